#include "djshard/coord/distributed_prepare.h"

#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/common/text.h"
#include "djshard/store/job.h"
#include "src/coord/coordinator_claim.h"
#include "src/coord/prepare_tasks.h"
#include "src/coord/task_pool.h"

namespace djshard::coord {

using nlohmann::json;

namespace {

constexpr const char* kResultName = "prepare-result.json";

// The coordination directory of a job's distributed prepare outside dlc, and
// what the preparer and its helpers share there.
struct PrepareCoordination {
  PrepareCoordination(const std::string& job_dir, const DistributedPrepareOptions& o)
      : disk(io::DiskOr(o.disk)),
        job(job_dir),
        dir(job.CoordinationDir("prepare")),
        lock{dir, "prepare"},
        scan(disk, dir, ScanKind(o.threads), o.lease_secs, o.heartbeat_secs, o.poll_interval_secs,
             [this](const std::string& line) { Say("scan", line); }),
        write(disk, dir, WriteKind(), o.lease_secs, o.heartbeat_secs, o.poll_interval_secs,
              [this](const std::string& line) { Say("write", line); }),
        log(o.log) {}

  std::string ResultPath() const { return dir + "/" + kResultName; }
  // The result file's content; nullopt while there is none.
  std::optional<std::string> Result() const {
    try {
      if (!disk.Stat(ResultPath())) return std::nullopt;
      return disk.Read(ResultPath());
    } catch (const Error&) {
      return std::nullopt;  // removed meanwhile by a new preparer
    }
  }
  void Say(const std::string& event, const std::string& line,
           LogLevel level = LogLevel::kInfo) const {
    if (!log) return;
    LogRecord r;
    r.level = level;
    r.event = event;
    r.message = line;
    log(r);
  }

