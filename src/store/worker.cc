#include "djshard/store/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "djshard/common/build_info.h"
#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/log.h"
#include "djshard/common/signals.h"
#include "djshard/common/text.h"
#include "djshard/exec/executor.h"
#include "djshard/exec/plan.h"
#include "djshard/io/checksum.h"
#include "djshard/io/input.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "djshard/job/checkpoint.h"
#include "djshard/job/job_files.h"
#include "djshard/job/shard_run.h"
#include "djshard/job/stop_request.h"
#include "djshard/recipe/recipe.h"
#include "djshard/store/claim.h"
#include "djshard/store/dedup_stage.h"
#include "djshard/store/fs_check.h"
#include "djshard/store/job.h"
#include "djshard/store/shard_source.h"

namespace djshard::store {

namespace {

// This attempt's log: attempts/<shard>/<attempt>/process.log, one record per
// step, each written and flushed before the step goes on (a dead node's log
// shows its last steps).
class AttemptLog {
 public:
  // Opens (appends to) the log once the attempt's directory exists.
  void Open(const std::string& path, const LogFileOpener& opener, const std::string& job_id,
            const std::string& shard_id) {
    file_ = opener ? opener(path) : OpenPlainLogFile(path);
    job_id_ = job_id;
    shard_id_ = shard_id;
  }
  void Line(const std::string& event, const std::string& text, LogLevel level = LogLevel::kInfo) {
    if (!file_) return;
    LogRecord r;
    r.level = level;
    r.event = event;
    r.message = text;
    r.job_id = job_id_;
    r.shard_id = shard_id_;
    file_->Write(r);
  }

 private:
  std::unique_ptr<LogFile> file_;
  std::string job_id_, shard_id_;
};

// Why an attempt was handed back: a signal, or `djshard stop`.
std::string StopCause() {
  return StopExitCode() == kExitStopped ? "stopped by djshard stop" : "interrupted by a signal";
}

// What a worker says when the job directory's filesystem failed under it.
std::string FilesystemFailure(const Error& e) {
  return Error(e.file(), e.line(), e.message(),
               "the job directory's filesystem failed, not the shard: free space or repair the "
               "mount, then start the worker again; the shard was handed back and no failure "
               "was counted")
      .what();
}

void CheckCompatible(const JobDir& job, bool allow_mismatch) {
  const Manifest& m = job.manifest();
  const std::string ours = version();
  const std::string major_theirs = m.engine_version.substr(0, m.engine_version.find('.'));
  const std::string major_ours = ours.substr(0, ours.find('.'));
  if (!allow_mismatch && (m.engine_name != "djshard" || major_theirs != major_ours)) {
    throw Error(job.ManifestPath(), 0,
                "job was prepared by " + m.engine_name + " " + m.engine_version +
                    ", this worker is djshard " + ours,
                "use a matching djshard or pass --allow-version-mismatch");
  }
  const std::string recipe_path = job.InJob(m.recipe_snapshot_path);
  if (!allow_mismatch && io::Sha256OfFile(recipe_path) != m.recipe_sha256) {
    throw Error(recipe_path, 0, "recipe snapshot does not match the manifest's sha256",
                "the job's recipe.yaml was edited; prepare a new job or pass "
                "--allow-version-mismatch");
  }
}

// One claimed attempt: its claim, lease and outputs. The processing runs on
// the worker's thread (Worker::Process); committing the output and publishing
// the done record (Worker::Finish) may then run on another thread while the
// worker already processes its next shard.
//
// Member order matters: members are destroyed in reverse, so the heartbeat
// thread, which uses `claim`, stops before the claim (and its lock
// descriptor) goes away, and the uncommitted outputs are removed before the
// log closes.
struct Attempt {
  explicit Attempt(Claim c) : claim(std::move(c)) {}

  Claim claim;
  const JobTask* task = nullptr;  // what the claim is for
  AttemptLog log;
  std::atomic<bool> lost{false};     // set by the heartbeat thread
  std::string infrastructure_error;  // why the filesystem ended the attempt, if it did
  std::optional<InputChangedError> input_changed;  // a reference shard's input changed
  std::unique_ptr<HeartbeatThread> heartbeat;
  std::unique_ptr<io::OutputStream> output, errors;
  exec::ExecSummary summary;
  double start = 0;
  std::string checkpoints;    // the shard's checkpoint directory, when it is checkpointed
  nlohmann::json partitions;  // {total, resumed, computed} of a checkpointed shard
  nlohmann::json stage;       // a dedup stage task's files and counts
  // a dedup shard task's kept lines, located when it is published
  std::function<KeptLines(io::OutputStream&, exec::ExecSummary&, bool)> keep;
};

// What one look at the job's state found.
struct ClaimSearch {
  std::optional<Claim> claim;
  const JobTask* task = nullptr;  // the claim's task
  std::vector<std::string> held;  // shards other live workers hold
  double backoff_left = 0;        // > 0: a failed shard may be retried in this many seconds
  bool raced = false;             // a shard changed between the listing and its claim
  ShardScan scan;
};

class Worker {
 public:
  explicit Worker(const WorkerOptions& options)
      : options_(options),
        job_(JobDir::Open(options.job_dir, io::DiskOr(options.disk))),
        store_(job_),
        me_(HostName() + ":" + std::to_string(::getpid())) {}

  // Run, and on any error hand back every claim this worker holds before the
  // error leaves it, so that no other worker waits out a lease for them. An
  // error of the job directory's filesystem ends the worker with
  // kFilesystemFailed instead of throwing.
  WorkerOutcome RunReleasingOnError() {
    try {
      return Run();
    } catch (const Error& e) {
      ReleaseAll(e.what());
      JobEvent(e.code() == kExitStopped ? "job_stopped" : "job_failed", e.what());
      if (!e.IsInfrastructure()) throw;
      outcome_.error = FilesystemFailure(e);
      outcome_.end = WorkerEnd::kFilesystemFailed;
      return outcome_;
    } catch (const std::exception& e) {
      ReleaseAll("the worker stopped on an internal error");
      JobEvent("job_failed", std::string("internal error: ") + e.what());
      throw;
    } catch (...) {
      ReleaseAll("the worker stopped on an internal error");
      JobEvent("job_failed", "internal error");
      throw;
    }
  }

