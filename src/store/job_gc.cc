// `djshard gc`: the files a job left that no commit record makes part of a
// checkpoint (SPEC-checkpoints §5).
#include "djshard/store/job_gc.h"

#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "djshard/common/error.h"
#include "djshard/exec/job_status.h"
#include "djshard/io/disk.h"
#include "djshard/store/job.h"

namespace djshard::store {

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

// The garbage of one partition set's checkpoint directory.
void CollectCheckpointDir(const std::string& dir, bool dry_run, GcResult& result) {
  // Every file a commit record names stays; so do the records themselves.
  std::set<std::string> named;
  std::error_code ec;
  std::vector<fs::path> data;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
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
}

GcResult CollectElastic(const std::string& job_dir, bool dry_run) {
  const JobDir job = JobDir::Open(job_dir);
  GcResult result;
  result.job_id = job.manifest().job_id;
  result.job_dir = job_dir;
  result.checkpoint_dir = ShardCheckpointsRoot(job);
  std::set<std::string> live;
  for (const ShardStatus& s : job.Statuses()) {
    if (s.lock && s.lock->age_secs < job.manifest().policy.lease_secs) live.insert(s.shard->id);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(result.checkpoint_dir, ec)) {
    if (!e.is_directory()) continue;
    const std::string shard = e.path().filename().string();
    if (live.count(shard) != 0) {
      result.skipped_shards.push_back(shard);
      continue;
    }
    CollectCheckpointDir(e.path().string(), dry_run, result);
  }
  return result;
}

}  // namespace

GcResult CollectGarbage(const std::string& job_dir, bool dry_run) {
  if (io::IsRegularFile(job_dir + "/manifest.json")) return CollectElastic(job_dir, dry_run);
  const exec::RunJobView view = exec::ReadRunJob(job_dir);
  if (view.status == "running") {
    throw Error(job_dir, 0,
                "job " + view.job_id + " is running (heartbeat " +
                    std::to_string(static_cast<int>(view.heartbeat_age_secs)) + " s old)",
                "gc a job once its run has ended; a killed run's heartbeat goes stale after " +
                    std::to_string(static_cast<int>(exec::kHeartbeatStaleSecs)) + " s");
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
  CollectCheckpointDir(result.checkpoint_dir, dry_run, result);
  return result;
}

}  // namespace djshard::store
