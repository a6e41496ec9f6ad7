#include "djshard/job/job_status.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/io/disk.h"

namespace djshard::job {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double AgeSecs(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<double>(NowNanos() - MtimeNanos(st)) / 1e9;
}

}  // namespace

json ReplicaPlanOf(const json& plan) {
  if (!plan.is_object() || !plan.contains("stages") || !plan["stages"].is_array()) return nullptr;
  json stages = json::array();
  for (const json& s : plan["stages"]) {
    if (!s.is_object() || s.value("kind", "") != "model") continue;
    std::string name = s.value("op_name", "");
    // A run job's plan names operators in ops[]; attempts' plans in the stage.
    if (name.empty() && s.contains("op_idxs") && !s["op_idxs"].empty() && plan.contains("ops")) {
      const size_t op = s["op_idxs"][0].get<size_t>();
      if (op < plan["ops"].size()) name = plan["ops"][op].value("name", "");
    }
    stages.push_back({{"stage_id", s.value("stage_id", json())},
                      {"op_name", name},
                      {"replicas", s.value("replicas", json())},
                      {"devices", s.value("devices", json::array())},
                      {"batch_size", s.value("batch_size", json())},
                      {"bound", s.value("bound", json())}});
  }
  if (stages.empty()) return nullptr;
  return {{"stages", stages}, {"probe", plan.value("probe", json())}};
}

std::vector<std::string> ReplicaPlanLines(const json& replica_plan) {
  std::vector<std::string> lines;
  if (!replica_plan.is_object()) return lines;
  for (const json& s : replica_plan["stages"]) {
    std::string devices;
    for (const json& d : s.value("devices", json::array())) {
      if (!devices.empty()) devices += ",";
      devices += d.is_string() ? d.get<std::string>() : d.dump();
    }
    std::string line = "stage " + s["stage_id"].dump() + " " + s.value("op_name", "") + ": " +
                       s["replicas"].dump() + " replica(s) on " + devices;
    if (s["bound"].is_string()) line += " (bound: " + s["bound"].get<std::string>() + ")";
    lines.push_back(line);
  }
  const json& probe = replica_plan["probe"];
  if (probe.is_object()) {
    std::string keys;
    for (const json& k : probe.value("cache_keys", json::array())) {
      if (!keys.empty()) keys += ",";
      keys += k.get<std::string>().substr(0, 12);
    }
    lines.push_back(std::string("probe: ") +
                    (probe.value("enabled", false) ? "enabled" : "disabled") +
                    (keys.empty() ? "" : ", keys " + keys));
  }
  return lines;
}

std::vector<json> ReadEventLines(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    json e = json::parse(line, nullptr, false);
    if (e.is_object()) out.push_back(std::move(e));  // a torn line does not parse: skipped
  }
  return out;
}

namespace {

constexpr std::pair<JobState, const char*> kJobStateNames[] = {
    {JobState::kPrepared, "prepared"},
    {JobState::kRunning, "running"},
    {JobState::kStopping, "stopping"},
    {JobState::kStopped, "stopped"},
    {JobState::kCompleted, "completed"},
    {JobState::kFailed, "failed"},
    {JobState::kIncomplete, "incomplete"},
    {JobState::kInterrupted, "interrupted"},
    {JobState::kInterruptedResumable, "interrupted (resumable)"},
    {JobState::kUnknown, "unknown"},
};

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Reads a run job directory into a RunJobView, one source at a time: the
// summary, the partitioning, the commit records, the events, the plan, and
// what the heartbeat says of a running job.
class RunJobReader {
 public:
  RunJobReader(const std::string& dir, RunJobView& v) : v_(v) {
    v_.job_dir = fs::absolute(dir).lexically_normal().string();
  }

  void Read() {
    ReadSummary();
    v_.partitions.resize(v_.partitions_total);
    for (uint64_t i = 0; i < v_.partitions.size(); ++i) v_.partitions[i].partition_id = i;
    ReadPartitioning();
    ReadCommits();
    ReadEvents();
    for (auto& [i, t] : ops_) v_.op_totals.push_back(t);
    ReadPlan();
    CountDone();
    AddRate();
    ApplyHeartbeat();
  }

