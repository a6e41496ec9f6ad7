#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace djshard::exec {

// What `djshard gc` found (and removed, unless dry_run) in a run job.
struct GcResult {
  std::string job_id, job_dir, checkpoint_dir;
  std::vector<std::string> removed;  // absolute paths
  uint64_t bytes = 0;
  uint64_t commits_kept = 0;
};

// Removes the garbage of a run job that is not running (SPEC-checkpoints §5):
// checkpoint data and errors files that no commit record names, and the temp
// files of writers that died ("*.tmp.*") in the job and checkpoint dirs.
// Commit records, the files they name and rejected/ are never touched. Throws
// Error when the job has a fresh heartbeat (it may still be writing) or when
// `job_dir` is not a run job.
GcResult CollectGarbage(const std::string& job_dir, bool dry_run);

}  // namespace djshard::exec