  // The claimed attempt after Process: published in the background, or
  // reported; how the worker ends when the attempt ends it. A changed input
  // of a reference job ends it with that error.
  std::optional<WorkerEnd> AfterProcess(AttemptStatus status) {
    if (status == AttemptStatus::kRunning) {
      PublishCurrentInBackground();
      return std::nullopt;
    }
    const std::unique_ptr<Attempt> attempt = std::move(current_);
    Report(*attempt, status);
    if (input_changed_) {
      try {
        Settle();  // the shard before it is still published
      } catch (const Error&) {
        // The changed input is what ends the job; the record is published.
      }
      throw *input_changed_;
    }
    if (status == AttemptStatus::kInterrupted && outcome_.error.empty()) {
      Say("interrupted", "interrupted; handed " + attempt->claim.shard_id() + " back");
      return WorkerEnd::kStopped;
    }
    return std::nullopt;
  }

  WorkerOutcome Run() {
    Setup();
    if (const std::optional<WorkerEnd> end = Preflight()) return End(*end);
    char policy[160];
    std::snprintf(policy, sizeof policy,
                  "lease %.1f s, heartbeat %.1f s, poll %.1f s, max_retries %lld, %d thread(s)",
                  policy_.lease_secs, policy_.heartbeat_secs, policy_.poll_interval_secs,
                  static_cast<long long>(policy_.max_retries), threads_);
    Say("start",
        "working on job " + job_.manifest().job_id + " (" +
            std::to_string(job_.manifest().shards.size()) + " shards" +
            (tasks_.size() > job_.manifest().shards.size()
                 ? ", " + std::to_string(tasks_.size()) + " tasks with its dedup stages"
                 : std::string()) +
            "): " + policy,
        "", LogLevel::kDebug);
    for (;;) {
      // A job stop claims nothing more (SPEC-checkpoints §9).
      stop_watch_->Look();
      if (StopRequested() || JobStopRequested()) return End(WorkerEnd::kStopped);
      if (options_.aborted && options_.aborted()) return End(WorkerEnd::kAborted);
      CheckInputUnchanged();
      CrashPoint("before_claim");
      ClaimSearch search = FindClaim();
      if (!search.claim) {
        if (!pending_.empty()) {
          // Our own last shard is the one left: publish it, then look again.
          Settle();
          if (!outcome_.error.empty()) return End(WorkerEnd::kFilesystemFailed);
          continue;
        }
        if (search.raced) {
          // Another worker took or finished a shard since the listing: look again shortly.
          Say("raced", "another worker took or finished a shard since the listing; looking again",
              "", LogLevel::kDebug);
          SleepInterruptibly(0.1);
          continue;
        }
        if (search.held.empty() && search.backoff_left > 0) {
          char secs[32];
          std::snprintf(secs, sizeof secs, "%.1f", search.backoff_left);
          Say("retry_wait",
              std::string("a failed shard may be retried in ") + secs + " s (retry backoff)");
          SleepInterruptibly(search.backoff_left,
                             [&] { return options_.aborted && options_.aborted(); });
          continue;
        }
        if (search.held.empty()) {
          if (const std::optional<WorkerEnd> end = JobEnd(search.scan)) return End(*end);
          // A lock vanished between its listing and its stat: look again shortly.
          SleepInterruptibly(0.1);
          continue;
        }
        WaitForHeldShards(search.held, search.backoff_left);
        continue;
      }
      CrashPoint("after_claim");
      current_ = std::make_unique<Attempt>(std::move(*search.claim));
      current_->task = search.task;
      // The attempt's directory and record come first: its log lives there.
      store_.StartAttempt(current_->claim, TaskInputPath(*current_->task), attempt_plan_);
      current_->log.Open(JobPaths::AttemptLogPath(current_->claim.attempt_dir()),
                         options_.open_log_file, job_.manifest().job_id,
                         current_->claim.shard_id());
      Say("claim",
          "took " + current_->claim.shard_id() + " (attempt " +
              std::to_string(current_->claim.attempt_number()) + ")",
          current_->claim.shard_id());
      ++outcome_.shards_taken;
      if (const std::optional<WorkerEnd> end = AfterProcess(Process(*current_))) {
        return End(*end);
      }
      if (!outcome_.error.empty()) return End(WorkerEnd::kFilesystemFailed);
      if (options_.max_shards > 0 && outcome_.shards_taken >= options_.max_shards) {
        return End(outcome_.shards_failed > 0 ? WorkerEnd::kClaimFailed : WorkerEnd::kMaxShards);
      }
    }
  }

 private:
  // Phase 1: everything that can refuse the job, before any claim.
  void Setup() {
    CheckCompatible(job_, options_.allow_version_mismatch);
    CheckNotStopped();
    CheckInputUnchanged();
    CheckJobFilesystem(job_.StateDir(), job_.disk());
    policy_ = job_.manifest().policy;
    if (options_.lease_secs) policy_.lease_secs = *options_.lease_secs;
    if (options_.heartbeat_secs) policy_.heartbeat_secs = *options_.heartbeat_secs;
    if (options_.max_retries) policy_.max_retries = *options_.max_retries;
    if (options_.poll_interval_secs) policy_.poll_interval_secs = *options_.poll_interval_secs;
    if (options_.retry_backoff_secs) policy_.retry_backoff_secs = *options_.retry_backoff_secs;
    // The plan is built once, before claiming (operators may load models): a
    // recipe this build cannot run is the job's problem, not a shard's.
    recipe_ = std::make_unique<recipe::Recipe>(
        recipe::LoadRecipe(job_.InJob(job_.manifest().recipe_snapshot_path)));
    const recipe::Recipe& recipe = *recipe_;
    const bool stages = !job_.manifest().dedup_stages.empty();
    plan_ = std::make_unique<exec::Plan>(
        exec::CompilePlan(recipe, ops::Registry::Global(), /*skip_unimplemented=*/false, stages));
    if (stages) CheckDedupStages(job_.manifest(), *plan_, recipe.path);
    tasks_ = JobTasks(job_.manifest());
    threads_ = exec::ThreadCount(options_.threads, recipe, *plan_);
    // A recipe with partition: or checkpoint: sections makes each shard a
    // partition set with checkpoints (SPEC-checkpoints §1, §7).
    const YAML::Node partition = recipe.root["partition"], checkpoint = recipe.root["checkpoint"];
    if ((partition && !partition.IsNull()) || (checkpoint && !checkpoint.IsNull())) {
      if (stages) {
        throw Error(recipe.path, 0,
                    "a recipe with deduplicators cannot have partition: or checkpoint: sections "
                    "in an elastic job",
                    "remove the sections; a dedup stage's tasks are retried whole");
      }
      job::JobSettings settings = job::ParseJobSettings(recipe.root, recipe.path);
      if (settings.checkpointing() && !plan_->operators.empty()) {
        taps_ = job::TapPositions(settings, recipe);
        settings_ = settings;
      }
    }
    // One events file per worker process: appends from several NFS clients
    // to one file are not atomic (SPEC-checkpoints §8).
    const int64_t now = NowNanos();
    events_ = std::make_unique<job::EventLog>(job_.dir() + "/events_" + FormatUtcForName(now) +
                                                  "_" + HostName() + "_" +
                                                  std::to_string(::getpid()) + ".jsonl",
                                              job_.manifest().job_id);
    events_->Emit("job_start", {{"status", "running"},
                                {"metadata",
                                 {{"role", "worker"},
                                  {"num_shards", job_.manifest().shards.size()},
                                  {"threads", threads_},
                                  {"max_shards", options_.max_shards}}}});
    stop_watch_ = std::make_unique<job::StopWatcher>(
        job_.dir(), [this](const job::StopRequest& r, JobStop level) { OnStop(r, level); },
        job_.disk());
  }

