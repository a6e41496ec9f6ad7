#include "djshard/coord/dlc.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/common/text.h"
#include "djshard/io/disk.h"
#include "djshard/io/json_fields.h"
#include "djshard/io/sha256.h"
#include "djshard/job/stop_request.h"
#include "djshard/store/dedup_stage.h"
#include "djshard/store/job.h"
#include "djshard/store/job_summary.h"
#include "djshard/store/merge.h"
#include "djshard/store/merge_copy.h"
#include "djshard/store/prepare.h"
#include "djshard/store/status.h"
#include "djshard/store/worker.h"
#include "src/coord/coordinator_claim.h"
#include "src/coord/prepare_tasks.h"
#include "src/coord/task_pool.h"

namespace djshard::coord {

using nlohmann::json;
namespace fs = std::filesystem;

std::optional<std::string> RunIdFromEnvironment() {
  for (const char* name : {"PAI_JOB_ID", "DLC_JOB_ID", "JOB_ID", "DJSHARD_RUN_ID", "SLURM_JOB_ID",
                           "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::string(v);
  }
  return std::nullopt;
}

namespace {

// The result of one phase on this instance: an exit code and, when it
// failed, the error.
struct PhaseResult {
  int code = 0;
  std::string error;
};

// Runs a phase, turning an Error into its code and message.
template <typename Fn>
PhaseResult Capture(Fn&& phase) {
  try {
    phase();
    return {};
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
}

// The coordination directory of one run id: elections, results, abort.
class Coordination {
 public:
  Coordination(const store::JobPaths& job, const std::string& run_id, io::Disk& disk)
      : disk_(disk) {
    io::Sha256 h;
    h.Update(run_id);
    dir_ = job.CoordinationDir(h.HexDigest().substr(0, 20));
    disk_.MakeDirs(dir_);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  bool Elect(const std::string& lock_name) {
    const json who = {{"hostname", HostName()},
                      {"pid", static_cast<int64_t>(::getpid())},
                      {"at", FormatUtcIso8601(NowNanos())}};
    return disk_.CreateExclusive(Path(lock_name), who.dump() + "\n");
  }
  std::optional<json> Read(const std::string& name) const {
    if (!disk_.Stat(Path(name))) return std::nullopt;
    try {
      return json::parse(disk_.Read(Path(name)));
    } catch (const std::exception&) {
      return std::nullopt;  // being written: WriteAtomic makes this transient
    }
  }
  // A phase's result file: prepare-result.json, finalize-result.json, abort.json.
  static std::string ResultJson(const std::string& phase, const PhaseResult& r,
                                const std::string& message = "") {
    json j = {{"phase", phase},
              {"return_code", r.code},
              {"hostname", HostName()},
              {"finished_at", FormatUtcIso8601(NowNanos())},
              {"error", r.error.empty() ? json(nullptr) : json(r.error)}};
    if (!message.empty()) j["message"] = message;
    return j.dump(2) + "\n";
  }
  // Publishes the first failure (single writer through abort.lock).
  void Abort(const PhaseResult& failure) {
    if (Elect("abort.lock")) disk_.WriteAtomic(Path("abort.json"), ResultJson("abort", failure));
  }
  const std::string& dir() const { return dir_; }
  // The lock of a coordinated phase ("prepare", "finalize").
  CoordinatorLockPaths Lock(const std::string& phase) const { return {dir_, phase}; }
  std::optional<json> AbortRecord() const { return Read("abort.json"); }

 private:
  io::Disk& disk_;
  std::string dir_;
};

// A distributed merge's copy task, run by any instance.
TaskPool::Kind CopyKind(const store::JobPaths& job_paths, io::Disk& disk) {
  return {"copy",
          [](const std::string& plan) {
            return store::MergeCopyPlan::FromJson(plan, "copy-plan.json").tasks.size();
          },
          [job_paths, &disk](const std::string& text, size_t task, const std::string& dir,
                             const std::string&, const std::function<bool()>& owned) {
            const store::MergeCopyPlan plan = store::MergeCopyPlan::FromJson(text, dir);
            const store::JobDir job = store::JobDir::Open(job_paths.dir(), disk);
            return store::RunMergeCopyTask(job, plan, task, owned);
          },
          [](const json& r) {
            const json error = r.value("error", json());
            return "copied " + std::to_string(r.value("parts", json::array()).size()) +
                   " part(s) into the merged file" +
                   (error.is_object() ? ", failed: " + error.value("message", "") : "");
          }};
}

class DlcRun {
 public:
  DlcRun(const DlcOptions& o, const std::string& run_id)
      : o_(o),
        run_id_(run_id),
        disk_(io::DiskOr(o.disk)),
        job_(o.job_dir),
        coord_(job_, run_id, disk_),
        scan_(disk_, coord_.dir(), ScanKind(o.threads.value_or(0)), LeaseSecs(), HeartbeatSecs(),
              o.poll_interval_secs, [this](const std::string& line) { Say("scan", line); }),
        write_(disk_, coord_.dir(), WriteKind(), LeaseSecs(), HeartbeatSecs(), o.poll_interval_secs,
               [this](const std::string& line) { Say("write", line); }),
        copy_(disk_, coord_.dir(), CopyKind(job_, disk_), LeaseSecs(), HeartbeatSecs(),
              o.poll_interval_secs, [this](const std::string& line) { Say("copy", line); }) {}

  DlcOutcome Run() {
    // A run id that already finished returns its stored result at once.
    if (const std::optional<json> fin = coord_.Read("finalize-result.json")) {
      const int code = fin->value("return_code", kExitFailure);
      // A stored PASS holds while the job it merged is there (the
      // coordination directory is beside the job directory, not in it).
      if (code == 0 && !disk_.Stat(job_.ManifestPath())) {
        throw djshard::Error(
            job_.dir(), 0,
            "run " + run_id_ + " passed before, but the job directory holds no job now",
            "pass a new --run-id to prepare and run the job again");
      }
      return {DlcEnd::kStoredResult, code,
              fin->value("message",
                         "stored result of run " + run_id_ + ": exit " + std::to_string(code))};
    }
    deadline_ = MonotonicSeconds() + o_.wait_timeout_secs;
    // `djshard stop` on the job ends this instance too, whatever its phase.
    const job::StopWatcher stop_watch(
        job_.dir(),
        [this](const job::StopRequest& r, JobStop level) {
          Say("stop", std::string(level == JobStop::kForced ? "forced stop" : "stop") +
                          " requested by " + r.hostname + ":" + std::to_string(r.pid) +
                          (r.reason.empty() ? "" : " (" + r.reason + ")"));
        },
        disk_);
    if (std::optional<DlcOutcome> end = Prepare()) return *end;
    if (std::optional<DlcOutcome> end = Work()) return *end;
    if (std::optional<DlcOutcome> end = WaitForShards()) return *end;
    return Finalize();
  }

 private:
  // Phase 1: one prepare coordinator; the others wait for its result, or
  // take it over when its lease goes stale.
  std::optional<DlcOutcome> Prepare() {
    std::optional<json> prepared;
    if (std::optional<DlcOutcome> end = Coordinate(Phase::kPrepare, &prepared)) return end;
    RemovePhaseTasks(Phase::kPrepare);
    if (const int code = prepared->value("return_code", kExitFailure); code != 0) {
      const json error = prepared->value("error", json(""));
      const std::string message = "prepare failed on " + prepared->value("hostname", "?") + ": " +
                                  (error.is_string() ? error.get<std::string>() : "");
      Error(message);
      return DlcOutcome{DlcEnd::kPrepareFailed, code, message};
    }
    return std::nullopt;
  }

  // What the prepare coordinator runs, publishing through `disk` (fenced by
  // its claim). Its staging directory is named by the claim's token, so that
  // whoever takes over can remove it.
  PhaseResult RunPrepare(io::Disk& disk, const std::string& token) {
    return Capture([&] {
      store::PrepareRequest req;
      req.config_path = o_.config;
      req.dataset_path = o_.dataset_path;
      req.job_dir = job_.dir();
      req.num_shards = o_.num_shards;
      req.shards_mode = o_.shards_mode;
      req.output_layout = o_.layout;
      req.policy.lease_secs = LeaseSecs();
      req.policy.heartbeat_secs = HeartbeatSecs();
      req.staging_tag = token;
      // Every instance scans a reference job's input (store/prepare_scan.h),
      // unless the launcher said there is one.
      if (o_.nodes != 1) {
        DistributeScan(
            req, o_.task_bytes, scan_, write_, disk,
            [this](const std::string& event, const std::string& line) { Say(event, line); });
      }
      const store::PrepareOutcome out = store::Prepare(req, disk);
      Say("prepared", out.already_prepared
                          ? "Job is already prepared and unchanged: " + job_.dir()
                          : "Prepared job " + out.manifest.job_id + ": " +
                                std::to_string(out.manifest.total_rows) + " rows, " +
                                std::to_string(out.manifest.num_shards) + " shards");
    });
  }

  // Phase 2: a worker on this instance. The first failure aborts every
  // instance with its code.
  std::optional<DlcOutcome> Work() {
    // Strict mode: each instance takes its share of the claims: shards, and
    // the tasks of the recipe's dedup stages.
    int64_t claims = o_.num_shards;
    try {
      const store::JobDir job = store::JobDir::Open(job_.dir(), disk_);
      job_id_ = job.manifest().job_id;
      claims = static_cast<int64_t>(store::JobTasks(job.manifest()).size());
    } catch (const std::exception&) {
      // The worker reports what is wrong with the job.
    }
    store::WorkerOptions w;
    w.job_dir = job_.dir();
    if (o_.require_all_nodes) w.max_shards = (claims + o_.nodes - 1) / o_.nodes;
    w.threads = o_.threads;
    w.poll_interval_secs = o_.poll_interval_secs;
    w.aborted = [&] { return coord_.AbortRecord().has_value(); };
    w.log = o_.worker_log;
    w.open_log_file = o_.open_log_file;
    w.disk = &disk_;
    store::WorkerOutcome outcome;
    if (Stopping()) return Stopped();
    PhaseResult r = Capture([&] { outcome = store::RunWorker(w); });
    // A stopped instance hands its shard back; that is no failure of the run.
    if (Stopping()) return Stopped();
    if (r.code != 0) Error(r.error);
    if (r.code == 0 && outcome.end != store::WorkerEnd::kAborted) {
      r.code = store::WorkerExitCode(outcome);
      if (!outcome.error.empty()) {
        r.error = outcome.error;
        Error(r.error);
      } else if (r.code != 0) {
        r.error = "worker on " + HostName() + " exited " + std::to_string(r.code);
      }
    }
    if (r.code != 0) coord_.Abort(r);
    return AbortedIfAny();
  }

  // Phase 3: waits until every shard is done (other instances may still work).
  std::optional<DlcOutcome> WaitForShards() {
    const store::JobDir job = store::JobDir::Open(job_.dir(), disk_);
    for (;;) {
      if (Stopping()) return Stopped();
      if (std::optional<DlcOutcome> end = AbortedIfAny()) return end;
      const store::JobStatus s = store::ReadStatus(job);
      if (s.failed()) {
        coord_.Abort({kExitFailure, std::to_string(s.counts.failed) +
                                        " shard(s) failed, or a dedup stage's task"});
        return AbortedIfAny();
      }
      if (s.complete()) return std::nullopt;
      if (MonotonicSeconds() > deadline_) {
        coord_.Abort({kExitFailure, "timed out waiting for shards: " + s.SummaryLine()});
        return AbortedIfAny();
      }
      SleepInterruptibly(o_.poll_interval_secs);
    }
  }

  // Phase 4: one finalize coordinator verifies and merges; the others wait,
  // or take it over when its lease goes stale.
  DlcOutcome Finalize() {
    std::optional<json> fin;
    if (std::optional<DlcOutcome> end = Coordinate(Phase::kFinalize, &fin)) return *end;
    RemovePhaseTasks(Phase::kFinalize);
    const int code = fin->value("return_code", kExitFailure);
    if (code != 0) {
      return {DlcEnd::kFinalizeFailed, code,
              "finalize failed on " + fin->value("hostname", std::string("?"))};
    }
    return {DlcEnd::kPassed, 0, fin->value("message", std::string())};
  }

  // What the finalize coordinator runs, publishing through `disk` (fenced
  // by its claim). Returns the PASS line in *message.
  PhaseResult RunFinalize(io::Disk& disk, std::string* message) {
    return Capture([&] { *message = VerifyAndMerge(disk); });
  }

  // Names the merged file's temporary name while copy tasks write it: the
  // run's, so that a coordinator that takes over goes on with the same file
  // and keeps the tasks already done.
  std::string CopyTag() const { return "dlc-" + fs::path(coord_.dir()).filename().string(); }
  std::string CopyTemp() const { return MergedOutput() + ".tmp." + CopyTag(); }

  // Checks the node count before anything is merged, then merges (which
  // verifies every shard output as it copies it: its rows and SHA-256 are the
  // result, the output is not read again). Returns the PASS line.
  std::string VerifyAndMerge(io::Disk& disk) {
    const store::JobDir job = store::JobDir::Open(job_.dir(), disk);
    const uint64_t expect_nodes = o_.require_all_nodes ? static_cast<uint64_t>(o_.nodes) : 1;
    // A node took part when it completed a shard or a dedup stage's task.
    std::set<std::string> owners;
    const store::JobStatus status = store::ReadStatus(job);
    for (const store::ShardStatus& sh : status.shards) owners.insert(sh.owner);
    for (const store::StageStatus& stage : status.stages) {
      for (const store::ShardStatus& task : stage.tasks) owners.insert(task.owner);
    }
    if (owners.size() < expect_nodes) {
      throw djshard::Error(job.dir(), 0,
                           "shards were completed by " + std::to_string(owners.size()) +
                               " distinct node(s), expected " + std::to_string(expect_nodes),
                           "some instances did not take part; check their logs");
    }
    store::MergeRequest merge;
    merge.output = o_.output;
    merge.overwrite = true;
    merge.layout = o_.layout;
    store::MergeOutcome merged;
    if (o_.nodes != 1 && store::CanMergeByCopyTasks(job, merge)) {
      // Every instance copies a share of the outputs into the merged file.
      const store::MergeCopyPlan plan = store::PlanMergeCopy(
          job, merge, o_.task_bytes, 8 * static_cast<size_t>(std::max<int64_t>(1, o_.nodes)),
          CopyTag(), disk);
      Say("copy", "merging in " + std::to_string(plan.tasks.size()) +
                      " copy task(s) that every instance claims");
      merged = store::FinishMergeCopy(job, plan, copy_.Lead(plan.ToJson(), disk), o_.sha256, disk);
    } else {
      merged = store::Merge(job, merge, disk);
    }
    if (!merged.model_devices_warning.empty()) {
      Log(LogLevel::kWarn, "warning", "WARNING: " + merged.model_devices_warning);
    }
    CrashPoint("finalize_merged");
    return store::PassLine(merged);
  }

  // The merged output as Merge names it.
  std::string MergedOutput() const {
    const std::string fallback = job_.DefaultMergedOutput(o_.layout);
    return fs::absolute(o_.output.empty() ? fallback : o_.output).lexically_normal().string();
  }

  // A phase that one instance leads for all: its lock and result file are
  // named after it in the coordination directory.
  enum class Phase { kPrepare, kFinalize };
  static std::string Name(Phase p) { return p == Phase::kPrepare ? "prepare" : "finalize"; }
  static std::string ResultName(Phase p) { return Name(p) + "-result.json"; }

  // What one look at a phase's coordinator came to.
  struct Step {
    bool progress = false;            // a live coordinator, or a step toward the result
    std::string blocked;              // else: why no step could be made
    int blocked_code = kExitFailure;  // the exit code should that last
    std::optional<DlcOutcome> end;    // this instance ends here (stopped while it led)
    bool worked = false;              // ran one of the coordinator's tasks: look again at once
  };
  static Step Progress() { return Step{true, "", kExitFailure, std::nullopt, false}; }
  static Step Blocked(const std::string& why, int code = kExitFailure) {
    return Step{false, why, code, std::nullopt, false};
  }

  // The one wait loop of a coordinated phase: returns once its result exists
  // (into *result). Meanwhile this instance leads the phase when no one
  // does, takes it over from a coordinator whose lease went stale, and waits
  // without a deadline while a live one heartbeats (a long merge is no
  // reason to give up); --wait-timeout-secs bounds only a wait that makes no
  // progress: a stale lock that cannot be taken, a failing filesystem. An
  // abort ends a wait for finalize.
  std::optional<DlcOutcome> Coordinate(Phase phase, std::optional<json>* result) {
    double deadline = MonotonicSeconds() + o_.wait_timeout_secs;
    for (;;) {
      if (Stopping()) return Stopped();
      if (phase == Phase::kFinalize) {
        if (std::optional<DlcOutcome> end = AbortedIfAny()) return end;
      }
      const Step step = TryToLead(phase, result);
      if (*result) return std::nullopt;
      if (step.end) return step.end;
      if (step.progress) {
        deadline = MonotonicSeconds() + o_.wait_timeout_secs;
      } else if (MonotonicSeconds() > deadline) {
        throw djshard::Error(coord_.Path(Name(phase) + ".lock"), 0,
                             "no live DLC " + Name(phase) + " coordinator and no takeover for " +
                                 FormatSeconds(o_.wait_timeout_secs) + ": " + step.blocked,
                             "once no process holds its flock and the shared directory works, "
                             "start the run again with the same run id: it goes on from there",
                             step.blocked_code);
      }
      if (!step.worked) SleepInterruptibly(o_.poll_interval_secs / 4);
    }
  }

  // Reads the phase's result; else leads the phase when no one does or when
  // its coordinator's lease is stale.
  Step TryToLead(Phase phase, std::optional<json>* result) {
    try {
      if ((*result = coord_.Read(ResultName(phase)))) return Progress();
      const CoordinatorLockPaths lock = coord_.Lock(Name(phase));
      const CoordinatorLook look = LookAtCoordinator(disk_, lock, LeaseSecs());
      const std::string role = "DLC " + Name(phase) + " coordinator (" + HostName() + ")";
      if (look.state == CoordinatorLook::kLive) {
        // While a coordinator lives, its tasks need hands.
        Step step = Progress();
        step.worked =
            phase == Phase::kPrepare ? scan_.WorkOnOne() || write_.WorkOnOne() : copy_.WorkOnOne();
        return step;
      }
      if (look.state == CoordinatorLook::kNone) return Lead(phase, "elected as " + role, result);
      const double lease = look.holder.lease_secs > 0 ? look.holder.lease_secs : LeaseSecs();
      const std::optional<CoordinatorHolder> from = TakeOverCoordinator(disk_, lock, lease);
      if (!from) {
        return Blocked("the stale lock of " + Who(look.holder) +
                       " could not be taken over (another process holds its flock)");
      }
      return Lead(phase,
                  "took over as " + role + " from " + Who(*from) + ": no heartbeat for " +
                      FormatSeconds(look.age_secs) + ", past its lease of " + FormatSeconds(lease) +
                      "; running " + Name(phase) + " again from the start",
                  result);
    } catch (const djshard::Error& e) {
      return Blocked(e.what(), e.IsInfrastructure() ? kExitTempFail : kExitFailure);
    }
  }

  // Claims the phase and, when that wins, runs it from the start and
  // publishes its result, unless the claim was lost meanwhile (then it
  // publishes nothing and waits like the others).
  Step Lead(Phase phase, const std::string& why, std::optional<json>* result) {
    const CoordinatorLockPaths lock = coord_.Lock(Name(phase));
    const std::unique_ptr<CoordinatorClaim> claim =
        CoordinatorClaim::TryClaim(disk_, lock, LeaseSecs(), HeartbeatSecs());
    if (!claim) return Progress();  // another instance leads
    // A coordinator may have published and released just before our create.
    if ((*result = coord_.Read(ResultName(phase)))) {
      claim->Release();
      return Progress();
    }
    Say(why.rfind("took over", 0) == 0 ? "takeover" : "elected", why);
    RemoveLeftovers(phase, lock);
    std::string message;
    const PhaseResult r = phase == Phase::kPrepare
                              ? RunPrepare(claim->fenced_disk(), claim->token())
                              : RunFinalize(claim->fenced_disk(), &message);
    if (r.code == kExitStopped && JobStopRequested()) {
      // `djshard stop --force` is no result of the run: the claim is handed
      // back so that the same run id runs the phase again once it is cleared.
      claim->Release();
      return Step{true, "", kExitFailure, Stopped(), false};
    }
    if (!claim->Owned() ||
        !claim->PublishAndRelease(coord_.Path(ResultName(phase)),
                                  Coordination::ResultJson(Name(phase), r, message))) {
      Error("lost the DLC " + Name(phase) + " coordinator lease on " + HostName() +
            " (it went stale and another instance took the phase over); published nothing");
      // What this instance made after it lost the lease goes once the phase
      // has its result.
      if (coord_.Read(ResultName(phase))) RemovePhaseTasks(phase);
      return Progress();
    }
    if (r.code != 0) {
      Error(r.error);
      if (phase == Phase::kFinalize) WriteFailedSummary(r);
    }
    RemovePhaseTasks(phase);
    *result = coord_.Read(ResultName(phase));
    return Progress();
  }

  // Once a phase has its result: its tasks' files, and the file that copy
  // tasks wrote unless it was renamed into place. Any instance may do it.
  void RemovePhaseTasks(Phase phase) {
    if (phase == Phase::kFinalize) {
      copy_.RemoveAll();
      ::unlink(CopyTemp().c_str());
      return;
    }
    scan_.RemoveAll();
    write_.RemoveAll();
  }

  // Removes what the coordinators this one took over from left behind:
  // prepare's staging directories (named by their tokens), merge's temporary
  // outputs, their staged result files.
  void RemoveLeftovers(Phase phase, const CoordinatorLockPaths& lock) {
    for (const CoordinatorHolder& stale : StaleCoordinators(lock)) {
      if (stale.token.empty()) continue;
      disk_.Unlink(coord_.Path(ResultName(phase) + ".staged." + stale.token));
      if (phase == Phase::kPrepare) RemoveLeftover(job_.StagingPath(stale.token));
    }
    if (phase != Phase::kFinalize) return;
    const fs::path out(MergedOutput());
    const std::string name = out.filename().string();
    // The copy tasks' file is the run's: a new coordinator goes on with it.
    RemoveLeftovers(out.parent_path(), {name + ".tmp.", name + ".errors.jsonl.tmp."},
                    fs::path(CopyTemp()).filename().string());
    RemoveLeftovers(job_.dir(), {"merge.json.tmp.", "merge.json.staged."});
  }
  // Removes the entries of `dir` whose names start with one of `prefixes`,
  // except `keep`.
  void RemoveLeftovers(const fs::path& dir, const std::vector<std::string>& prefixes,
                       const std::string& keep = "") {
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name == keep) continue;
      for (const std::string& prefix : prefixes) {
        if (name.rfind(prefix, 0) == 0) RemoveLeftover(it->path().string());
      }
    }
  }
  void RemoveLeftover(const std::string& path) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec))) return;
    io::RemoveTreeQuietly(path);
    Say("cleanup", "removed " + path + ", left by a coordinator that was taken over");
  }

  // Merge wrote "completed" when it succeeded; a failure is said here.
  void WriteFailedSummary(const PhaseResult& r) {
    try {
      store::WriteJobSummary(
          store::JobDir::Open(job_.dir(), disk_),
          store::SummaryUpdate{store::SummaryStatus::kFailed, {}, false, r.error});
    } catch (const std::exception&) {
      // The finalize result carries the failure anyway.
    }
  }

  static std::string Who(const CoordinatorHolder& h) {
    return h.hostname + " pid " + std::to_string(h.pid);
  }
  double LeaseSecs() const { return o_.lease_secs.value_or(store::Policy{}.lease_secs); }
  double HeartbeatSecs() const {
    return o_.heartbeat_secs.value_or(store::Policy{}.heartbeat_secs);
  }

  std::optional<DlcOutcome> AbortedIfAny() const {
    const std::optional<json> a = coord_.AbortRecord();
    if (!a) return std::nullopt;
    const json error = a->value("error", json(nullptr));
    return DlcOutcome{DlcEnd::kAborted, a->value("return_code", kExitFailure),
                      error.is_string() ? error.get<std::string>() : "aborted"};
  }

  // SIGINT/SIGTERM, or `djshard stop` of the job.
  static bool Stopping() { return StopRequested() || JobStopRequested(); }
  static DlcOutcome Stopped() {
    return {DlcEnd::kStopped, StopExitCode(),
            StopExitCode() == kExitStopped ? "stopped by djshard stop" : "stopped by a signal"};
  }

  void Say(const std::string& event, const std::string& s, LogLevel level = LogLevel::kInfo) const {
    if (!o_.log) return;
    LogRecord r;
    r.level = level;
    r.event = event;
    r.message = s;
    r.job_id = job_id_;
    o_.log(r);
  }
  void Error(const std::string& s) const { Say("abort", s, LogLevel::kError); }

  const DlcOptions& o_;
  const std::string run_id_;
  std::string job_id_;  // once the job is prepared
  io::Disk& disk_;
  const store::JobPaths job_;
  Coordination coord_;
  TaskPool scan_;   // a distributed prepare's tasks
  TaskPool write_;  // and a copy job's shard files
  TaskPool copy_;   // a distributed merge's tasks
  double deadline_ = 0;
};

}  // namespace

