#include "djshard/coord/dlc.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/common/text.h"
#include "djshard/exec/stop_request.h"
#include "djshard/io/disk.h"
#include "djshard/io/sha256.h"
#include "djshard/store/job_summary.h"
#include "djshard/store/merge.h"
#include "djshard/store/prepare.h"
#include "djshard/store/status.h"
#include "djshard/store/worker.h"

namespace djshard::coord {

using nlohmann::json;

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
  void WriteResult(const std::string& name, const std::string& phase, const PhaseResult& r,
                   const std::string& message = "") {
    json j = {{"phase", phase},
              {"return_code", r.code},
              {"hostname", HostName()},
              {"finished_at", FormatUtcIso8601(NowNanos())},
              {"error", r.error.empty() ? json(nullptr) : json(r.error)}};
    if (!message.empty()) j["message"] = message;
    disk_.WriteAtomic(Path(name), j.dump(2) + "\n");
  }
  // Publishes the first failure (single writer through abort.lock).
  void Abort(const PhaseResult& failure) {
    if (Elect("abort.lock")) WriteResult("abort.json", "abort", failure);
  }
  std::optional<json> AbortRecord() const { return Read("abort.json"); }

 private:
  io::Disk& disk_;
  std::string dir_;
};

class DlcRun {
 public:
  DlcRun(const DlcOptions& o, const std::string& run_id)
      : o_(o),
        run_id_(run_id),
        disk_(o.disk != nullptr ? *o.disk : io::RealDisk()),
        job_(o.job_dir),
        coord_(job_, run_id, disk_) {}

  DlcOutcome Run() {
    // A run id that already finished returns its stored result at once.
    if (const std::optional<json> fin = coord_.Read("finalize-result.json")) {
      const int code = fin->value("return_code", kExitFailure);
      return {DlcEnd::kStoredResult, code,
              fin->value("message",
                         "stored result of run " + run_id_ + ": exit " + std::to_string(code))};
    }
    deadline_ = MonotonicSeconds() + o_.wait_timeout_secs;
    // `djshard stop` on the job ends this instance too, whatever its phase.
    const exec::StopWatcher stop_watch(
        job_.dir(),
        [this](const exec::StopRequest& r, JobStop level) {
          Say(std::string(level == JobStop::kForced ? "forced stop" : "stop") + " requested by " +
              r.hostname + ":" + std::to_string(r.pid) +
              (r.reason.empty() ? "" : " (" + r.reason + ")"));
        },
        disk_);
    if (std::optional<DlcOutcome> end = Prepare()) return *end;
    if (std::optional<DlcOutcome> end = Work()) return *end;
    if (std::optional<DlcOutcome> end = WaitForShards()) return *end;
    return Finalize();
  }

 private:
  // Phase 1: one prepare coordinator; the others wait for its result.
  std::optional<DlcOutcome> Prepare() {
    if (!coord_.Read("prepare-result.json") && coord_.Elect("prepare.lock")) {
      Say("elected as DLC prepare coordinator (" + HostName() + ")");
      const PhaseResult r = Capture([&] {
        store::PrepareRequest req;
        req.config_path = o_.config;
        req.dataset_path = o_.dataset_path;
        req.job_dir = job_.dir();
        req.num_shards = o_.num_shards;
        const store::PrepareOutcome out = store::Prepare(req, disk_);
        Say(out.already_prepared ? "Job is already prepared and unchanged: " + job_.dir()
                                 : "Prepared job " + out.manifest.job_id + ": " +
                                       std::to_string(out.manifest.total_rows) + " rows, " +
                                       std::to_string(out.manifest.num_shards) + " shards");
      });
      if (r.code == kExitStopped && JobStopRequested()) {
        // `djshard stop --force` is no result of the run: the election is
        // undone so that the same run id prepares again once it is cleared.
        disk_.Unlink(coord_.Path("prepare.lock"));
        return Stopped();
      }
      if (r.code != 0) Error(r.error);
      coord_.WriteResult("prepare-result.json", "prepare", r);
    }
    std::optional<json> prepared;
    if (std::optional<DlcOutcome> end = WaitForResult(
            "prepare-result.json", "the prepare coordinator", Waiting::kForPrepare, &prepared)) {
      return end;
    }
    if (const int code = prepared->value("return_code", kExitFailure); code != 0) {
      const json error = prepared->value("error", json(""));
      const std::string message = "prepare failed on " + prepared->value("hostname", "?") + ": " +
                                  (error.is_string() ? error.get<std::string>() : "");
      Error(message);
      return DlcOutcome{DlcEnd::kPrepareFailed, code, message};
    }
    return std::nullopt;
  }

