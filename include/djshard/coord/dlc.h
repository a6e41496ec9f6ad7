#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "djshard/common/log.h"
#include "djshard/io/disk.h"
#include "djshard/store/manifest.h"
#include "djshard/store/prepare_scan.h"

namespace djshard::coord {

// The first non-empty run id of a launcher's environment: PAI_JOB_ID,
// DLC_JOB_ID, JOB_ID, DJSHARD_RUN_ID, SLURM_JOB_ID, OMPI_MCA_ess_base_jobid,
// TORCHELASTIC_RUN_ID. nullopt when none is set.
std::optional<std::string> RunIdFromEnvironment();

struct DlcOptions {
  std::string job_dir;
  std::string config;
  std::optional<std::string> dataset_path;
  int64_t nodes = 0;  // 0: unknown
  int64_t num_shards = 4;
  store::ShardsMode shards_mode = store::ShardsMode::kCopy;
  store::OutputLayout layout = store::OutputLayout::kFile;
  bool require_all_nodes = false;
  // When `nodes` is not 1, every instance works on prepare and merge: a
  // reference job's input is scanned in tasks of `task_bytes` of input
  // (store/prepare_scan.h), and a file-layout output is copied in tasks of
  // about `task_bytes` of output (store/merge_copy.h).
  uint64_t task_bytes = store::kDefaultScanTaskBytes;
  // Also compute the merged file's plain SHA-256 after a distributed merge
  // (one serial read of the file); a merge on one node always has it.
  bool sha256 = false;
  std::string output;  // empty: <job-dir>/merged.jsonl
  std::optional<std::string> run_id;
  // Bounds only waits that cannot make progress: a stale coordinator that
  // cannot be taken over, shards that never finish. A live coordinator is
  // waited for without bound.
  double wait_timeout_secs = 86400;
  double poll_interval_secs = 2;
  // The lease policy of the job it prepares and of its coordinator claims
  // (prepare.lock, finalize.lock); unset: Policy's defaults.
  std::optional<double> lease_secs, heartbeat_secs;
  std::optional<int> threads;   // else the recipe's np, else num_proc, else every core
  LogFunction log;              // progress lines, and this instance's errors (level kError)
  LogFunction worker_log;       // the embedded worker's lines
  LogFileOpener open_log_file;  // its attempts' process.log; unset: plain text
  // The filesystem of the job and coordination directories; tests pass one
  // that fails on command. nullptr: the real one.
  io::Disk* disk = nullptr;
};

// How an instance of `djshard dlc` ended.
enum class DlcEnd {
  kPassed,          // finalize verified and merged the job (message: the PASS line)
  kStoredResult,    // the run id had finished before: its stored result
  kPrepareFailed,   // the prepare coordinator failed
  kAborted,         // an instance (maybe this one) published a failure
  kFinalizeFailed,  // the finalize coordinator failed
  kStopped,         // SIGINT/SIGTERM, or `djshard stop` (exit 3)
};

struct DlcOutcome {
  DlcEnd end = DlcEnd::kPassed;
  // The exit code every instance of the run agrees on: the coordination files
  // carry it from the instance where it arose (SPEC "dlc").
  int exit_code = 0;
  std::string message;  // the PASS line, or what failed and where
};

// The scan and copy tasks of every dlc run of the job dir now in progress,
// one line per phase ("dlc prepare: 3 of 7 scan tasks done; running: ..."),
// and those of a `djshard prepare --distributed` ("prepare: ..."), for
// `status` and `monitor`; empty when none.
std::vector<std::string> DlcTaskProgress(const std::string& job_dir);

// `djshard dlc`: the same command on every instance of a launcher (PAI-DLC,
// mpirun, srun, a Kubernetes indexed job). Instances elect one prepare and
// one finalize coordinator through leased claims in a coordination directory
// beside the job (heartbeat, fencing, takeover of a stale one, which runs the
// phase again from the start), run workers in between, propagate the first
// failure to every instance, and all end with the same code (SPEC "dlc").
// Throws Error for a request that cannot start (no run id, a bad
// --nodes/--num-shards/--lease-secs), or when a wait made no progress for
// --wait-timeout-secs (exit 2; 75 when the shared filesystem failed).
DlcOutcome RunDlc(const DlcOptions& options);

}  // namespace djshard::coord
