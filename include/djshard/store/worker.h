#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "djshard/common/log.h"
#include "djshard/io/disk.h"

namespace djshard::store {

struct WorkerOptions {
  std::string job_dir;
  int64_t max_shards = 0;      // 0: until the job is finished
  std::optional<int> threads;  // else the recipe's np, else num_proc, else every core
  bool allow_version_mismatch = false;
  // Overrides of the manifest's policy; nullopt keeps the job's value.
  std::optional<double> lease_secs, heartbeat_secs, poll_interval_secs, retry_backoff_secs;
  std::optional<int64_t> max_retries;
  // Asked between shards and while waiting for other nodes: true ends the
  // worker at once (dlc's abort propagation).
  std::function<bool()> aborted;
  // Where the worker says which shard it took, finished or lost.
  LogFunction log;
  // Opens each attempt's process.log; unset: plain text lines.
  LogFileOpener open_log_file;
  // The filesystem of the job directory; tests pass one that fails on command.
  io::Disk* disk = nullptr;  // nullptr: the real one
};

// How a worker ended.
enum class WorkerEnd {
  kJobComplete,  // every shard of the job is done
  kJobFailed,    // the job ended with failed shards
  kMaxShards,    // --max-shards reached, no claim of this worker failed
  kClaimFailed,  // --max-shards reached, a claim of this worker failed
  // SIGINT/SIGTERM or `djshard stop`: nothing more was claimed, and the
  // running attempt was finished (graceful stop) or handed back "interrupted"
  kStopped,
  kAborted,  // options.aborted said so
  // The job directory's filesystem failed (full, read-only, I/O error): the
  // attempt was handed back as "interrupted"; outcome.error says why.
  kFilesystemFailed,
};

struct WorkerOutcome {
  WorkerEnd end = WorkerEnd::kJobComplete;
  int64_t shards_taken = 0;   // claims made by this worker
  int64_t shards_failed = 0;  // of which failed
  std::string error;          // kFilesystemFailed: the path and the error
};

// `djshard worker`: claims shards in manifest order under heartbeat leases,
// runs the job's recipe on each through the executor and publishes a done
// record (SPEC "worker"). The recipe is compiled before any claim: a job this
// build cannot run throws Error without touching a shard. A failure of the job
// directory's filesystem (Error::IsInfrastructure) is not the shard's: the
// attempt is handed back as "interrupted" and the worker ends with
// kFilesystemFailed. On any other error every claim is handed back before the
// Error is thrown. A job with a stop request is refused (Error, exit 3); one
// requested while it runs is seen within kStopPollSecs (SPEC-checkpoints §9).
// Each worker process appends its events to its own
// events_<ts>_<host>_<pid>.jsonl in the job directory.
WorkerOutcome RunWorker(const WorkerOptions& options);

// The exit code SPEC "worker" gives an outcome: 0 for kJobComplete and
// kMaxShards, 2 for kJobFailed and kClaimFailed, 130/143 for kStopped by a
// signal, 3 for kStopped by `djshard stop`, 75 for kFilesystemFailed. kAborted has no code of its
// own: its caller knows why.
int WorkerExitCode(const WorkerOutcome& outcome);

}  // namespace djshard::store
