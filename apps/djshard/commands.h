#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "djshard/store/manifest.h"

namespace djshard::cli {

// Each subcommand registers itself on the app and sets `*exit_code` when it runs.
// Errors are thrown as djshard::Error and printed by main().
void AddPrepareCommand(CLI::App& app, int* exit_code);
void AddPrepareWorkerCommand(CLI::App& app, int* exit_code);
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
void AddModelCommand(CLI::App& app, int* exit_code);
void AddJobsCommand(CLI::App& app, int* exit_code);
void AddMonitorCommand(CLI::App& app, int* exit_code);
void AddGcCommand(CLI::App& app, int* exit_code);
void AddStopCommand(CLI::App& app, int* exit_code);
// Internal, hidden from help: the child of a preflight probe.
void AddProbeCommand(CLI::App& app, int* exit_code);

// Prints the jobs under `work_dir` (run and elastic), newest first, as a
// table or one JSON array; `djshard jobs` and `djshard stop --list`. Returns 0.
int PrintJobs(const std::string& work_dir, bool running_only, bool as_json);

// A job dir that `djshard dlc` instances are still preparing (no manifest
// yet): their tasks, once or (`watch`) until the job is published or a stop.
// False when no dlc prepares it (nothing printed).
bool PrintPreparing(const std::string& job_dir, bool watch, double interval, bool json);

// A duration option: any positive number of seconds ("0.2", "1.5", "300"),
// as Data-Juicer takes them; negatives, non-numbers and (unless
// `zero_allowed`) 0 are refused with a message naming the option.
CLI::Option* AddSecondsOption(CLI::App* cmd, const std::string& names, double* target,
                              const std::string& help, bool zero_allowed = false);

// --ray-address, which Data-Juicer's commands take: accepted so that their
// command lines run unchanged, and ignored, since djshard runs no Ray cluster.
void AddRayAddressOption(CLI::App* cmd);

// --shards copy|reference (prepare, dlc): how the job holds its shards.
void AddShardsModeOption(CLI::App* cmd, store::ShardsMode* mode);

// --layout file|parts (prepare, merge, dlc): how merge writes the output.
void AddLayoutOption(CLI::App* cmd, std::function<void(store::OutputLayout)> set,
                     const std::string& help);

// --threads N (at least 1) into `*threads` when given.
void AddThreadsOption(CLI::App* cmd, std::shared_ptr<std::optional<int>> threads);

// --task-mib M: MiB per task of a distributed prepare or merge (a positive
// multiple of 0.0625) into `*bytes`.
CLI::Option* AddTaskMibOption(CLI::App* cmd, uint64_t* bytes, const std::string& help);

// --device cpu|cuda|auto and --gpus 0,2: where model operators run
// (model::SetDeviceSettings), for run, worker and dlc.
void AddDeviceOptions(CLI::App* cmd);

}  // namespace djshard::cli
