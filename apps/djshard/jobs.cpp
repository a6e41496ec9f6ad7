#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.h"
#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/coord/dlc.h"
#include "djshard/job/job_status.h"
#include "djshard/store/job.h"
#include "djshard/store/job_view.h"

namespace djshard::cli {

namespace {

std::string Duration(double secs) {
  char buf[32];
  const long s = static_cast<long>(secs);
  std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

// 0 completed, 1 running or incomplete (an elastic job "stopping" too),
// 2 failed, 3 stopped: for run and elastic jobs alike.
int MonitorExitCode(job::JobState state) {
  switch (state) {
    case job::JobState::kCompleted:
      return kExitOk;
    case job::JobState::kFailed:
      return kExitFailure;
    case job::JobState::kStopped:
      return kExitStopped;
    default:
      return kExitIncomplete;
  }
}

// Per-operator totals of a job (its op_totals array), one line each.
void PrintOpTotals(const nlohmann::json& op_totals) {
  for (const auto& op : op_totals) {
    std::printf("  op %llu %-34s rows %llu -> %llu  %.2f s\n",
                static_cast<unsigned long long>(op["op_idx"].get<uint64_t>()),
                op["name"].get<std::string>().c_str(),
                static_cast<unsigned long long>(op["rows_in"].get<uint64_t>()),
                static_cast<unsigned long long>(op["rows_out"].get<uint64_t>()),
                op["seconds"].get<double>());
  }
}

void PrintView(const job::RunJobView& v, bool detailed) {
  std::printf("job %s: %s\n", v.job_id.c_str(), v.StatusName().c_str());
  std::printf("partitions: %llu of %llu done; rows %llu of %llu; %.0f rows/s",
              static_cast<unsigned long long>(v.partitions_done),
              static_cast<unsigned long long>(v.partitions_total),
              static_cast<unsigned long long>(v.rows_done),
              static_cast<unsigned long long>(v.rows_total), v.rows_per_sec);
  if (v.eta_secs) std::printf("; ETA %s", Duration(*v.eta_secs).c_str());
  std::printf("\n");
  std::printf("last checkpoint: %s\n",
              v.last_checkpoint_time.empty() ? "none" : v.last_checkpoint_time.c_str());
  for (const job::PartitionView& p : v.partitions) {
    if (!detailed && p.state != job::PartitionState::kRunning) continue;
    std::string taps;
    for (const uint64_t t : p.taps) {
      if (!taps.empty()) taps.push_back(',');
      taps.append(std::to_string(t));
    }
    std::printf("  partition %llu  %-9s  taps [%s]  rows %llu -> %llu\n",
                static_cast<unsigned long long>(p.partition_id), job::PartitionStateName(p.state),
                taps.c_str(), static_cast<unsigned long long>(p.rows_in),
                static_cast<unsigned long long>(p.rows_out));
  }
  if (!v.replica_plan.is_null()) {
    std::printf("replica plan:\n");
    for (const std::string& line : job::ReplicaPlanLines(v.replica_plan)) {
      std::printf("  %s\n", line.c_str());
    }
  }
  if (detailed) {
    PrintOpTotals(v.op_totals);
  }
}

void PrintView(const store::ElasticJobView& v, bool detailed) {
  std::printf("job %s (elastic): %s%s\n", v.job_id.c_str(), job::JobStateName(v.state),
              v.merged ? ", merged" : "");
  std::printf(
      "shards: %llu of %llu done, %llu running, %llu failed; rows %llu of %llu; %.0f rows/s",
      static_cast<unsigned long long>(v.shards_done),
      static_cast<unsigned long long>(v.shards_total),
      static_cast<unsigned long long>(v.shards_running),
      static_cast<unsigned long long>(v.shards_failed),
      static_cast<unsigned long long>(v.rows_done), static_cast<unsigned long long>(v.rows_total),
      v.rows_per_sec);
  if (v.eta_secs) std::printf("; ETA %s", Duration(*v.eta_secs).c_str());
  std::printf("\n");
  if (v.partitions.per_shard) {
    std::printf("partitions: %llu of %llu done, %llu failed, %llu resumed",
                static_cast<unsigned long long>(v.partitions.completed),
                static_cast<unsigned long long>(v.partitions.total),
                static_cast<unsigned long long>(v.partitions.failed),
                static_cast<unsigned long long>(v.partitions.resumed));
    if (v.partitions.unsized_shards > 0) {
      std::printf("; %llu shard(s) not started yet, their partitions not counted",
                  static_cast<unsigned long long>(v.partitions.unsized_shards));
    }
    std::printf("\n");
  }
  for (const nlohmann::json& stage : v.dedup_stages) {
    std::printf("dedup stage %llu (%s): %llu of %llu tasks done, %llu running, %llu failed\n",
                stage["stage"].get<unsigned long long>(), stage["op"].get<std::string>().c_str(),
                stage["done"].get<unsigned long long>(), stage["tasks"].get<unsigned long long>(),
                stage["running"].get<unsigned long long>(),
                stage["failed"].get<unsigned long long>());
  }
  if (!v.stop.is_null()) {
    std::printf("stop requested: %s at %s by %s\n", v.stop.value("mode", "").c_str(),
                v.stop.value("requested_at", "").c_str(), v.stop.value("requested_by", "").c_str());
  }
  std::printf("last checkpoint: %s\n",
              v.last_checkpoint_time.empty() ? "none" : v.last_checkpoint_time.c_str());
  for (const store::RunningAttempt& a : v.running) {
    std::printf("  %s  running on %s pid %lld  lock age %.1f s", a.shard_id.c_str(),
                a.hostname.c_str(), static_cast<long long>(a.pid), a.lock_age_secs);
    if (!a.current_op.empty()) std::printf("  op %s", a.current_op.c_str());
    if (a.partitions_total > 0) {
      std::printf("  partitions %llu/%llu committed",
                  static_cast<unsigned long long>(a.partitions_committed),
                  static_cast<unsigned long long>(a.partitions_total));
    }
    std::printf("\n");
  }
  if (!v.model_devices_warning.empty()) {
    std::printf("WARNING: %s\n", v.model_devices_warning.c_str());
  }
  for (const nlohmann::json& plan : v.replica_plans) {
    std::printf("replica plan of %s (pid %s, %s thread(s)):\n",
                plan["hostname"].get<std::string>().c_str(), plan["pid"].dump().c_str(),
                plan["threads"].dump().c_str());
    for (const std::string& line : job::ReplicaPlanLines(plan)) {
      std::printf("  %s\n", line.c_str());
    }
  }
  if (!detailed) return;
  for (const auto& sh : v.shard_details) {
    std::printf("  shard %s  %-7s  rows %llu  %s\n", sh["shard_id"].get<std::string>().c_str(),
                sh["status"].get<std::string>().c_str(),
                static_cast<unsigned long long>(sh["rows"].get<uint64_t>()),
                sh["owner"].is_string() ? sh["owner"].get<std::string>().c_str() : "");
  }
  PrintOpTotals(v.op_totals);
}

// `monitor` of an elastic job: its view (and a dlc merge's copy tasks in
// progress), once or (`watch`) until the job ends. Returns the exit code.
int MonitorElasticJob(const std::string& dir, bool watch, bool as_json, bool detailed,
                      double interval) {
  const store::JobDir job = store::JobDir::Open(dir);
  for (;;) {
    const store::ElasticJobView v = store::ReadElasticJob(job);
    if (watch && !as_json && isatty(STDOUT_FILENO)) std::fputs("\033[H\033[2J", stdout);
    if (as_json) {
      std::printf("%s\n", v.ToJson(detailed).dump(2).c_str());
    } else {
      PrintView(v, detailed);
      for (const std::string& line : coord::DlcTaskProgress(job.dir())) {
        std::printf("%s\n", line.c_str());
      }
    }
    std::fflush(stdout);
    const int code = MonitorExitCode(v.state);
    if (!watch || code != kExitIncomplete) return code;
    SleepInterruptibly(interval);
    ThrowIfStopRequested();
  }
}

}  // namespace

int PrintJobs(const std::string& work_dir, bool running_only, bool as_json) {
  nlohmann::json all = nlohmann::json::array();
  if (!as_json) {
    std::printf("%-32s %-8s %-24s %-26s %12s %11s  %s\n", "job", "kind", "status", "start",
                "duration", "done/total", "host");
  }
  for (const store::JobRow& r : store::ListJobs(work_dir, running_only)) {
    if (as_json) {
      all.push_back(r.json);
      continue;
    }
    const std::string parts = std::to_string(r.done) + "/" + std::to_string(r.total);
    std::printf("%-32s %-8s %-24s %-26s %12s %11s  %s\n", r.job_id.c_str(), r.kind.c_str(),
                r.status.c_str(), r.start_time.c_str(), Duration(r.duration_secs).c_str(),
                parts.c_str(), r.hostname.c_str());
  }
  if (as_json) std::printf("%s\n", all.dump(2).c_str());
  return kExitOk;
}

void AddJobsCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string work_dir = ".";
    bool running = false, as_json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("jobs", "List the jobs (run and elastic) under a work dir, newest first");
  cmd->add_option("--work-dir", opt->work_dir, "Directory of job directories (default: .)");
  cmd->add_flag("--running", opt->running,
                "Only jobs whose heartbeat is fresh (run) or with a live claim (elastic)");
  cmd->add_flag("--json", opt->as_json, "One JSON array");
  cmd->callback(
      [opt, exit_code]() { *exit_code = PrintJobs(opt->work_dir, opt->running, opt->as_json); });
}

void AddMonitorCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string job, job_dir, work_dir = ".";
    bool detailed = false, watch = false, as_json = false;
    double interval = 10;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "monitor",
      "Show a job's progress: partitions (run) or shards and running attempts (elastic), "
      "rows/s, checkpoints, ETA");
  cmd->add_option("job", opt->job, "Job directory, or job id under --work-dir");
  cmd->add_option("--job-dir", opt->job_dir, "Job directory (instead of the positional job)");
  cmd->add_option("--work-dir", opt->work_dir, "Directory of job directories (default: .)");
  cmd->add_flag("--detailed", opt->detailed, "A row per partition and per-operator totals");
  cmd->add_flag("--watch", opt->watch, "Refresh every --interval seconds until the job ends");
  AddSecondsOption(cmd, "--interval", &opt->interval, "Seconds between refreshes (default 10)");
  cmd->add_flag("--json", opt->as_json, "One JSON object");
  cmd->callback([opt, exit_code]() {
    auto is_job = [](const std::string& d) {
      return std::filesystem::exists(d + "/job_summary.json") || store::IsElasticJobDir(d);
    };
    if (opt->job.empty() == opt->job_dir.empty()) {
      throw Error(opt->job.empty() ? "monitor needs a job"
                                   : "monitor takes the job once: '" + opt->job +
                                         "' and --job-dir '" + opt->job_dir + "'",
                  "djshard monitor --job-dir J, or djshard monitor JOB_ID --work-dir W");
    }
    if (!opt->job_dir.empty()) {
      // Instances of `djshard dlc` still scanning its input: their tasks.
      if (!is_job(opt->job_dir) &&
          PrintPreparing(opt->job_dir, opt->watch, opt->interval, opt->as_json)) {
        *exit_code = kExitIncomplete;
        if (!opt->watch || !is_job(opt->job_dir)) return;
      }
      if (!is_job(opt->job_dir)) {
        throw Error(opt->job_dir, 0, "no such job",
                    "--job-dir names a directory holding job_summary.json or manifest.json");
      }
      opt->job = opt->job_dir;
    }
    std::string dir = opt->job;
    if (!is_job(dir)) dir = opt->work_dir + "/" + opt->job;
    if (!is_job(dir)) {
      throw Error(opt->job, 0, "no such job", "pass its directory, or its id with --work-dir");
    }
    if (store::IsElasticJobDir(dir)) {
      *exit_code = MonitorElasticJob(dir, opt->watch, opt->as_json, opt->detailed, opt->interval);
      return;
    }
    for (;;) {
      const job::RunJobView v = job::ReadRunJob(dir);
      if (opt->watch && !opt->as_json && isatty(STDOUT_FILENO)) std::fputs("\033[H\033[2J", stdout);
      if (opt->as_json) {
        std::printf("%s\n", v.ToJson(opt->detailed).dump(2).c_str());
      } else {
        PrintView(v, opt->detailed);
      }
      std::fflush(stdout);
      *exit_code = MonitorExitCode(v.state);
      if (!opt->watch || v.state != job::JobState::kRunning) return;
      SleepInterruptibly(opt->interval);
      ThrowIfStopRequested();
    }
  });
}

}  // namespace djshard::cli
