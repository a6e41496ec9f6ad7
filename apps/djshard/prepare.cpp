#include "djshard/store/prepare.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "commands.h"
#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/coord/distributed_prepare.h"
#include "logging.h"

namespace djshard::cli {

namespace {

// What prepare says of the job it published (or found already prepared).
void PrintPrepared(const store::PrepareOutcome& out, double secs) {
  const store::Manifest& m = out.manifest;
  if (out.already_prepared) {
    std::printf("Job is already prepared and unchanged: %s\n", out.job_dir.c_str());
    return;
  }
  for (const std::string& w : m.warnings) Log(LogLevel::kWarn, "warning", "WARNING: " + w);
  std::printf("Prepared job %s: %llu rows in %zu input file(s), %llu shards, %.1f MB in %.2f s\n",
              m.job_id.c_str(), static_cast<unsigned long long>(m.total_rows), m.input_files.size(),
              static_cast<unsigned long long>(m.num_shards),
              static_cast<double>(m.total_size_bytes) / 1e6, secs);
  std::printf("Job directory: %s\n", out.job_dir.c_str());
  if (m.shards_mode == store::ShardsMode::kReference) {
    std::printf("Shards: %s ... %s, byte ranges of the input (no copy in the job directory)\n",
                m.shards.front().id.c_str(), m.shards.back().id.c_str());
  } else {
    std::printf("Shards: %s/shards (%s ... %s)\n", out.job_dir.c_str(), m.shards.front().id.c_str(),
                m.shards.back().id.c_str());
  }
}

}  // namespace

void AddPrepareCommand(CLI::App& app, int* exit_code) {
  auto req = std::make_shared<store::PrepareRequest>();
  auto dataset = std::make_shared<std::string>();
  auto distributed = std::make_shared<bool>(false);
  auto tasks = std::make_shared<coord::DistributedPrepareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "prepare", "Validate the input and the recipe, cut ordered shards, publish a job directory");
  cmd->add_option("--config", req->config_path, "Data-Juicer YAML recipe")->required();
  cmd->add_option("--dataset-path", *dataset, "JSONL file or directory (overrides dataset_path)");
  cmd->add_option("--job-dir", req->job_dir, "Job directory to create (shared by all nodes)")
      ->required();
  cmd->add_option("--num-shards", req->num_shards, "Number of byte-balanced shards")->required();
  AddSecondsOption(cmd, "--lease-secs,--lock-timeout-secs", &req->policy.lease_secs,
                   "Seconds without heartbeat after which a claim may be taken over")
      ->capture_default_str();
  AddSecondsOption(cmd, "--heartbeat-secs", &req->policy.heartbeat_secs,
                   "Seconds between a worker's lease refreshes")
      ->capture_default_str();
  cmd->add_option("--max-retries", req->policy.max_retries,
                  "Failed attempts allowed after the first before a shard is failed")
      ->capture_default_str();
  AddSecondsOption(cmd, "--poll-interval-secs", &req->policy.poll_interval_secs,
                   "Seconds a worker sleeps while other nodes hold the remaining shards")
      ->capture_default_str();
  AddSecondsOption(cmd, "--retry-backoff-secs", &req->policy.retry_backoff_secs,
                   "The n-th retry of a failed shard waits this times 2^(n-1) seconds, at most "
                   "600 (0: at once)",
                   /*zero_allowed=*/true)
      ->capture_default_str();
  AddShardsModeOption(cmd, &req->shards_mode);
  AddLayoutOption(
      cmd, [req](store::OutputLayout layout) { req->output_layout = layout; },
      "The layout merge writes by default: file (default) or parts, for which the workers "
      "record each output's SHA-256 so that merge moves no data");
  cmd->add_flag("--distributed", *distributed,
                "Scan the input (and write a copy job's shard files) in tasks that djshard "
                "prepare-worker processes on other nodes claim too; a job whose records get no "
                "index key and whose input is not compressed");
  AddTaskMibOption(cmd, &tasks->task_bytes,
                   "With --distributed: MiB of input per scan task and of shards per write task "
                   "(default 256; a multiple of 0.0625)");
  AddRayAddressOption(cmd);
  cmd->callback([req, dataset, distributed, tasks, exit_code]() {
    if (!dataset->empty()) req->dataset_path = *dataset;
    const double start = MonotonicSeconds();
    tasks->lease_secs = req->policy.lease_secs;
    tasks->heartbeat_secs = req->policy.heartbeat_secs;
    // The job's poll interval is the workers' (20 s by default): the tasks of
    // a prepare are looked at as often as dlc's.
    tasks->poll_interval_secs = std::min(req->policy.poll_interval_secs, 2.0);
    tasks->log = LogRecordToStderr;
    const store::PrepareOutcome out =
        *distributed ? coord::PrepareWithHelpers(*req, *tasks) : store::Prepare(*req);
    PrintPrepared(out, MonotonicSeconds() - start);
    *exit_code = 0;
  });
}

void AddPrepareWorkerCommand(CLI::App& app, int* exit_code) {
  auto job_dir = std::make_shared<std::string>();
  auto o = std::make_shared<coord::DistributedPrepareOptions>();
  auto threads = std::make_shared<std::optional<int>>();
  CLI::App* cmd = app.add_subcommand(
      "prepare-worker",
      "Help a djshard prepare --distributed of the job: claim its scan and shard write tasks "
      "until the job is published");
  cmd->add_option("--job-dir", *job_dir, "Job directory being prepared (shared by all nodes)")
      ->required();
  AddThreadsOption(cmd, threads);
  AddSecondsOption(cmd, "--wait-timeout-secs", &o->wait_timeout_secs,
                   "Give up when no prepare of the job has been running this long")
      ->capture_default_str();
  AddSecondsOption(cmd, "--lease-secs,--lock-timeout-secs", &o->lease_secs,
                   "Seconds without heartbeat after which a task's claim may be taken over")
      ->capture_default_str();
  AddSecondsOption(cmd, "--heartbeat-secs", &o->heartbeat_secs, "Seconds between lease refreshes")
      ->capture_default_str();
  AddSecondsOption(cmd, "--poll-interval-secs", &o->poll_interval_secs, "Seconds between looks")
      ->capture_default_str();
  cmd->callback([job_dir, o, threads, exit_code]() {
    if (o->heartbeat_secs >= o->lease_secs) {
      throw Error("--heartbeat-secs must be less than --lease-secs",
                  "a lease must survive at least one missed heartbeat");
    }
    o->threads = threads->value_or(0);
    o->log = LogRecordToStderr;
    const coord::PrepareHelperOutcome out = coord::HelpPrepare(*job_dir, *o);
    std::printf("Job is prepared: %s (%zu task(s) run here)\n", job_dir->c_str(), out.tasks);
    *exit_code = 0;
  });
}

}  // namespace djshard::cli
