// job_summary.json of an elastic job directory (SPEC-checkpoints §8).
#include "djshard/store/job_summary.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "djshard/common/clock.h"
#include "djshard/common/text.h"
#include "djshard/io/disk.h"
#include "djshard/job/checkpoint.h"
#include "djshard/recipe/recipe.h"
#include "djshard/store/job_view.h"
#include "djshard/store/records.h"
#include "djshard/store/status.h"

namespace djshard::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The summary's checkpointing section from the job's recipe: shards of a
// recipe with partition:/checkpoint: sections checkpoint their partitions.
json CheckpointingJson(const JobDir& job) {
  const Manifest& m = job.manifest();
  json c = {{"strategy", "disabled"},    {"n_ops", nullptr},
            {"op_names", json::array()}, {"last_checkpoint_time", nullptr},
            {"resumable", true},         {"checkpoint_dir", job.dir() + "/checkpoints"}};
  try {
    const recipe::Recipe recipe = recipe::LoadRecipe(job.InJob(m.recipe_snapshot_path));
    const YAML::Node p = recipe.root["partition"], k = recipe.root["checkpoint"];
    if ((!p || p.IsNull()) && (!k || k.IsNull())) return c;
    const job::JobSettings st = job::ParseJobSettings(recipe.root, recipe.path);
    if (!st.checkpointing()) return c;
    c["strategy"] = job::TapStrategyName(st.strategy);
    c["n_ops"] = st.n_ops;
    c["op_names"] = st.op_names;
    c["checkpoint_dir"] = JobPaths::CheckpointsRoot(job.dir(), m.job_id, st.checkpoint_dir);
  } catch (const std::exception&) {
    // The summary is for people; the workers refuse a broken recipe.
  }
  return c;
}

// The newest created_at of the commit records (taps and gather-journal
// segments) in the shards' checkpoint directories under `root`, or `floor`
// when none is newer (the summary's earlier value: a done shard's
// checkpoints are deleted). Null when there is neither.
json LastCheckpointTime(const std::string& root, const json& floor) {
  std::string last = floor.is_string() ? floor.get<std::string>() : "";
  std::error_code ec;
  for (const auto& shard : fs::directory_iterator(root, ec)) {
    std::error_code ec2;
    if (!shard.is_directory(ec2)) continue;
    for (const auto& e : fs::directory_iterator(shard.path(), ec2)) {
      const std::string name = e.path().filename().string();
      if (!name.ends_with(".commit.json")) continue;
      std::string text;
      try {
        text = io::ReadFile(e.path().string());
      } catch (const std::exception&) {
        continue;  // deleted meanwhile (keep: latest, a done shard)
      }
      const json c = json::parse(text, nullptr, false);
      if (c.is_object() && c.value("created_at", json()).is_string()) {
        last = std::max(last, c["created_at"].get<std::string>());
      }
    }
  }
  return last.empty() ? json() : json(last);
}

}  // namespace

const char* SummaryStatusName(SummaryStatus status) {
  switch (status) {
    case SummaryStatus::kPrepared:
      return "prepared";
    case SummaryStatus::kRunning:
      return "running";
    case SummaryStatus::kCompleted:
      return "completed";
    case SummaryStatus::kFailed:
      return "failed";
    case SummaryStatus::kStopped:
      return "stopped";
  }
  return "prepared";
}

void WriteJobSummary(const JobDir& job, const SummaryUpdate& update) {
  const Manifest& m = job.manifest();
  const std::string path = job.dir() + "/job_summary.json";
  json old;
  if (job.disk().Stat(path)) {
    try {
      old = json::parse(job.disk().Read(path), nullptr, false);
    } catch (const std::exception&) {
      old = json();
    }
  }
  const JobStatus status = ReadStatus(job);
  uint64_t rows_out = 0;
  for (const ShardStatus& sh : status.shards) {
    if (sh.state != ShardState::kDone) continue;
    try {
      const std::string done = job.DonePath(sh.shard->id);
      rows_out += DoneRecord::FromJson(job.disk().Read(done), done).rows;
    } catch (const std::exception&) {
      // An unreadable record counts no rows; merge will refuse it.
    }
  }
  const PartitionCounts partitions = CountPartitions(job, status);
  const int64_t now = NowNanos();
  const int64_t start = ParseUtcIso8601(m.created_at);
  const bool ended = update.status == SummaryStatus::kCompleted ||
                     update.status == SummaryStatus::kFailed ||
                     update.status == SummaryStatus::kStopped;
  json stop = old.is_object() && old.contains("stop") ? old["stop"] : json();
  if (update.clear_stop) stop = nullptr;
  if (update.stop) {
    stop = {{"requested_at", update.stop->requested_at},
            {"mode", update.stop->mode},
            {"reason", update.stop->reason.empty() ? json() : json(update.stop->reason)},
            {"requested_by", update.stop->hostname + ":" + std::to_string(update.stop->pid)}};
  }
  json checkpointing = CheckpointingJson(job);
  if (checkpointing["strategy"] != "disabled") {
    checkpointing["last_checkpoint_time"] = LastCheckpointTime(
        checkpointing["checkpoint_dir"].get<std::string>(),
        old.is_object() && old.contains("checkpointing") && old["checkpointing"].is_object()
            ? old["checkpointing"].value("last_checkpoint_time", json())
            : json());
  }
  const json summary = {
      {"job_id", m.job_id},
      {"executor_type", "djshard"},
      {"status", SummaryStatusName(update.status)},
      {"config_file", m.recipe_source_path},
      {"config_sha256", m.recipe_sha256},
      {"work_dir", fs::path(job.dir()).parent_path().string()},
      {"job_dir", job.dir()},
      {"start_time", m.created_at},
      {"end_time", ended ? json(FormatUtcIso8601(now)) : json()},
      {"duration_secs", ended && start > 0 ? json(static_cast<double>(now - start) / 1e9) : json()},
      // Elastic jobs resume by themselves: any worker takes the job up again.
      {"resume_token", m.job_id},
      {"resumption_command", "djshard worker --job-dir " + job.dir()},
      {"error_message", update.error_message.empty() ? json() : json(update.error_message)},
      {"hostname", HostName()},
      {"pid", ::getpid()},
      {"shards",
       {{"total", status.total},
        {"completed", status.counts.done},
        {"failed", status.counts.failed},
        {"running", status.counts.running}}},
      // A shard is processed as one partition unless it checkpoints its own.
      {"partitions",
       {{"total", partitions.total},
        {"completed", partitions.completed},
        {"failed", partitions.failed},
        {"resumed", partitions.resumed},
        {"per_shard", partitions.per_shard},
        {"unsized_shards", partitions.unsized_shards}}},
      {"rows", {{"in", m.total_rows}, {"out", rows_out}}},
      {"checkpointing", checkpointing},
      {"stop", stop}};
  job.disk().WriteAtomic(path, summary.dump(2) + "\n");
}

}  // namespace djshard::store
