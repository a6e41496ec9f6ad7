// `djshard monitor` and `djshard jobs` on elastic job directories
// (SPEC-checkpoints §8): state files, checkpoints and events, never a write.
#include "djshard/store/job_view.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/io/disk.h"
#include "djshard/job/checkpoint.h"
#include "djshard/job/job_status.h"
#include "djshard/job/stop_request.h"
#include "djshard/recipe/recipe.h"
#include "djshard/store/records.h"
#include "djshard/store/status.h"

namespace djshard::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Partitions of a shard that checkpoints its own (checkpoints/<shard>/):
// total from partitioning_info.json, committed = partitions with a commit.
void ReadShardCheckpoints(const std::string& dir, RunningAttempt* a, std::string* last) {
  const std::string info = dir + "/partitioning_info.json";
  if (!io::IsRegularFile(info)) return;
  const json j = json::parse(io::ReadFile(info), nullptr, false);
  if (j.is_object()) a->partitions_total = j.value("num_partitions", uint64_t{0});
  std::set<uint64_t> committed;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 12 || name.compare(name.size() - 12, 12, ".commit.json") != 0) continue;
    const json c = json::parse(io::ReadFile(e.path().string()), nullptr, false);
    if (!c.is_object()) continue;
    committed.insert(c.value("partition_id", uint64_t{0}));
    *last = std::max(*last, c.value("created_at", std::string()));
  }
  a->partitions_committed = committed.size();
}

// True when `dir` has an entry (an attempt was made).
bool Tried(const std::string& dir) {
  std::error_code ec;
  const fs::directory_iterator it(dir, ec);
  return !ec && it != fs::directory_iterator();
}

// What a shard's checkpoint directory says of its partitions: their number
// (0: no partitioning_info.json yet) and how many have a final-tap commit.
struct ShardPartitionFiles {
  uint64_t num_partitions = 0;
  uint64_t final_commits = 0;
};

ShardPartitionFiles ReadShardPartitionFiles(const std::string& dir, size_t final_op) {
  ShardPartitionFiles f;
  const std::string info = dir + "/partitioning_info.json";
  if (!io::IsRegularFile(info)) return f;
  const json j = json::parse(io::ReadFile(info), nullptr, false);
  if (j.is_object()) f.num_partitions = j.value("num_partitions", uint64_t{0});
  // Commit records are named checkpoint_op_OOOO_partition_PPPPP.commit.json;
  // only a commit record makes a checkpoint exist.
  std::string prefix = std::to_string(final_op);
  prefix = "checkpoint_op_" + std::string(prefix.size() < 4 ? 4 - prefix.size() : 0, '0') + prefix +
           "_partition_";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > 12 &&
        name.compare(name.size() - 12, 12, ".commit.json") == 0) {
      ++f.final_commits;
    }
  }
  f.final_commits = std::min(f.final_commits, f.num_partitions);
  return f;
}

// The partitions {total, resumed, computed} of a done shard: its done
// record's, else those of the attempt that published it.
json DonePartitions(const JobDir& job, const DoneRecord& done) {
  if (done.partitions.is_object()) return done.partitions;
  try {
    const std::string attempt = job.InJob(fs::path(done.output_path).parent_path().string());
    const std::string path = JobPaths::AttemptRecordPath(attempt);
    return AttemptRecord::FromJson(job.disk().Read(path), path).partitions;
  } catch (const std::exception&) {
    return json();
  }
}

}  // namespace