  // Phase 2: a worker on this instance. The first failure aborts every
  // instance with its code.
  std::optional<DlcOutcome> Work() {
    store::WorkerOptions w;
    w.job_dir = job_.dir();
    if (o_.require_all_nodes) w.max_shards = (o_.num_shards + o_.nodes - 1) / o_.nodes;
    w.threads = o_.threads;
    w.poll_interval_secs = o_.poll_interval_secs;
    w.aborted = [&] { return coord_.AbortRecord().has_value(); };
    w.say = o_.worker_say;
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
      if (s.counts.failed > 0) {
        coord_.Abort({kExitFailure, std::to_string(s.counts.failed) + " shard(s) failed"});
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

  // Phase 4: one finalize coordinator verifies and merges; the others wait.
  DlcOutcome Finalize() {
    if (coord_.Elect("finalize.lock")) {
      Say("elected as DLC finalize coordinator (" + HostName() + ")");
      std::string message;
      const PhaseResult r = Capture([&] { message = VerifyAndMerge(); });
      if (r.code != 0) {
        Error(r.error);
        try {
          // Merge wrote "completed" when it succeeded; a failure is said here.
          store::WriteJobSummary(store::JobDir::Open(job_.dir(), disk_),
                                 store::SummaryUpdate{"failed", {}, false, r.error});
        } catch (const std::exception&) {
          // The finalize result carries the failure anyway.
        }
      }
      coord_.WriteResult("finalize-result.json", "finalize", r, message);
    }
    std::optional<json> fin;
    if (std::optional<DlcOutcome> end = WaitForResult(
            "finalize-result.json", "the finalize coordinator", Waiting::kForFinalize, &fin)) {
      return *end;
    }
    const int code = fin->value("return_code", kExitFailure);
    if (code != 0) {
      return {DlcEnd::kFinalizeFailed, code,
              "finalize failed on " + fin->value("hostname", std::string("?"))};
    }
    return {DlcEnd::kPassed, 0, fin->value("message", std::string())};
  }

  // Checks the node count before anything is merged, then merges (which
  // verifies every shard output) and re-reads the result. Returns the PASS line.
  std::string VerifyAndMerge() {
    const store::JobDir job = store::JobDir::Open(job_.dir(), disk_);
    const uint64_t expect_nodes = o_.require_all_nodes ? static_cast<uint64_t>(o_.nodes) : 1;
    std::set<std::string> owners;
    for (const store::ShardStatus& sh : store::ReadStatus(job).shards) owners.insert(sh.owner);
    if (owners.size() < expect_nodes) {
      throw djshard::Error(job.dir(), 0,
                           "shards were completed by " + std::to_string(owners.size()) +
                               " distinct node(s), expected " + std::to_string(expect_nodes),
                           "some instances did not take part; check their logs");
    }
    store::MergeRequest merge;
    merge.output = o_.output;
    merge.overwrite = true;
    const store::MergeOutcome merged = store::Merge(job, merge, disk_);
    store::CheckMergedOutput(merged);
    if (!merged.model_devices_warning.empty())
      std::fprintf(stderr, "WARNING: %s\n", merged.model_devices_warning.c_str());
    return store::PassLine(merged);
  }

  // The one wait loop: polls for a coordinator's result file until it
  // appears (into *result) or a stop. While prepare runs, nothing can abort
  // and the deadline applies; while finalize runs, an abort ends the wait and
  // the deadline does not (a long merge is no reason to give up).
  enum class Waiting { kForPrepare, kForFinalize };
  std::optional<DlcOutcome> WaitForResult(const std::string& name, const std::string& who,
                                          Waiting waiting, std::optional<json>* result) {
    for (*result = coord_.Read(name); !*result; *result = coord_.Read(name)) {
      if (Stopping()) return Stopped();
      if (waiting == Waiting::kForFinalize) {
        if (std::optional<DlcOutcome> end = AbortedIfAny()) return end;
      } else if (MonotonicSeconds() > deadline_) {
        throw djshard::Error("timed out waiting for " + who, "check its log");
      }
      SleepInterruptibly(o_.poll_interval_secs / 4);
    }
    return std::nullopt;
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

  void Say(const std::string& s) const {
    if (o_.say) o_.say(s);
  }
  void Error(const std::string& s) const {
    if (o_.error) o_.error(s);
  }

  const DlcOptions& o_;
  const std::string run_id_;
  io::Disk& disk_;
  const store::JobPaths job_;
  Coordination coord_;
  double deadline_ = 0;
};

}  // namespace

DlcOutcome RunDlc(const DlcOptions& o) {
  std::optional<std::string> run_id = o.run_id;
  if (!run_id) run_id = RunIdFromEnvironment();
  if (!run_id || run_id->empty()) {
    throw Error("no run id",
                "pass --run-id, or run under a launcher that sets PAI_JOB_ID, DLC_JOB_ID, JOB_ID, "
                "DJSHARD_RUN_ID, SLURM_JOB_ID, OMPI_MCA_ess_base_jobid or TORCHELASTIC_RUN_ID");
  }
  if (o.num_shards <= 0) throw Error("--num-shards must be greater than 0");
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