  io::Disk& disk;
  const store::JobPaths job;
  const std::string dir;
  const CoordinatorLockPaths lock;
  TaskPool scan, write;
  LogFunction log;
};

// Throws the failure a prepare's result file records; returns when it
// records success.
void ThrowIfFailed(const std::string& result) {
  const json r = json::parse(result, nullptr, false);
  const int code = r.is_object() ? r.value("return_code", int{kExitFailure}) : kExitFailure;
  if (code == 0) return;
  const json error = r.is_object() ? r.value("error", json()) : json();
  throw Error("prepare failed on " + (r.is_object() ? r.value("hostname", "?") : "?") + ": " +
                  (error.is_string() ? error.get<std::string>() : "see its output"),
              "", code);
}

std::string Who(const CoordinatorHolder& h) { return h.hostname + " pid " + std::to_string(h.pid); }

// The preparer's claim: a new one, or a dead preparer's taken over once its
// lease is stale. While another preparer lives, waits for it: once it has
// published, this prepare finds the job prepared.
std::unique_ptr<CoordinatorClaim> ClaimPrepare(PrepareCoordination& c,
                                               const DistributedPrepareOptions& o) {
  c.disk.MakeDirs(c.dir);
  // A failure published while this one waited is this prepare's too; one
  // that was there before it started is what it was started again for.
  const std::optional<std::string> earlier = c.Result();
  bool said = false;
  for (;;) {
    ThrowIfStopRequested();
    if (said) {
      if (const std::optional<std::string> result = c.Result(); result && result != earlier) {
        ThrowIfFailed(*result);
      }
    }
    if (auto claim = CoordinatorClaim::TryClaim(c.disk, c.lock, o.lease_secs, o.heartbeat_secs)) {
      return claim;
    }
    const CoordinatorLook look = LookAtCoordinator(c.disk, c.lock, o.lease_secs);
    if (look.state == CoordinatorLook::kStale) {
      const double lease = look.holder.lease_secs > 0 ? look.holder.lease_secs : o.lease_secs;
      if (const std::optional<CoordinatorHolder> from =
              TakeOverCoordinator(c.disk, c.lock, lease)) {
        c.Say("takeover", "took the prepare over from " + Who(*from) + ": no heartbeat for " +
                              FormatSeconds(look.age_secs) +
                              "; the scan tasks finished so far are kept");
        continue;
      }
    }
    if (look.state == CoordinatorLook::kLive && !said) {
      c.Say("waiting", "another prepare of this job is running on " + Who(look.holder) +
                           "; waiting for it to finish or for its lease to go stale");
      said = true;
    }
    SleepInterruptibly(o.poll_interval_secs / 4);
  }
}

std::string ResultJson(int code, const std::string& error, const std::string& job_id) {
  const json j = {{"phase", "prepare"},     {"return_code", code},
                  {"hostname", HostName()}, {"finished_at", FormatUtcIso8601(NowNanos())},
                  {"job_id", job_id},       {"error", error.empty() ? json(nullptr) : json(error)}};
  return j.dump(2) + "\n";
}

}  // namespace

store::PrepareOutcome PrepareWithHelpers(store::PrepareRequest req,
                                         const DistributedPrepareOptions& o) {
  PrepareCoordination c(req.job_dir, o);
  const std::unique_ptr<CoordinatorClaim> claim = ClaimPrepare(c, o);
  // What an earlier preparer published or left: its result, its staging.
  c.disk.Unlink(c.ResultPath());
  for (const CoordinatorHolder& stale : StaleCoordinators(c.lock)) {
    if (!stale.token.empty()) io::RemoveTreeQuietly(c.job.StagingPath(stale.token));
  }
  req.staging_tag = claim->token();
  DistributeScan(req, o.task_bytes, c.scan, c.write, claim->fenced_disk(),
                 [&c](const std::string& event, const std::string& line) { c.Say(event, line); });
  // The tasks' files go while the claim is held: a preparer that claims
  // next plans the same tasks in the same directories.
  // False when the lease was lost first (another prepare took over).
  const auto publish = [&](const std::string& content) {
    if (claim->Owned()) {
      c.scan.RemoveAll();
      c.write.RemoveAll();
    }
    return claim->PublishAndRelease(c.ResultPath(), content);
  };
  bool split = false;
  const auto scan = req.distributed_scan.run;
  req.distributed_scan.run = [&split, scan](const store::ScanPlan& plan) {
    split = true;
    return scan(plan);
  };
  try {
    const store::PrepareOutcome out = store::Prepare(req, claim->fenced_disk());
    if (!split && !out.already_prepared) {
      c.Say("warning",
            "WARNING: prepared on this node alone: a recipe with index_key, or a compressed "
            "input of a copy job, is not split into tasks",
            LogLevel::kWarn);
    }
    CrashPoint("prepare_before_result");
    if (!publish(ResultJson(0, "", out.manifest.job_id))) {
      // The job was published under the lease; only its result file was not.
      c.Say("warning",
            "WARNING: the job is prepared, but this prepare's lease went stale before it wrote "
            "its result: another prepare took over, and finds the job prepared",
            LogLevel::kWarn);
    }
    return out;
  } catch (const Error& e) {
    if (StopRequested() || !claim->Owned()) {
      // A stop is no result: the prepare goes on when it is started again.
      claim->Release();
      throw;
    }
    if (!publish(ResultJson(e.code(), e.what(), ""))) {
      throw Error(c.lock.Lock(), 0,
                  "lost the prepare's lease (it went stale and another prepare took over); "
                  "published no result",
                  "see the other prepare's output");
    }
    throw;
  }
}

PrepareHelperOutcome HelpPrepare(const std::string& job_dir, const DistributedPrepareOptions& o) {
  PrepareCoordination c(job_dir, o);
  // A result that was there before this helper started is an earlier
  // prepare's: only a new one ends the wait.
  const std::optional<std::string> earlier = c.Result();
  PrepareHelperOutcome out;
  double alive_at = MonotonicSeconds();
  bool said_waiting = false;
  for (;;) {
    ThrowIfStopRequested();
    if (c.disk.Stat(c.job.ManifestPath())) return out;
    if (const std::optional<std::string> result = c.Result(); result && result != earlier) {
      ThrowIfFailed(*result);
      return out;
    }
    CoordinatorLook look;
    bool ran = false;
    try {
      look = LookAtCoordinator(c.disk, c.lock, o.lease_secs);
      if (look.state == CoordinatorLook::kLive) ran = c.scan.WorkOnOne() || c.write.WorkOnOne();
    } catch (const Error& e) {
      if (StopRequested()) throw;
      // The prepare may have ended meanwhile (its files gone): look again.
      if (c.disk.Stat(c.job.ManifestPath())) return out;
      if (const std::optional<std::string> result = c.Result(); result && result != earlier) {
        ThrowIfFailed(*result);
        return out;
      }
      // The task went back to the pool; the filesystem's failure is exit 75.
      if (e.IsInfrastructure()) {
        throw Error(e.file(), e.line(), e.message(), e.hint(), kExitTempFail);
      }
      if (MonotonicSeconds() - alive_at > o.wait_timeout_secs) throw;
      SleepInterruptibly(o.poll_interval_secs / 4);
      continue;
    }
    if (look.state == CoordinatorLook::kLive) {
      alive_at = MonotonicSeconds();
      said_waiting = false;
      if (ran) {
        ++out.tasks;
      } else {
        SleepInterruptibly(o.poll_interval_secs / 4);
      }
      continue;
    }
    const std::string why = look.state == CoordinatorLook::kStale
                                ? "its preparer " + Who(look.holder) + " stopped heartbeating " +
                                      FormatSeconds(look.age_secs) + " ago"
                                : "no prepare of it is running";
    if (MonotonicSeconds() - alive_at > o.wait_timeout_secs) {
      throw Error(job_dir, 0, "gave up waiting for the job to be prepared: " + why,
                  "start djshard prepare --distributed for it (again, if it died: the scan tasks "
                  "it finished are kept)");
    }
    if (!said_waiting) c.Say("waiting", "waiting for the job to be prepared: " + why);
    said_waiting = true;
    SleepInterruptibly(o.poll_interval_secs);
  }
}

}  // namespace djshard::coord