 private:
  // job_summary.json: the job's identity, state, times, partition count and
  // where its checkpoints are.
  void ReadSummary() {
    const std::string summary_path = v_.job_dir + "/job_summary.json";
    if (!Exists(summary_path)) {
      throw Error(v_.job_dir, 0, "not a djshard run job (no job_summary.json)",
                  "pass a job directory, or an id with --work-dir");
    }
    summary_ = json::parse(io::ReadFile(summary_path), nullptr, false);
    if (!summary_.is_object()) {
      throw Error(summary_path, 0, "job_summary.json is not a JSON object");
    }
    v_.job_id = summary_.value("job_id", "");
    const std::string status = summary_.value("status", "");
    v_.state = ParseJobState(status);
    if (v_.state == JobState::kUnknown) v_.unknown_status = status;
    v_.start_time = summary_.value("start_time", "");
    v_.start_ns = ParseUtcIso8601(v_.start_time);
    v_.hostname = summary_.value("hostname", "");
    if (summary_.contains("duration_secs") && summary_["duration_secs"].is_number()) {
      v_.duration_secs = summary_["duration_secs"].get<double>();
    } else if (v_.start_ns > 0) {
      v_.duration_secs = static_cast<double>(NowNanos() - v_.start_ns) / 1e9;
    }
    v_.partitions_total = summary_.value("partitions", json::object()).value("total", uint64_t{0});
    v_.heartbeat_age_secs = AgeSecs(v_.job_dir + "/heartbeat");
    // checkpoint.dir may have put the checkpoints elsewhere; the summary says where.
    checkpoints_ = v_.job_dir + "/checkpoints";
    if (const json c = summary_.value("checkpointing", json::object());
        c.is_object() && c.contains("checkpoint_dir") && c["checkpoint_dir"].is_string()) {
      checkpoints_ = c["checkpoint_dir"].get<std::string>();
    }
  }

  // partitioning_info.json: the job's rows and each partition's.
  void ReadPartitioning() {
    const std::string info_path = checkpoints_ + "/partitioning_info.json";
    if (!Exists(info_path)) return;
    const json info = json::parse(io::ReadFile(info_path), nullptr, false);
    if (!info.is_object()) return;
    v_.rows_total = info.value("total_rows", uint64_t{0});
    for (const json& p : info.value("partitions", json::array())) {
      rows_of_.push_back(p.value("rows", uint64_t{0}));
    }
  }

  // The commit records: each partition's committed taps, the latest commit.
  void ReadCommits() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(checkpoints_, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("checkpoint_op_", 0) != 0 || name.find(".commit.json") == std::string::npos ||
          name.size() < 12 || name.compare(name.size() - 12, 12, ".commit.json") != 0) {
        continue;
      }
      const json c = json::parse(io::ReadFile(e.path().string()), nullptr, false);
      if (!c.is_object()) continue;
      const uint64_t p = c.value("partition_id", uint64_t{0});
      if (p >= v_.partitions.size()) continue;
      v_.partitions[p].taps.push_back(c.value("op_idx", uint64_t{0}));
      const std::string created = c.value("created_at", "");
      if (created > v_.last_checkpoint_time) v_.last_checkpoint_time = created;
    }
  }

  // The events files in name order: partition states, completions, op totals.
  void ReadEvents() {
    std::vector<std::string> event_files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(v_.job_dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("events_", 0) == 0) event_files.push_back(e.path().string());
    }
    std::sort(event_files.begin(), event_files.end());
    for (const std::string& f : event_files) {
      for (const json& e : ReadEventLines(f)) AddEvent(e);
    }
  }

  void AddEvent(const json& e) {
    const std::string type = e.value("event_type", "");
    if (!e.contains("partition_id")) {
      if (type == "job_start" && e.contains("metadata")) {
        // Each run of the job starts its partitions afresh.
        for (PartitionView& p : v_.partitions) {
          if (p.state == PartitionState::kRunning) p.state = PartitionState::kPending;
        }
      }
      return;
    }
    const uint64_t p = e["partition_id"].get<uint64_t>();
    if (p >= v_.partitions.size()) return;
    PartitionView& part = v_.partitions[p];
    if (type == "partition_start" || type == "partition_resume") {
      part.state = PartitionState::kRunning;
    }
    if (type == "partition_complete") {
      part.state = PartitionState::kCompleted;
      part.rows_in = e.value("input_rows", uint64_t{0});
      part.rows_out = e.value("output_rows", uint64_t{0});
      completions_[p] = {part.rows_in, ParseUtcIso8601(e.value("timestamp", ""))};
    }
    if (type == "op_complete") AddOpTotals(e);
  }

  void AddOpTotals(const json& e) {
    const size_t op = e.value("op_idx", size_t{0});
    json& t = ops_[op];
    if (t.is_null())
      t = {{"op_idx", op},
           {"name", e.value("op_name", "")},
           {"rows_in", 0},
           {"rows_out", 0},
           {"seconds", 0.0}};
    t["rows_in"] = t["rows_in"].get<uint64_t>() + e.value("input_rows", uint64_t{0});
    t["rows_out"] = t["rows_out"].get<uint64_t>() + e.value("output_rows", uint64_t{0});
    t["seconds"] = t["seconds"].get<double>() + e.value("duration_secs", 0.0);
  }

  // dag_execution_plan.json: the replica plan, and the last op, whose
  // committed tap finishes a partition even before its event is written.
  void ReadPlan() {
    const std::string plan_path = v_.job_dir + "/dag_execution_plan.json";
    if (!Exists(plan_path)) return;
    const json plan = json::parse(io::ReadFile(plan_path), nullptr, false);
    v_.replica_plan = ReplicaPlanOf(plan);
    const size_t num_ops = plan.is_object() ? plan.value("ops", json::array()).size() : 0;
    for (PartitionView& p : v_.partitions) {
      if (num_ops > 0 && std::find(p.taps.begin(), p.taps.end(), num_ops - 1) != p.taps.end()) {
        p.state = PartitionState::kCompleted;
      }
    }
  }

  void CountDone() {
    for (PartitionView& p : v_.partitions) {
      if (p.state == PartitionState::kCompleted) ++v_.partitions_done;
      if (p.partition_id < rows_of_.size() && p.state == PartitionState::kCompleted) {
        v_.rows_done += rows_of_[p.partition_id];
      }
      std::sort(p.taps.begin(), p.taps.end());
    }
  }

  // Rows/s: finished partitions' rows over the time since the first of them
  // started completing (the last interval of the running job).
  void AddRate() {
    if (completions_.empty() || v_.start_ns <= 0) return;
    int64_t last = 0;
    uint64_t rows = 0;
    for (const auto& [p, rt] : completions_) {
      rows += rt.first;
      last = std::max(last, rt.second);
    }
    const double secs = static_cast<double>(last - v_.start_ns) / 1e9;
    if (secs > 0) v_.rows_per_sec = static_cast<double>(rows) / secs;
  }

  // A running job with a stale heartbeat was interrupted; a live one gets an ETA.
  void ApplyHeartbeat() {
    if (v_.state != JobState::kRunning) return;
    if (v_.heartbeat_age_secs < 0 || v_.heartbeat_age_secs > kHeartbeatStaleSecs) {
      bool commits = false;
      for (const PartitionView& p : v_.partitions) commits = commits || !p.taps.empty();
      const bool resumable =
          summary_.value("checkpointing", json::object()).value("resumable", false) && commits;
      v_.state = resumable ? JobState::kInterruptedResumable : JobState::kInterrupted;
    } else if (v_.rows_per_sec > 0 && v_.rows_total >= v_.rows_done) {
      v_.eta_secs = static_cast<double>(v_.rows_total - v_.rows_done) / v_.rows_per_sec;
    }
  }

  RunJobView& v_;
  json summary_;
  std::string checkpoints_;
  std::vector<uint64_t> rows_of_;  // by partition, from partitioning_info.json
  std::map<uint64_t, std::pair<uint64_t, int64_t>> completions_;  // partition -> rows, time
  std::map<size_t, json> ops_;                                    // op totals by op_idx
};

}  // namespace