PartitionCounts CountPartitions(const JobDir& job, const JobStatus& status) {
  PartitionCounts c;
  const Manifest& m = job.manifest();
  std::optional<job::JobSettings> settings;
  size_t num_ops = 0;
  try {
    const recipe::Recipe recipe = recipe::LoadRecipe(job.InJob(m.recipe_snapshot_path));
    const YAML::Node p = recipe.root["partition"], k = recipe.root["checkpoint"];
    if ((p && !p.IsNull()) || (k && !k.IsNull())) {
      const job::JobSettings st = job::ParseJobSettings(recipe.root, recipe.path);
      if (st.checkpointing() && !recipe.process.empty()) {
        settings = st;
        num_ops = recipe.process.size();
      }
    }
  } catch (const std::exception&) {
    // A recipe the workers refuse checkpoints nothing.
  }
  if (!settings) {
    c.total = status.total;
    c.completed = status.counts.done;
    c.failed = status.counts.failed;
    return c;
  }
  c.per_shard = true;
  const std::string root = JobPaths::CheckpointsRoot(job.dir(), m.job_id, settings->checkpoint_dir);
  for (const ShardStatus& sh : status.shards) {
    json done_parts;
    if (sh.state == ShardState::kDone) {
      try {
        const std::string path = job.DonePath(sh.shard->id);
        done_parts = DonePartitions(job, DoneRecord::FromJson(job.disk().Read(path), path));
      } catch (const std::exception&) {
        // An unreadable record: its count comes from the checkpoints, if any.
      }
    }
    uint64_t n = 0, completed = 0;
    if (done_parts.is_object()) {
      n = done_parts.value("total", uint64_t{0});
      c.resumed += done_parts.value("resumed", uint64_t{0});
    } else {
      const ShardPartitionFiles f = ReadShardPartitionFiles(root + "/" + sh.shard->id, num_ops - 1);
      n = f.num_partitions;
      completed = f.final_commits;
      if (n == 0 && settings->mode == job::PartitionMode::kManual) {
        n = settings->num_of_partitions;
      }
    }
    if (n == 0) {
      ++c.unsized_shards;
      continue;
    }
    if (sh.state == ShardState::kDone) completed = n;
    c.total += n;
    c.completed += completed;
    if (sh.state == ShardState::kFailed) c.failed += n - completed;
  }
  return c;
}

bool IsElasticJobDir(const std::string& dir) { return io::IsRegularFile(dir + "/manifest.json"); }

namespace {

// Reads an elastic job's records into its view, in named steps.
class ElasticJobReader {
 public:
  ElasticJobReader(const JobDir& job, ElasticJobView& v) : job_(job), v_(v) {}

  void Read() {
    const Manifest& m = job_.manifest();
    v_.job_id = m.job_id;
    v_.job_dir = job_.dir();
    v_.start_time = m.created_at;
    v_.rows_total = m.total_rows;
    const JobStatus status = ReadStatus(job_);
    v_.shards_total = status.total;
    v_.shards_done = status.counts.done;
    v_.shards_failed = status.counts.failed;
    v_.shards_running = status.counts.running;
    v_.shards_stale = status.counts.stale;
    v_.merged = io::IsRegularFile(job_.MergeRecordPath());
    v_.partitions = CountPartitions(job_, status);
    v_.running.reserve(status.shards.size());
    for (const ShardStatus& sh : status.shards) AddShard(sh);
    AddStages(status);
    v_.input_changed = status.input_changed.has_value();
    ReadReplicaPlans();
    for (auto& [k, t] : ops_) v_.op_totals.push_back(t);
    v_.model_devices_warning = MixedModelDevicesWarning(v_.shards_by_model_devices);
    v_.hosts.assign(hosts_.begin(), hosts_.end());
    FindCurrentOperators();
    if (const std::optional<job::StopRequest> r = job::ReadStopRequest(job_.dir(), job_.disk())) {
      v_.stop = {{"requested_at", r->requested_at},
                 {"mode", r->mode},
                 {"reason", r->reason.empty() ? json() : json(r->reason)},
                 {"requested_by", r->hostname + ":" + std::to_string(r->pid)}};
    }
    v_.state = State();
    AddRates(m);
  }

