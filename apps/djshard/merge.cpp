#include "djshard/store/merge.h"

#include <cstdio>
#include <memory>

#include "commands.h"
#include "logging.h"

namespace djshard::cli {

void AddMergeCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string job_dir;
    store::MergeRequest request;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "merge", "Verify every shard output and concatenate them in order into one file");
  cmd->add_option("--job-dir", opt->job_dir, "Job directory")->required();
  cmd->add_option("--output", opt->request.output, "Merged JSONL (default <job-dir>/merged.jsonl)");
  cmd->add_flag("--overwrite", opt->request.overwrite, "Replace an existing output");
  AddLayoutOption(
      cmd, [opt](store::OutputLayout layout) { opt->request.layout = layout; },
      "file: one JSONL file; parts: a directory of one part per shard (hard links) and "
      "_manifest.json (default: the layout the job was prepared for)");
  cmd->callback([opt, exit_code]() {
    const store::JobDir job = store::JobDir::Open(opt->job_dir);
    const store::MergeOutcome out = store::Merge(job, opt->request);
    if (!out.model_devices_warning.empty())
      Log(LogLevel::kWarn, "warning", "WARNING: " + out.model_devices_warning);
    if (out.layout == store::OutputLayout::kParts) {
      std::printf("Merged %llu rows from %llu shards into %s as %llu parts (%s/_manifest.json)\n",
                  static_cast<unsigned long long>(out.rows),
                  static_cast<unsigned long long>(out.num_shards), out.output_path.c_str(),
                  static_cast<unsigned long long>(out.num_shards), out.output_path.c_str());
    } else {
      std::printf("Merged %llu rows from %llu shards into %s (sha256 %s)\n",
                  static_cast<unsigned long long>(out.rows),
                  static_cast<unsigned long long>(out.num_shards), out.output_path.c_str(),
                  out.sha256.c_str());
    }
    *exit_code = 0;
  });
}

void AddVerifyCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string job_dir;
    store::VerifyRequest request;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Re-check a finished job: shard outputs, node count and the merged output");
  cmd->add_option("--job-dir", opt->job_dir, "Job directory")->required();
  cmd->add_option("--output", opt->request.output,
                  "Merged JSONL (default: merge.json's output, else <job-dir>/merged.jsonl)");
  cmd->add_option("--expect-nodes", opt->request.expect_nodes,
                  "Distinct hostnames required among the done records")
      ->capture_default_str();
  cmd->add_flag("--deep", opt->request.deep,
                "Also re-read and re-parse every line of every shard output as JSON");
  cmd->callback([opt, exit_code]() {
    const store::JobDir job = store::JobDir::Open(opt->job_dir);
    const store::MergeOutcome out = store::Verify(job, opt->request);
    if (!out.model_devices_warning.empty())
      Log(LogLevel::kWarn, "warning", "WARNING: " + out.model_devices_warning);
    std::printf("%s\n", store::PassLine(out).c_str());
    if (out.stage_files > 0 || out.stage_files_removed > 0) {
      Log(LogLevel::kInfo, "verify",
          "dedup stages: " + std::to_string(out.stage_files) +
              " task file(s) match their done records" +
              (out.stage_files_removed > 0
                   ? ", " + std::to_string(out.stage_files_removed) + " removed by gc"
                   : std::string()));
    }
    if (opt->request.deep) {
      char took[64];
      std::snprintf(took, sizeof(took), "%.2f s", out.seconds);
      Log(LogLevel::kInfo, "verify",
          "deep check: every line of the " + std::to_string(out.num_shards) +
              " shard outputs parsed as JSON in " + took);
    }
    *exit_code = 0;
  });
}

}  // namespace djshard::cli
