#include "djshard/store/status.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/coord/dlc.h"
#include "djshard/store/job_view.h"

namespace djshard::cli {

namespace {

// 0 complete, 1 incomplete, 2 any failed (docs/operations.md "Exit codes").
int StatusExitCode(const store::JobStatus& s) {
  if (s.failed()) return kExitFailure;
  return s.complete() ? kExitOk : kExitIncomplete;
}

uint64_t DoneRows(const store::JobStatus& s) {
  uint64_t rows = 0;
  for (const store::ShardStatus& sh : s.shards) {
    if (sh.state == store::ShardState::kDone) rows += sh.shard->rows;
  }
  return rows;
}

// A running, stale or failed shard or stage task: its owner, heartbeat and error.
void PrintActive(const store::ShardStatus& sh) {
  if (sh.state != store::ShardState::kRunning && sh.state != store::ShardState::kStale &&
      sh.state != store::ShardState::kFailed) {
    return;
  }
  std::printf("  %s  %-7s  owner=%s pid=%lld", sh.shard->id.c_str(),
              store::ShardStateName(sh.state), sh.owner.c_str(), static_cast<long long>(sh.pid));
  if (sh.lock) std::printf("  heartbeat %.1fs ago", sh.lock->age_secs);
  if (!sh.error.empty()) std::printf("  error=%s", sh.error.c_str());
  std::printf("\n");
}

// Refreshes until the job is terminal: counts, each shard's owner and
// heartbeat age, and input rows/s finished since the watch started.
int Watch(const store::JobDir& job, double interval) {
  const bool tty = isatty(STDOUT_FILENO) != 0;
  const double start = MonotonicSeconds();
  uint64_t start_rows = 0;
  bool first = true;
  for (;;) {
    const store::JobStatus s = store::ReadStatus(job);
    const uint64_t rows = DoneRows(s);
    if (first) start_rows = rows;
    first = false;
    const double elapsed = MonotonicSeconds() - start;
    if (tty) std::fputs("\033[H\033[2J", stdout);
    std::printf("%s  %s\n", FormatUtcIso8601(NowNanos()).c_str(), s.SummaryLine().c_str());
    std::printf("rows done: %llu of %llu, %.0f rows/s since the watch began\n",
                static_cast<unsigned long long>(rows),
                static_cast<unsigned long long>(job.manifest().total_rows),
                elapsed > 0 ? static_cast<double>(rows - start_rows) / elapsed : 0.0);
    for (const store::StageStatus& stage : s.stages) {
      std::printf("dedup stage %zu (%s): %llu of %zu tasks done\n", stage.stage, stage.op.c_str(),
                  static_cast<unsigned long long>(stage.counts.done), stage.tasks.size());
    }
    for (const store::ShardStatus& sh : s.shards) PrintActive(sh);
    for (const store::StageStatus& stage : s.stages) {
      for (const store::ShardStatus& task : stage.tasks) PrintActive(task);
    }
    for (const std::string& line : coord::DlcTaskProgress(job.dir())) {
      std::printf("%s\n", line.c_str());
    }
    std::fflush(stdout);
    if (s.terminal()) return StatusExitCode(s);
    SleepInterruptibly(interval);
    if (StopRequested()) return StopExitCode();
  }
}

}  // namespace

bool PrintPreparing(const std::string& job_dir, bool watch, double interval, bool json) {
  const bool tty = isatty(STDOUT_FILENO) != 0;
  for (bool first = true;; first = false) {
    if (store::IsElasticJobDir(job_dir)) return true;
    const std::vector<std::string> lines = coord::DlcTaskProgress(job_dir);
    if (lines.empty()) return !first;
    if (watch && tty) std::fputs("\033[H\033[2J", stdout);
    if (json) {
      std::printf("%s\n", nlohmann::json({{"state", "preparing"}, {"dlc", lines}}).dump(2).c_str());
    } else {
      std::printf("%s  preparing %s\n", FormatUtcIso8601(NowNanos()).c_str(), job_dir.c_str());
      for (const std::string& line : lines) std::printf("%s\n", line.c_str());
    }
    std::fflush(stdout);
    if (!watch) return true;
    SleepInterruptibly(interval);
    if (StopRequested()) return true;
  }
}

void AddStatusCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string job_dir;
    bool all = false;
    bool json = false;
    bool watch = false;
    double interval = 2;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "status", "Show shard counts; exit 0 when complete, 1 while incomplete, 2 if any failed");
  cmd->add_option("--job-dir", opt->job_dir, "Job directory")->required();
  cmd->add_flag("--all", opt->all, "One line per shard, with its owner");
  cmd->add_flag("--json", opt->json, "Machine-readable output");
  cmd->add_flag("--watch", opt->watch,
                "Refresh counts, owners, heartbeat ages and rows/s until the job is terminal");
  AddSecondsOption(cmd, "--interval", &opt->interval, "Seconds between --watch refreshes")
      ->capture_default_str();
  cmd->callback([opt, exit_code]() {
    // Instances of `djshard dlc` may still be scanning its input.
    if (!store::IsElasticJobDir(opt->job_dir) &&
        PrintPreparing(opt->job_dir, opt->watch, opt->interval, opt->json)) {
      *exit_code = StopRequested() ? StopExitCode() : kExitIncomplete;
      if (!opt->watch || !store::IsElasticJobDir(opt->job_dir)) return;
    }
    const store::JobDir job = store::JobDir::Open(opt->job_dir);
    if (opt->watch) {
      *exit_code = Watch(job, opt->interval);
      return;
    }
    const store::JobStatus status = store::ReadStatus(job);
    const std::string text = opt->json ? status.Json() : status.Text(opt->all);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (!opt->json) {
      for (const std::string& line : coord::DlcTaskProgress(job.dir())) {
        std::printf("%s\n", line.c_str());
      }
    }
    *exit_code = StatusExitCode(status);
  });
}

}  // namespace djshard::cli
