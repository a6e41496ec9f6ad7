#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace djshard::store {

struct WorkerOptions {
  std::string job_dir;
  int64_t max_shards = 0;  // 0: until the job is finished
  int threads = 0;         // 0: every core
  bool allow_version_mismatch = false;
  // Overrides of the manifest's policy; nullopt keeps the job's value.
  std::optional<int64_t> lease_secs, heartbeat_secs, max_retries, poll_interval_secs;
  // Checked while waiting for other nodes: a non-zero value ends the worker
  // with that exit code (dlc's abort propagation).
  std::function<int()> abort_code;
  // Where the worker says which shard it took, finished or lost (stderr).
  std::function<void(const std::string&)> say;
};

// `djshard worker`: claims shards in manifest order under heartbeat leases,
// runs the job's recipe on each through the executor and publishes a done
// record (SPEC "worker"). Returns the exit code: 0 when every shard is done
// (or --max-shards was reached without a failed claim), 2 when the job ended
// with failed shards or a claim failed under --max-shards, 130/143 after
// SIGINT/SIGTERM (the running attempt handed back at once).
int RunWorker(const WorkerOptions& options);

}  // namespace djshard::store
