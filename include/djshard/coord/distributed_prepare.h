#pragma once

#include <cstdint>
#include <string>

#include "djshard/common/log.h"
#include "djshard/io/disk.h"
#include "djshard/store/prepare.h"
#include "djshard/store/prepare_scan.h"

namespace djshard::coord {

// A prepare that other nodes help with, outside dlc: `djshard prepare
// --distributed` leads it, and `djshard prepare-worker` on any node claims
// its scan tasks (and a copy job's shard write tasks) with the shard
// protocol's leased locks until the job is published. Their coordination
// directory is .<job>.dlc-coordination/prepare, beside the job dir.
struct DistributedPrepareOptions {
  uint64_t task_bytes = store::kDefaultScanTaskBytes;  // of input per scan task
  int threads = 0;                                     // per scan task; 0: every core
  // The claims this process makes: the preparer's lock, and each task's.
  double lease_secs = store::Policy{}.lease_secs;
  double heartbeat_secs = store::Policy{}.heartbeat_secs;
  double poll_interval_secs = 2;
  // prepare-worker: gives up when no preparer has been alive this long.
  double wait_timeout_secs = 3600;
  LogFunction log;           // progress lines
  io::Disk* disk = nullptr;  // nullptr: the real filesystem
};

// The preparer: claims the prepare's lock (taking a dead preparer's over:
// the scan tasks it finished are kept), runs store::Prepare with its scan and
// write tasks open to prepare-workers, works on them too, and publishes the
// result for the prepare-workers. While another preparer of the job lives,
// waits for it (and then finds the job prepared). Throws what Prepare throws.
store::PrepareOutcome PrepareWithHelpers(store::PrepareRequest req,
                                         const DistributedPrepareOptions& o);

struct PrepareHelperOutcome {
  size_t tasks = 0;  // the tasks this process ran
};

// A prepare-worker: runs tasks of the job's distributed prepare while its
// preparer lives, and waits while none does (for one to start, or a dead
// one to be started again); returns once the job is published (at once when
// it already is). Throws Error with the preparer's exit code and message
// when the prepare failed, after `wait_timeout_secs` without a live
// preparer, and when stopped; a task its filesystem failed goes back to the
// pool and ends this process with exit 75.
PrepareHelperOutcome HelpPrepare(const std::string& job_dir, const DistributedPrepareOptions& o);

}  // namespace djshard::coord
