#include "djshard/store/worker.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
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

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Names in a directory, without stat-ing each entry (one getdents pass).
std::set<std::string> ListNames(const std::string& dir, const std::string& suffix) {
  std::set<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.insert(name.substr(0, name.size() - suffix.size()));
    }
  }
  ::closedir(d);
  return names;
}

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

// Sleeps up to `secs` while other workers hold `held`, and wakes early when
// the lock of one of the first few of them goes away (its shard was finished,
// failed, handed back or taken over): the next scan may then find work, or
// the end of the job, without waiting out the poll interval. One stat per
// watched lock every quarter second keeps the load on a shared filesystem low.
void WaitForHeldShards(const JobDir& job, const std::vector<std::string>& held, double secs) {
  const size_t watched = std::min<size_t>(held.size(), 8);
  SleepInterruptibly(secs, [&] {
    for (size_t i = 0; i < watched; ++i) {
      struct stat st {};
      if (::stat(job.LockPath(held[i]).c_str(), &st) != 0) return true;
    }
    return false;
  });
}

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
        bool stopping = false;
        for (double left = interval; left > 0; left = next - MonotonicSeconds()) {
          pollfd pfd{wake_[0], POLLIN, 0};
          if (::poll(&pfd, 1, static_cast<int>(left * 1000) + 1) > 0) {
            stopping = true;
            break;
          }
        }
        if (stopping) break;
        bool ok = false;
        try {
          ok = store.Heartbeat(claim);
        } catch (const std::exception&) {
          ok = false;
        }
        if (!ok) {
          lost->store(true);
          break;
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

struct Effective {
  Policy policy;
  int threads;
};

void CheckCompatible(const JobDir& job, bool allow_mismatch) {
  const Manifest& m = job.manifest();
  const std::string ours = version();
  const std::string major_theirs = m.engine_version.substr(0, m.engine_version.find('.'));
  const std::string major_ours = ours.substr(0, ours.find('.'));
  if (!allow_mismatch && (m.engine_name != "djshard" || major_theirs != major_ours)) {
    throw Error(job.dir() + "/manifest.json", 0,
                "job was prepared by " + m.engine_name + " " + m.engine_version +
                    ", this worker is djshard " + ours,
                "use a matching djshard or pass --allow-version-mismatch");
  }
  const std::string recipe_path = job.dir() + "/" + m.recipe_snapshot_path;
  if (!allow_mismatch && io::Sha256OfFile(recipe_path) != m.recipe_sha256) {
    throw Error(recipe_path, 0, "recipe snapshot does not match the manifest's sha256",
                "the job's recipe.yaml was edited; prepare a new job or pass "
                "--allow-version-mismatch");
  }
}

// One claimed attempt: its claim, lease and outputs. The processing runs on
// the worker's thread (Process); committing the output and publishing the
// done record (Finish) may then run on another thread while the worker
// already processes its next shard.
struct Attempt {
  explicit Attempt(Claim c) : claim(std::move(c)), log(claim.attempt_dir() + "/process.log") {}

  Claim claim;
  AttemptLog log;
  std::atomic<bool> lost{false};
  std::unique_ptr<HeartbeatThread> heartbeat;
  std::unique_ptr<io::OutputStream> output, errors;
  exec::ExecSummary summary;
  double start = 0;
};

// Marks a failed attempt, publishes the failed record when the retries are
// used up, and releases the claim. Returns "failed", or "lost".
std::string FailAttempt(const JobDir& job, ClaimStore& store, Attempt& a, const Effective& eff,
                        const std::string& error) {
  const Claim& claim = a.claim;
  a.log.Line("failed: " + error);
  SetAttemptStatus(claim.attempt_dir(), "failed", error);
  const int64_t failures = CountFailures(job, claim.shard_id());
  std::string failed_json;
  if (failures > eff.policy.max_retries) {
    a.log.Line("failure " + std::to_string(failures) + " exceeds max_retries " +
               std::to_string(eff.policy.max_retries) + ": shard failed");
    failed_json = json({{"shard_id", claim.shard_id()},
                        {"status", "failed"},
                        {"failures", failures},
                        {"last_error", error},
                        {"last_attempt", claim.attempt_rel()},
                        {"last_log", claim.attempt_rel() + "/process.log"},
                        {"failed_at", FormatUtcIso8601(NowNanos())},
                        {"hostname", HostName()}})
                      .dump(2) +
                  "\n";
  }
  if (!store.Release(claim, failed_json)) {
    SetAttemptStatus(claim.attempt_dir(), "lost", error);
    return "lost";
  }
  return "failed";
}

// Runs the recipe over the claimed shard. Returns "processed" when the output
// is complete (Finish publishes it), else the attempt's final status:
// "failed", "lost" or "interrupted".
std::string ProcessAttempt(const JobDir& job, ClaimStore& store, Attempt& a, const Effective& eff,
                           std::unique_ptr<exec::Plan>* plan_cache) {
  const Manifest& m = job.manifest();
  const Claim& claim = a.claim;
  const ShardEntry* shard = job.FindShard(claim.shard_id());
  json record = json::parse(claim.lock_json());
  record["status"] = "running";
  record["input_path"] = shard->path;
  record["started_at"] = FormatUtcIso8601(NowNanos());
  io::RealDisk().WriteReplace(claim.attempt_dir() + "/attempt.json", record.dump(2) + "\n");
  a.log.Line("claimed " + claim.shard_id() + " on " + HostName() + " pid " +
             std::to_string(::getpid()) + ", attempt " + std::to_string(claim.attempt_number()));
  a.heartbeat = std::make_unique<HeartbeatThread>(
      store, claim, static_cast<double>(eff.policy.heartbeat_secs), &a.lost);
  a.start = MonotonicSeconds();
  std::string error;
  try {
    // The plan is built once per worker (operators may load models); a
    // failure to build it fails this attempt and is tried again next time.
    if (!*plan_cache) {
      const recipe::Recipe recipe = recipe::LoadRecipe(job.dir() + "/" + m.recipe_snapshot_path);
      *plan_cache =
          std::make_unique<exec::Plan>(exec::CompilePlan(recipe, ops::Registry::Global()));
    }
    const exec::Plan& plan = **plan_cache;
    io::InputCandidate input{job.dir() + "/" + shard->path, job.dir() + "/" + shard->path,
                             shard->path};
    a.output = std::make_unique<io::OutputStream>(claim.attempt_dir() + "/processed.jsonl", true);
    a.output->HashContent();  // the done record's sha256, without reading the file again
    a.errors = std::make_unique<io::OutputStream>(claim.attempt_dir() + "/errors.jsonl", true);
    exec::ExecOptions exec_options;
    exec_options.threads = eff.threads;
    exec_options.cancel = &a.lost;
    a.log.Line("running " + std::to_string(plan.operators.size()) + " operator(s) with " +
               std::to_string(eff.threads) + " thread(s) on " + shard->path);
    a.summary = exec::Execute(plan, {input}, *a.output, a.errors.get(), exec_options);
  } catch (const Error& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = std::string("internal error: ") + e.what();
  }
  if (error.empty()) return "processed";
  a.heartbeat->Stop();
  a.output.reset();  // removes the temporary files
  a.errors.reset();
  if (StopRequested()) {
    a.log.Line("interrupted by a signal; handing the shard back");
    SetAttemptStatus(claim.attempt_dir(), "interrupted", "interrupted by a signal");
    store.Release(claim);
    return "interrupted";
  }
  if (a.lost.load()) {
    a.log.Line("lost the claim (lease taken over); publishing nothing");
    SetAttemptStatus(claim.attempt_dir(), "lost", "claim lost while running");
    return "lost";
  }
  return FailAttempt(job, store, a, eff, error);
}

// Commits a processed attempt's output and publishes its done record under
// the claim's fencing. Returns "done", "superseded", "lost" or "failed".
std::string FinishAttempt(const JobDir& job, ClaimStore& store, Attempt& a, const Effective& eff) {
  const Claim& claim = a.claim;
  std::string output_sha256;
  try {
    // processed.jsonl must be durable before a done record can name it; its
    // directory fsync also covers the errors file renamed just before.
    a.errors->Commit(/*durable=*/false);
    a.output->Commit();
    output_sha256 = a.output->ContentSha256();
    CrashPoint("after_output");
  } catch (const std::exception& e) {
    a.heartbeat->Stop();
    return FailAttempt(job, store, a, eff, e.what());
  }
  const exec::ExecSummary& summary = a.summary;
  json op_stats = json::array();
  for (const exec::OperatorCounters& c : summary.operators) {
    op_stats.push_back({{"name", c.name},
                        {"rows_in", c.rows_in},
                        {"rows_out", c.rows_out},
                        {"errors", c.errors},
                        {"seconds", c.seconds}});
  }
  const json done = {
      {"shard_id", claim.shard_id()},
      {"status", "done"},
      {"completed_at", FormatUtcIso8601(NowNanos())},
      {"hostname", HostName()},
      {"pid", static_cast<int64_t>(::getpid())},
      {"token", claim.token()},
      {"attempt_number", claim.attempt_number()},
      {"output_path", claim.attempt_rel() + "/processed.jsonl"},
      {"rows", summary.rows_out},
      {"size_bytes", summary.bytes_out},
      {"sha256", output_sha256},
      {"engine", {{"name", "djshard"}, {"version", version()}, {"git_commit", git_commit()}}},
      {"op_stats", op_stats},
      {"seconds", MonotonicSeconds() - a.start}};
  // The lease is kept until the record is out: the heartbeat stops after.
  const ClaimStore::PublishResult published = store.PublishDone(claim, done.dump(2) + "\n");
  a.heartbeat->Stop();
  switch (published) {
    case ClaimStore::PublishResult::kPublished:
      a.log.Line("done: " + std::to_string(summary.rows_in) + " rows in, " +
                 std::to_string(summary.rows_out) + " out");
      SetAttemptStatus(claim.attempt_dir(), "done");
      return "done";
    case ClaimStore::PublishResult::kAlreadyDone:
      a.log.Line("another attempt published this shard first");
      SetAttemptStatus(claim.attempt_dir(), "superseded");
      return "superseded";
    case ClaimStore::PublishResult::kLost:
      break;
  }
  a.log.Line("lost the claim before publishing; publishing nothing");
  SetAttemptStatus(claim.attempt_dir(), "lost", "claim lost before publishing");
  return "lost";
}

}  // namespace