  // Thrown through preflight by a stop request, a signal or dlc's abort.
  struct PreflightInterrupted {
    WorkerEnd end;
  };

  // Phase 1b, model preflight (SPEC-checkpoints §10), before any claim: for
  // a recipe with partition: or checkpoint: sections and model operators,
  // every operator's cache key is probed once across the job's workers
  // (probe/<key>.json, one prober per key under probe/<key>.lock; the others
  // wait for the record and read it), and this node's replica plan goes into
  // every attempt.json it starts. A failed probe, here or read from a fresh
  // failure record, throws Error (exit 2) naming the operator before any
  // shard is claimed. Returns how the worker ends when it was stopped.
  std::optional<WorkerEnd> Preflight() {
    const recipe::Recipe& recipe = *recipe_;
    const YAML::Node partition = recipe.root["partition"], checkpoint = recipe.root["checkpoint"];
    if ((!partition || partition.IsNull()) && (!checkpoint || checkpoint.IsNull())) {
      return std::nullopt;
    }
    // A finished job has no shard left to claim, and nothing to probe for.
    const ShardScan scan = job_.Scan();
    if (scan.done.size() + scan.failed.size() >= job_.manifest().shards.size()) {
      return std::nullopt;
    }
    job::ShardPreflightRequest request;
    request.recipe = &recipe;
    request.plan = plan_.get();
    request.settings = job::ParseJobSettings(recipe.root, recipe.path);
    for (const ShardEntry& s : job_.manifest().shards) request.inputs.push_back(job_.InJob(s.path));
    request.job_dir = job_.dir();
    request.disk = &job_.disk();
    request.threads = threads_;
    request.threads_explicit =
        options_.threads.has_value() || recipe.np.has_value() || plan_->num_proc > 0;
    request.lease_secs = policy_.lease_secs;
    request.heartbeat_secs = policy_.heartbeat_secs;
    request.poll_secs = std::min(0.25, policy_.poll_interval_secs);
    request.events = events_.get();
    request.check_stop = [this] {  // the stop watcher's thread looks for stop requests
      if (StopRequested() || JobStopRequested()) throw PreflightInterrupted{WorkerEnd::kStopped};
      if (options_.aborted && options_.aborted()) {
        throw PreflightInterrupted{WorkerEnd::kAborted};
      }
    };
    request.say = [this](const std::string& line) { Say("preflight", line); };
    job::ShardPreflight result;
    try {
      result = job::RunShardPreflight(request);
    } catch (const PreflightInterrupted& e) {
      Say("interrupted", "preflight interrupted; claimed nothing");
      return e.end;
    }
    if (!result.has_model_ops) return std::nullopt;
    const int planned_threads = threads_;
    threads_ = result.threads;
    attempt_plan_ = result.plan_fields;
    attempt_plan_["hostname"] = HostName();
    attempt_plan_["pid"] = ::getpid();
    attempt_plan_["threads"] = threads_;
    for (const std::string& line : result.printout) Say("preflight", line);
    if (threads_ != planned_threads) {
      Say("preflight", "  executor threads: " + std::to_string(threads_) +
                           " (every core would be " + std::to_string(planned_threads) +
                           ": memory)");
    }
    return std::nullopt;
  }

  // A worker refuses to start on a stopped job: its stop request must be
  // cleared first.
  void CheckNotStopped() const {
    const std::optional<job::StopRequest> r = job::ReadStopRequest(job_.dir(), job_.disk());
    if (!r) return;
    std::string who = r->hostname + ":" + std::to_string(r->pid);
    if (!r->reason.empty()) who += ": " + r->reason;
    throw Error("job is stopped; djshard stop --clear " + job_.dir(),
                "stop requested at " + r->requested_at + " by " + who, kExitStopped);
  }

  // Called by the stop watcher when a stop request is seen or becomes forced.
  void OnStop(const job::StopRequest& r, JobStop level) {
    const bool forced = level == JobStop::kForced;
    events_->Emit("stop_requested",
                  {{"status", forced ? "force" : "graceful"},
                   {"metadata",
                    {{"mode", r.mode},
                     {"reason", r.reason.empty() ? nlohmann::json() : nlohmann::json(r.reason)},
                     {"requested_at", r.requested_at},
                     {"requested_by", r.hostname + ":" + std::to_string(r.pid)},
                     {"escalated", forced && r.mode != "force"}}}});
    std::string why = r.reason.empty() ? "" : " (" + r.reason + ")";
    if (!forced) {
      Say("stop", "stop requested by " + r.hostname + ":" + std::to_string(r.pid) + why +
                      ": claiming nothing more, finishing the shard in flight");
    } else {
      Say("stop",
          std::string(r.mode == "force" ? "forced stop requested" : "stop grace period passed") +
              why + ": aborting the shard in flight");
    }
  }

