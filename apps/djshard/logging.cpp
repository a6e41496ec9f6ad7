#include "logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"

namespace djshard::cli {

namespace {

struct Settings {
  LogLevel level = LogLevel::kInfo;
  bool json = false;
};

Settings& Current() {
  static Settings settings;
  return settings;
}

spdlog::level::level_enum SpdLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

std::shared_ptr<spdlog::logger> MakeConsole(const std::string& name,
                                            std::shared_ptr<spdlog::sinks::sink> sink) {
  auto logger = std::make_shared<spdlog::logger>(name, std::move(sink));
  logger->set_pattern("%v");
  logger->set_level(SpdLevel(Current().level));
  logger->flush_on(spdlog::level::trace);
  return logger;
}

spdlog::logger& Stderr() {
  static const auto logger =
      MakeConsole("stderr", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  return *logger;
}

spdlog::logger& Stdout() {
  static const auto logger =
      MakeConsole("stdout", std::make_shared<spdlog::sinks::stdout_sink_mt>());
  return *logger;
}

// One JSON line: ts, level, host, pid, job_id, shard_id, partition_id (where
// there is one), event, msg.
std::string JsonLine(const LogRecord& r) {
  static const std::string host = HostName();
  nlohmann::ordered_json line;
  line["ts"] = FormatUtcIso8601(NowNanos());
  line["level"] = LogLevelName(r.level);
  line["host"] = host;
  line["pid"] = static_cast<int64_t>(::getpid());
  if (!r.job_id.empty()) line["job_id"] = r.job_id;
  if (!r.shard_id.empty()) line["shard_id"] = r.shard_id;
  if (!r.partition_id.empty()) line["partition_id"] = r.partition_id;
  line["event"] = r.event.empty() ? "message" : r.event;
  line["msg"] = r.message;
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The line a user has always seen: "<who>: <text>", "ERROR: " before errors.
std::string TextLine(const LogRecord& r) {
  std::string line = r.level == LogLevel::kError ? "ERROR: " : "";
  if (!r.source.empty()) line += r.source + ": ";
  return line + r.message;
}

void Emit(spdlog::logger& logger, const LogRecord& r) {
  if (!logger.should_log(SpdLevel(r.level))) return;
  const std::string line = Current().json ? JsonLine(r) : TextLine(r);
  logger.log(SpdLevel(r.level), spdlog::string_view_t(line.data(), line.size()));
}

class AttemptLogFile : public LogFile {
 public:
  explicit AttemptLogFile(const std::string& path)
      : logger_("process.log", std::make_shared<spdlog::sinks::basic_file_sink_mt>(path)) {
    logger_.set_pattern("%v");
    logger_.set_level(SpdLevel(std::min(Current().level, LogLevel::kInfo)));
    logger_.flush_on(spdlog::level::trace);
  }
  void Write(const LogRecord& r) override {
    const std::string line =
        Current().json ? JsonLine(r) : FormatUtcIso8601(NowNanos()) + " " + TextLine(r);
    logger_.log(SpdLevel(r.level), spdlog::string_view_t(line.data(), line.size()));
  }

 private:
  spdlog::logger logger_;
};

const char* kLevels = "trace, debug, info, warn or error";

// The value of option `name` in argv ("--name V" or "--name=V"), the last one given.
const char* OptionValue(int argc, char** argv, const std::string& name) {
  const char* value = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == name && i + 1 < argc) value = argv[i + 1];
    if (arg.rfind(name + "=", 0) == 0) value = argv[i] + name.size() + 1;
  }
  return value;
}

}  // namespace

void StartLogging(int argc, char** argv) {
  Settings s;
  const char* level = std::getenv("DJSHARD_LOG_LEVEL");
  const char* format = std::getenv("DJSHARD_LOG_FORMAT");
  const char* from_level = "DJSHARD_LOG_LEVEL";
  const char* from_format = "DJSHARD_LOG_FORMAT";
  if (const char* v = OptionValue(argc, argv, "--log-level")) level = v, from_level = "--log-level";
  if (const char* v = OptionValue(argc, argv, "--log-format")) {
    format = v;
    from_format = "--log-format";
  }
  if (level != nullptr && *level != '\0') {
    const std::optional<LogLevel> l = ParseLogLevel(level);
    if (!l) {
      throw Error(std::string(from_level) + ": '" + level + "' is not a log level",
                  std::string("give ") + kLevels);
    }
    s.level = *l;
  }
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quiet") s.level = std::max(s.level, LogLevel::kWarn);
  }
  if (format != nullptr && *format != '\0') {
    if (std::string(format) != "text" && std::string(format) != "json") {
      throw Error(std::string(from_format) + ": '" + format + "' is not a log format",
                  "give text or json");
    }
    s.json = std::string(format) == "json";
  }
  Current() = s;
  Stderr().set_level(SpdLevel(s.level));
  Stdout().set_level(SpdLevel(s.level));
  SetProcessLog(LogRecordToStderr);
}

void AddLogOptions(CLI::App& app) {
  // StartLogging has read the values already; CLI11 checks and documents them.
  static std::string level, format;
  static bool quiet = false;
  for (CLI::App* cmd : app.get_subcommands({})) {
    cmd->add_option("--log-level", level,
                    "Log lines at this level and above: " + std::string(kLevels) +
                        " (default info, or $DJSHARD_LOG_LEVEL)")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "warning", "error"}));
    cmd->add_flag("--quiet", quiet, "Log warnings and errors only");
    cmd->add_option("--log-format", format,
                    "text (the default, or $DJSHARD_LOG_FORMAT) or json: one JSON object per "
                    "line with ts, level, host, pid, job_id, shard_id, event and msg")
        ->check(CLI::IsMember({"text", "json"}));
  }
}

void LogRecordToStderr(const LogRecord& record) { Emit(Stderr(), record); }

void LogRecordToStdout(const LogRecord& record) {
  if (Current().json || record.level == LogLevel::kError) return Emit(Stderr(), record);
  std::fflush(stdout);
  Emit(Stdout(), record);
}

void LogError(const std::string& what) {
  LogRecord r;
  r.level = LogLevel::kError;
  r.event = "error";
  r.message = what;
  std::fflush(stdout);
  LogRecordToStderr(r);
}

std::unique_ptr<LogFile> OpenAttemptLogFile(const std::string& path) {
  return std::make_unique<AttemptLogFile>(path);
}

}  // namespace djshard::cli