const char* JobStateName(JobState state) {
  for (const auto& [s, name] : kJobStateNames) {
    if (s == state) return name;
  }
  return "unknown";
}

JobState ParseJobState(std::string_view name) {
  for (const auto& [s, n] : kJobStateNames) {
    if (s != JobState::kUnknown && name == n) return s;
  }
  return JobState::kUnknown;
}

const char* PartitionStateName(PartitionState state) {
  switch (state) {
    case PartitionState::kPending:
      return "pending";
    case PartitionState::kRunning:
      return "running";
    case PartitionState::kCompleted:
      return "completed";
  }
  return "pending";
}

RunJobView ReadRunJob(const std::string& dir) {
  RunJobView v;
  RunJobReader(dir, v).Read();
  return v;
}

std::string RunJobView::StatusName() const {
  return state == JobState::kUnknown ? unknown_status : JobStateName(state);
}

json RunJobView::ToJson(bool detailed) const {
  json j = {
      {"job_id", job_id},
      {"job_dir", job_dir},
      {"status", StatusName()},
      {"start_time", start_time},
      {"duration_secs", duration_secs},
      {"hostname", hostname},
      {"heartbeat_age_secs", heartbeat_age_secs < 0 ? json() : json(heartbeat_age_secs)},
      {"partitions", {{"done", partitions_done}, {"total", partitions_total}}},
      {"rows", {{"done", rows_done}, {"total", rows_total}}},
      {"rows_per_sec", rows_per_sec},
      {"eta_secs", eta_secs ? json(*eta_secs) : json()},
      {"last_checkpoint", last_checkpoint_time.empty() ? json() : json(last_checkpoint_time)}};
  json running = json::array();
  for (const PartitionView& p : partitions) {
    if (p.state == PartitionState::kRunning) running.push_back(p.partition_id);
  }
  j["running_partitions"] = running;
  if (!replica_plan.is_null()) j["replica_plan"] = replica_plan;
  if (detailed) {
    json rows = json::array();
    for (const PartitionView& p : partitions) {
      rows.push_back({{"partition_id", p.partition_id},
                      {"status", PartitionStateName(p.state)},
                      {"committed_taps", p.taps},
                      {"rows_in", p.rows_in},
                      {"rows_out", p.rows_out}});
    }
    j["partition_details"] = rows;
    j["operators"] = op_totals;
  }
  return j;
}

}  // namespace djshard::job