  // job_complete, job_failed or job_stopped of this worker process.
  void JobEvent(const std::string& type, const std::string& error = "") {
    if (!events_) return;
    try {
      nlohmann::json fields = {
          {"status", type == "job_complete"  ? "completed"
                     : type == "job_stopped" ? "stopped"
                                             : "failed"},
          {"metadata",
           {{"shards_taken", outcome_.shards_taken}, {"shards_failed", outcome_.shards_failed}}}};
      if (type == "job_stopped") {
        fields["metadata"]["cause"] = error;
      } else if (!error.empty()) {
        fields["error_message"] = error;
      }
      events_->Emit(type, fields);
    } catch (const std::exception&) {
      // The job's outcome matters more than its event.
    }
  }

  // Phase 2: one look at the job; claims the first claimable shard in manifest
  // order, taking over stale locks and clearing locks left beside records.
  ClaimSearch FindClaim() {
    ClaimSearch search;
    search.scan = job_.Scan();
    const ShardScan& scan = search.scan;
    Say("scan",
        "looked at the job: " + std::to_string(scan.done.size()) + " done, " +
            std::to_string(scan.failed.size()) + " failed, " + std::to_string(scan.locked.size()) +
            " locked",
        "", LogLevel::kTrace);
    std::optional<int64_t> fs_now;
    // Tasks are claimed phase by phase: a dedup stage's next phase waits
    // until every task of the one before is done.
    size_t phase = 0;
    bool phase_open = false;  // a task of `phase` is not done
    for (const JobTask& task : tasks_) {
      if (task.phase != phase) {
        if (phase_open) break;
        phase = task.phase;
      }
      const std::string& id = task.id;
      if (!scan.done.count(id)) phase_open = true;
      // The shard this process is publishing: its lock goes with the record
      // (on NFS, flock is per process, so this thread would get it).
      if (Publishing(id)) continue;
      if (scan.finished(id)) {
        // A lock beside a record: its owner died between the two.
        if (scan.locked.count(id) && store_.ClearFinishedLock(id)) {
          Say("cleanup", "removed the leftover lock of finished " + id, id);
        }
        continue;
      }
      if (!scan.locked.count(id) && scan.attempted.count(id) && policy_.retry_backoff_secs > 0) {
        // A shard that failed waits out its retry backoff; others go first.
        if (!fs_now) fs_now = job_.FilesystemNowNanos();
        const double left = store_.RetryBackoffLeft(id, policy_.retry_backoff_secs, *fs_now);
        if (left > 0) {
          search.backoff_left =
              search.backoff_left > 0 ? std::min(search.backoff_left, left) : left;
          continue;
        }
      }
      if (scan.locked.count(id)) {
        if (!fs_now) fs_now = job_.FilesystemNowNanos();
        const std::optional<double> age = store_.LockAge(id, *fs_now);
        if (age && *age <= policy_.lease_secs) {
          search.held.push_back(id);
          continue;
        }
        if (age && store_.TakeOverStale(id, policy_.lease_secs)) {
          Say("takeover", "took over stale lock of " + id, id);
        } else if (age) {
          search.held.push_back(id);
          continue;
        }
      }
      search.claim = store_.TryClaim(id);
      if (search.claim) {
        search.task = &task;
        return search;
      }
      search.raced = true;
    }
    return search;
  }

  // Nothing running and nothing claimable: the job is terminal, unless a
  // listing was out of date.
  std::optional<WorkerEnd> JobEnd(const ShardScan& scan) {
    if (!scan.failed.empty()) {
      Say("job_failed",
          "job ended with " + std::to_string(scan.failed.size()) + " failed shard(s)");
      return WorkerEnd::kJobFailed;
    }
    if (std::all_of(tasks_.begin(), tasks_.end(),
                    [&scan](const JobTask& t) { return scan.done.count(t.id) > 0; })) {
      Say("job_done", "every shard is done");
      return WorkerEnd::kJobComplete;
    }
    return std::nullopt;
  }

  // Sleeps up to the poll interval while other workers hold `held`, and wakes
  // early when the lock of one of the first few of them goes away (its shard
  // was finished, failed, handed back or taken over): the next scan may then
  // find work, or the end of the job. One stat per watched lock every quarter
  // second keeps the load on a shared filesystem low.
  void WaitForHeldShards(const std::vector<std::string>& held, double backoff_left) {
    const double wait = backoff_left > 0 ? std::min(policy_.poll_interval_secs, backoff_left)
                                         : policy_.poll_interval_secs;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", wait);
    Say("waiting", "waiting for " + std::to_string(held.size()) +
                       " shard(s) held by other workers (" + held.front() +
                       (held.size() > 1 ? ", ..." : "") + "); next look in " + secs +
                       " s, or when one of them is released");
    const size_t watched = std::min<size_t>(held.size(), 8);
    SleepInterruptibly(wait, [&] {
      if (options_.aborted && options_.aborted()) return true;
      for (size_t i = 0; i < watched; ++i) {
        if (!job_.disk().Stat(job_.LockPath(held[i]))) return true;
      }
      return false;
    });
  }

  // Phase 3: runs the recipe over the claimed shard. kRunning when the output
  // is complete and waits for Finish, else the attempt's final status
  // (failed, lost or interrupted).
  AttemptStatus Process(Attempt& a) {
    const ShardEntry* shard = &job_.manifest().shards[a.task->shard];
    BeginAttempt(a, *shard);
    std::string error;
    try {
      // A reference shard has no file: rows are named by the shard and their line in it.
      const bool file = job_.manifest().shards_mode != ShardsMode::kReference;
      const std::string path = file ? job_.InJob(shard->path) : shard->id;
      const io::InputCandidate input{path, path, file ? shard->path : shard->id};
      OpenAttemptOutputs(a);
      if (tasks_.size() > job_.manifest().shards.size()) {
        RunStageTask(a);
      } else if (settings_) {
        ProcessPartitions(a, *shard, input);
      } else {
        ExecuteShard(a, *shard, input);
      }
    } catch (const InputChangedError& e) {
      error = e.what();
      a.input_changed = e;
    } catch (const Error& e) {
      error = e.what();
      if (e.IsInfrastructure()) a.infrastructure_error = FilesystemFailure(e);
    } catch (const std::exception& e) {
      error = std::string("internal error: ") + e.what();
    }
    if (error.empty()) return AttemptStatus::kRunning;
    if (!a.input_changed && RowTask(*a.task) && !a.lost.load() && !StopRequested() &&
        !JobStopRequested()) {
      a.input_changed = ChangedInputOf(*shard);
    }
    return EndUnprocessed(a, error);
  }