std::vector<std::string> DlcTaskProgress(const std::string& job_dir) {
  const store::JobPaths job(job_dir);
  const fs::path root = fs::path(job.CoordinationDir("x")).parent_path();
  std::vector<std::string> lines;
  std::error_code ec;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const auto nothing = [](const std::string&) {};
    const double lease = store::Policy{}.lease_secs;
    io::Disk& disk = io::RealDisk();
    const std::string dir = it->path().string();
    // `djshard prepare --distributed` coordinates in "prepare", dlc runs by run id.
    const std::string prepare = it->path().filename() == "prepare" ? "prepare: " : "dlc prepare: ";
    try {
      const std::string scan = TaskPool(disk, dir, ScanKind(0), lease, 1, 1, nothing).Progress();
      if (!scan.empty()) lines.push_back(prepare + scan);
      const std::string write = TaskPool(disk, dir, WriteKind(), lease, 1, 1, nothing).Progress();
      if (!write.empty()) lines.push_back(prepare + write);
      const std::string copy =
          TaskPool(disk, dir, CopyKind(job, disk), lease, 1, 1, nothing).Progress();
      if (!copy.empty()) lines.push_back("dlc merge: " + copy);
    } catch (const djshard::Error&) {
      // A plan being replaced or removed: nothing to show.
    }
  }
  return lines;
}

