#pragma once

// The replica plan of SPEC-checkpoints §10.6: how many replicas each model
// stage gets and on which device. A pure function of the probe results and
// the devices, so that tests can run it on made-up machines.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace djshard::preflight {

// A device replicas may go to, as the planner sees it.
struct PlannerDevice {
  std::string name;          // "cuda:0", "cpu"
  uint64_t total_bytes = 0;  // memory of the device
  uint64_t free_bytes = 0;   // what the job may use of it
};

// What a model stage needs, from its probe (or its explicit arguments).
struct PlannerStage {
  size_t stage_id = 0;
  std::string name;            // the operator, for messages
  double rows_per_sec = 0;     // steady input rows/s of one replica
  double input_ratio = 1;      // rows reaching the stage per input row of the job
  uint64_t weights_bytes = 0;  // paid once per device (replicas share the weights)
  uint64_t replica_bytes = 0;  // activations of one replica
  uint64_t context_bytes = 0;  // paid once per device (the CUDA context)
  // Smallest share of a device one replica is scheduled for:
  // max(memory_fraction, 1/max_workers_per_device).
  double min_share = 0;
  std::optional<int> fixed_replicas;  // explicit num_proc: not grown, lowered to what fits
};

struct PlannerLimits {
  int max_workers_per_device = 5;  // partition.max_gpu_workers_per_device
  int cpu_threads = 1;             // every replica is fed by a CPU thread
  int max_batches_in_flight = 1;   // a replica without a batch waits
};

struct StagePlacement {
  size_t stage_id = 0;
  int replicas = 0;
  std::vector<std::string> devices;  // one entry per replica
  std::string bound;                 // why it stopped growing: memory|device_cap|cpu|batches|fixed
};

struct ReplicaPlan {
  std::vector<StagePlacement> stages;  // in the order of the input stages
  std::vector<std::string> warnings;   // a fixed num_proc lowered to what fits
  // The stages that are loaded together (indexes into `stages`, in order),
  // one entry per phase of an execution group (SPEC-checkpoints §10.7): one
  // phase when every stage fits at once, else consecutive stages that fit
  // together, each phase planned on the whole devices.
  std::vector<std::vector<size_t>> phases;
};

// One replica per stage on the device with the most free memory; a stage
// whose single replica fits on no device is an Error (exit 2) with a table of
// stage, bytes needed and largest free. Stages that each fit but not together
// are split, in order, into phases whose stages fit together (a new phase
// starts at the first stage that finds no room after those before it in its
// phase). Then, within each phase, replicas are added to the bottleneck stage
// (lowest replicas x rows/s / input ratio) while memory, the per-device cap,
// the CPU thread budget and the batches in flight allow; planning stops when
// the bottleneck cannot grow.
ReplicaPlan PlanReplicas(const std::vector<PlannerStage>& stages,
                         const std::vector<PlannerDevice>& devices, const PlannerLimits& limits);

// The executor threads a CPU plan feeds: on the CPU every executor thread
// runs the model stages' replicas itself, so a plan whose memory holds fewer
// replicas than `threads` lowers them to its replicas (summed over the model
// stages of a phase; the smallest such phase); otherwise `threads`.
int CpuExecutorThreads(const ReplicaPlan& plan, int threads);

// A GPU replica's share of its device (SPEC-checkpoints §10.4, §10.6): the
// measured memory fraction (when measured), else an explicit
// `num_gpus`/`gpu_required` in (0, 1], at least 1 / max_workers_per_device.
// An explicit value below the measured fraction is raised to it, and
// `warning` says so.
double GpuReplicaShare(std::optional<double> requested, std::optional<double> measured,
                       int max_workers_per_device, std::string* warning);

// What one phase of an execution group costs: initializing its operators
// once, and running one partition through it.
struct PhaseCost {
  double init_secs = 0;           // summed over the phase's stages
  double secs_per_partition = 0;  // its slowest stage on the average partition
};

// Seconds the slowest stage of a phase needs for `rows` input rows of a
// partition: rows x input ratio / (replicas x rows/s), the largest over the
// phase's stages (0 when no stage has a rate).
double PhaseSecondsPerPartition(const std::vector<PlannerStage>& stages, const ReplicaPlan& plan,
                                size_t phase, double rows);

// execution_group_size: auto (SPEC-checkpoints §10.7): the smallest number of
// partitions G such that every phase's init_secs / (G x secs_per_partition)
// is at most `max_ratio`, capped at `partitions` (at least 1). A phase
// without a measured time needs every partition.
uint64_t AutoExecutionGroupSize(const std::vector<PhaseCost>& phases, uint64_t partitions,
                                double max_ratio);

// execution_group_size: `given` (an integer, capped at the partitions), else auto.
uint64_t ExecutionGroupSize(std::optional<uint64_t> given, const std::vector<PhaseCost>& phases,
                            uint64_t partitions, double max_ratio);

// The largest init_secs / (group x secs_per_partition) over the phases (0
// without phases; infinity when a phase has no measured time).
double InitializationOverheadRatio(const std::vector<PhaseCost>& phases, uint64_t group);

}  // namespace djshard::preflight
