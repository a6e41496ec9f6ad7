#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "djshard/io/discover.h"
#include "djshard/io/disk.h"
#include "djshard/store/manifest.h"

namespace djshard::store {

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
