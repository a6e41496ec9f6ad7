// `djshard gc`: the files a job left that no commit record makes part of a
// checkpoint (SPEC-checkpoints §5).
#include "djshard/store/job_gc.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/disk.h"
#include "djshard/job/job_files.h"
#include "djshard/job/job_status.h"
#include "djshard/preflight/probe_records.h"
#include "djshard/store/dedup_stage.h"
#include "djshard/store/job.h"
#include "djshard/store/records.h"

namespace djshard::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool IsTemp(const std::string& name) { return name.find(".tmp.") != std::string::npos; }

void Remove(const fs::path& path, io::Disk& disk, bool dry_run, GcResult& result) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  if (!dry_run) disk.Unlink(path.string());
  result.removed.push_back(path.string());
  result.bytes += static_cast<uint64_t>(st.st_size);
}

// Temp files directly in `dir`.
void CollectTemps(const fs::path& dir, io::Disk& disk, bool dry_run, GcResult& result) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (IsTemp(e.path().filename().string())) Remove(e.path(), disk, dry_run, result);
  }
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

json ReadRecord(const fs::path& path) {
  const json record = json::parse(io::ReadFile(path.string()), nullptr, false);
  if (!record.is_object()) {
    throw Error(path.string(), 0, "not a commit record",
                "a commit record is never rewritten; restore it, or move the job aside");
  }
  return record;
}

// The index of the recipe's last operator, whose tap is every partition's
// final tap (SPEC-checkpoints §5), from dag_execution_plan.json; -1 when the
// plan is missing or names no operator.
int64_t LastOpIdx(const std::string& job_dir) {
  std::string text;
  try {
    text = io::ReadFile(job_dir + "/dag_execution_plan.json");
  } catch (const Error&) {
    return -1;
  }
  const json plan = json::parse(text, nullptr, false);
  int64_t last = -1;
  if (!plan.is_object() || !plan.value("ops", json()).is_array()) return last;
  for (const json& op : plan["ops"]) {
    if (op.is_object() && op.value("op_idx", json()).is_number_integer()) {
      last = std::max(last, op["op_idx"].get<int64_t>());
    }
  }
  return last;
}

// The garbage of one partition set's checkpoint directory: temp files, tap
// data and errors files and gather-journal segments (SPEC-lineage §6) that no
// commit record names, and the journals of partitions whose final tap is
// committed (the executor deletes those itself once that tap commits; a run
// killed in between leaves them). `last_op` is LastOpIdx.
void CollectCheckpointDir(const std::string& dir, int64_t last_op, io::Disk& disk, bool dry_run,
                          GcResult& result) {
  // Every file a commit record names stays; so do the records themselves,
  // but for the journal records of finished partitions.
  std::set<std::string> named;
  std::set<uint64_t> finished;  // partitions whose final tap is committed
  std::vector<std::pair<fs::path, json>> journal_records;
  std::error_code ec;
  std::vector<fs::path> data;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (IsTemp(name)) {
      Remove(e.path(), disk, dry_run, result);
    } else if (EndsWith(name, ".commit.json")) {
      json record = ReadRecord(e.path());
      if (name.rfind("lineage_", 0) == 0) {
        journal_records.emplace_back(e.path(), std::move(record));
        continue;
      }
      ++result.commits_kept;
      for (const char* key : {"data_path", "errors_path", "origins_path"}) {
        if (record.value(key, json()).is_string()) named.insert(record[key].get<std::string>());
      }
      if (last_op >= 0 && record.value("op_idx", json()) == json(last_op) &&
          record.value("partition_id", json()).is_number_unsigned()) {
        finished.insert(record["partition_id"].get<uint64_t>());
      }
    } else if (name.rfind("checkpoint_op_", 0) == 0 || name.rfind("lineage_", 0) == 0) {
      data.push_back(e.path());
    }
  }
  for (const auto& [path, record] : journal_records) {
    const json partition = record.value("partition_id", json());
    if (partition.is_number_unsigned() && finished.count(partition.get<uint64_t>()) != 0) {
      // The record goes first: its segment stops existing before its data.
      Remove(path, disk, dry_run, result);
      continue;
    }
    ++result.commits_kept;
    if (record.value("data_path", json()).is_string()) {
      named.insert(record["data_path"].get<std::string>());
    }
  }
  for (const fs::path& p : data) {
    if (named.count(p.filename().string()) == 0) Remove(p, disk, dry_run, result);
  }
}

