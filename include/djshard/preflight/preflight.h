#pragma once

// The model preflight layer (src/preflight, djshard::preflight;
// SPEC-checkpoints §10): before any partition starts, every model operator is
// probed on a small sample in a one-shot child process (`djshard probe-op`),
// the results are cached in gpu_probe_results.json, and the replica plan is
// made from them.
//
// Owns: the probes and their cache, the probe records an elastic job's
// workers share (preflight/probe_records.h), the replica plan and execution
// groups (preflight/replica_plan.h), and the preflight keys of a recipe's
// partition: section (PreflightSettings).
// May use: exec (plans, the executor a probe runs), ops, model, recipe, io,
// common. Knows nothing of job settings, checkpoints or claims: a job hands it
// what it probes (PreflightContext) and writes what it decided.
// Offers: RunPreflight, AddPreflightToPlan, ThreadsAfterPlan, ProbeOperator.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "djshard/exec/plan.h"
#include "djshard/io/disk.h"
#include "djshard/recipe/recipe.h"

namespace djshard::preflight {

// The GPU/model preflight keys of the partition: section (SPEC-checkpoints
// §10), with Data-Juicer's names and defaults. None of them changes output bytes.
struct PreflightSettings {
  bool enabled = true;                           // gpu_preflight_enabled
  uint64_t max_gpu_workers_per_device = 5;       // replicas per device, every stage together
  uint64_t max_concurrent_probes = 1;            // max_concurrent_gpu_probes (auto = 1)
  std::optional<double> timeout_seconds;         // gpu_probe_timeout_seconds (null: none)
  uint64_t warmup_batches = 1;                   // gpu_probe_warmup_batches (0 allowed)
  uint64_t steady_batches = 3;                   // gpu_probe_steady_batches
  uint64_t sample_offset = 0;                    // gpu_probe_sample_offset, in rows
  bool sample_shuffle = false;                   // gpu_probe_sample_shuffle
  std::optional<uint64_t> sample_seed = 42;      // gpu_probe_sample_seed (null: a new one each run)
  std::optional<uint64_t> execution_group_size;  // nullopt: auto
  double max_initialization_overhead_ratio = 0.1;  // for execution_group_size: auto
};

// What the job knows when it runs preflight.
struct PreflightContext {
  const recipe::Recipe* recipe = nullptr;
  const exec::Plan* plan = nullptr;
  PreflightSettings settings;
  std::vector<std::string> inputs;  // input files, in order
  std::string job_dir;              // gpu_probe_results.json and probe/ go here
  int threads = 1;                  // the executor's threads
  uint64_t partitions_in_flight = 1;
  uint64_t num_partitions = 1;
  uint64_t total_rows = 0;  // of the input: the average partition sizes execution groups
  // Appends one event (probe_start, probe_complete, probe_failed).
  std::function<void(const std::string& type, nlohmann::json fields)> emit;
  // An elastic job (worker, dlc): the probes are shared through
  // <job_dir>/probe/<cache_key>.json, one prober per key (ProbeRecords); the
  // lease and heartbeat are the workers' claim lease and heartbeat. Unset for run.
  struct Shared {
    double lease_secs = 60;
    double heartbeat_secs = 10;
    double poll_secs = 0.25;  // between looks at a key another worker probes
  };
  std::optional<Shared> shared;
  // The filesystem of the job directory (the shared probe records); null: the real one.
  io::Disk* disk = nullptr;
  // Called while probes run and while waiting for another prober: throws
  // (a stop request, a signal) to end preflight; running probes are killed.
  std::function<void()> check_stop;
  // Lines for the user while preflight waits (another worker's probe).
  std::function<void(const std::string&)> say;
};

// What preflight decided. `plan_fields` holds the dag_execution_plan.json
// keys it owns; empty when the recipe has no model operator.
struct PreflightResult {
  bool has_model_ops = false;
  nlohmann::json plan_fields = nlohmann::json::object();
  std::vector<std::string> printout;  // lines for the user, before the job starts
  // Per operator: its input_columns / output_columns contracts (null: unknown).
  nlohmann::json op_columns = nlohmann::json::array();
  // The executor threads the plan feeds on the CPU (CpuExecutorThreads):
  // below PreflightContext::threads when memory holds fewer model replicas.
  // 0 when the model stages are not on the CPU.
  int cpu_threads = 0;
  // The phases of each execution group (SPEC-checkpoints §10.7): one when
  // every model stage fits at once; else, in op order, the operators each
  // phase runs (op_range) and the model operators it loads.
  struct Phase {
    size_t first_op = 0, last_op = 0;  // op_range, inclusive
    std::vector<size_t> model_ops;     // loaded for the phase
  };
  std::vector<Phase> phases;
  uint64_t group_size = 0;  // partitions per execution group (the run's when one phase)
};

// Probes (or reuses the cached probe of) every model operator of the plan and
// plans its replicas. Shared (elastic): a key with a record is read, a key
// whose lock another worker holds is waited for, a key with a failure record
// younger than the lease stops this worker as the failed probe did. Throws Error (exit 2) naming
// the operator when a probe fails, times out, or a mapper returns no rows; with preflight disabled,
// when a model operator lacks num_proc or mem_required; when a stage fits on no device (with
// the table); and, for an elastic job, when the model stages do not fit together (workers do not
// alternate execution groups).
PreflightResult RunPreflight(const PreflightContext& context);

// Puts preflight's stages, execution groups and probe keys into a plan
// document made by the job (a no-op without model operators).
void AddPreflightToPlan(const PreflightResult& result, nlohmann::json* plan_json);

// The executor threads a process runs after the plan: on the CPU each thread
// runs a replica, so a memory that holds fewer replicas than `threads` lowers
// them, unless they were given (`threads_explicit`: kept, with a warning).
int ThreadsAfterPlan(const PreflightResult& result, int threads, bool threads_explicit);

// `djshard probe-op`: the child side of one probe.
struct ProbeRequest {
  std::string config;          // the recipe
  size_t op_idx = 0;           // the operator probed
  std::vector<size_t> replay;  // operators replayed on the sample first, ascending
  std::string sample;          // JSONL sample rows
  std::string work;            // a directory for the replayed rows
  uint64_t warmup = 1;
  uint64_t steady = 3;
  std::string result;  // where the result JSON goes
};

// Replays the ancestors, initializes the operator once and times warmup and
// steady batches of batch_size rows (survivors cycled); measures the host
// memory its initialization keeps and the peak its batches add
// (`host_memory` {weights_bytes, activation_peak_bytes}; null when the kernel
// does not report it). Throws Error when the operator raises or a mapper
// returns no rows.
void ProbeOperator(const ProbeRequest& request);

}  // namespace djshard::preflight
