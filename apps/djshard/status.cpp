#include "djshard/store/status.h"

#include <cstdio>
#include <memory>

#include "commands.h"

namespace djshard::cli {

void AddStatusCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string job_dir;
    bool all = false;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "status", "Show shard counts; exit 0 when complete, 1 while incomplete, 2 if any failed");
  cmd->add_option("--job-dir", opt->job_dir, "Job directory")->required();
  cmd->add_flag("--all", opt->all, "One line per shard, with its owner");
  cmd->add_flag("--json", opt->json, "Machine-readable output");
  cmd->callback([opt, exit_code]() {
    const store::JobDir job = store::JobDir::Open(opt->job_dir);
    const store::JobStatus status = store::ReadStatus(job);
    const std::string text = opt->json ? status.Json() : status.Text(opt->all);
    std::fwrite(text.data(), 1, text.size(), stdout);
    *exit_code = status.ExitCode();
  });
}

}  // namespace djshard::cli