int RunWorker(const WorkerOptions& options) {
  const JobDir job = JobDir::Open(options.job_dir);
  CheckCompatible(job, options.allow_version_mismatch);
  const Manifest& m = job.manifest();
  Effective eff{m.policy, options.threads > 0 ? options.threads
                                              : static_cast<int>(std::max(
                                                    1u, std::thread::hardware_concurrency()))};
  if (options.lease_secs) eff.policy.lease_secs = *options.lease_secs;
  if (options.heartbeat_secs) eff.policy.heartbeat_secs = *options.heartbeat_secs;
  if (options.max_retries) eff.policy.max_retries = *options.max_retries;
  if (options.poll_interval_secs) eff.policy.poll_interval_secs = *options.poll_interval_secs;
  const auto say = [&](const std::string& s) {
    if (options.say) options.say(s);
  };
  const std::string me = HostName() + ":" + std::to_string(::getpid());

  ClaimStore store(job);
  std::unique_ptr<exec::Plan> plan;
  int64_t taken = 0;
  bool claim_failed = false;

  // At most one attempt is being finished (output committed, done record
  // published) in the background while the next shard is processed.
  struct Pending {
    std::unique_ptr<Attempt> attempt;
    std::future<std::string> result;
  };
  std::optional<Pending> pending;
  const auto report = [&](const Attempt& a, const std::string& result) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", MonotonicSeconds() - a.start);
    if (result == "done") {
      say(me + ": finished " + a.claim.shard_id() + " in " + secs + " s");
    } else {
      say(me + ": " + result + " " + a.claim.shard_id() + " after " + secs + " s");
      if (result == "failed") claim_failed = true;
    }
  };
  const auto settle = [&]() {
    if (!pending) return;
    report(*pending->attempt, pending->result.get());
    pending.reset();
  };

  for (;;) {
    if (StopRequested()) {
      settle();  // a processed shard is still published
      return StopExitCode();
    }
    if (options.abort_code) {
      if (const int code = options.abort_code(); code != 0) {
        settle();
        return code;
      }
    }
    CrashPoint("before_claim");
    // One scan: three directory listings, then a stat only for locked shards.
    const std::set<std::string> done = ListNames(job.StateDir() + "/done", ".json");
    const std::set<std::string> failed = ListNames(job.StateDir() + "/failed", ".json");
    const std::set<std::string> locked = ListNames(job.StateDir() + "/locks", ".lock");
    std::optional<Claim> claim;
    std::vector<std::string> held;
    std::optional<int64_t> fs_now;
    bool raced = false;  // a shard changed between the listing and its claim
    for (const ShardEntry& s : m.shards) {
      if (done.count(s.id) || failed.count(s.id)) {
        // A lock beside a record: its owner died between the two.
        if (locked.count(s.id) && store.ClearFinishedLock(s.id)) {
          say(me + ": removed the leftover lock of finished " + s.id);
        }
        continue;
      }
      if (pending && pending->attempt->claim.shard_id() == s.id) continue;
      if (locked.count(s.id)) {
        if (!fs_now) fs_now = job.FilesystemNowNanos();
        const std::optional<double> age = store.LockAge(s.id, *fs_now);
        if (age && *age <= static_cast<double>(eff.policy.lease_secs)) {
          held.push_back(s.id);
          continue;
        }
        if (age && store.TakeOverStale(s.id, static_cast<double>(eff.policy.lease_secs))) {
          say(me + ": took over stale lock of " + s.id);
        } else if (age) {
          held.push_back(s.id);
          continue;
        }
      }
      claim = store.TryClaim(s.id);
      if (claim) break;
      raced = true;
    }
    if (!claim) {
      if (pending) {
        // Our own last shard is the one left: publish it, then look again.
        settle();
        continue;
      }
      if (raced) {
        // Another worker took or finished a shard since the listing: look again shortly.
        SleepInterruptibly(0.1);
        continue;
      }
      if (held.empty()) {
        // Nothing running, nothing claimable: the job is terminal.
        if (!failed.empty()) {
          say(me + ": job ended with " + std::to_string(failed.size()) + " failed shard(s)");
          return kExitFailure;
        }
        if (done.size() >= m.shards.size()) {
          say(me + ": every shard is done");
          return kExitOk;
        }
        // A lock vanished between its listing and its stat: look again shortly.
        SleepInterruptibly(0.1);
        continue;
      }
      say(me + ": waiting for " + std::to_string(held.size()) +
          " shard(s) held by other workers (" + held.front() + (held.size() > 1 ? ", ..." : "") +
          "); next look in " + std::to_string(eff.policy.poll_interval_secs) +
          " s, or when one of them is released");
      WaitForHeldShards(job, held, static_cast<double>(eff.policy.poll_interval_secs));
      continue;
    }
    CrashPoint("after_claim");
    fs::create_directories(claim->attempt_dir());
    auto attempt = std::make_unique<Attempt>(std::move(*claim));
    say(me + ": took " + attempt->claim.shard_id() + " (attempt " +
        std::to_string(attempt->claim.attempt_number()) + ")");
    const std::string result = ProcessAttempt(job, store, *attempt, eff, &plan);
    ++taken;
    if (result == "processed") {
      settle();
      Attempt* a = attempt.get();
      pending = Pending{std::move(attempt), std::async(std::launch::async, [&job, &store, a, &eff] {
                          return FinishAttempt(job, store, *a, eff);
                        })};
    } else if (result == "interrupted") {
      settle();
      say(me + ": interrupted; handed " + attempt->claim.shard_id() + " back");
      return StopExitCode();
    } else {
      report(*attempt, result);
    }
    if (options.max_shards > 0 && taken >= options.max_shards) {
      settle();
      return claim_failed ? kExitFailure : kExitOk;
    }
  }
}

}  // namespace djshard::store