  // The claim in the attempt's log, its heartbeat, and its partition_start.
  void BeginAttempt(Attempt& a, const ShardEntry& shard) {
    const Claim& claim = a.claim;
    a.log.Line("claim", "claimed " + claim.shard_id() + " on " + HostName() + " pid " +
                            std::to_string(::getpid()) + ", attempt " +
                            std::to_string(claim.attempt_number()));
    a.heartbeat = std::make_unique<HeartbeatThread>(
        [this, &claim] { return store_.Heartbeat(claim); }, policy_.heartbeat_secs, &a.lost);
    a.start = MonotonicSeconds();
    // A shard is processed as one partition: partition events name the shard
    // and the attempt, without a partition_id.
    events_->Emit("partition_start", {{"shard_id", claim.shard_id()},
                                      {"attempt_token", claim.token()},
                                      {"input_rows", RowTask(*a.task) ? shard.rows : 0},
                                      {"metadata", {{"attempt_number", claim.attempt_number()}}}});
  }

  // The attempt's output and errors files, temporary until Finish commits them.
  void OpenAttemptOutputs(Attempt& a) {
    a.output = std::make_unique<io::OutputStream>(
        JobPaths::AttemptOutputPath(a.claim.attempt_dir()), true, job_.disk());
    // The done record's xxh3_128 (and for the parts layout its SHA-256),
    // without reading the file again.
    a.output->HashContent(job_.manifest().output_layout == OutputLayout::kParts);
    a.errors = std::make_unique<io::OutputStream>(
        JobPaths::AttemptErrorsPath(a.claim.attempt_dir()), true, job_.disk());
  }

  // A reference shard's input changed after prepare: the job's fault, not
  // the shard's. The attempt ends interrupted (no retry is burned), the claim
  // goes back, and the job's record makes every worker end with the error.
  AttemptStatus EndOnChangedInput(Attempt& a, const InputChangedError& e) {
    const Claim& claim = a.claim;
    a.log.Line("input_changed", e.what());
    store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kInterrupted, e.what());
    store_.Release(claim);
    RecordInputChanged(
        job_, job_.disk(),
        {e.file(), claim.shard_id(), e.message(), HostName(), FormatUtcIso8601(NowNanos())});
    input_changed_ = e;
    return AttemptStatus::kInterrupted;
  }

  // For a reference shard whose attempt failed: whether its input changed
  // (the executor may meet a line broken by an edit before the range's hash
  // does). Anything else that reading it again meets leaves the failure as it was.
  std::optional<InputChangedError> ChangedInputOf(const ShardEntry& shard) const {
    try {
      CheckShardUnchanged(job_, job_.manifest(), shard);
    } catch (const InputChangedError& e) {
      return e;
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }

  // A job whose input changed after prepare ends every worker with exit 2.
  void CheckInputUnchanged() const {
    if (job_.manifest().shards_mode != ShardsMode::kReference) return;
    if (const std::optional<InputChangedRecord> r = ReadInputChanged(job_, job_.disk())) {
      throw InputChangedJobError(*r, job_.dir());
    }
  }

  // Phase 3 without checkpoints: the executor over the shard in one pass,
  // with op events. Throws on any error, and when the shard differs from the
  // manifest.
  void ExecuteShard(Attempt& a, const ShardEntry& shard, const io::InputCandidate& input) {
    exec::ExecOptions exec_options = ShardExecOptions(a);
    // The shard is checked against the manifest as it is read: its stored
    // bytes hashed on the way in, its rows counted by the executor.
    io::ChecksumHasher shard_hash(shard.checksum.kind);
    io::LineChunker shard_reader(1, exec_options.batch_bytes, plan_->batch_rows, [&](size_t) {
      return OpenShard(job_, job_.manifest(), shard, &shard_hash);
    });
    exec_options.source = [&shard_reader](io::LineChunk* c) { return shard_reader.Next(c); };
    a.log.Line("run", "running " + std::to_string(plan_->operators.size()) + " operator(s) with " +
                          std::to_string(threads_) + " thread(s) on " +
                          shard.Describe(job_.manifest()));
    a.summary = exec::Execute(*plan_, {input}, *a.output, a.errors.get(), exec_options);
    const io::Checksum read = shard_hash.Finish();
    if (a.summary.rows_in != shard.rows || (!shard.checksum.empty() && read != shard.checksum)) {
      const bool file = job_.manifest().shards_mode != ShardsMode::kReference;
      throw Error(file ? input.path : shard.Describe(job_.manifest()), 0,
                  "shard file differs from the manifest (rows or " + shard.checksum.field() + ")",
                  "the job directory was changed; prepare the job again");
    }
  }

  // The executor's options for an attempt: threads, the lost-claim cancel,
  // the shard id that lineage errors name, and op events.
  exec::ExecOptions ShardExecOptions(Attempt& a) {
    const Claim& claim = a.claim;
    exec::ExecOptions exec_options;
    exec_options.threads = threads_;
    exec_options.cancel = &a.lost;
    const ShardEntry& shard = job_.manifest().shards[a.task->shard];
    exec_options.shard_id = shard.id;
    // Batches of at most a 16th of each thread's share of the shard, so that
    // the threads end a shard together (its last batch keeps one thread busy
    // while the others wait): 128 KiB for 4 MB shards on 2 threads.
    const uint64_t share = shard.size_bytes / (static_cast<uint64_t>(std::max(threads_, 1)) * 16);
    exec_options.batch_bytes =
        static_cast<size_t>(std::clamp<uint64_t>(share, 64 << 10, exec_options.batch_bytes));
    auto op_started = std::make_shared<std::vector<double>>(plan_->operators.size(), 0);
    exec_options.op_event = [this, &claim, op_started](size_t i,
                                                       const exec::OperatorCounters* done) {
      if (done == nullptr) {
        (*op_started)[i] = MonotonicSeconds();
        events_->Emit("op_start", {{"shard_id", claim.shard_id()},
                                   {"attempt_token", claim.token()},
                                   {"op_idx", i},
                                   {"op_name", plan_->operators[i].op->name()}});
        return;
      }
      events_->Emit("op_complete", {{"shard_id", claim.shard_id()},
                                    {"attempt_token", claim.token()},
                                    {"op_idx", i},
                                    {"op_name", done->name},
                                    {"status", "completed"},
                                    {"duration_secs", MonotonicSeconds() - (*op_started)[i]},
                                    {"metadata", {{"busy_secs", done->seconds}}},
                                    {"input_rows", done->rows_in},
                                    {"output_rows", done->rows_out}});
    };
    return exec_options;
  }

  static bool RowTask(const JobTask& task) {
    return task.kind == TaskKind::kSign || task.kind == TaskKind::kShard;
  }

  // What an attempt's record names as its input: the shard file, or for a
  // dedup stage's group and components tasks, the stage.
  std::string TaskInputPath(const JobTask& task) const {
    switch (task.kind) {
      case TaskKind::kGroup:
      case TaskKind::kComponents:
        return "dedup stage " + std::to_string(task.stage) + " keys";
      case TaskKind::kSign:
      case TaskKind::kShard:
        break;
    }
    return job_.manifest().shards[task.shard].Describe(job_.manifest());
  }

  // A task of a job with dedup stages (store/dedup_stage.h), with op events.
  void RunStageTask(Attempt& a) {
    TaskContext context;
    context.job = &job_;
    context.plan = plan_.get();
    context.threads = threads_;
    context.exec = ShardExecOptions(a);
    a.log.Line("run", "running task " + a.claim.shard_id() + " with " + std::to_string(threads_) +
                          " thread(s)");
    TaskResult result = RunTask(context, *a.task, a.claim.attempt_dir(), *a.output, *a.errors);
    a.summary = std::move(result.summary);
    a.summary.rows_in = result.input_rows;
    a.stage = std::move(result.stage);
    a.keep = std::move(result.keep);
  }

  // An attempt whose processing threw `error`: its temporary files go, and
  // the shard is handed back (filesystem failure, stop), given up with
  // nothing published (lost claim) or failed.
  AttemptStatus EndUnprocessed(Attempt& a, const std::string& error) {
    const Claim& claim = a.claim;
    a.heartbeat->Stop();
    a.output.reset();  // removes the temporary files
    a.errors.reset();
    if (!a.infrastructure_error.empty()) return HandBack(a, a.infrastructure_error);
    if (a.input_changed) return EndOnChangedInput(a, *a.input_changed);
    if (StopRequested() || JobStopRequested()) {
      a.log.Line("interrupted", StopCause() + "; handing the shard back");
      store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kInterrupted, StopCause());
      store_.Release(claim);
      return AttemptStatus::kInterrupted;
    }
    if (a.lost.load()) {
      a.log.Line("lost_claim", "lost the claim (lease taken over); publishing nothing");
      store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kLost,
                              "claim lost while running");
      return AttemptStatus::kLost;
    }
    return Fail(a, error);
  }

