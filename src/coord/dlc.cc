#include "djshard/coord/dlc.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/common/text.h"
#include "djshard/io/disk.h"
#include "djshard/io/sha256.h"
#include "djshard/store/merge.h"
#include "djshard/store/prepare.h"
#include "djshard/store/status.h"
#include "djshard/store/worker.h"

namespace djshard::coord {

namespace fs = std::filesystem;
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

// The coordination directory of one run id: elections, results, abort.
class Coordination {
 public:
  Coordination(const std::string& job_dir, const std::string& run_id) {
    const fs::path job(job_dir);
    io::Sha256 h;
    h.Update(run_id);
    dir_ = (job.parent_path() / ("." + job.filename().string() + ".dlc-coordination") /
            h.HexDigest().substr(0, 20))
               .string();
    fs::create_directories(dir_);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  bool Elect(const std::string& lock_name) {
    const json who = {{"hostname", HostName()},
                      {"pid", static_cast<int64_t>(::getpid())},
                      {"at", FormatUtcIso8601(NowNanos())}};
    return io::RealDisk().CreateExclusive(Path(lock_name), who.dump() + "\n");
  }
  std::optional<json> Read(const std::string& name) const {
    std::error_code ec;
    if (!fs::exists(Path(name), ec)) return std::nullopt;
    try {
      return json::parse(io::ReadFile(Path(name)));
    } catch (const std::exception&) {
      return std::nullopt;  // being written: WriteAtomic makes this transient
    }
  }
  void WriteResult(const std::string& name, const std::string& phase, int code,
                   const std::string& error, const std::string& message = "") {
    json r = {{"phase", phase},
              {"return_code", code},
              {"hostname", HostName()},
              {"finished_at", FormatUtcIso8601(NowNanos())},
              {"error", error.empty() ? json(nullptr) : json(error)}};
    if (!message.empty()) r["message"] = message;
    io::RealDisk().WriteAtomic(Path(name), r.dump(2) + "\n");
  }
  // Publishes the first failure (single writer through abort.lock).
  void Abort(int code, const std::string& error) {
    if (Elect("abort.lock")) WriteResult("abort.json", "abort", code, error);
  }
  int AbortCode() const {
    const std::optional<json> a = Read("abort.json");
    return a ? a->value("return_code", kExitFailure) : 0;
  }

 private:
  std::string dir_;
};

}  // namespace

int RunDlc(const DlcOptions& o) {
  const auto say = [&](const std::string& s) {
    if (o.say) o.say(s);
  };
  std::optional<std::string> run_id = o.run_id;
  if (!run_id) run_id = RunIdFromEnvironment();
  if (!run_id || run_id->empty()) {
    throw Error("no run id",
                "pass --run-id, or run under a launcher that sets PAI_JOB_ID, DLC_JOB_ID, JOB_ID, "
                "DJSHARD_RUN_ID, SLURM_JOB_ID, OMPI_MCA_ess_base_jobid or TORCHELASTIC_RUN_ID");
  }
  if (o.num_shards <= 0) throw Error("--num-shards must be greater than 0");
  int64_t cap = 0;
  if (o.require_all_nodes) {
    if (o.nodes <= 0) throw Error("--require-all-nodes needs --nodes", "say how many nodes run");
    cap = (o.num_shards + o.nodes - 1) / o.nodes;
    if (o.num_shards < o.nodes || (o.nodes - 1) * cap >= o.num_shards) {
      throw Error("strict mode cannot give every one of " + std::to_string(o.nodes) +
                      " nodes a shard with --num-shards " + std::to_string(o.num_shards),
                  "use at least as many shards as nodes, e.g. a multiple of --nodes");
    }
  }
  const std::string job_dir = fs::absolute(o.job_dir).lexically_normal().string();
  Coordination coord(job_dir, *run_id);

  // A run id that already finished returns its stored result at once.
  if (const std::optional<json> fin = coord.Read("finalize-result.json")) {
    const int code = fin->value("return_code", kExitFailure);
    say(fin->value("message",
                   "stored result of run " + *run_id + ": exit " + std::to_string(code)));
    return code;
  }
  const double deadline = MonotonicSeconds() + static_cast<double>(o.wait_timeout_secs);

  // 1. Prepare: one coordinator, the others wait for its result.
  std::optional<json> prepared = coord.Read("prepare-result.json");
  if (!prepared && coord.Elect("prepare.lock")) {
    say("elected as DLC prepare coordinator (" + HostName() + ")");
    int code = 0;
    std::string error;
    try {
      store::PrepareRequest req;
      req.config_path = o.config;
      req.dataset_path = o.dataset_path;
      req.job_dir = job_dir;
      req.num_shards = o.num_shards;
      const store::PrepareOutcome out = store::Prepare(req);
      say(out.already_prepared ? "Job is already prepared and unchanged: " + job_dir
                               : "Prepared job " + out.manifest.job_id + ": " +
                                     std::to_string(out.manifest.total_rows) + " rows, " +
                                     std::to_string(out.manifest.num_shards) + " shards");
    } catch (const Error& e) {
      code = e.code();
      error = e.what();
      std::fprintf(stderr, "ERROR: %s\n", e.what());
    }
    coord.WriteResult("prepare-result.json", "prepare", code, error);
    prepared = coord.Read("prepare-result.json");
  }
  while (!prepared) {
    if (StopRequested()) return StopExitCode();
    if (MonotonicSeconds() > deadline) {
      throw Error("timed out waiting for the prepare coordinator", "check its log");
    }
    SleepInterruptibly(static_cast<double>(o.poll_interval_secs) / 4);
    prepared = coord.Read("prepare-result.json");
  }
  if (const int code = prepared->value("return_code", kExitFailure); code != 0) {
    std::fprintf(stderr, "ERROR: prepare failed on %s: %s\n",
                 prepared->value("hostname", "?").c_str(),
                 prepared->value("error", json("")).is_string()
                     ? prepared->value("error", std::string()).c_str()
                     : "");
    return code;
  }

  // 2. Workers. The first failure aborts every instance with its code.
  store::WorkerOptions w;
  w.job_dir = job_dir;
  w.max_shards = cap;
  w.threads = o.threads;
  w.poll_interval_secs = o.poll_interval_secs;
  w.abort_code = [&] { return coord.AbortCode(); };
  w.say = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  int code = 0;
  std::string error;
  try {
    code = store::RunWorker(w);
  } catch (const Error& e) {
    code = e.code();
    error = e.what();
    std::fprintf(stderr, "ERROR: %s\n", e.what());
  }
  if (code == kExitInterrupted || code == kExitTerminated) return code;
  if (const int abort = coord.AbortCode(); abort != 0) return abort;
  if (code != 0) {
    coord.Abort(code, error.empty() ? "worker on " + HostName() + " exited " + std::to_string(code)
                                    : error);
    return coord.AbortCode();
  }

  // 3. Wait until every shard is done.
  const store::JobDir job = store::JobDir::Open(job_dir);
  for (;;) {
    if (StopRequested()) return StopExitCode();
    if (const int abort = coord.AbortCode(); abort != 0) return abort;
    const store::JobStatus s = store::ReadStatus(job);
    if (s.counts.failed > 0) {
      coord.Abort(kExitFailure, std::to_string(s.counts.failed) + " shard(s) failed");
      return coord.AbortCode();
    }
    if (s.complete()) break;
    if (MonotonicSeconds() > deadline) {
      coord.Abort(kExitFailure, "timed out waiting for shards: " + s.SummaryLine());
      return coord.AbortCode();
    }
    SleepInterruptibly(static_cast<double>(o.poll_interval_secs));
  }

  // 4. Finalize: one coordinator verifies and merges; the others wait.
  if (coord.Elect("finalize.lock")) {
    say("elected as DLC finalize coordinator (" + HostName() + ")");
    int fcode = 0;
    std::string ferror, message;
    try {
      const uint64_t expect_nodes = o.require_all_nodes ? static_cast<uint64_t>(o.nodes) : 1;
      // The node count is checked before anything is merged.
      std::set<std::string> owners;
      for (const store::ShardStatus& sh : store::ReadStatus(job).shards) owners.insert(sh.owner);
      if (owners.size() < expect_nodes) {
        throw Error(job_dir, 0,
                    "shards were completed by " + std::to_string(owners.size()) +
                        " distinct node(s), expected " + std::to_string(expect_nodes),
                    "some instances did not take part; check their logs");
      }
      store::MergeRequest merge;
      merge.output = o.output;
      merge.overwrite = true;
      // Merge verifies every shard output; what is left is re-reading the result.
      const store::MergeOutcome merged = store::Merge(job, merge);
      store::CheckMergedOutput(merged);
      message = store::PassLine(merged);
    } catch (const Error& e) {
      fcode = e.code();
      ferror = e.what();
      std::fprintf(stderr, "ERROR: %s\n", e.what());
    }
    coord.WriteResult("finalize-result.json", "finalize", fcode, ferror, message);
  }
  std::optional<json> fin = coord.Read("finalize-result.json");
  while (!fin) {
    if (StopRequested()) return StopExitCode();
    if (const int abort = coord.AbortCode(); abort != 0) return abort;
    SleepInterruptibly(static_cast<double>(o.poll_interval_secs) / 4);
    fin = coord.Read("finalize-result.json");
  }
  const int fcode = fin->value("return_code", kExitFailure);
  if (fcode == 0) say(fin->value("message", std::string()));
  return fcode;
}

}  // namespace djshard::coord
