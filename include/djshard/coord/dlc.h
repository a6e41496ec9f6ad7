#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace djshard::coord {

// The first non-empty run id of a launcher's environment: PAI_JOB_ID,
// DLC_JOB_ID, JOB_ID, DJSHARD_RUN_ID, SLURM_JOB_ID, OMPI_MCA_ess_base_jobid,
// TORCHELASTIC_RUN_ID. nullopt when none is set.
std::optional<std::string> RunIdFromEnvironment();

struct DlcOptions {
  std::string job_dir;
  std::string config;
  std::optional<std::string> dataset_path;
  int64_t nodes = 0;  // 0: unknown
  int64_t num_shards = 4;
  bool require_all_nodes = false;
  std::string output;  // empty: <job-dir>/merged.jsonl
  std::optional<std::string> run_id;
  int64_t wait_timeout_secs = 86400;
  int64_t poll_interval_secs = 2;
  int threads = 0;
  std::function<void(const std::string&)> say;  // progress lines (stdout)
};

// `djshard dlc`: the same command on every instance of a launcher (PAI-DLC,
// mpirun, srun, a Kubernetes indexed job). Instances elect one prepare and
// one finalize coordinator through O_EXCL files in a coordination directory
// beside the job, run workers in between, propagate the first failure to
// every instance, and all exit with the same code (SPEC "dlc").
int RunDlc(const DlcOptions& options);

}  // namespace djshard::coord