  // Phase 3 of a checkpointed shard (SPEC-checkpoints §7): the shard is a
  // partition set in its checkpoint directory, shared by all its attempts.
  // Per partition the newest valid commit of an earlier attempt is where this
  // one starts; a commit that fails verification is moved to rejected/.
  // Commits are linked under the claim's fence, like the done record. The
  // output is the final taps, in order, so the done record means what it
  // always does. Throws on any error; sets a.lost when the claim was lost.
  void ProcessPartitions(Attempt& a, const ShardEntry& shard, const io::InputCandidate& input) {
    const Manifest& m = job_.manifest();
    a.checkpoints =
        JobPaths::CheckpointsRoot(job_.dir(), m.job_id, settings_->checkpoint_dir) + "/" + shard.id;
    job::ShardCheckpoints checkpoints;
    checkpoints.recipe = recipe_.get();
    checkpoints.plan = plan_.get();
    checkpoints.settings = *settings_;
    checkpoints.taps = taps_;
    checkpoints.job_id = m.job_id;
    checkpoints.engine_version = m.engine_version;
    checkpoints.config_sha256 = m.recipe_sha256;
    checkpoints.threads = threads_;
    checkpoints.events = events_.get();
    checkpoints.disk = &job_.disk();
    job::ShardAttempt attempt;
    attempt.shard_id = shard.id;
    attempt.shard_path = shard.path;
    attempt.rows = shard.rows;
    attempt.size_bytes = shard.size_bytes;
    attempt.checksum = shard.checksum;
    attempt.input = input;
    attempt.checkpoints = a.checkpoints;
    attempt.token = a.claim.token();
    attempt.lost = &a.lost;
    attempt.as_owner = [this, &a](const std::function<void()>& fn) {
      return store_.AsOwner(a.claim, fn);
    };
    attempt.record_partitions = [this, &a](const nlohmann::json& partitions,
                                           const nlohmann::json& resumed_from) {
      store_.RecordPartitions(a.claim.attempt_dir(), partitions, resumed_from);
    };
    attempt.log = [&a](const std::string& event, const std::string& text) {
      a.log.Line(event, text);
    };
    const job::ShardRunResult result =
        job::RunCheckpointedShard(checkpoints, attempt, *a.output, *a.errors);
    a.partitions = result.partitions;
    a.summary = result.summary;
  }

  // After the done record: the shard's checkpoints go, unless
  // checkpoint.keep_after_done.
  void RemoveCheckpoints(Attempt& a) {
    if (a.checkpoints.empty() || settings_->keep_after_done) return;
    std::error_code ec;
    std::filesystem::remove_all(a.checkpoints, ec);
    if (ec) {
      a.log.Line("cleanup", "could not remove " + a.checkpoints + ": " + ec.message());
    } else {
      a.log.Line("cleanup", "removed the shard's checkpoints " + a.checkpoints);
    }
  }

