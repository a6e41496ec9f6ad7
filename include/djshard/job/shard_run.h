#pragma once

// What an elastic job's worker runs of the run-job machinery: a shard as a
// partition set with checkpoints (SPEC-checkpoints §7), and model preflight
// shared by the job's workers (SPEC-checkpoints §10.5). The worker keeps its
// claims, leases and records (store); it reaches them from here only through
// the callbacks of ShardAttempt.
#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/exec/executor.h"
#include "djshard/exec/plan.h"
#include "djshard/io/checksum.h"
#include "djshard/io/discover.h"
#include "djshard/io/disk.h"
#include "djshard/io/output.h"
#include "djshard/job/checkpoint.h"
#include "djshard/job/job_files.h"
#include "djshard/recipe/recipe.h"

namespace djshard::job {

// What every checkpointed shard of a worker process shares.
struct ShardCheckpoints {
  const recipe::Recipe* recipe = nullptr;
  const exec::Plan* plan = nullptr;
  JobSettings settings;
  std::vector<size_t> taps;  // TapPositions
  std::string job_id;
  std::string engine_version;  // the job's: a commit another version made is rejected
  std::string config_sha256;   // the recipe snapshot's
  int threads = 1;
  EventLog* events = nullptr;
  io::Disk* disk = nullptr;
};

// One claimed attempt at a shard, as the manifest and the claim describe it.
struct ShardAttempt {
  std::string shard_id;
  std::string shard_path;  // as the manifest names it, for messages
  uint64_t rows = 0, size_bytes = 0;
  io::Checksum checksum;  // the manifest's
  io::InputCandidate input;
  std::string checkpoints;  // the shard's checkpoint directory
  std::string token;        // the attempt's: in every file it writes
  // Set by the worker's heartbeat when the claim was lost (the partitions
  // stop); set here when a fenced step finds it lost.
  std::atomic<bool>* lost = nullptr;
  // Runs `fn` under the claim's fence; false, without running it, when the
  // claim is lost.
  std::function<bool(const std::function<void()>& fn)> as_owner;
  // The partitions ({total, resumed, computed}) and the commits resumed from,
  // once they are known (the attempt's record).
  std::function<void(const nlohmann::json& partitions, const nlohmann::json& resumed_from)>
      record_partitions;
  // A line of the attempt's log.
  std::function<void(const std::string& event, const std::string& text)> log;
};

struct ShardRunResult {
  exec::ExecSummary summary;
  nlohmann::json partitions;  // {total, resumed, computed}
};

// Runs a checkpointed shard into `output` and `errors` (neither is
// committed): checks the shard file against the manifest, publishes or reads
// partitioning_info.json, verifies the commits earlier attempts left (a
// commit that fails moves into rejected/ with a checkpoint_rejected event),
// removes data files no commit names, then runs each partition from where
// its newest valid commit stands, committing taps under the claim's fence;
// the output is the final taps, in order. A stop request starts no more
// partitions. Throws on any error; sets *attempt.lost when the claim was lost.
ShardRunResult RunCheckpointedShard(const ShardCheckpoints& checkpoints,
                                    const ShardAttempt& attempt, io::OutputStream& output,
                                    io::OutputStream& errors);

// What a worker knows when it runs model preflight.
struct ShardPreflightRequest {
  const recipe::Recipe* recipe = nullptr;
  const exec::Plan* plan = nullptr;
  JobSettings settings;
  std::vector<std::string> inputs;  // every shard file, in manifest order
  std::string job_dir;
  io::Disk* disk = nullptr;
  int threads = 1;
  bool threads_explicit = false;  // given by --threads, np or num_proc
  double lease_secs = 60, heartbeat_secs = 10, poll_secs = 0.25;  // of the shared probe records
  EventLog* events = nullptr;
  // Called while probes run or wait: throws to end preflight.
  std::function<void()> check_stop;
  std::function<void(const std::string&)> say;  // lines while preflight waits
};

// What preflight decided for this worker.
struct ShardPreflight {
  bool has_model_ops = false;
  int threads = 1;  // the executor threads after the plan (ThreadsAfterPlan)
  // This node's replica plan for every attempt.json it starts (without
  // hostname, pid and threads); null without model operators.
  nlohmann::json plan_fields;
  std::vector<std::string> printout;  // lines for the user, before any claim
};

// Probes every model operator once across the job's workers (probe/<key>.json,
// one prober per key) and plans this node's replicas. Throws Error (exit 2)
// as RunPreflight does, and what check_stop throws.
ShardPreflight RunShardPreflight(const ShardPreflightRequest& request);

}  // namespace djshard::job
