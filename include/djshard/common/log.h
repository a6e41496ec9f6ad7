#pragma once
// What djshard reports while it works, as records: the library hands them to
// callbacks (and to the process's log function for the few places that have
// no caller to report to); apps/ turns them into log lines, as text or JSON
// lines, filtered by level.

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace djshard {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError };

// "trace", "debug", "info", "warn", "error".
const char* LogLevelName(LogLevel level);
// The level a name gives ("warning" is "warn"); nullopt for another name.
std::optional<LogLevel> ParseLogLevel(const std::string& name);

struct LogRecord {
  LogLevel level = LogLevel::kInfo;
  std::string event;   // stable name: "claim", "done", "takeover", "retry_wait", ...
  std::string source;  // who speaks, "<host>:<pid>" of a worker; text logs put it first
  std::string message;
  std::string job_id;        // when the record is about a job
  std::string shard_id;      // when it is about one shard
  std::string partition_id;  // when it is about one partition of a run job
};

using LogFunction = std::function<void(const LogRecord&)>;

// A log file of its own (an attempt's process.log): each record is written
// and flushed before Write returns.
class LogFile {
 public:
  virtual ~LogFile() = default;
  virtual void Write(const LogRecord& record) = 0;
};
// Opens (appends to) the log file at a path.
using LogFileOpener = std::function<std::unique_ptr<LogFile>(const std::string& path)>;

// A plain text log file: "<UTC ISO-8601> <message>" lines, for callers that
// give no opener (the library's own tests).
std::unique_ptr<LogFile> OpenPlainLogFile(const std::string& path);

// The process's log function, for library code with no caller to report to.
// Default: records at info and above on stderr, "ERROR: " before errors.
void SetProcessLog(LogFunction log);
void Log(const LogRecord& record);
inline void Log(LogLevel level, const std::string& event, const std::string& message) {
  LogRecord r;
  r.level = level;
  r.event = event;
  r.message = message;
  Log(r);
}

}  // namespace djshard
