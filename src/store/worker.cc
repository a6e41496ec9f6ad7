#include "djshard/store/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include "djshard/common/build_info.h"
#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/common/text.h"
#include "djshard/exec/executor.h"
#include "djshard/exec/plan.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "djshard/recipe/recipe.h"
#include "djshard/store/claim.h"
#include "djshard/store/job.h"

namespace djshard::store {

namespace {

// This attempt's log lines: attempts/<shard>/<attempt>/process.log.
class AttemptLog {
 public:
  explicit AttemptLog(const std::string& path) : out_(path, std::ios::app) {}
  void Line(const std::string& text) {
    out_ << FormatUtcIso8601(NowNanos()) << " " << text << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

// Refreshes a claim's lease every `interval` seconds until stopped; sets
// `lost` when ownership is gone. It waits with poll(2) on a pipe and a
// relative timeout: Stop() wakes it at once, and a node whose wall clock
// jumps or is off by hours still heartbeats on time.
class HeartbeatThread {
 public:
  HeartbeatThread(ClaimStore& store, const Claim& claim, double interval, std::atomic<bool>* lost) {
    if (::pipe2(wake_, O_CLOEXEC) != 0) ThrowSystemError("pipe", "cannot create");
    thread_ = std::thread([this, &store, &claim, interval, lost] {
      for (;;) {
        const double next = MonotonicSeconds() + interval;
        for (double left = interval; left > 0; left = next - MonotonicSeconds()) {
          pollfd pfd{wake_[0], POLLIN, 0};
          if (::poll(&pfd, 1, static_cast<int>(left * 1000) + 1) > 0) return;  // Stop()
        }
        bool ok = false;
        try {
          ok = store.Heartbeat(claim);
        } catch (const std::exception&) {
          ok = false;
        }
        if (!ok) {
          lost->store(true);
          return;
        }
      }
    });
  }
  ~HeartbeatThread() {
    Stop();
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  void Stop() {
    if (!thread_.joinable()) return;
    const char byte = 1;
    while (::write(wake_[1], &byte, 1) < 0 && errno == EINTR) {
    }
    thread_.join();
  }

 private:
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

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
  explicit Attempt(Claim c)
      : claim(std::move(c)), log(JobPaths::AttemptLogPath(claim.attempt_dir())) {}

  Claim claim;
  AttemptLog log;
  std::atomic<bool> lost{false};  // set by the heartbeat thread
  std::unique_ptr<HeartbeatThread> heartbeat;
  std::unique_ptr<io::OutputStream> output, errors;
  exec::ExecSummary summary;
  double start = 0;
};

// What one look at the job's state found.
struct ClaimSearch {
  std::optional<Claim> claim;
  std::vector<std::string> held;  // shards other live workers hold
  bool raced = false;             // a shard changed between the listing and its claim
  ShardScan scan;
};

class Worker {
 public:
  explicit Worker(const WorkerOptions& options)
      : options_(options),
        job_(JobDir::Open(options.job_dir,
                          options.disk != nullptr ? *options.disk : io::RealDisk())),
        store_(job_),
        me_(HostName() + ":" + std::to_string(::getpid())) {}

  WorkerOutcome Run() {
    Setup();
    for (;;) {
      if (StopRequested()) return End(WorkerEnd::kStopped);
      if (options_.aborted && options_.aborted()) return End(WorkerEnd::kAborted);
      CrashPoint("before_claim");
      ClaimSearch search = FindClaim();
      if (!search.claim) {
        if (pending_) {
          // Our own last shard is the one left: publish it, then look again.
          Settle();
          continue;
        }
        if (search.raced) {
          // Another worker took or finished a shard since the listing: look again shortly.
          SleepInterruptibly(0.1);
          continue;
        }
        if (search.held.empty()) {
          if (const std::optional<WorkerEnd> end = JobEnd(search.scan)) return End(*end);
          // A lock vanished between its listing and its stat: look again shortly.
          SleepInterruptibly(0.1);
          continue;
        }
        WaitForHeldShards(search.held);
        continue;
      }
      CrashPoint("after_claim");
      // The attempt's directory and record come first: its log lives there.
      store_.StartAttempt(*search.claim, job_.FindShard(search.claim->shard_id())->path);
      auto attempt = std::make_unique<Attempt>(std::move(*search.claim));
      Say("took " + attempt->claim.shard_id() + " (attempt " +
          std::to_string(attempt->claim.attempt_number()) + ")");
      ++outcome_.shards_taken;
      const AttemptStatus status = Process(*attempt);
      if (status == AttemptStatus::kRunning) {
        PublishInBackground(std::move(attempt));
      } else if (status == AttemptStatus::kInterrupted) {
        Say("interrupted; handed " + attempt->claim.shard_id() + " back");
        return End(WorkerEnd::kStopped);
      } else {
        Report(*attempt, status);
      }
      if (options_.max_shards > 0 && outcome_.shards_taken >= options_.max_shards) {
        Settle();
        return End(outcome_.shards_failed > 0 ? WorkerEnd::kClaimFailed : WorkerEnd::kMaxShards);
      }
    }
  }

 private:
  // Phase 1: everything that can refuse the job, before any claim.
  void Setup() {
    CheckCompatible(job_, options_.allow_version_mismatch);
    policy_ = job_.manifest().policy;
    if (options_.lease_secs) policy_.lease_secs = *options_.lease_secs;
    if (options_.heartbeat_secs) policy_.heartbeat_secs = *options_.heartbeat_secs;
    if (options_.max_retries) policy_.max_retries = *options_.max_retries;
    if (options_.poll_interval_secs) policy_.poll_interval_secs = *options_.poll_interval_secs;
    // The plan is built once, before claiming (operators may load models): a
    // recipe this build cannot run is the job's problem, not a shard's.
    const recipe::Recipe recipe =
        recipe::LoadRecipe(job_.InJob(job_.manifest().recipe_snapshot_path));
    plan_ = std::make_unique<exec::Plan>(exec::CompilePlan(recipe, ops::Registry::Global()));
    threads_ = exec::ThreadCount(options_.threads, recipe, *plan_);
  }

  // Phase 2: one look at the job; claims the first claimable shard in manifest
  // order, taking over stale locks and clearing locks left beside records.
  ClaimSearch FindClaim() {
    ClaimSearch search;
    search.scan = job_.Scan();
    const ShardScan& scan = search.scan;
    std::optional<int64_t> fs_now;
    for (const ShardEntry& s : job_.manifest().shards) {
      if (scan.finished(s.id)) {
        // A lock beside a record: its owner died between the two.
        if (scan.locked.count(s.id) && store_.ClearFinishedLock(s.id)) {
          Say("removed the leftover lock of finished " + s.id);
        }
        continue;
      }
      if (pending_ && pending_->attempt->claim.shard_id() == s.id) continue;
      if (scan.locked.count(s.id)) {
        if (!fs_now) fs_now = job_.FilesystemNowNanos();
        const std::optional<double> age = store_.LockAge(s.id, *fs_now);
        if (age && *age <= policy_.lease_secs) {
          search.held.push_back(s.id);
          continue;
        }
        if (age && store_.TakeOverStale(s.id, policy_.lease_secs)) {
          Say("took over stale lock of " + s.id);
        } else if (age) {
          search.held.push_back(s.id);
          continue;
        }
      }
      search.claim = store_.TryClaim(s.id);
      if (search.claim) return search;
      search.raced = true;
    }
    return search;
  }

  // Nothing running and nothing claimable: the job is terminal, unless a
  // listing was out of date.
  std::optional<WorkerEnd> JobEnd(const ShardScan& scan) {
    if (!scan.failed.empty()) {
      Say("job ended with " + std::to_string(scan.failed.size()) + " failed shard(s)");
      return WorkerEnd::kJobFailed;
    }
    if (scan.done.size() >= job_.manifest().shards.size()) {
      Say("every shard is done");
      return WorkerEnd::kJobComplete;
    }
    return std::nullopt;
  }

  // Sleeps up to the poll interval while other workers hold `held`, and wakes
  // early when the lock of one of the first few of them goes away (its shard
  // was finished, failed, handed back or taken over): the next scan may then
  // find work, or the end of the job. One stat per watched lock every quarter
  // second keeps the load on a shared filesystem low.
  void WaitForHeldShards(const std::vector<std::string>& held) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", policy_.poll_interval_secs);
    Say("waiting for " + std::to_string(held.size()) + " shard(s) held by other workers (" +
        held.front() + (held.size() > 1 ? ", ..." : "") + "); next look in " + secs +
        " s, or when one of them is released");
    const size_t watched = std::min<size_t>(held.size(), 8);
    SleepInterruptibly(policy_.poll_interval_secs, [&] {
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
    const Claim& claim = a.claim;
    const ShardEntry* shard = job_.FindShard(claim.shard_id());
    a.log.Line("claimed " + claim.shard_id() + " on " + HostName() + " pid " +
               std::to_string(::getpid()) + ", attempt " + std::to_string(claim.attempt_number()));
    a.heartbeat = std::make_unique<HeartbeatThread>(store_, claim, policy_.heartbeat_secs, &a.lost);
    a.start = MonotonicSeconds();
    std::string error;
    try {
      const std::string path = job_.InJob(shard->path);
      const io::InputCandidate input{path, path, shard->path};
      a.output = std::make_unique<io::OutputStream>(
          JobPaths::AttemptOutputPath(claim.attempt_dir()), true, job_.disk());
      a.output->HashContent();  // the done record's sha256, without reading the file again
      a.errors = std::make_unique<io::OutputStream>(
          JobPaths::AttemptErrorsPath(claim.attempt_dir()), true, job_.disk());
      exec::ExecOptions exec_options;
      exec_options.threads = threads_;
      exec_options.cancel = &a.lost;
      a.log.Line("running " + std::to_string(plan_->operators.size()) + " operator(s) with " +
                 std::to_string(threads_) + " thread(s) on " + shard->path);
      a.summary = exec::Execute(*plan_, {input}, *a.output, a.errors.get(), exec_options);
    } catch (const Error& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = std::string("internal error: ") + e.what();
    }
    if (error.empty()) return AttemptStatus::kRunning;
    a.heartbeat->Stop();
    a.output.reset();  // removes the temporary files
    a.errors.reset();
    if (StopRequested()) {
      a.log.Line("interrupted by a signal; handing the shard back");
      store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kInterrupted,
                              "interrupted by a signal");
      store_.Release(claim);
      return AttemptStatus::kInterrupted;
    }
    if (a.lost.load()) {
      a.log.Line("lost the claim (lease taken over); publishing nothing");
      store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kLost,
                              "claim lost while running");
      return AttemptStatus::kLost;
    }
    return Fail(a, error);
  }

  // Phase 4: commits a processed attempt's output and publishes its done
  // record under the claim's fencing. Runs on the background publisher.
  AttemptStatus Finish(Attempt& a) {
    const Claim& claim = a.claim;
    DoneRecord done;
    try {
      // processed.jsonl must be durable before a done record can name it; its
      // directory fsync also covers the errors file renamed just before.
      a.errors->Commit(/*durable=*/false);
      a.output->Commit();
      done.sha256 = a.output->ContentSha256();
      CrashPoint("after_output");
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
    done.seconds = MonotonicSeconds() - a.start;
    // The lease is kept until the record is out: the heartbeat stops after.
    const ClaimStore::PublishResult published = store_.PublishDone(claim, done);
    a.heartbeat->Stop();
    switch (published) {
      case ClaimStore::PublishResult::kPublished:
        a.log.Line("done: " + std::to_string(a.summary.rows_in) + " rows in, " +
                   std::to_string(a.summary.rows_out) + " out");
        store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kDone);
        return AttemptStatus::kDone;
      case ClaimStore::PublishResult::kAlreadyDone:
        a.log.Line("another attempt published this shard first");
        store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kSuperseded);
        return AttemptStatus::kSuperseded;
      case ClaimStore::PublishResult::kLost:
        break;
    }
    a.log.Line("lost the claim before publishing; publishing nothing");
    store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kLost,
                            "claim lost before publishing");
    return AttemptStatus::kLost;
  }

