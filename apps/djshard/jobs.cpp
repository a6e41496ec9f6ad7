#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.h"
#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/exec/job_status.h"

namespace djshard::cli {

namespace {

std::string Duration(double secs) {
  char buf[32];
  const long s = static_cast<long>(secs);
  std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

// 0 completed, 1 running or incomplete, 2 failed, 3 stopped.
int MonitorExitCode(const exec::RunJobView& v) {
  if (v.status == "completed") return kExitOk;
  if (v.status == "failed") return kExitFailure;
  if (v.status == "stopped") return 3;
  return kExitIncomplete;
}

void PrintView(const exec::RunJobView& v, bool detailed) {
  std::printf("job %s: %s\n", v.job_id.c_str(), v.status.c_str());
  std::printf("partitions: %llu of %llu done; rows %llu of %llu; %.0f rows/s",
              static_cast<unsigned long long>(v.partitions_done),
              static_cast<unsigned long long>(v.partitions_total),
              static_cast<unsigned long long>(v.rows_done),
              static_cast<unsigned long long>(v.rows_total), v.rows_per_sec);
  if (v.eta_secs) std::printf("; ETA %s", Duration(*v.eta_secs).c_str());
  std::printf("\n");
  std::printf("last checkpoint: %s\n",
              v.last_checkpoint_time.empty() ? "none" : v.last_checkpoint_time.c_str());
  for (const exec::PartitionView& p : v.partitions) {
    if (!detailed && p.status != "running") continue;
    std::string taps;
    for (const uint64_t t : p.taps) {
      if (!taps.empty()) taps.push_back(',');
      taps.append(std::to_string(t));
    }
    std::printf("  partition %llu  %-9s  taps [%s]  rows %llu -> %llu\n",
                static_cast<unsigned long long>(p.partition_id), p.status.c_str(), taps.c_str(),
                static_cast<unsigned long long>(p.rows_in),
                static_cast<unsigned long long>(p.rows_out));
  }
  if (detailed) {
    for (const auto& op : v.op_totals) {
      std::printf("  op %llu %-34s rows %llu -> %llu  %.2f s\n",
                  static_cast<unsigned long long>(op["op_idx"].get<uint64_t>()),
                  op["name"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(op["rows_in"].get<uint64_t>()),
                  static_cast<unsigned long long>(op["rows_out"].get<uint64_t>()),
                  op["seconds"].get<double>());
    }
  }
}

}  // namespace

void AddJobsCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string work_dir = ".";
    bool running = false, as_json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("jobs", "List the run jobs under a work dir, newest first");
  cmd->add_option("--work-dir", opt->work_dir, "Directory of job directories (default: .)");
  cmd->add_flag("--running", opt->running, "Only jobs whose heartbeat is fresh");
  cmd->add_flag("--json", opt->as_json, "One JSON array");
  cmd->callback([opt, exit_code]() {
    nlohmann::json all = nlohmann::json::array();
    if (!opt->as_json) {
      std::printf("%-32s %-24s %-26s %12s %11s  %s\n", "job", "status", "start", "duration",
                  "partitions", "host");
    }
    for (const exec::RunJobView& v : exec::ListRunJobs(opt->work_dir)) {
      if (opt->running && v.status != "running") continue;
      if (opt->as_json) {
        all.push_back(v.ToJson(false));
        continue;
      }
      const std::string parts =
          std::to_string(v.partitions_done) + "/" + std::to_string(v.partitions_total);
      std::printf("%-32s %-24s %-26s %12s %11s  %s\n", v.job_id.c_str(), v.status.c_str(),
                  v.start_time.c_str(), Duration(v.duration_secs).c_str(), parts.c_str(),
                  v.hostname.c_str());
    }
    if (opt->as_json) std::printf("%s\n", all.dump(2).c_str());
    *exit_code = kExitOk;
  });
}

void AddMonitorCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string job, work_dir = ".";
    bool detailed = false, watch = false, as_json = false;
    double interval = 10;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "monitor", "Show a run job's progress: partitions, rows/s, checkpoints, ETA");
  cmd->add_option("job", opt->job, "Job directory, or job id under --work-dir")->required();
  cmd->add_option("--work-dir", opt->work_dir, "Directory of job directories (default: .)");
  cmd->add_flag("--detailed", opt->detailed, "A row per partition and per-operator totals");
  cmd->add_flag("--watch", opt->watch, "Refresh every --interval seconds until the job ends");
  AddSecondsOption(cmd, "--interval", &opt->interval, "Seconds between refreshes (default 10)");
  cmd->add_flag("--json", opt->as_json, "One JSON object");
  cmd->callback([opt, exit_code]() {
    std::string dir = opt->job;
    if (!std::filesystem::exists(dir + "/job_summary.json")) dir = opt->work_dir + "/" + opt->job;
    if (!std::filesystem::exists(dir + "/job_summary.json")) {
      throw Error(opt->job, 0, "no such run job", "pass its directory, or its id with --work-dir");
    }
    for (;;) {
      const exec::RunJobView v = exec::ReadRunJob(dir);
      if (opt->watch && !opt->as_json && isatty(STDOUT_FILENO)) std::fputs("\033[H\033[2J", stdout);
      if (opt->as_json) {
        std::printf("%s\n", v.ToJson(opt->detailed).dump(2).c_str());
      } else {
        PrintView(v, opt->detailed);
      }
      std::fflush(stdout);
      *exit_code = MonitorExitCode(v);
      if (!opt->watch || v.status != "running") return;
      SleepInterruptibly(opt->interval);
      ThrowIfStopRequested();
    }
  });
}

}  // namespace djshard::cli
