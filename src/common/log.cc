#include "djshard/common/log.h"

#include <cstdio>
#include <fstream>
#include <mutex>

#include "djshard/common/clock.h"

namespace djshard {

namespace {

class PlainLogFile : public LogFile {
 public:
  explicit PlainLogFile(const std::string& path) : out_(path, std::ios::app) {}
  void Write(const LogRecord& record) override {
    out_ << FormatUtcIso8601(NowNanos()) << " " << record.message << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

std::mutex log_mu;
LogFunction& ProcessLog() {
  static LogFunction log;
  return log;
}

}  // namespace

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

std::optional<LogLevel> ParseLogLevel(const std::string& name) {
  for (LogLevel l :
       {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (name == LogLevelName(l)) return l;
  }
  if (name == "warning") return LogLevel::kWarn;
  return std::nullopt;
}

std::unique_ptr<LogFile> OpenPlainLogFile(const std::string& path) {
  return std::make_unique<PlainLogFile>(path);
}

void SetProcessLog(LogFunction log) {
  std::lock_guard<std::mutex> lock(log_mu);
  ProcessLog() = std::move(log);
}

void Log(const LogRecord& record) {
  LogFunction log;
  {
    std::lock_guard<std::mutex> lock(log_mu);
    log = ProcessLog();
  }
  if (log) return log(record);
  if (record.level < LogLevel::kInfo) return;
  std::fprintf(stderr, "%s%s%s\n", record.level == LogLevel::kError ? "ERROR: " : "",
               record.source.empty() ? "" : (record.source + ": ").c_str(), record.message.c_str());
  std::fflush(stderr);
}

}  // namespace djshard
