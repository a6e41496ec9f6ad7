#include "djshard/coord/dlc.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.h"
#include "logging.h"

namespace djshard::cli {

namespace {

// configs/demo.yaml of this installation: beside the source tree of a build
// (build/bin/djshard) or under share/djshard of an install.
std::string DefaultConfig() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (const fs::path& p : {exe.parent_path() / "../../configs/demo.yaml",
                            exe.parent_path() / "../share/djshard/configs/demo.yaml"}) {
    if (fs::exists(p, ec)) return p.lexically_normal().string();
  }
  return "configs/demo.yaml";
}

}  // namespace

void AddDlcCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<coord::DlcOptions>();
  auto dataset = std::make_shared<std::string>();
  auto run_id = std::make_shared<std::string>();
  auto threads = std::make_shared<std::optional<int>>();
  auto lease = std::make_shared<double>(0), heartbeat = std::make_shared<double>(0);
  CLI::App* cmd = app.add_subcommand(
      "dlc", "Run prepare, workers and merge as the same command on every node of a launcher");
  cmd->add_option("--job-dir", opt->job_dir, "Job directory (shared by all nodes)")->required();
  cmd->add_option("--config", opt->config, "Recipe (default: configs/demo.yaml)");
  cmd->add_option("--dataset-path", *dataset, "JSONL file or directory");
  cmd->add_option("--nodes", opt->nodes, "Number of instances the launcher starts");
  cmd->add_option("--num-shards", opt->num_shards, "Shards to prepare")->capture_default_str();
  AddShardsModeOption(cmd, &opt->shards_mode);
  AddLayoutOption(
      cmd, [opt](store::OutputLayout layout) { opt->layout = layout; },
      "file (default): one merged JSONL; parts: a directory of one part per shard and "
      "_manifest.json (default output <job-dir>/merged)");
  AddTaskMibOption(
      cmd, &opt->task_bytes,
      "With --nodes other than 1: MiB of input per scan task and of shards per write task of "
      "prepare, and of output per copy task of a file-layout merge, that any instance claims "
      "(default 256; a multiple of 0.0625); scan tasks use --threads, else every core");
  cmd->add_flag("--sha256", opt->sha256,
                "After a merge by every instance, also compute the merged file's plain SHA-256 "
                "(one serial read); it always has per-part SHA-256 and their tree hash");
  cmd->add_flag("--require-all-nodes", opt->require_all_nodes,
                "Strict mode: every node must complete shards (needs --nodes)");
  cmd->add_option("--output", opt->output, "Merged JSONL (default <job-dir>/merged.jsonl)");
  cmd->add_option("--run-id", *run_id, "Run id (default: from the launcher's environment)");
  AddSecondsOption(cmd, "--wait-timeout-secs", &opt->wait_timeout_secs,
                   "Give up a wait that makes no progress (a stale coordinator that cannot be "
                   "taken over, shards that never finish) after this long")
      ->capture_default_str();
  AddSecondsOption(cmd, "--lease-secs,--lock-timeout-secs", lease.get(),
                   "Seconds without heartbeat after which a shard or coordinator claim may be "
                   "taken over (default 300)");
  AddSecondsOption(cmd, "--heartbeat-secs", heartbeat.get(),
                   "Seconds between lease refreshes (default 15)");
  AddSecondsOption(cmd, "--poll-interval-secs", &opt->poll_interval_secs, "Seconds between looks")
      ->capture_default_str();
  AddThreadsOption(cmd, threads);
  AddRayAddressOption(cmd);
  AddDeviceOptions(cmd);
  cmd->callback([opt, dataset, run_id, threads, lease, heartbeat, exit_code]() {
    if (opt->config.empty()) opt->config = DefaultConfig();
    if (!dataset->empty()) opt->dataset_path = *dataset;
    if (!run_id->empty()) opt->run_id = *run_id;
    opt->threads = *threads;
    if (*lease > 0) opt->lease_secs = *lease;
    if (*heartbeat > 0) opt->heartbeat_secs = *heartbeat;
    opt->log = LogRecordToStdout;
    opt->worker_log = LogRecordToStderr;
    opt->open_log_file = OpenAttemptLogFile;
    const coord::DlcOutcome out = coord::RunDlc(*opt);
    if (out.end == coord::DlcEnd::kPassed || out.end == coord::DlcEnd::kStoredResult) {
      std::printf("%s\n", out.message.c_str());
      std::fflush(stdout);
    }
    *exit_code = out.exit_code;
  });
}

}  // namespace djshard::cli
