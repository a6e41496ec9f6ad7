#include "djshard/store/status.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "djshard/common/error.h"
#include "djshard/store/dedup_stage.h"

namespace djshard::store {

using nlohmann::json;

namespace {

void Count(StatusCounts& counts, ShardState state) {
  switch (state) {
    case ShardState::kPending:
      ++counts.pending;
      break;
    case ShardState::kRunning:
      ++counts.running;
      break;
    case ShardState::kStale:
      ++counts.stale;
      break;
    case ShardState::kDone:
      ++counts.done;
      break;
    case ShardState::kFailed:
      ++counts.failed;
      break;
  }
}

std::string CountsText(const StatusCounts& c) {
  return "pending=" + std::to_string(c.pending) + " running=" + std::to_string(c.running) +
         " stale=" + std::to_string(c.stale) + " done=" + std::to_string(c.done) +
         " failed=" + std::to_string(c.failed);
}

json CountsJson(const StatusCounts& c) {
  return {{"pending", c.pending},
          {"running", c.running},
          {"stale", c.stale},
          {"done", c.done},
          {"failed", c.failed}};
}

// "  <id>  <state>  rows=N  owner=... lock_age=... retry_in=... error=..."
std::string StatusLine(const ShardStatus& sh) {
  char line[512];
  std::snprintf(line, sizeof line, "  %s  %-7s  rows=%llu", sh.shard->id.c_str(),
                ShardStateName(sh.state), static_cast<unsigned long long>(sh.shard->rows));
  std::string out = line;
  if (!sh.owner.empty()) out += "  owner=" + sh.owner + " pid=" + std::to_string(sh.pid);
  if (sh.lock) {
    std::snprintf(line, sizeof line, "  lock_age=%.1fs", sh.lock->age_secs);
    out += line;
  }
  if (sh.retry_in_secs > 0) {
    std::snprintf(line, sizeof line, "  retry_in=%.1fs", sh.retry_in_secs);
    out += line;
  }
  if (!sh.error.empty()) out += "  error=" + sh.error;
  return out + "\n";
}

json StatusJson(const ShardStatus& sh, const char* id_key) {
  json s;
  s[id_key] = sh.shard->id;
  s["rows"] = sh.shard->rows;
  s["status"] = ShardStateName(sh.state);
  s["owner"] = sh.owner.empty() ? json(nullptr) : json(sh.owner);
  s["pid"] = sh.pid == 0 ? json(nullptr) : json(sh.pid);
  s["lock_age_secs"] = sh.lock ? json(sh.lock->age_secs) : json(nullptr);
  s["error"] = sh.error.empty() ? json(nullptr) : json(sh.error);
  s["retry_in_secs"] = sh.retry_in_secs > 0 ? json(sh.retry_in_secs) : json(nullptr);
  return s;
}

// The dedup stages' tasks, by stage: their ids (rows: the shard's, for a
// sign task).
std::vector<StageStatus> ReadStages(const JobDir& job) {
  const Manifest& m = job.manifest();
  std::vector<StageStatus> stages(m.dedup_stages.size());
  std::vector<std::vector<ShardEntry>> entries(stages.size());
  for (const JobTask& task : JobTasks(m)) {
    if (task.kind == TaskKind::kShard) continue;
    ShardEntry e;
    e.id = task.id;
    e.rows = task.kind == TaskKind::kSign ? m.shards[task.shard].rows : 0;
    entries[task.stage - 1].push_back(std::move(e));
  }
  for (size_t k = 0; k < stages.size(); ++k) {
    StageStatus& s = stages[k];
    s.stage = k + 1;
    s.op = m.dedup_stages[k].op;
    s.entries = std::make_shared<const std::vector<ShardEntry>>(std::move(entries[k]));
    s.tasks = job.StatusesOf(*s.entries);
    for (const ShardStatus& t : s.tasks) Count(s.counts, t.state);
  }
  return stages;
}

}  // namespace

JobStatus ReadStatus(const JobDir& job) {
  JobStatus s;
  s.job_id = job.manifest().job_id;
  s.job_dir = job.dir();
  s.total = job.manifest().shards.size();
  s.shards = job.Statuses();
  for (const ShardStatus& sh : s.shards) Count(s.counts, sh.state);
  s.stages = ReadStages(job);
  if (job.manifest().shards_mode == ShardsMode::kReference) {
    s.input_changed = ReadInputChanged(job, job.disk());
  }
  return s;
}

bool JobStatus::failed() const {
  if (input_changed) return true;
  for (const StageStatus& stage : stages) {
    if (stage.counts.failed > 0) return true;
  }
  return counts.failed > 0;
}

bool JobStatus::terminal() const {
  if (input_changed) return true;
  for (const StageStatus& stage : stages) {
    if (stage.counts.failed > 0) return true;
  }
  return counts.done + counts.failed == total;
}

std::string JobStatus::SummaryLine() const {
  std::string line =
      "Job " + job_id + ": total=" + std::to_string(total) + " " + CountsText(counts);
  uint64_t failed_tasks = 0;
  for (const StageStatus& stage : stages) failed_tasks += stage.counts.failed;
  if (failed_tasks > 0) {
    line += " (" + std::to_string(failed_tasks) +
            " dedup stage task(s) failed: the shards wait for them)";
  }
  return line;
}

std::string JobStatus::Text(bool all) const {
  std::string out = SummaryLine() + "\n";
  for (const StageStatus& stage : stages) {
    out += "  dedup stage " + std::to_string(stage.stage) + " (" + stage.op +
           "): tasks=" + std::to_string(stage.tasks.size()) + " " + CountsText(stage.counts) + "\n";
  }
  if (input_changed) {
    out += "  failed: " + input_changed->file + ": " + input_changed->message + " (found by " +
           input_changed->hostname + " in " + input_changed->shard_id + " at " +
           input_changed->detected_at + ")\n";
  }
  if (!all) return out;
  for (const ShardStatus& sh : shards) out += StatusLine(sh);
  for (const StageStatus& stage : stages) {
    for (const ShardStatus& task : stage.tasks) out += StatusLine(task);
  }
  return out;
}

std::string JobStatus::Json() const {
  json j;
  j["job_id"] = job_id;
  j["job_dir"] = job_dir;
  j["total"] = total;
  j["counts"] = CountsJson(counts);
  j["complete"] = complete();
  j["terminal"] = terminal();
  j["shards"] = json::array();
  for (const ShardStatus& sh : shards) j["shards"].push_back(StatusJson(sh, "shard_id"));
  if (input_changed) {
    j["input_changed"] = {{"file", input_changed->file},
                          {"shard_id", input_changed->shard_id},
                          {"message", input_changed->message},
                          {"hostname", input_changed->hostname},
                          {"detected_at", input_changed->detected_at}};
  }
  if (!stages.empty()) {
    j["dedup_stages"] = json::array();
    for (const StageStatus& stage : stages) {
      json s = {{"stage", stage.stage}, {"op", stage.op}, {"counts", CountsJson(stage.counts)}};
      s["tasks"] = json::array();
      for (const ShardStatus& task : stage.tasks) s["tasks"].push_back(StatusJson(task, "task_id"));
      j["dedup_stages"].push_back(std::move(s));
    }
  }
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

void RequireComplete(const JobDir& job, const std::string& action) {
  const JobStatus s = ReadStatus(job);
  if (!s.complete()) {
    throw Error(job.dir(), 0,
                "cannot " + action + ": job is not complete (" + s.SummaryLine() + ")",
                s.input_changed ? "restore the input as it was when the job was prepared, or "
                                  "prepare a new job"
                : s.failed()    ? "run 'djshard retry --all-failed' and the workers again"
                                : "wait for the workers to finish");
  }
}

}  // namespace djshard::store