 private:
  // The dedup stages' counts, and their running tasks beside the shards'.
  void AddStages(const JobStatus& status) {
    for (const StageStatus& stage : status.stages) {
      v_.dedup_stages.push_back({{"stage", stage.stage},
                                 {"op", stage.op},
                                 {"tasks", stage.tasks.size()},
                                 {"done", stage.counts.done},
                                 {"running", stage.counts.running},
                                 {"failed", stage.counts.failed}});
      v_.stage_failed = v_.stage_failed || stage.counts.failed > 0;
      for (const ShardStatus& task : stage.tasks) {
        if (task.state != ShardState::kRunning || !task.lock) continue;
        RunningAttempt a;
        a.shard_id = task.shard->id;
        a.hostname = task.lock->hostname;
        a.pid = task.lock->pid;
        a.token = task.lock->token;
        a.lock_age_secs = task.lock->age_secs;
        v_.running.push_back(std::move(a));
      }
    }
  }

  // One shard's row of the view, and what its records add to the totals.
  void AddShard(const ShardStatus& sh) {
    json row = {{"shard_id", sh.shard->id},
                {"status", ShardStateName(sh.state)},
                {"rows", sh.shard->rows},
                {"owner", sh.owner.empty() ? json() : json(sh.owner)}};
    if (!sh.owner.empty()) hosts_.insert(sh.owner);
    if (sh.state == ShardState::kDone) {
      v_.rows_done += sh.shard->rows;
      AddDoneRecord(sh, row);
    }
    if (sh.error.size()) row["error"] = sh.error;
    if (sh.state == ShardState::kRunning && sh.lock) AddRunningAttempt(sh, row);
    v_.shard_details.push_back(row);
  }

  // A done shard's record: rows out, model devices, the node's plan, the
  // job's first start and last finish, operator totals.
  void AddDoneRecord(const ShardStatus& sh, json& row) {
    try {
      const std::string path = job_.DonePath(sh.shard->id);
      const DoneRecord done = DoneRecord::FromJson(job_.disk().Read(path), path);
      row["rows_out"] = done.rows;
      v_.shards_by_model_devices[done.model_devices].push_back(done.shard_id);
      if (!plan_of_host_.count(done.hostname)) {
        plan_of_host_[done.hostname] =
            job_.InJob(fs::path(done.output_path).parent_path().string()) + "/attempt.json";
      }
      const int64_t end = ParseUtcIso8601(done.completed_at);
      const int64_t begin = end - static_cast<int64_t>(done.seconds * 1e9);
      if (end > 0) {
        last_done_ = std::max(last_done_, end);
        first_start_ = first_start_ == 0 ? begin : std::min(first_start_, begin);
      }
      for (size_t i = 0; i < done.op_stats.size(); ++i) {
        const exec::OperatorCounters& c = done.op_stats[i];
        json& t = ops_[i];
        if (t.is_null()) {
          t = {{"op_idx", i}, {"name", c.name}, {"rows_in", 0}, {"rows_out", 0}, {"seconds", 0.0}};
        }
        t["rows_in"] = t["rows_in"].get<uint64_t>() + c.rows_in;
        t["rows_out"] = t["rows_out"].get<uint64_t>() + c.rows_out;
        t["seconds"] = t["seconds"].get<double>() + c.seconds;
      }
    } catch (const std::exception&) {
      // An unreadable done record: the shard still counts as done.
    }
  }

  // A running shard's attempt: its owner, checkpoints and attempt.json.
  void AddRunningAttempt(const ShardStatus& sh, json& row) {
    RunningAttempt a;
    a.shard_id = sh.shard->id;
    a.hostname = sh.lock->hostname;
    a.pid = sh.lock->pid;
    a.token = sh.lock->token;
    a.lock_age_secs = sh.lock->age_secs;
    if (checkpoints_root_.empty()) checkpoints_root_ = ShardCheckpointsRoot(job_);
    ReadShardCheckpoints(checkpoints_root_ + "/" + sh.shard->id, &a, &v_.last_checkpoint_time);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(job_.AttemptsDir(a.shard_id), ec)) {
      const std::string name = e.path().filename().string();
      if (!a.token.empty() && name.ends_with("-" + a.token)) {
        plan_of_host_[a.hostname] = e.path().string() + "/attempt.json";
      }
    }
    v_.running.push_back(a);
    row["attempt_token"] = a.token;
    row["pid"] = a.pid;
  }

