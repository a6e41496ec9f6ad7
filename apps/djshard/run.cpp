#include <unistd.h>

#include <cstdio>
#include <memory>

#include "commands.h"
#include "djshard/job/run_job.h"
#include "logging.h"

namespace djshard::cli {

namespace {

void PrintProgress(const exec::ExecSummary& s) {
  const double mb = static_cast<double>(s.bytes_in) / 1e6;
  std::fprintf(stderr, "\r%llu rows in, %llu out, %.1f MB, %.1f MB/s, %.1f s   ",
               static_cast<unsigned long long>(s.rows_in),
               static_cast<unsigned long long>(s.rows_out), mb, s.seconds > 0 ? mb / s.seconds : 0,
               s.seconds);
}

struct RunOptions {
  std::string config, dataset, export_path;
  std::shared_ptr<std::optional<int>> threads = std::make_shared<std::optional<int>>();
  std::vector<job::ConfigOverride> overrides;
  std::optional<std::string> job_id, work_dir, resume;
};

// Recipe keys of the partition:, checkpoint: and event_logging: sections,
// set from the command line as Data-Juicer's dotted overrides.
void AddRecipeKeyOptions(CLI::App* cmd, const std::shared_ptr<RunOptions>& opt) {
  const std::vector<std::pair<std::string, std::string>> dotted = {
      {"partition.mode", "auto or manual"},
      {"partition.num_of_partitions", "manual: partitions of the input (default 4)"},
      {"partition.target_size_mb", "auto: 128, 256, 512 or 1024 MB per partition (default 256)"},
      {"partition.size", "auto: rows per partition when a row's size estimate is 0"},
      {"partition.max_size_mb", "auto: cap on a partition's estimated size (default 256)"},
      {"partition.max_concurrent_partitions",
       "partitions in flight at once, or auto (2); never changes the output"},
      {"partition.gpu_preflight_enabled",
       "probe model operators before the job and plan their replicas (default true)"},
      {"partition.max_gpu_workers_per_device", "model replicas per GPU at most (default 5)"},
      {"partition.max_concurrent_gpu_probes", "probes at once, or auto (1)"},
      {"partition.gpu_probe_timeout_seconds",
       "a probe running longer stops the job (default none)"},
      {"partition.gpu_probe_warmup_batches", "untimed batches per probe (default 1)"},
      {"partition.gpu_probe_steady_batches", "timed batches per probe (default 3)"},
      {"partition.gpu_probe_sample_offset", "probe sample: the rows after this many (default 0)"},
      {"partition.gpu_probe_sample_shuffle", "probe sample: seeded random rows (default false)"},
      {"partition.gpu_probe_sample_seed",
       "seed of the shuffled sample (default 42; null: new each run, never reused)"},
      {"partition.execution_group_size", "partitions per execution group, or auto"},
      {"partition.max_initialization_overhead_ratio",
       "execution_group_size auto: model init time / group time at most (default 0.1)"},
      {"checkpoint.enabled", "true or false (default true)"},
      {"checkpoint.strategy", "every_n_ops, every_op, manual or disabled (default every_n_ops)"},
      {"checkpoint.n_ops", "every_n_ops: tap after every n-th operator (default 5)"},
      {"checkpoint.op_names", "manual: tap after these operators, e.g. a,b"},
      {"checkpoint.compression", "zstd or none (default zstd)"},
      {"checkpoint.keep", "latest or all taps per partition (default latest)"},
      {"checkpoint.dir",
       "where checkpoints go: DIR/<job_id>, or DIR with {job_id} substituted "
       "(default <job_dir>/checkpoints)"},
      {"event_logging.enabled", "write events_<ts>.jsonl in the job dir (default true)"},
  };
  for (const auto& [key, help] : dotted) {
    const std::string name = key;
    cmd->add_option_function<std::string>(
        "--" + key, [opt, name](const std::string& v) { opt->overrides.emplace_back(name, v); },
        "Recipe key " + key + ": " + help);
  }
}

void AddJobOptions(CLI::App* cmd, const std::shared_ptr<RunOptions>& opt) {
  cmd->add_option_function<std::string>(
      "--job_id,--job-id", [opt](const std::string& v) { opt->job_id = v; },
      "Job id (default: the recipe's job_id, else a new YYYYmmdd_HHMMSS_<hex>)");
  cmd->add_option_function<std::string>(
      "--work-dir", [opt](const std::string& v) { opt->work_dir = v; },
      "Directory of job directories (default: the recipe's work_dir, else the export's "
      "directory)");
  cmd->add_option_function<std::string>(
      "--resume", [opt](const std::string& v) { opt->resume = v; },
      "Resume job TOKEN from its committed checkpoints (validated; exit 2 on a mismatch)");
}

void PrintResumeToken(const std::string& id, bool resumable) {
  if (!resumable) return;
  LogRecord r;
  r.event = "resume_token";
  r.job_id = id;
  r.message = "Resume token: " + id + ". Rerun the original command with --resume " + id +
              " to resume this job.";
  LogRecordToStderr(r);
}

job::RunRequest MakeRunRequest(const RunOptions& opt) {
  job::RunRequest req;
  req.config_path = opt.config;
  if (!opt.dataset.empty()) req.dataset_path = opt.dataset;
  if (!opt.export_path.empty()) req.export_path = opt.export_path;
  req.threads = *opt.threads;
  req.overrides = opt.overrides;
  req.job_id = opt.job_id;
  req.work_dir = opt.work_dir;
  req.resume = opt.resume;
  req.job_started = PrintResumeToken;
  return req;
}

// The summary on stdout: throughput, the operators' counters, where things went.
void PrintOutcome(const job::RunOutcome& out) {
  const exec::ExecSummary& s = out.summary;
  const double mb = static_cast<double>(s.bytes_in) / 1e6;
  std::printf("Processed %llu rows (%.1f MB) in %.2f s with %d thread(s): %.1f MB/s, %.0f rows/s\n",
              static_cast<unsigned long long>(s.rows_in), mb, s.seconds, out.threads,
              s.seconds > 0 ? mb / s.seconds : 0,
              s.seconds > 0 ? static_cast<double>(s.rows_in) / s.seconds : 0);
  std::printf("%-36s %12s %12s %8s %10s\n", "operator", "rows in", "rows out", "errors", "seconds");
  for (const exec::OperatorCounters& c : s.operators) {
    std::printf("%-36s %12llu %12llu %8llu %10.2f\n", c.name.c_str(),
                static_cast<unsigned long long>(c.rows_in),
                static_cast<unsigned long long>(c.rows_out),
                static_cast<unsigned long long>(c.errors), c.seconds);
  }
  std::printf("Kept %llu of %llu rows -> %s\n", static_cast<unsigned long long>(s.rows_out),
              static_cast<unsigned long long>(s.rows_in), out.export_path.c_str());
  std::printf("Stats: %s\n", out.stats_path.c_str());
  if (!out.job_dir.empty()) {
    std::printf("Job %s: %llu partition(s), %llu taken from checkpoints: %s\n", out.job_id.c_str(),
                static_cast<unsigned long long>(out.partitions),
                static_cast<unsigned long long>(out.partitions_resumed), out.job_dir.c_str());
  }
  if (s.errors > 0) {
    std::printf("%llu record(s) dropped by operator errors: %s\n",
                static_cast<unsigned long long>(s.errors), out.errors_path.c_str());
  }
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a recipe on one machine over a JSONL file or directory (like dj-process)");
  cmd->add_option("--config", opt->config, "Data-Juicer YAML recipe")->required();
  cmd->add_option("--dataset-path", opt->dataset,
                  "JSONL file or directory (overrides dataset_path)");
  cmd->add_option("--export-path", opt->export_path,
                  "Output JSONL, compressed when it ends in .gz or .zst (overrides export_path)");
  AddThreadsOption(cmd, opt->threads);
  AddDeviceOptions(cmd);
  AddRecipeKeyOptions(cmd, opt);
  AddJobOptions(cmd, opt);
  cmd->callback([opt, exit_code]() {
    job::RunRequest req = MakeRunRequest(*opt);
    const bool tty = isatty(STDERR_FILENO) != 0;
    if (tty) req.progress = PrintProgress;
    const job::RunOutcome out = job::RunRecipe(req);
    if (tty) std::fprintf(stderr, "\r%*s\r", 80, "");
    if (out.already_completed) {
      std::printf("Job %s already completed: %s\n", out.job_id.c_str(), out.export_path.c_str());
    } else {
      PrintOutcome(out);
    }
    *exit_code = 0;
  });
}

}  // namespace djshard::cli
