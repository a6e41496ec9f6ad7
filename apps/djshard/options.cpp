#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "djshard/common/error.h"
#include "djshard/model/device.h"
#include "djshard/store/prepare_scan.h"

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

void AddShardsModeOption(CLI::App* cmd, store::ShardsMode* mode) {
  cmd->add_option_function<std::string>(
         "--shards",
         [mode](const std::string& value) {
           *mode = value == "reference" ? store::ShardsMode::kReference : store::ShardsMode::kCopy;
         },
         "copy (default): shard files in the job dir; reference: no copy of the data, each "
         "shard is byte ranges of the input files, which must not change until the job ends")
      ->check(CLI::IsMember({"copy", "reference"}));
}

void AddLayoutOption(CLI::App* cmd, std::function<void(store::OutputLayout)> set,
                     const std::string& help) {
  cmd->add_option_function<std::string>(
         "--layout",
         [set](const std::string& value) {
           set(value == "parts" ? store::OutputLayout::kParts : store::OutputLayout::kFile);
         },
         help)
      ->check(CLI::IsMember({"file", "parts"}));
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

CLI::Option* AddTaskMibOption(CLI::App* cmd, uint64_t* bytes, const std::string& help) {
  return cmd
      ->add_option_function<double>(
          "--task-mib",
          [bytes](double mib) {
            const double b = mib * 1048576.0;
            const auto unit = static_cast<double>(store::kScanTaskUnitBytes);
            if (!(b >= unit) || b > 1e15 || b / unit != std::floor(b / unit)) {
              throw CLI::ValidationError("--task-mib",
                                         "must be a positive multiple of 0.0625 (64 KiB)");
            }
            *bytes = static_cast<uint64_t>(b);
          },
          help)
      ->type_name("MIB");
}

void AddDeviceOptions(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
         "--device",
         [](const std::string& name) {
           model::DeviceSettings settings = model::GetDeviceSettings();
           settings.request = *model::ParseDeviceRequest(name);
           model::SetDeviceSettings(settings);
         },
         "Where model operators run: cpu, cuda (an error when no GPU is visible) or auto (a GPU "
         "when the recipe asks for one or one is visible)")
      ->check(CLI::IsMember({"cpu", "cuda", "gpu", "auto"}));
  cmd->add_option_function<std::vector<int>>(
         "--gpus",
         [](const std::vector<int>& gpus) {
           model::DeviceSettings settings = model::GetDeviceSettings();
           settings.gpus = gpus;
           model::SetDeviceSettings(settings);
         },
         "Use only these of the visible GPUs, e.g. 0,2")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
}

}  // namespace djshard::cli
