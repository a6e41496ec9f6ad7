#include "djshard/store/worker.h"

#include <cstdio>
#include <memory>

#include "commands.h"
#include "djshard/common/error.h"
#include "djshard/coord/distributed_prepare.h"
#include "logging.h"

namespace djshard::cli {

void AddWorkerCommand(CLI::App& app, int* exit_code) {
  struct Options {
    store::WorkerOptions w;
    double lease = 0, heartbeat = 0, poll = 0, backoff = -1;
    int64_t retries = -1;
    bool join_prepare = false;
    std::shared_ptr<std::optional<int>> threads = std::make_shared<std::optional<int>>();
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "worker", "Claim shards of a prepared job and process them until the job is done");
  cmd->add_option("--job-dir", opt->w.job_dir, "Job directory (shared by all nodes)")->required();
  cmd->add_option("--max-shards", opt->w.max_shards,
                  "Stop after this many shards, dedup stage tasks included (0: no limit)");
  AddSecondsOption(cmd, "--lease-secs,--lock-timeout-secs", &opt->lease,
                   "Lease before a silent claim may be taken over (default: the job's)");
  AddSecondsOption(cmd, "--heartbeat-secs", &opt->heartbeat, "Seconds between lease refreshes");
  cmd->add_option("--max-retries", opt->retries, "Failed attempts allowed after the first")
      ->check(CLI::NonNegativeNumber);
  AddSecondsOption(cmd, "--poll-interval-secs", &opt->poll,
                   "Seconds between looks while others work");
  AddSecondsOption(cmd, "--retry-backoff-secs", &opt->backoff,
                   "Retry backoff of failed shards (default: the job's)", /*zero_allowed=*/true);
  AddThreadsOption(cmd, opt->threads);
  cmd->add_flag("--join-prepare", opt->join_prepare,
                "While the job is not published yet, help its djshard prepare --distributed as "
                "prepare-worker does (waiting for it if need be), then work on its shards");
  cmd->add_flag("--allow-version-mismatch", opt->w.allow_version_mismatch,
                "Run a job prepared by another djshard version or with an edited recipe.yaml");
  AddRayAddressOption(cmd);
  AddDeviceOptions(cmd);
  cmd->callback([opt, exit_code]() {
    if (opt->lease > 0) opt->w.lease_secs = opt->lease;
    if (opt->heartbeat > 0) opt->w.heartbeat_secs = opt->heartbeat;
    if (opt->retries >= 0) opt->w.max_retries = opt->retries;
    if (opt->poll > 0) opt->w.poll_interval_secs = opt->poll;
    if (opt->backoff >= 0) opt->w.retry_backoff_secs = opt->backoff;
    opt->w.threads = *opt->threads;
    opt->w.log = LogRecordToStderr;
    opt->w.open_log_file = OpenAttemptLogFile;
    if (opt->join_prepare) {
      coord::DistributedPrepareOptions prepare;
      if (opt->lease > 0) prepare.lease_secs = opt->lease;
      if (opt->heartbeat > 0) prepare.heartbeat_secs = opt->heartbeat;
      if (prepare.heartbeat_secs >= prepare.lease_secs) {
        throw Error("--heartbeat-secs must be less than --lease-secs",
                    "a lease must survive at least one missed heartbeat");
      }
      prepare.threads = opt->threads->value_or(0);
      if (opt->poll > 0) prepare.poll_interval_secs = opt->poll;
      prepare.log = LogRecordToStderr;
      coord::HelpPrepare(opt->w.job_dir, prepare);
    }
    const store::WorkerOutcome out = store::RunWorker(opt->w);
    if (!out.error.empty()) LogError(out.error);
    *exit_code = store::WorkerExitCode(out);
  });
}

}  // namespace djshard::cli
