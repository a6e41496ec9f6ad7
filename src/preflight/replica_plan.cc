#include "djshard/preflight/replica_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "djshard/common/error.h"

namespace djshard::preflight {

namespace {

std::string Gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

// What the devices hold while the plan is made.
struct DeviceState {
  uint64_t free = 0;
  int replicas = 0;               // of every stage
  std::vector<bool> has_weights;  // per stage
};

class Placer {
 public:
  Placer(const std::vector<PlannerStage>& stages, const std::vector<PlannerDevice>& devices,
         const PlannerLimits& limits)
      : stages_(stages), devices_(devices), limits_(limits) {
    for (const PlannerDevice& d : devices) {
      DeviceState s;
      s.free = d.free_bytes;
      s.has_weights.assign(stages.size(), false);
      state_.push_back(s);
    }
  }

  // Bytes one more replica of stage `s` takes on device `d`.
  uint64_t Cost(size_t s, size_t d) const {
    const PlannerStage& st = stages_[s];
    uint64_t bytes = st.replica_bytes;
    if (!state_[d].has_weights[s]) bytes += st.weights_bytes;
    if (state_[d].replicas == 0) bytes += st.context_bytes;
    const auto share = static_cast<uint64_t>(
        std::ceil(st.min_share * static_cast<double>(devices_[d].total_bytes)));
    return std::max(bytes, share);
  }

  // The device with the most free memory that takes one more replica of
  // `s`; nullopt when none does (`why`: memory or device_cap).
  std::optional<size_t> Pick(size_t s, std::string* why) const {
    std::optional<size_t> best;
    bool capped = false;
    for (size_t d = 0; d < devices_.size(); ++d) {
      if (state_[d].replicas >= limits_.max_workers_per_device) {
        capped = true;
        continue;
      }
      if (Cost(s, d) > state_[d].free) continue;
      if (!best || state_[d].free > state_[*best].free) best = d;
    }
    if (!best && why != nullptr) *why = capped ? "device_cap" : "memory";
    return best;
  }

  void Place(size_t s, size_t d, StagePlacement* p) {
    state_[d].free -= Cost(s, d);
    state_[d].replicas += 1;
    state_[d].has_weights[s] = true;
    p->replicas += 1;
    p->devices.push_back(devices_[d].name);
  }

