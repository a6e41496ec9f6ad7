#include "djshard/store/status.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "djshard/common/error.h"

namespace djshard::store {

using nlohmann::json;

JobStatus ReadStatus(const JobDir& job) {
  JobStatus s;
  s.job_id = job.manifest().job_id;
  s.job_dir = job.dir();
  s.total = job.manifest().shards.size();
  s.shards = job.Statuses();
  for (const ShardStatus& sh : s.shards) {
    switch (sh.state) {
      case ShardState::kPending:
        ++s.counts.pending;
        break;
      case ShardState::kRunning:
        ++s.counts.running;
        break;
      case ShardState::kStale:
        ++s.counts.stale;
        break;
      case ShardState::kDone:
        ++s.counts.done;
        break;
      case ShardState::kFailed:
        ++s.counts.failed;
        break;
    }
  }
  return s;
}

std::string JobStatus::SummaryLine() const {
  return "Job " + job_id + ": total=" + std::to_string(total) +
         " pending=" + std::to_string(counts.pending) +
         " running=" + std::to_string(counts.running) + " stale=" + std::to_string(counts.stale) +
         " done=" + std::to_string(counts.done) + " failed=" + std::to_string(counts.failed);
}

std::string JobStatus::Text(bool all) const {
  std::string out = SummaryLine() + "\n";
  if (!all) return out;
  for (const ShardStatus& sh : shards) {
    char line[512];
    std::snprintf(line, sizeof line, "  %s  %-7s  rows=%llu", sh.shard->id.c_str(),
                  ShardStateName(sh.state), static_cast<unsigned long long>(sh.shard->rows));
    out += line;
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
    out += "\n";
  }
  return out;
}

std::string JobStatus::Json() const {
  json j;
  j["job_id"] = job_id;
  j["job_dir"] = job_dir;
  j["total"] = total;
  j["counts"] = {{"pending", counts.pending},
                 {"running", counts.running},
                 {"stale", counts.stale},
                 {"done", counts.done},
                 {"failed", counts.failed}};
  j["complete"] = complete();
  j["terminal"] = terminal();
  j["shards"] = json::array();
  for (const ShardStatus& sh : shards) {
    json s;
    s["shard_id"] = sh.shard->id;
    s["rows"] = sh.shard->rows;
    s["status"] = ShardStateName(sh.state);
    s["owner"] = sh.owner.empty() ? json(nullptr) : json(sh.owner);
    s["pid"] = sh.pid == 0 ? json(nullptr) : json(sh.pid);
    s["lock_age_secs"] = sh.lock ? json(sh.lock->age_secs) : json(nullptr);
    s["error"] = sh.error.empty() ? json(nullptr) : json(sh.error);
    s["retry_in_secs"] = sh.retry_in_secs > 0 ? json(sh.retry_in_secs) : json(nullptr);
    j["shards"].push_back(std::move(s));
  }
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

void RequireComplete(const JobDir& job, const std::string& action) {
  const JobStatus s = ReadStatus(job);
  if (!s.complete()) {
    throw Error(job.dir(), 0,
                "cannot " + action + ": job is not complete (" + s.SummaryLine() + ")",
                s.counts.failed > 0 ? "run 'djshard retry --all-failed' and the workers again"
                                    : "wait for the workers to finish");
  }
}

}  // namespace djshard::store
