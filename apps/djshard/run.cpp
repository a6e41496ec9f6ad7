#include "djshard/exec/run.h"

#include <unistd.h>

#include <cstdio>
#include <memory>

#include "commands.h"

namespace djshard::cli {

namespace {

void PrintProgress(const exec::ExecSummary& s) {
  const double mb = static_cast<double>(s.bytes_in) / 1e6;
  std::fprintf(stderr, "\r%llu rows in, %llu out, %.1f MB, %.1f MB/s, %.1f s   ",
               static_cast<unsigned long long>(s.rows_in),
               static_cast<unsigned long long>(s.rows_out), mb, s.seconds > 0 ? mb / s.seconds : 0,
               s.seconds);
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string config, dataset, export_path;
    std::shared_ptr<std::optional<int>> threads = std::make_shared<std::optional<int>>();
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a recipe on one machine over a JSONL file or directory (like dj-process)");
  cmd->add_option("--config", opt->config, "Data-Juicer YAML recipe")->required();
  cmd->add_option("--dataset-path", opt->dataset,
                  "JSONL file or directory (overrides dataset_path)");
  cmd->add_option("--export-path", opt->export_path,
                  "Output JSONL, compressed when it ends in .gz or .zst (overrides export_path)");
  AddThreadsOption(cmd, opt->threads);
  AddDeviceOptions(cmd);
  cmd->callback([opt, exit_code]() {
    exec::RunRequest req;
    req.config_path = opt->config;
    if (!opt->dataset.empty()) req.dataset_path = opt->dataset;
    if (!opt->export_path.empty()) req.export_path = opt->export_path;
    req.threads = *opt->threads;
    const bool tty = isatty(STDERR_FILENO) != 0;
    if (tty) req.progress = PrintProgress;
    const exec::RunOutcome out = exec::RunRecipe(req);
    if (tty) std::fprintf(stderr, "\r%*s\r", 80, "");
    const exec::ExecSummary& s = out.summary;
    const double mb = static_cast<double>(s.bytes_in) / 1e6;
    std::printf(
        "Processed %llu rows (%.1f MB) in %.2f s with %d thread(s): %.1f MB/s, %.0f rows/s\n",
        static_cast<unsigned long long>(s.rows_in), mb, s.seconds, out.threads,
        s.seconds > 0 ? mb / s.seconds : 0,
        s.seconds > 0 ? static_cast<double>(s.rows_in) / s.seconds : 0);
    std::printf("%-36s %12s %12s %8s %10s\n", "operator", "rows in", "rows out", "errors",
                "seconds");
    for (const exec::OperatorCounters& c : s.operators) {
      std::printf("%-36s %12llu %12llu %8llu %10.2f\n", c.name.c_str(),
                  static_cast<unsigned long long>(c.rows_in),
                  static_cast<unsigned long long>(c.rows_out),
                  static_cast<unsigned long long>(c.errors), c.seconds);
    }
    std::printf("Kept %llu of %llu rows -> %s\n", static_cast<unsigned long long>(s.rows_out),
                static_cast<unsigned long long>(s.rows_in), out.export_path.c_str());
    std::printf("Stats: %s\n", out.stats_path.c_str());
    if (s.errors > 0) {
      std::printf("%llu record(s) dropped by operator errors: %s\n",
                  static_cast<unsigned long long>(s.errors), out.errors_path.c_str());
    }
    *exit_code = 0;
  });
}

}  // namespace djshard::cli
