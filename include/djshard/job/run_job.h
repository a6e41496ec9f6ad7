#pragma once

// The run-job layer (src/job, djshard::job): `djshard run` and the jobs it
// makes (SPEC-checkpoints), and the files every job writes.
//
// Owns: RunRecipe here (a plain run, or a job with partitions, checkpoints and
// a job directory); job settings, the recipe's partition:, checkpoint: and
// event_logging: sections (job/checkpoint.h); partitions
// (job/partition.h); the partition runner with its taps, commits and gather
// journals (job/partition_runner.h); events files and stamps
// (job/job_files.h); what `djshard jobs` and `monitor` read of a run job
// (job/job_status.h); stop requests (job/stop_request.h); a run job's
// preflight; and what an elastic job's worker runs of all this: a
// checkpointed shard and the shared preflight (job/shard_run.h).
// May use: preflight, exec, ops, model, recipe, io, common. Knows nothing of
// manifests, claims, leases or coordination: a worker reaches its claim
// through the callbacks of job/shard_run.h.
// Offers: RunRecipe, and the headers above.
#include <functional>
#include <optional>
#include <string>

#include "djshard/exec/executor.h"
#include "djshard/io/disk.h"
#include "djshard/job/checkpoint.h"

namespace djshard::job {

struct RunRequest {
  std::string config_path;
  std::optional<std::string> dataset_path;  // overrides the recipe's dataset_path
  std::optional<std::string> export_path;   // overrides the recipe's export_path
  std::optional<int> threads;               // overrides the recipe's np
  std::function<void(const exec::ExecSummary&)> progress;

  // Job mode (SPEC-checkpoints): partitions, checkpoints and a job directory.
  // It is on when the recipe has a partition: or checkpoint: section or any
  // of these is given.
  std::vector<ConfigOverride> overrides;  // --partition.* / --checkpoint.* / --event_logging.*
  std::optional<std::string> job_id;      // --job_id
  std::optional<std::string> work_dir;    // --work-dir
  std::optional<std::string> resume;      // --resume TOKEN
  // Called once a new job's directory exists, before any partition starts.
  std::function<void(const std::string& job_id, bool resumable)> job_started;
};

struct RunOutcome {
  std::string export_path;
  std::string stats_path;   // <export>.stats.json
  std::string errors_path;  // <export>.errors.jsonl
  int threads = 1;
  exec::ExecSummary summary;
  // Job mode only:
  std::string job_id;
  std::string job_dir;
  uint64_t partitions = 0;
  uint64_t partitions_resumed = 0;  // taken from a committed final tap
  bool already_completed = false;   // --resume of a completed job: nothing was done
};

// `djshard run`: one machine, one recipe over a file or directory. Writes the
// export (compressed for .gz/.zst), the errors file and the stats file, each
// through temp + rename (through `disk`): on any error no new output appears
// and an older one stays as it was.
RunOutcome RunRecipe(const RunRequest& request, io::Disk& disk = io::RealDisk());

}  // namespace djshard::job