 private:
  const std::vector<PlannerStage>& stages_;
  const std::vector<PlannerDevice>& devices_;
  const PlannerLimits& limits_;
  std::vector<DeviceState> state_;
};

// Places the stages of one phase on the whole devices: one replica each,
// then explicit num_proc, then the bottleneck grows.
void PlanPhase(const std::vector<PlannerStage>& stages, const std::vector<PlannerDevice>& devices,
               const PlannerLimits& limits, const std::vector<size_t>& phase, ReplicaPlan* out) {
  ReplicaPlan& plan = *out;
  Placer placer(stages, devices, limits);
  for (size_t s : phase) {
    const std::optional<size_t> d = placer.Pick(s, nullptr);
    if (!d) throw Error("internal: stage " + std::to_string(stages[s].stage_id) + " lost its room");
    placer.Place(s, *d, &plan.stages[s]);
  }
  int total = static_cast<int>(phase.size());
  // Explicit num_proc: that many replicas, lowered to what fits.
  for (size_t s : phase) {
    if (!stages[s].fixed_replicas) continue;
    StagePlacement& p = plan.stages[s];
    p.bound = "fixed";
    while (p.replicas < *stages[s].fixed_replicas) {
      std::string why;
      const std::optional<size_t> d = placer.Pick(s, &why);
      if (!d) {
        plan.warnings.push_back(stages[s].name + ": num_proc " +
                                std::to_string(*stages[s].fixed_replicas) + " lowered to " +
                                std::to_string(p.replicas) + " replicas (" + why + ")");
        break;
      }
      placer.Place(s, *d, &p);
      ++total;
    }
  }
  // Grow the bottleneck while it can grow.
  for (;;) {
    size_t bottleneck = phase.front();
    double lowest = INFINITY;
    for (size_t s : phase) {
      const double ratio = stages[s].input_ratio > 0 ? stages[s].input_ratio : 1e-9;
      const double rate = plan.stages[s].replicas * stages[s].rows_per_sec / ratio;
      if (rate < lowest) {
        lowest = rate;
        bottleneck = s;
      }
    }
    StagePlacement& p = plan.stages[bottleneck];
    if (stages[bottleneck].fixed_replicas) break;
    if (total >= limits.cpu_threads) {
      p.bound = "cpu";
      break;
    }
    if (p.replicas >= limits.max_batches_in_flight) {
      p.bound = "batches";
      break;
    }
    std::string why;
    const std::optional<size_t> d = placer.Pick(bottleneck, &why);
    if (!d) {
      p.bound = why;
      break;
    }
    placer.Place(bottleneck, *d, &p);
    ++total;
  }
}

}  // namespace

ReplicaPlan PlanReplicas(const std::vector<PlannerStage>& stages,
                         const std::vector<PlannerDevice>& devices, const PlannerLimits& limits) {
  ReplicaPlan plan;
  if (stages.empty()) return plan;
  if (devices.empty()) throw Error("no device to place model replicas on");

  // A stage that fits on no device even alone: the table of SPEC-checkpoints §10.6.
  uint64_t largest_free = 0;
  for (const PlannerDevice& d : devices) largest_free = std::max(largest_free, d.free_bytes);
  std::string table;
  {
    const Placer empty(stages, devices, limits);
    for (size_t s = 0; s < stages.size(); ++s) {
      uint64_t needed = UINT64_MAX;
      for (size_t d = 0; d < devices.size(); ++d) needed = std::min(needed, empty.Cost(s, d));
      if (needed <= largest_free) continue;
      char row[256];
      std::snprintf(row, sizeof row, "\n  %-6zu %-36s %-24s %s", stages[s].stage_id,
                    stages[s].name.c_str(),
                    (std::to_string(needed) + " (" + Gib(needed) + ")").c_str(),
                    (std::to_string(largest_free) + " (" + Gib(largest_free) + ")").c_str());
      table += row;
    }
  }
  if (!table.empty()) {
    char head[256];
    std::snprintf(head, sizeof head, "\n  %-6s %-36s %-24s %s", "stage", "operator", "bytes needed",
                  "largest free");
    throw Error("a model stage does not fit on any device:" + std::string(head) + table,
                "free device memory, use a smaller dtype or batch_size, or lower "
                "max_gpu_workers_per_device's floor share");
  }

  plan.stages.resize(stages.size());
  for (size_t s = 0; s < stages.size(); ++s) plan.stages[s].stage_id = stages[s].stage_id;
  // The phases: consecutive stages whose first replicas fit together.
  {
    std::vector<size_t> phase;
    std::optional<Placer> first;
    first.emplace(stages, devices, limits);
    for (size_t s = 0; s < stages.size(); ++s) {
      StagePlacement scratch;
      std::optional<size_t> d = first->Pick(s, nullptr);
      if (!d) {
        plan.phases.push_back(phase);
        phase.clear();
        first.emplace(stages, devices, limits);
        d = first->Pick(s, nullptr);  // fits alone: checked above
      }
      first->Place(s, *d, &scratch);
      phase.push_back(s);
    }
    plan.phases.push_back(phase);
  }
  for (const std::vector<size_t>& phase : plan.phases) {
    PlanPhase(stages, devices, limits, phase, &plan);
  }
  return plan;
}

int CpuExecutorThreads(const ReplicaPlan& plan, int threads) {
  std::vector<std::vector<size_t>> phases = plan.phases;
  if (phases.empty()) {
    phases.emplace_back();
    for (size_t s = 0; s < plan.stages.size(); ++s) phases.back().push_back(s);
  }
  int lowest = threads;
  for (const std::vector<size_t>& phase : phases) {
    int replicas = 0;
    bool memory_bound = false;
    for (size_t s : phase) {
      replicas += plan.stages[s].replicas;
      memory_bound = memory_bound || plan.stages[s].bound == "memory";
    }
    if (memory_bound && replicas >= 1) lowest = std::min(lowest, replicas);
  }
  return lowest;
}

double PhaseSecondsPerPartition(const std::vector<PlannerStage>& stages, const ReplicaPlan& plan,
                                size_t phase, double rows) {
  double secs = 0;
  for (size_t s : plan.phases.at(phase)) {
    const double rate = plan.stages[s].replicas * stages[s].rows_per_sec;
    if (rate <= 0) continue;
    secs = std::max(secs, rows * std::max(stages[s].input_ratio, 0.0) / rate);
  }
  return secs;
}

uint64_t ExecutionGroupSize(std::optional<uint64_t> given, const std::vector<PhaseCost>& phases,
                            uint64_t partitions, double max_ratio) {
  if (given) return std::clamp<uint64_t>(*given, 1, std::max<uint64_t>(1, partitions));
  return AutoExecutionGroupSize(phases, partitions, max_ratio);
}

double InitializationOverheadRatio(const std::vector<PhaseCost>& phases, uint64_t group) {
  double worst = 0;
  for (const PhaseCost& c : phases) {
    if (c.init_secs <= 0) continue;
    const double compute = static_cast<double>(group) * c.secs_per_partition;
    worst = std::max(worst, compute > 0 ? c.init_secs / compute : INFINITY);
  }
  return worst;
}

uint64_t AutoExecutionGroupSize(const std::vector<PhaseCost>& phases, uint64_t partitions,
                                double max_ratio) {
  const uint64_t cap = std::max<uint64_t>(1, partitions);
  uint64_t g = 1;
  for (const PhaseCost& c : phases) {
    if (c.init_secs <= 0) continue;
    if (c.secs_per_partition <= 0 || max_ratio <= 0) return cap;
    // init / (g x secs) <= ratio  <=>  g >= init / (ratio x secs)
    const double need = std::ceil(c.init_secs / (max_ratio * c.secs_per_partition) - 1e-9);
    if (need >= static_cast<double>(cap)) return cap;
    g = std::max<uint64_t>(g, static_cast<uint64_t>(std::max(1.0, need)));
  }
  return std::min(g, cap);
}

double GpuReplicaShare(std::optional<double> requested, std::optional<double> measured,
                       int max_workers_per_device, std::string* warning) {
  const double floor = 1.0 / static_cast<double>(std::max(1, max_workers_per_device));
  double share = measured.value_or(0);
  if (requested && *requested > 0) {
    share = *requested;
    if (measured && *measured > *requested) {
      share = *measured;
      if (warning != nullptr) {
        char buf[160];
        std::snprintf(buf, sizeof buf,
                      "num_gpus %.3g is below the measured share %.3g of a device; raised to it",
                      *requested, *measured);
        *warning = buf;
      }
    }
  }
  return std::max(share, floor);
}

}  // namespace djshard::preflight