  // Marks a failed attempt, publishes the failed record when the retries are
  // used up, and releases the claim. kFailed, or kLost when the claim was gone.
  AttemptStatus Fail(Attempt& a, const std::string& error) {
    const Claim& claim = a.claim;
    a.log.Line("failed: " + error);
    store_.SetAttemptStatus(claim.attempt_dir(), AttemptStatus::kFailed, error);
    const int64_t failures = store_.CountFailures(claim.shard_id());
    std::optional<FailedRecord> failed;
    if (failures > policy_.max_retries) {
      a.log.Line("failure " + std::to_string(failures) + " exceeds max_retries " +
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

  // At most one attempt is finished (output committed, done record published)
  // in the background while the next shard is processed.
  void PublishInBackground(std::unique_ptr<Attempt> attempt) {
    Settle();
    Attempt* a = attempt.get();
    pending_ = Pending{std::move(attempt),
                       std::async(std::launch::async, [this, a] { return Finish(*a); })};
  }

  // Waits for the background publisher and reports its result.
  void Settle() {
    if (!pending_) return;
    Report(*pending_->attempt, pending_->result.get());
    pending_.reset();
  }

  void Report(const Attempt& a, AttemptStatus status) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", MonotonicSeconds() - a.start);
    if (status == AttemptStatus::kDone) {
      Say("finished " + a.claim.shard_id() + " in " + secs + " s");
      return;
    }
    Say(std::string(AttemptStatusName(status)) + " " + a.claim.shard_id() + " after " + secs +
        " s");
    if (status == AttemptStatus::kFailed) ++outcome_.shards_failed;
  }

  // A processed shard is still published before the worker returns.
  WorkerOutcome End(WorkerEnd end) {
    Settle();
    outcome_.end = end;
    return outcome_;
  }

  void Say(const std::string& s) const {
    if (options_.say) options_.say(me_ + ": " + s);
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
  std::unique_ptr<exec::Plan> plan_;
  int threads_ = 1;
  WorkerOutcome outcome_;
  std::optional<Pending> pending_;  // last: its publisher uses the members above
};

}  // namespace

WorkerOutcome RunWorker(const WorkerOptions& options) { return Worker(options).Run(); }

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
  }
  return kExitFailure;
}

}  // namespace djshard::store
