// `djshard gc`: the files a run job left that no commit record makes part of
// a checkpoint (SPEC-checkpoints §5).
#include "djshard/exec/job_gc.h"

#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "djshard/common/error.h"
#include "djshard/exec/job_status.h"
#include "djshard/io/disk.h"
#include "src/exec/job_files.h"

namespace djshard::exec {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool IsTemp(const std::string& name) { return name.find(".tmp.") != std::string::npos; }

void Remove(const fs::path& path, bool dry_run, GcResult& result) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  if (!dry_run) io::RealDisk().Unlink(path.string());
  result.removed.push_back(path.string());
  result.bytes += static_cast<uint64_t>(st.st_size);
}

// Temp files directly in `dir`.
void CollectTemps(const fs::path& dir, bool dry_run, GcResult& result) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (IsTemp(e.path().filename().string())) Remove(e.path(), dry_run, result);
  }
}

}  // namespace

GcResult CollectGarbage(const std::string& job_dir, bool dry_run) {
  struct stat sb {};
  if (::stat((job_dir + "/manifest.json").c_str(), &sb) == 0) {
    throw Error(job_dir, 0, "an elastic job directory, not a run job",
                "workers publish their files atomically and leave no garbage to collect");
  }
  const RunJobView view = ReadRunJob(job_dir);
  if (view.status == "running") {
    throw Error(job_dir, 0,
                "job " + view.job_id + " is running (heartbeat " +
                    std::to_string(static_cast<int>(view.heartbeat_age_secs)) + " s old)",
                "gc a job once its run has ended; a killed run's heartbeat goes stale after " +
                    std::to_string(static_cast<int>(kHeartbeatStaleSecs)) + " s");
  }
  GcResult result;
  result.job_id = view.job_id;
  result.job_dir = job_dir;
  const json summary = json::parse(io::ReadFile(job_dir + "/job_summary.json"), nullptr, false);
  result.checkpoint_dir = job_dir + "/checkpoints";
  if (summary.is_object() && summary.contains("checkpointing") &&
      summary["checkpointing"].value("checkpoint_dir", json()).is_string()) {
    result.checkpoint_dir = summary["checkpointing"]["checkpoint_dir"].get<std::string>();
  }
  CollectTemps(job_dir, dry_run, result);
  CollectTemps(job_dir + "/metadata", dry_run, result);

  // Every file a commit record names stays; so do the records themselves.
  std::set<std::string> named;
  std::error_code ec;
  std::vector<fs::path> data;
  for (const auto& e : fs::directory_iterator(result.checkpoint_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (IsTemp(name)) {
      Remove(e.path(), dry_run, result);
    } else if (name.size() > 12 && name.compare(name.size() - 12, 12, ".commit.json") == 0) {
      const json record = json::parse(io::ReadFile(e.path().string()), nullptr, false);
      if (!record.is_object()) {
        throw Error(e.path().string(), 0, "not a commit record",
                    "a commit record is never rewritten; restore it, or move the job aside");
      }
      ++result.commits_kept;
      for (const char* key : {"data_path", "errors_path"}) {
        if (record.value(key, json()).is_string()) named.insert(record[key].get<std::string>());
      }
    } else if (name.rfind("checkpoint_op_", 0) == 0) {
      data.push_back(e.path());
    }
  }
  for (const fs::path& p : data) {
    if (named.count(p.filename().string()) == 0) Remove(p, dry_run, result);
  }
  return result;
}

}  // namespace djshard::exec