// Whether process `pid` may run on this host (a pid reused by another
// process counts: gc then keeps what it could have removed).
bool MayBeAlive(int64_t pid) {
  if (pid <= 0 || pid > INT32_MAX) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

// Files and directories under `dir`, deepest first.
void RemoveTree(const fs::path& dir, const std::set<std::string>& keep, io::Disk& disk,
                bool dry_run, GcResult& result) {
  std::error_code ec;
  std::vector<fs::path> subdirs;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && !e.is_symlink(ec)) {
      subdirs.push_back(e.path());
    } else if (keep.count(e.path().lexically_normal().string()) == 0) {
      Remove(e.path(), disk, dry_run, result);
    }
  }
  for (const fs::path& sub : subdirs) RemoveTree(sub, keep, disk, dry_run, result);
  if (dry_run) return;
  ::rmdir(dir.c_str());  // fails, as it should, while a kept file is in it
}

// probe/ of an elastic job (SPEC-checkpoints §10.5): the work directories of
// workers that are gone (but the logs a record names) and the stale locks.
// Records (<key>.json, <key>.failed.json) stay.
void CollectProbe(const JobDir& job, const std::string& job_dir, io::Disk& disk, bool dry_run,
                  GcResult& result) {
  const std::string dir = job_dir + "/probe";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::set<std::string> keep;  // the logs failure records name
  std::vector<std::string> lock_keys;
  std::vector<fs::path> work_dirs;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("work.", 0) == 0 && e.is_directory(ec) && !e.is_symlink(ec)) {
      work_dirs.push_back(e.path());
    } else if (EndsWith(name, ".lock")) {
      lock_keys.push_back(name.substr(0, name.size() - 5));
    } else if (EndsWith(name, ".json")) {
      const json record = json::parse(io::ReadFile(e.path().string()), nullptr, false);
      if (record.is_object() && record.value("log", json()).is_string()) {
        keep.insert(
            (fs::path(job_dir) / record["log"].get<std::string>()).lexically_normal().string());
      }
    }
  }
  const std::string host = HostName();
  for (const fs::path& work : work_dirs) {
    // work.<host>.<pid>: the host may have dots, the pid has none.
    const std::string name = work.filename().string();
    const size_t dot = name.rfind('.');
    const std::string who = name.substr(5, dot == std::string::npos ? 0 : dot - 5);
    int64_t pid = 0;
    try {
      pid = dot == std::string::npos ? 0 : std::stoll(name.substr(dot + 1));
    } catch (const std::exception&) {
      pid = 0;
    }
    if (pid <= 0 || who.empty()) continue;  // not a worker's: not gc's either
    if (who != host) {
      result.skipped_probe.push_back(work.string() + ": worker on host " + who +
                                     ", whose processes gc cannot see from here");
    } else if (MayBeAlive(pid)) {
      result.skipped_probe.push_back(work.string() + ": worker pid " + std::to_string(pid) +
                                     " is running");
    } else {
      RemoveTree(work, keep, disk, dry_run, result);
    }
  }
  preflight::ProbeRecords records(dir, job.manifest().policy.lease_secs,
                                  job.manifest().policy.heartbeat_secs, disk);
  for (const std::string& key : lock_keys) {
    const std::string path = records.LockPath(key);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (!records.LockIsStale(key)) {
      result.skipped_probe.push_back(path + ": a probe holds it (younger than the lease)");
    } else if (dry_run || records.RemoveStaleLock(key)) {
      result.removed.push_back(path);
      result.bytes += static_cast<uint64_t>(st.st_size);
    }
  }
}

