#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace djshard::cli {

// Each subcommand registers itself on the app and sets `*exit_code` when it runs.
// Errors are thrown as djshard::Error and printed by main().
void AddPrepareCommand(CLI::App& app, int* exit_code);
void AddStatusCommand(CLI::App& app, int* exit_code);
void AddRetryCommand(CLI::App& app, int* exit_code);
void AddMergeCommand(CLI::App& app, int* exit_code);
void AddVerifyCommand(CLI::App& app, int* exit_code);
void AddVersionCommand(CLI::App& app, int* exit_code);
void AddRunCommand(CLI::App& app, int* exit_code);
void AddOpsCommand(CLI::App& app, int* exit_code);
void AddWorkerCommand(CLI::App& app, int* exit_code);
void AddDlcCommand(CLI::App& app, int* exit_code);
void AddTokenizeCommand(CLI::App& app, int* exit_code);

}  // namespace djshard::cli