  // Per node, the replica plan of one of its attempts (one read per node).
  void ReadReplicaPlans() {
    for (const auto& [host, path] : plan_of_host_) {
      std::string text;
      try {
        text = job_.disk().Read(path);
      } catch (const Error&) {
        continue;  // gone or unreadable: the node's plan is not shown
      }
      const json attempt = json::parse(text, nullptr, false);
      if (!attempt.is_object() || !attempt.contains("plan")) continue;
      json plan = job::ReplicaPlanOf(attempt["plan"]);
      if (plan.is_null()) continue;
      plan["hostname"] = host;
      plan["pid"] = attempt["plan"].value("pid", json());
      plan["threads"] = attempt["plan"].value("threads", json());
      v_.replica_plans.push_back(plan);
    }
  }

  // The operator each running attempt is in: its last op_start in the events.
  void FindCurrentOperators() {
    std::map<std::string, RunningAttempt*> by_token;
    for (RunningAttempt& a : v_.running) by_token[a.token] = &a;
    if (by_token.empty()) return;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(job_.dir(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("events_", 0) != 0) continue;
      for (const json& ev : job::ReadEventLines(e.path().string())) {
        const auto it = by_token.find(ev.value("attempt_token", std::string()));
        if (it == by_token.end()) continue;
        if (ev.value("event_type", "") == "op_start")
          it->second->current_op = ev.value("op_name", "");
      }
    }
  }

  job::JobState State() const {
    const bool live = v_.shards_running > 0;
    if (v_.shards_failed > 0 || v_.stage_failed || v_.input_changed) {
      return job::JobState::kFailed;
    }
    if (v_.shards_done == v_.shards_total) return job::JobState::kCompleted;
    if (!v_.stop.is_null()) return live ? job::JobState::kStopping : job::JobState::kStopped;
    if (live) return job::JobState::kRunning;
    if (v_.shards_done > 0 || v_.shards_stale > 0 || Tried(job_.dir() + "/attempts")) {
      return job::JobState::kIncomplete;
    }
    return job::JobState::kPrepared;
  }

  // Duration, rows per second and the time left.
  void AddRates(const Manifest& m) {
    const bool live = v_.shards_running > 0;
    const bool completed = v_.shards_failed == 0 && v_.shards_done == v_.shards_total;
    const int64_t now = NowNanos();
    const int64_t created = ParseUtcIso8601(m.created_at);
    const int64_t end = completed && last_done_ > 0 ? last_done_ : now;
    if (created > 0) v_.duration_secs = static_cast<double>(end - created) / 1e9;
    if (first_start_ > 0 && last_done_ > first_start_) {
      const int64_t until = live ? now : last_done_;
      v_.rows_per_sec =
          static_cast<double>(v_.rows_done) / (static_cast<double>(until - first_start_) / 1e9);
    }
    if (live && v_.rows_per_sec > 0 && v_.rows_total >= v_.rows_done) {
      v_.eta_secs = static_cast<double>(v_.rows_total - v_.rows_done) / v_.rows_per_sec;
    }
  }

  const JobDir& job_;
  ElasticJobView& v_;
  std::set<std::string> hosts_;
  // Per host, the attempt.json whose replica plan monitor shows: a running
  // attempt's, else one done shard's.
  std::map<std::string, std::string> plan_of_host_;
  std::map<size_t, json> ops_;  // by op index
  int64_t first_start_ = 0, last_done_ = 0;
  std::string checkpoints_root_;  // read from the recipe when a running shard needs it
};

}  // namespace

ElasticJobView ReadElasticJob(const JobDir& job) {
  ElasticJobView v;
  ElasticJobReader(job, v).Read();
  return v;
}