// The outputs of shard attempts that no merge will read: every attempt's but
// the one its shard's done record names, once the attempt's record says it
// ended (failed, taken over, interrupted...), or says it runs while another
// attempt published the shard (a frozen owner cannot publish over that). An
// attempt still running on an unpublished shard may be a live owner; its
// output stays. Their records, logs and errors files stay too.
void CollectDeadAttempts(const JobDir& job, const std::set<std::string>& live, io::Disk& disk,
                         bool dry_run, GcResult& result) {
  const ShardScan scan = job.Scan();
  for (const ShardEntry& shard : job.manifest().shards) {
    if (live.count(shard.id) != 0 || scan.attempted.count(shard.id) == 0) continue;
    std::string published;
    if (scan.done.count(shard.id) != 0) {
      const std::string path = job.DonePath(shard.id);
      try {
        const DoneRecord done = DoneRecord::FromJson(disk.Read(path), path);
        published = job.InJob(fs::path(done.output_path).parent_path().string());
      } catch (const Error&) {
        continue;  // an unreadable record: leave its files for verify to report
      }
    }
    std::error_code ec;
    for (const auto& attempt : fs::directory_iterator(job.AttemptsDir(shard.id), ec)) {
      const std::string dir = attempt.path().string();
      if (dir == published) continue;
      const std::string record = JobPaths::AttemptRecordPath(dir);
      try {
        const AttemptStatus status = AttemptRecord::FromJson(disk.Read(record), record).status;
        if (status == AttemptStatus::kRunning && published.empty()) continue;
      } catch (const Error&) {
        continue;  // none yet, or being written: maybe a live attempt
      }
      std::error_code files_ec;
      for (const auto& file : fs::directory_iterator(dir, files_ec)) {
        const std::string name = file.path().filename().string();
        if (file.path().string() == JobPaths::AttemptOutputPath(dir) || IsTemp(name)) {
          Remove(file.path(), disk, dry_run, result);
        }
      }
    }
  }
}

GcResult CollectElastic(const std::string& job_dir, io::Disk& disk, bool dry_run) {
  const JobDir job = JobDir::Open(job_dir, disk);
  GcResult result;
  result.job_id = job.manifest().job_id;
  result.job_dir = job_dir;
  result.checkpoint_dir = ShardCheckpointsRoot(job);
  const int64_t last_op = LastOpIdx(job_dir);
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
    CollectCheckpointDir(e.path().string(), last_op, disk, dry_run, result);
  }
  CollectProbe(job, job_dir, disk, dry_run, result);
  CollectDeadAttempts(job, live, disk, dry_run, result);
  for (const std::string& path : StageGarbage(job)) Remove(path, disk, dry_run, result);
  return result;
}

}  // namespace

GcResult CollectGarbage(const std::string& job_dir, bool dry_run, io::Disk& disk) {
  if (io::IsRegularFile(job_dir + "/manifest.json")) return CollectElastic(job_dir, disk, dry_run);
  const job::RunJobView view = job::ReadRunJob(job_dir);
  if (view.state == job::JobState::kRunning) {
    throw Error(job_dir, 0,
                "job " + view.job_id + " is running (heartbeat " +
                    std::to_string(static_cast<int>(view.heartbeat_age_secs)) + " s old)",
                "gc a job once its run has ended; a killed run's heartbeat goes stale after " +
                    std::to_string(static_cast<int>(job::kHeartbeatStaleSecs)) + " s");
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
  CollectTemps(job_dir, disk, dry_run, result);
  CollectTemps(job_dir + "/metadata", disk, dry_run, result);
  CollectCheckpointDir(result.checkpoint_dir, LastOpIdx(job_dir), disk, dry_run, result);
  // The export's and errors file's temporary files, where a killed run left them.
  const std::string cli_path = job_dir + "/metadata/cli.json";
  const json cli =
      io::IsRegularFile(cli_path) ? json::parse(io::ReadFile(cli_path), nullptr, false) : json();
  if (cli.is_object() && cli.value("export_path", json()).is_string()) {
    for (const std::string& path :
         job::RemoveExportLeftovers(cli["export_path"], view.job_id,
                                    /*other_hosts_ended=*/true, disk, /*dry_run=*/true)) {
      Remove(path, disk, dry_run, result);
    }
  }
  return result;
}

}  // namespace djshard::store
