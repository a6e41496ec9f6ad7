#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "djshard/io/disk.h"
#include "djshard/store/manifest.h"

namespace djshard::store {

struct PrepareRequest {
  std::string config_path;
  std::optional<std::string> dataset_path;  // overrides the recipe's dataset_path
  std::string job_dir;
  int64_t num_shards = 0;
  Policy policy;
};

struct PrepareOutcome {
  bool already_prepared = false;  // an identical job existed; nothing was written
  std::string job_dir;            // absolute
  Manifest manifest;
};

// One JSONL input file found under the dataset path.
struct InputCandidate {
  std::string path;           // absolute
  std::string display_path;   // as the user would name it in an error
  std::string relative_path;  // to the dataset directory (the file name for a file)
};

// A single file, or every file below a directory (recursively, hidden ones
// too) whose name ends in .jsonl, .jsonl.gz or .jsonl.zst (any case), sorted
// by relative path in byte order.
std::vector<InputCandidate> DiscoverInputs(const std::string& dataset_path,
                                           const std::string& display_root);

// Validates the request and the whole input, cuts it into byte-balanced
// shards and publishes the job directory with one rename (SPEC "prepare").
// Throws Error (exit 2) with nothing published on any problem.
PrepareOutcome Prepare(const PrepareRequest& request, io::Disk& disk = io::RealDisk());

}  // namespace djshard::store
