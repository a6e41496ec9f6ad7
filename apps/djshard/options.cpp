#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"

namespace djshard::cli {

CLI::Option* AddSecondsOption(CLI::App* cmd, const std::string& names, double* target,
                              const std::string& help, bool zero_allowed) {
  CLI::Option* option = cmd->add_option(names, *target, help);
  option->check(CLI::Validator(
      [zero_allowed](std::string& value) -> std::string {
        char* end = nullptr;
        const double secs = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0') {
          return "'" + value + "' is not a number of seconds";
        }
        if (zero_allowed ? !(secs >= 0) : !(secs > 0)) {
          return std::string("must be a ") + (zero_allowed ? "non-negative" : "positive") +
                 " number of seconds, got " + value;
        }
        return "";
      },
      "SECONDS"));
  return option;
}

void AddRayAddressOption(CLI::App* cmd) {
  static std::string ignored;  // one process, one command: never read
  cmd->add_option("--ray-address", ignored,
                  "Accepted for Data-Juicer command lines and ignored: djshard needs no Ray "
                  "cluster (nodes coordinate through the job directory)");
}

void AddThreadsOption(CLI::App* cmd, std::shared_ptr<std::optional<int>> threads) {
  cmd->add_option_function<int>(
         "--threads", [threads](const int& n) { *threads = n; },
         "Threads, I/O included (default: the recipe's np, else its largest num_proc, else "
         "every core)")
      ->check(CLI::PositiveNumber);
}

}  // namespace djshard::cli
