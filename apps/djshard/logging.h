#pragma once
// The binary's one logging path (spdlog): the records the library reports
// become lines on stderr (dlc's own progress: stdout), as text (the lines a
// user has always seen) or JSON lines for a log collector, filtered by level;
// an attempt's process.log is a file sink of the same records.

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "djshard/common/log.h"

namespace djshard::cli {

// Reads --log-level, --log-format and --quiet from the command line (any
// position) over DJSHARD_LOG_LEVEL and DJSHARD_LOG_FORMAT, and sets up the
// console loggers and the library's process log. A bad value is an Error.
void StartLogging(int argc, char** argv);

// Adds --log-level, --quiet and --log-format to every subcommand of `app`,
// so that they show in each one's help and are checked.
void AddLogOptions(CLI::App& app);

// A record on stderr.
void LogRecordToStderr(const LogRecord& record);
// A progress record that text logs print on stdout (dlc's own lines); JSON
// logs keep every record on stderr.
void LogRecordToStdout(const LogRecord& record);
// An error on stderr: "ERROR: <what>" in text logs.
void LogError(const std::string& what);

// Opens an attempt's process.log as a file sink: every record at info or
// above (whatever the console's level), flushed as it is written.
std::unique_ptr<LogFile> OpenAttemptLogFile(const std::string& path);

}  // namespace djshard::cli
