#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "djshard/common/error.h"
#include "djshard/io/disk.h"
#include "djshard/store/job_gc.h"

namespace djshard::cli {

void AddGcCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string job, work_dir = ".";
    bool dry_run = false, as_json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "gc",
      "Remove the checkpoint files of a job that no commit names (left by a killed run or worker), "
      "and the dedup stage files nothing will read again");
  cmd->add_option("job", opt->job,
                  "Job directory (run or elastic), or a run job's id under --work-dir")
      ->required();
  cmd->add_option("--work-dir", opt->work_dir, "Directory of job directories (default: .)");
  cmd->add_flag("--dry-run", opt->dry_run, "List what would be removed; remove nothing");
  cmd->add_flag("--json", opt->as_json, "One JSON object");
  cmd->callback([opt, exit_code]() {
    std::string dir = opt->job;
    if (!std::filesystem::exists(dir + "/job_summary.json") &&
        !std::filesystem::exists(dir + "/manifest.json")) {
      dir = opt->work_dir + "/" + opt->job;
    }
    if (!std::filesystem::exists(dir + "/job_summary.json") &&
        !std::filesystem::exists(dir + "/manifest.json")) {
      throw Error(opt->job, 0, "no such run job", "pass its directory, or its id with --work-dir");
    }
    const store::GcResult r = store::CollectGarbage(dir, opt->dry_run, io::RealDisk());
    if (opt->as_json) {
      nlohmann::json j = {{"job_id", r.job_id},
                          {"job_dir", r.job_dir},
                          {"checkpoint_dir", r.checkpoint_dir},
                          {"dry_run", opt->dry_run},
                          {"removed", r.removed},
                          {"bytes", r.bytes},
                          {"commits_kept", r.commits_kept},
                          {"skipped_shards", r.skipped_shards},
                          {"skipped_probe", r.skipped_probe}};
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      for (const std::string& shard : r.skipped_shards) {
        std::printf("left %s alone: a live attempt holds it\n", shard.c_str());
      }
      for (const std::string& what : r.skipped_probe) {
        std::printf("kept %s\n", what.c_str());
      }
      for (const std::string& path : r.removed) {
        std::printf("%s %s\n", opt->dry_run ? "would remove" : "removed", path.c_str());
      }
      std::printf("job %s: %s %zu file(s), %.1f MB; %llu commit(s) and their files kept\n",
                  r.job_id.c_str(), opt->dry_run ? "would remove" : "removed", r.removed.size(),
                  static_cast<double>(r.bytes) / 1e6,
                  static_cast<unsigned long long>(r.commits_kept));
    }
    *exit_code = kExitOk;
  });
}

}  // namespace djshard::cli