json ElasticJobView::ToJson(bool detailed) const {
  json running_json = json::array();
  for (const RunningAttempt& a : running) {
    json r = {{"shard_id", a.shard_id},
              {"hostname", a.hostname},
              {"pid", a.pid},
              {"attempt_token", a.token},
              {"lock_age_secs", a.lock_age_secs},
              {"current_op", a.current_op.empty() ? json() : json(a.current_op)}};
    if (a.partitions_total > 0) {
      r["partitions"] = {{"committed", a.partitions_committed}, {"total", a.partitions_total}};
    }
    running_json.push_back(r);
  }
  json j = {{"job_id", job_id},
            {"job_dir", job_dir},
            {"kind", "elastic"},
            {"status", job::JobStateName(state)},
            {"start_time", start_time},
            {"duration_secs", duration_secs},
            {"hosts", hosts},
            {"shards",
             {{"done", shards_done},
              {"total", shards_total},
              {"failed", shards_failed},
              {"running", shards_running},
              {"stale", shards_stale}}},
            {"partitions",
             {{"done", partitions.completed},
              {"total", partitions.total},
              {"failed", partitions.failed},
              {"resumed", partitions.resumed},
              {"per_shard", partitions.per_shard},
              {"unsized_shards", partitions.unsized_shards}}},
            {"rows", {{"done", rows_done}, {"total", rows_total}}},
            {"rows_per_sec", rows_per_sec},
            {"eta_secs", eta_secs ? json(*eta_secs) : json()},
            {"last_checkpoint", last_checkpoint_time.empty() ? json() : json(last_checkpoint_time)},
            {"merged", merged},
            {"running_attempts", running_json},
            {"replica_plans", replica_plans},
            {"stop", stop}};
  json devices = json::array();
  for (const auto& [kinds, shards] : shards_by_model_devices) {
    if (!kinds.empty()) devices.push_back({{"model_devices", kinds}, {"shards", shards.size()}});
  }
  j["model_devices"] = devices;
  if (!dedup_stages.empty()) j["dedup_stages"] = dedup_stages;
  j["warnings"] = json::array();
  if (!model_devices_warning.empty()) j["warnings"].push_back(model_devices_warning);
  if (detailed) {
    j["shard_details"] = shard_details;
    j["operators"] = op_totals;
  }
  return j;
}

std::vector<JobRow> ListJobs(const std::string& work_dir, bool running_only) {
  std::vector<JobRow> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(work_dir, ec)) {
    if (!e.is_directory(ec)) continue;
    const std::string dir = e.path().string();
    JobRow row;
    try {
      if (IsElasticJobDir(dir)) {
        const ElasticJobView v = ReadElasticJob(JobDir::Open(dir));
        if (running_only && v.state != job::JobState::kRunning &&
            v.state != job::JobState::kStopping) {
          continue;
        }
        row = {v.job_id,
               "elastic",
               job::JobStateName(v.state),
               v.start_time,
               v.hosts.empty() ? "" : v.hosts.front() + (v.hosts.size() > 1 ? ",..." : ""),
               v.duration_secs,
               v.shards_done,
               v.shards_total,
               v.ToJson(false)};
      } else if (io::IsRegularFile(dir + "/job_summary.json")) {
        const job::RunJobView v = job::ReadRunJob(dir);
        if (running_only && v.state != job::JobState::kRunning) continue;
        row = {v.job_id,       "run",           v.StatusName(),    v.start_time,
               v.hostname,     v.duration_secs, v.partitions_done, v.partitions_total,
               v.ToJson(false)};
        row.json["kind"] = "run";
      } else {
        continue;
      }
    } catch (const std::exception&) {
      continue;  // a half-made or foreign directory is not listed
    }
    out.push_back(std::move(row));
  }
  std::sort(out.begin(), out.end(), [](const JobRow& a, const JobRow& b) {
    return a.start_time != b.start_time ? a.start_time > b.start_time : a.job_id < b.job_id;
  });
  return out;
}

}  // namespace djshard::store
