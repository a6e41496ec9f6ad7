#include "djshard/store/retry.h"

#include <cstdio>
#include <memory>

#include "commands.h"
#include "djshard/common/error.h"

namespace djshard::cli {

void AddRetryCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string job_dir;
    store::RetryRequest request;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "retry", "Give failed shards a fresh retry budget (their history is kept under state/)");
  cmd->add_option("--job-dir", opt->job_dir, "Job directory")->required();
  cmd->add_flag("--all-failed", opt->request.all_failed, "Every shard with a failed record");
  cmd->add_option("--shard-id", opt->request.shard_ids, "A shard to retry (repeatable)");
  cmd->add_flag("--discard-checkpoints", opt->request.discard_checkpoints,
                "Delete the shards' checkpoints too: the next attempt starts from zero "
                "(by default it resumes from them)");
  cmd->callback([opt, exit_code]() {
    if (opt->request.all_failed == !opt->request.shard_ids.empty()) {
      throw Error("retry needs exactly one selector", "pass --all-failed or --shard-id ID");
    }
    const store::JobDir job = store::JobDir::Open(opt->job_dir);
    const store::RetryOutcome out = store::Retry(job, opt->request);
    if (out.retried.empty()) {
      std::printf("No failed shards selected\n");
    } else {
      for (const std::string& id : out.retried) std::printf("Retrying %s\n", id.c_str());
      std::printf("%zu shard(s) will be claimed again by the next worker\n", out.retried.size());
    }
    for (const std::string& dir : out.discarded)
      std::printf("Discarded checkpoints %s\n", dir.c_str());
    *exit_code = 0;
  });
}

}  // namespace djshard::cli