  // Phase 4: commits a processed attempt's output and publishes its done
  // record under the claim's fencing. Runs on the background publisher.
  AttemptStatus Finish(Attempt& a) {
    const Claim& claim = a.claim;
    DoneRecord done;
    try {
      // processed.jsonl must be durable before a done record can name it; its
      // directory fsync also covers the errors file renamed just before, and
      // a stage task's files (fsynced first).
      const bool parts = job_.manifest().output_layout == OutputLayout::kParts;
      KeptLines kept;
      if (a.keep) kept = a.keep(*a.output, a.summary, parts);
      if (a.task) SyncTaskFiles(a.claim.attempt_dir(), a.stage);
      a.errors->Commit(/*durable=*/false);
      a.output->Commit();
      if (kept.source.empty()) {
        done.checksum = io::Checksum::Xxh3(a.output->ContentXxh3());
        if (parts) done.output_sha256 = a.output->ContentSha256();
      } else {
        done.output_source = std::move(kept.source);
        done.checksum = io::Checksum::Xxh3(kept.xxh3_128);
        done.output_sha256 = kept.sha256;
      }
      CrashPoint("after_output");
    } catch (const Error& e) {
      a.heartbeat->Stop();
      if (!e.IsInfrastructure()) return Fail(a, e.what());
      a.infrastructure_error = FilesystemFailure(e);
      return HandBack(a, a.infrastructure_error);
    } catch (const std::exception& e) {
      a.heartbeat->Stop();
      return Fail(a, e.what());
    }
    done.shard_id = claim.shard_id();
    done.completed_at = FormatUtcIso8601(NowNanos());
    done.hostname = HostName();
    done.pid = ::getpid();
    done.token = claim.token();
    done.attempt_number = claim.attempt_number();
    done.output_path = JobPaths::AttemptOutputPath(claim.attempt_rel());
    done.rows = a.summary.rows_out;
    done.size_bytes = a.summary.bytes_out;
    done.engine_version = version();
    done.engine_git_commit = git_commit();
    done.op_stats = a.summary.operators;
    done.region_stats = a.summary.regions;
    done.model_devices = a.summary.model_devices;
    done.seconds = MonotonicSeconds() - a.start;
    done.partitions = a.partitions;
    done.stage = a.stage;
    // The lease is kept until the record is out: the heartbeat stops after.
    const ClaimStore::PublishResult published = store_.PublishDone(claim, done);
    a.heartbeat->Stop();
    switch (published) {
      case ClaimStore::PublishResult::kPublished:
        a.log.Line("done", "done: " + std::to_string(a.summary.rows_in) + " rows in, " +
                               std::to_string(a.summary.rows_out) + " out");
        store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kDone);
        RemoveCheckpoints(a);
        return AttemptStatus::kDone;
      case ClaimStore::PublishResult::kAlreadyDone:
        a.log.Line("duplicate", "another attempt published this shard first");
        store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kSuperseded);
        return AttemptStatus::kSuperseded;
      case ClaimStore::PublishResult::kLost:
        break;
    }
    a.log.Line("lost_claim", "lost the claim before publishing; publishing nothing");
    store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kLost,
                            "claim lost before publishing");
    return AttemptStatus::kLost;
  }

  // Hands an attempt's claim back without counting a failure: the attempt
  // becomes "interrupted" with the reason (or "done" when its record is
  // already out) and the lock goes, for any worker to take the shard at once.
  // Used when the job directory's filesystem failed under the attempt (not
  // the shard's fault; the worker then ends with kFilesystemFailed) and when
  // the worker ends on any other error. Each step is best effort: on a full
  // disk even the record may not fit.
  AttemptStatus HandBack(Attempt& a, const std::string& error) {
    a.log.Line("interrupted", "handing the shard back: " + error);
    try {
      // An attempt whose done record is out (the error came after the link)
      // is done; any other is interrupted.
      const std::string done = job_.DonePath(a.claim.shard_id());
      const bool published =
          job_.disk().Stat(done) &&
          DoneRecord::FromJson(job_.disk().Read(done), done).token == a.claim.token();
      store_.SetAttemptStatus(a.claim.attempt_dir(),
                              published ? AttemptStatus::kDone : AttemptStatus::kInterrupted,
                              published ? "" : error);
    } catch (const Error&) {
      // The record stays "running"; the released lock tells the truth.
    }
    try {
      store_.Release(a.claim);
    } catch (const Error&) {
      // The lease expires instead.
    }
    return AttemptStatus::kInterrupted;
  }

  // Marks a failed attempt, publishes the failed record when the retries are
  // used up, and releases the claim. kFailed, or kLost when the claim was gone.
  AttemptStatus Fail(Attempt& a, const std::string& error) {
    const Claim& claim = a.claim;
    a.log.Line("failed", "failed: " + error);
    store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kFailed, error);
    const int64_t failures = store_.CountFailures(claim.shard_id());
    std::optional<FailedRecord> failed;
    if (failures > policy_.max_retries) {
      a.log.Line("failed", "failure " + std::to_string(failures) + " exceeds max_retries " +
                               std::to_string(policy_.max_retries) + ": shard failed");
      failed = FailedRecord{claim.shard_id(),
                            failures,
                            error,
                            claim.attempt_rel(),
                            JobPaths::AttemptLogPath(claim.attempt_rel()),
                            FormatUtcIso8601(NowNanos()),
                            HostName()};
    }
    if (!store_.Release(claim, failed)) {
      store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kLost, error);
      return AttemptStatus::kLost;
    }
    return AttemptStatus::kFailed;
  }

  // At most kPublishing attempts are finished (a dedup shard task's kept lines located,
  // output committed, done record published) in the background while the
  // next shard is processed: each mostly waits for the kernel's writes and
  // fsyncs, which then overlap each other and the processing.
  // The attempt stays current_ until the publisher has it, so that an error
  // in Settle hands it back too.
  static constexpr size_t kPublishing = 2;
  void PublishCurrentInBackground() {
    while (pending_.size() >= kPublishing) SettleOldest();
    Attempt* a = current_.get();
    pending_.push_back(Pending{std::move(current_),
                               std::async(std::launch::async, [this, a] { return Finish(*a); })});
  }

  // Whether shard `id` is being published by this process.
  bool Publishing(const std::string& id) const {
    for (const Pending& p : pending_) {
      if (p.attempt->claim.shard_id() == id) return true;
    }
    return false;
  }

  // Waits for every background publisher, oldest first, and reports each
  // result. When one fails, its claim is handed back, the others are still
  // waited for, and the first error goes on.
  void Settle() {
    std::exception_ptr first;
    while (!pending_.empty()) {
      try {
        SettleOldest();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  // Waits for the oldest background publisher and reports its result. When
  // the publisher failed, its claim is handed back before the error goes on.
  void SettleOldest() {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    AttemptStatus status;
    try {
      status = p.result.get();
    } catch (const Error& e) {
      p.attempt->heartbeat->Stop();
      HandBack(*p.attempt, e.what());
      throw;
    } catch (...) {
      p.attempt->heartbeat->Stop();
      HandBack(*p.attempt, "internal error while publishing");
      throw;
    }
    Report(*p.attempt, status);
  }

  void Report(const Attempt& a, AttemptStatus status) {
    if (!a.infrastructure_error.empty() && outcome_.error.empty()) {
      outcome_.error = a.infrastructure_error;
    }
    const double elapsed = MonotonicSeconds() - a.start;
    try {
      const bool done = status == AttemptStatus::kDone;
      nlohmann::json fields = {{"shard_id", a.claim.shard_id()},
                               {"attempt_token", a.claim.token()},
                               {"status", done ? "completed" : AttemptStatusName(status)},
                               {"duration_secs", elapsed},
                               {"input_rows", a.summary.rows_in},
                               {"output_rows", a.summary.rows_out}};
      if (done && elapsed > 0) {
        fields["throughput_rows_per_second"] = static_cast<double>(a.summary.rows_in) / elapsed;
      }
      if (!done) fields["error_message"] = AttemptError(a);
      events_->Emit(done ? "partition_complete" : "partition_failed", fields);
    } catch (const std::exception&) {
      // An event that cannot be written does not change the attempt.
    }
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", elapsed);
    if (status == AttemptStatus::kDone) {
      Say("done", "finished " + a.claim.shard_id() + " in " + secs + " s", a.claim.shard_id());
      return;
    }
    Say(AttemptStatusName(status),
        std::string(AttemptStatusName(status)) + " " + a.claim.shard_id() + " after " + secs + " s",
        a.claim.shard_id(), status == AttemptStatus::kFailed ? LogLevel::kWarn : LogLevel::kInfo);
    if (status == AttemptStatus::kFailed) ++outcome_.shards_failed;
  }

  // The error its attempt.json records, for the attempt's event.
  std::string AttemptError(const Attempt& a) const {
    try {
      const std::string path = JobPaths::AttemptRecordPath(a.claim.attempt_dir());
      return AttemptRecord::FromJson(job_.disk().Read(path), path).error;
    } catch (const Error&) {
      return a.infrastructure_error;
    }
  }

  // Hands back the claim being processed and waits for the one being
  // published (which publishes, or hands itself back).
  void ReleaseAll(const std::string& reason) {
    if (current_) {
      if (current_->heartbeat) current_->heartbeat->Stop();
      current_->output.reset();
      current_->errors.reset();
      HandBack(*current_, reason);
      current_.reset();
    }
    try {
      Settle();
    } catch (...) {
      // Its claim was handed back too; the first error is the one reported.
    }
  }

  // A processed shard is still published before the worker returns; if its
  // publishing met a failure of the filesystem, that is how the worker ends.
  WorkerOutcome End(WorkerEnd end) {
    Settle();
    if (!outcome_.error.empty() && end != WorkerEnd::kStopped) end = WorkerEnd::kFilesystemFailed;
    outcome_.end = end;
    switch (end) {
      case WorkerEnd::kJobComplete:
      case WorkerEnd::kMaxShards:
        JobEvent("job_complete");
        break;
      case WorkerEnd::kStopped:
        if (StopExitCode() == kExitStopped) Say("stop", "stopped by djshard stop");
        JobEvent("job_stopped", StopCause());
        break;
      case WorkerEnd::kJobFailed:
      case WorkerEnd::kClaimFailed:
        JobEvent("job_failed", "the job has failed shards");
        break;
      case WorkerEnd::kAborted:
        JobEvent("job_failed", "aborted");
        break;
      case WorkerEnd::kFilesystemFailed:
        JobEvent("job_failed", outcome_.error);
        break;
    }
    return outcome_;
  }

  // A line of this worker's, "<host>:<pid>: <text>" in text logs.
  void Say(const std::string& event, const std::string& text, const std::string& shard_id = "",
           LogLevel level = LogLevel::kInfo) const {
    if (!options_.log) return;
    LogRecord r;
    r.level = level;
    r.event = event;
    r.source = me_;
    r.message = text;
    r.job_id = job_.manifest().job_id;
    r.shard_id = shard_id;
    options_.log(r);
  }

  struct Pending {
    std::unique_ptr<Attempt> attempt;
    std::future<AttemptStatus> result;
  };

  const WorkerOptions& options_;
  const JobDir job_;
  ClaimStore store_;  // uses job_: declared after it
  const std::string me_;
  Policy policy_;
  std::unique_ptr<recipe::Recipe> recipe_;
  std::unique_ptr<exec::Plan> plan_;
  // Set when shards are partition sets with checkpoints; taps_ then holds the tap positions.
  std::optional<job::JobSettings> settings_;
  std::vector<size_t> taps_;
  std::vector<JobTask> tasks_;  // the job's shards, and its dedup stages' tasks, in claim order
  int threads_ = 1;
  nlohmann::json attempt_plan_;  // this node's replica plan, for attempt.json (null: none)
  std::unique_ptr<job::EventLog> events_;  // this process's events file
  // Declared after events_ and say: its callback uses them until it is destroyed.
  std::unique_ptr<job::StopWatcher> stop_watch_;
  WorkerOutcome outcome_;
  std::optional<InputChangedError> input_changed_;  // found by this worker: it ends with it
  std::unique_ptr<Attempt> current_;                // the attempt being processed on this thread
  std::deque<Pending> pending_;                     // last: its publishers use the members above
};

}  // namespace

WorkerOutcome RunWorker(const WorkerOptions& options) {
  return Worker(options).RunReleasingOnError();
}

int WorkerExitCode(const WorkerOutcome& outcome) {
  switch (outcome.end) {
    case WorkerEnd::kJobComplete:
    case WorkerEnd::kMaxShards:
      return kExitOk;
    case WorkerEnd::kJobFailed:
    case WorkerEnd::kClaimFailed:
    case WorkerEnd::kAborted:
      return kExitFailure;
    case WorkerEnd::kStopped:
      return StopExitCode();
    case WorkerEnd::kFilesystemFailed:
      return kExitTempFail;
  }
  return kExitFailure;
}

}  // namespace djshard::store
