#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "djshard/io/discover.h"
#include "djshard/io/disk.h"
#include "djshard/store/manifest.h"
#include "djshard/store/prepare_scan.h"

namespace djshard::store {

// How a distributed prepare runs its tasks (store/prepare_scan.h).
struct DistributedScan {
  uint64_t task_bytes = kDefaultScanTaskBytes;
  // Gets the plan and returns every task's result, in task order (dlc runs
  // the tasks on every instance). Unset: prepare scans the input itself.
  std::function<std::vector<ScanTaskResult>(const ScanPlan&)> run;
  // A copy job's shard files: gets the plan and returns every write task's
  // result, in task order, each shard's "file" an absolute path. Unset: a
  // copy job is prepared on this node.
  std::function<std::vector<nlohmann::json>(const ShardWritePlan&)> write;
  // Where the write tasks find the input's check blocks: a directory that a
  // coordinator taking over finds again (so that it plans the same write
  // tasks and keeps those done), on the job dir's filesystem.
  std::string blocks_root;
};

struct PrepareRequest {
  std::string config_path;
  std::optional<std::string> dataset_path;  // overrides the recipe's dataset_path
  std::string job_dir;
  int64_t num_shards = 0;
  Policy policy;
  int threads = 0;  // validating and normalizing; 0: every core
  // kReference: the job holds no copy of the data, each shard is byte ranges
  // of the input files (copy when an input is compressed, with a warning).
  ShardsMode shards_mode = ShardsMode::kCopy;
  // kParts: workers record each output's SHA-256 for merge's parts layout.
  OutputLayout output_layout = OutputLayout::kFile;
  // Names the staging directory (.<job>.preparing.<tag>), so that whoever
  // takes over a dead preparer can remove it (dlc passes its coordinator
  // claim's token). Empty: a random tag.
  std::string staging_tag;
  // Set: a job whose records get no index keys and whose input is not
  // compressed is scanned by distributed tasks and cut from their results;
  // a copy job's shard files are then written by distributed tasks too.
  DistributedScan distributed_scan;
};

struct PrepareOutcome {
  bool already_prepared = false;  // an identical job existed; nothing was written
  std::string job_dir;            // absolute
  Manifest manifest;
};

// Validates the request and the whole input, cuts it into byte-balanced
// shards and publishes the job directory with one rename (SPEC "prepare").
// Throws Error (exit 2) with nothing published on any problem.
PrepareOutcome Prepare(const PrepareRequest& request, io::Disk& disk = io::RealDisk());

}  // namespace djshard::store
