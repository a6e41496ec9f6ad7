#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "djshard/io/disk.h"

namespace djshard::store {

// What `djshard gc` found (and removed, unless dry_run) in a job.
struct GcResult {
  std::string job_id, job_dir, checkpoint_dir;
  std::vector<std::string> removed;  // absolute paths
  uint64_t bytes = 0;
  uint64_t commits_kept = 0;
  // Elastic jobs: shards whose checkpoints were left alone because a live
  // attempt holds them (a fresh lock).
  std::vector<std::string> skipped_shards;
  // Elastic jobs: what of probe/ was left alone, and why ("<path>: <why>").
  std::vector<std::string> skipped_probe;
};

// Removes the garbage of a job (SPEC-checkpoints §5): checkpoint data and
// errors files and gather-journal segment data (SPEC-lineage §6) that no
// commit record names, the journals (records, then data) of partitions whose
// final tap is committed, and the temporary files ("*.tmp.*") of writers that
// died. Tap commit records, the files they name and rejected/ are never
// touched.
// - A run job: its checkpoint dir, and temporary files in the job dir and
//   metadata/. Throws Error when its heartbeat is fresh (the run may still be
//   writing).
// - An elastic job: checkpoints/<shard>/ of every shard that no live attempt
//   holds (its lock missing or older than the lease); the protocol's own
//   files are left to the workers. In probe/: the work.<host>.<pid>/
//   directories of workers of this host that are gone (but for the logs a
//   probe record names) and the locks older than the lease; records stay,
//   and so does a work directory of another host (its process is not
//   visible from here).
GcResult CollectGarbage(const std::string& job_dir, bool dry_run, io::Disk& disk);

}  // namespace djshard::store