DlcOutcome RunDlc(const DlcOptions& o) {
  std::optional<std::string> run_id = o.run_id;
  if (!run_id) run_id = RunIdFromEnvironment();
  if (!run_id || run_id->empty()) {
    throw Error("no run id",
                "pass --run-id, or run under a launcher that sets PAI_JOB_ID, DLC_JOB_ID, JOB_ID, "
                "DJSHARD_RUN_ID, SLURM_JOB_ID, OMPI_MCA_ess_base_jobid or TORCHELASTIC_RUN_ID");
  }
  if (o.num_shards <= 0) throw Error("--num-shards must be greater than 0");
  const store::Policy defaults;
  const double lease = o.lease_secs.value_or(defaults.lease_secs);
  const double heartbeat = o.heartbeat_secs.value_or(defaults.heartbeat_secs);
  if (lease <= 0) throw Error("--lease-secs must be greater than 0");
  if (heartbeat <= 0 || heartbeat >= lease) {
    throw Error("--heartbeat-secs must be greater than 0 and less than --lease-secs",
                "a lease must survive at least one missed heartbeat");
  }
  if (o.require_all_nodes) {
    if (o.nodes <= 0) throw Error("--require-all-nodes needs --nodes", "say how many nodes run");
    const int64_t cap = (o.num_shards + o.nodes - 1) / o.nodes;
    if (o.num_shards < o.nodes || (o.nodes - 1) * cap >= o.num_shards) {
      throw Error("strict mode cannot give every one of " + std::to_string(o.nodes) +
                      " nodes a shard with --num-shards " + std::to_string(o.num_shards),
                  "use at least as many shards as nodes, e.g. a multiple of --nodes");
    }
  }
  return DlcRun(o, *run_id).Run();
}

}  // namespace djshard::coord
