// The replica planner of SPEC-checkpoints §10.6 (test 12) on made-up devices.
#include "djshard/preflight/replica_plan.h"

#include <gtest/gtest.h>

#include <map>

#include "djshard/common/error.h"

namespace djshard::preflight {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

std::vector<PlannerDevice> FourGpus(uint64_t free_each = 80 * kGiB) {
  std::vector<PlannerDevice> d;
  for (int i = 0; i < 4; ++i) d.push_back({"cuda:" + std::to_string(i), 80 * kGiB, free_each});
  return d;
}

PlannerStage Stage(size_t id, double rows_per_sec, uint64_t weights, uint64_t activations,
                   double min_share = 0.2) {
  PlannerStage s;
  s.stage_id = id;
  s.name = "op" + std::to_string(id);
  s.rows_per_sec = rows_per_sec;
  s.weights_bytes = weights;
  s.replica_bytes = activations;
  s.min_share = min_share;
  return s;
}

PlannerLimits Roomy() {
  PlannerLimits l;
  l.max_workers_per_device = 5;
  l.cpu_threads = 1000;
  l.max_batches_in_flight = 1000;
  return l;
}

std::map<std::string, int> PerDevice(const StagePlacement& p) {
  std::map<std::string, int> m;
  for (const std::string& d : p.devices) ++m[d];
  return m;
}

TEST(ReplicaPlan, FirstReplicasGoToTheDeviceWithMostFreeMemory) {
  std::vector<PlannerDevice> devices = FourGpus();
  devices[2].free_bytes = 79 * kGiB;
  devices[3].free_bytes = 30 * kGiB;
  PlannerLimits l = Roomy();
  l.cpu_threads = 2;  // no growth: only the first placements
  const ReplicaPlan p =
      PlanReplicas({Stage(1, 100, 10 * kGiB, kGiB), Stage(2, 100, 10 * kGiB, kGiB)}, devices, l);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].devices, std::vector<std::string>{"cuda:0"});
  // cuda:0 now has less free than cuda:1.
  EXPECT_EQ(p.stages[1].devices, std::vector<std::string>{"cuda:1"});
  EXPECT_EQ(p.stages[0].bound, "cpu");  // the bottleneck (a tie: the first) cannot grow
}

TEST(ReplicaPlan, TheBottleneckStageGetsTheReplicas) {
  // Stage 1 runs a million rows/s, stage 2 only 100: stage 2 grows until the
  // per-GPU cap (5 per device, every stage together) stops it.
  const ReplicaPlan p = PlanReplicas(
      {Stage(1, 1e6, kGiB, kGiB, 0.01), Stage(2, 100, kGiB, kGiB, 0.01)}, FourGpus(), Roomy());
  EXPECT_EQ(p.stages[0].replicas, 1);
  EXPECT_EQ(p.stages[1].replicas, 19);  // 4 x 5 slots, one taken by stage 1
  EXPECT_EQ(p.stages[1].bound, "device_cap");
  for (const auto& [device, n] : PerDevice(p.stages[1])) EXPECT_LE(n, 5) << device;
}

TEST(ReplicaPlan, InputRatioMakesADownstreamStageLessOfABottleneck) {
  PlannerStage a = Stage(1, 100, kGiB, kGiB, 0.01), b = Stage(2, 100, kGiB, kGiB, 0.01);
  b.input_ratio = 0.25;  // a filter before it keeps a quarter of the rows
  PlannerLimits l = Roomy();
  l.cpu_threads = 10;
  const ReplicaPlan p = PlanReplicas({a, b}, FourGpus(), l);
  EXPECT_EQ(p.stages[0].replicas, 8);
  EXPECT_EQ(p.stages[1].replicas, 2);
}

TEST(ReplicaPlan, MemoryBoundStopsWhenNoDeviceHasRoom) {
  // 30 GiB weights per device, 20 GiB per replica: 80 GiB holds 30+20+20 = 70.
  const ReplicaPlan p =
      PlanReplicas({Stage(1, 100, 30 * kGiB, 20 * kGiB, 0.0)}, FourGpus(), Roomy());
  EXPECT_EQ(p.stages[0].replicas, 8);
  EXPECT_EQ(p.stages[0].bound, "memory");
  for (const auto& [device, n] : PerDevice(p.stages[0])) EXPECT_EQ(n, 2) << device;
}

TEST(ReplicaPlan, ScheduledShareFloorsSmallReplicas) {
  // A replica that measures 1 GiB is still scheduled for 1/5 of a device.
  const ReplicaPlan p = PlanReplicas({Stage(1, 100, 0, kGiB, 0.3)}, FourGpus(), Roomy());
  EXPECT_EQ(p.stages[0].replicas, 12);  // 3 x 0.3 fits in one device, 4 devices
  EXPECT_EQ(p.stages[0].bound, "memory");
}

TEST(ReplicaPlan, CpuThreadBudgetBoundsEveryStageTogether) {
  PlannerLimits l = Roomy();
  l.cpu_threads = 6;
  const ReplicaPlan p = PlanReplicas(
      {Stage(1, 100, kGiB, kGiB, 0.01), Stage(2, 100, kGiB, kGiB, 0.01)}, FourGpus(), l);
  EXPECT_EQ(p.stages[0].replicas + p.stages[1].replicas, 6);
  EXPECT_EQ(p.stages[0].replicas, 3);
  EXPECT_TRUE(p.stages[0].bound == "cpu" || p.stages[1].bound == "cpu");
}

TEST(ReplicaPlan, BatchesInFlightBoundAStage) {
  PlannerLimits l = Roomy();
  l.max_batches_in_flight = 3;
  const ReplicaPlan p = PlanReplicas({Stage(1, 100, kGiB, kGiB, 0.01)}, FourGpus(), l);
  EXPECT_EQ(p.stages[0].replicas, 3);
  EXPECT_EQ(p.stages[0].bound, "batches");
}

TEST(ReplicaPlan, ExplicitNumProcIsFixedAndLoweredToWhatFits) {
  PlannerStage fixed = Stage(1, 1, 30 * kGiB, 20 * kGiB, 0.0);
  fixed.fixed_replicas = 20;
  const ReplicaPlan p = PlanReplicas({fixed}, FourGpus(), Roomy());
  EXPECT_EQ(p.stages[0].replicas, 8);
  EXPECT_EQ(p.stages[0].bound, "fixed");
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("num_proc 20 lowered to 8"), std::string::npos) << p.warnings[0];
}

TEST(ReplicaPlan, AStageNeeding90GiBIsRefusedWithTheTable) {
  try {
    PlanReplicas({Stage(1, 100, kGiB, kGiB), Stage(2, 100, 85 * kGiB, 5 * kGiB)}, FourGpus(),
                 Roomy());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitFailure);
    const std::string m = e.message();
    EXPECT_NE(m.find("stage"), std::string::npos) << m;
    EXPECT_NE(m.find("bytes needed"), std::string::npos) << m;
    EXPECT_NE(m.find("largest free"), std::string::npos) << m;
    EXPECT_NE(m.find("op2"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(90 * kGiB)), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(80 * kGiB)), std::string::npos) << m;
    EXPECT_EQ(m.find("op1 "), std::string::npos) << m;  // op1 fits
  }
}

TEST(ReplicaPlan, StagesThatFitAloneButNotTogetherAlternateInPhases) {
  std::vector<PlannerDevice> one = {{"cuda:0", 80 * kGiB, 80 * kGiB}};
  const ReplicaPlan p =
      PlanReplicas({Stage(1, 100, 50 * kGiB, 0, 0), Stage(2, 100, 50 * kGiB, 0, 0)}, one, Roomy());
  ASSERT_EQ(p.phases.size(), 2u);
  EXPECT_EQ(p.phases[0], std::vector<size_t>{0});
  EXPECT_EQ(p.phases[1], std::vector<size_t>{1});
  // Each phase has the device to itself: its replicas share its weights up to the cap.
  EXPECT_EQ(p.stages[0].replicas, 5);
  EXPECT_EQ(p.stages[1].replicas, 5);
  EXPECT_EQ(p.stages[0].bound, "device_cap");
  EXPECT_EQ(PerDevice(p.stages[1]), (std::map<std::string, int>{{"cuda:0", 5}}));
}

TEST(ReplicaPlan, PhasesKeepOpOrderAndGroupStagesThatFitTogether) {
  // 80 GiB: 30 + 30 fit, the third 30 does not; the fourth joins the third.
  std::vector<PlannerDevice> one = {{"cuda:0", 80 * kGiB, 80 * kGiB}};
  const ReplicaPlan p =
      PlanReplicas({Stage(1, 100, 30 * kGiB, 0, 0), Stage(2, 100, 30 * kGiB, 0, 0),
                    Stage(3, 100, 30 * kGiB, 0, 0), Stage(4, 100, 30 * kGiB, 0, 0)},
                   one, Roomy());
  ASSERT_EQ(p.phases.size(), 2u);
  EXPECT_EQ(p.phases[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(p.phases[1], (std::vector<size_t>{2, 3}));
}

TEST(ReplicaPlan, EachPhaseGrowsItsBottleneckInTheWholeMemory) {
  // 50 GiB weights + 5 GiB per replica: alone, a stage holds 6 replicas in 80 GiB.
  std::vector<PlannerDevice> one = {{"cuda:0", 80 * kGiB, 80 * kGiB}};
  PlannerLimits l = Roomy();
  l.max_workers_per_device = 100;
  const ReplicaPlan p = PlanReplicas(
      {Stage(1, 100, 50 * kGiB, 5 * kGiB, 0), Stage(2, 10, 50 * kGiB, 5 * kGiB, 0)}, one, l);
  ASSERT_EQ(p.phases.size(), 2u);
  EXPECT_EQ(p.stages[0].replicas, 6);
  EXPECT_EQ(p.stages[1].replicas, 6);
  EXPECT_EQ(p.stages[0].bound, "memory");
  EXPECT_EQ(p.stages[1].bound, "memory");
}

TEST(ReplicaPlan, StagesThatFitTogetherMakeOnePhase) {
  const ReplicaPlan p =
      PlanReplicas({Stage(1, 100, kGiB, kGiB), Stage(2, 100, kGiB, kGiB)}, FourGpus(), Roomy());
  ASSERT_EQ(p.phases.size(), 1u);
  EXPECT_EQ(p.phases[0], (std::vector<size_t>{0, 1}));
}

TEST(ReplicaPlan, AStageTooLargeAloneIsStillRefusedWhenOthersAlternate) {
  std::vector<PlannerDevice> one = {{"cuda:0", 80 * kGiB, 80 * kGiB}};
  try {
    PlanReplicas({Stage(1, 100, 50 * kGiB, 0, 0), Stage(2, 100, 50 * kGiB, 0, 0),
                  Stage(3, 100, 90 * kGiB, 0, 0)},
                 one, Roomy());
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("op3"), std::string::npos) << m;
    EXPECT_EQ(m.find("op1 "), std::string::npos) << m;
  }
}

TEST(ExecutionGroupSize, AutoIsTheSmallestGroupUnderTheRatio) {
  // Phase A: 10 s init, 2 s per partition -> 10 / (G x 2) <= 0.1 needs G >= 50.
  // Phase B: 1 s init, 1 s per partition -> G >= 10.
  const std::vector<PhaseCost> phases = {{10, 2}, {1, 1}};
  EXPECT_EQ(AutoExecutionGroupSize(phases, 1000, 0.1), 50u);
  EXPECT_LE(InitializationOverheadRatio(phases, 50), 0.1);
  EXPECT_GT(InitializationOverheadRatio(phases, 49), 0.1);
  EXPECT_DOUBLE_EQ(InitializationOverheadRatio(phases, 50), 0.1);
  // A looser ratio needs fewer partitions.
  EXPECT_EQ(AutoExecutionGroupSize(phases, 1000, 0.5), 10u);
}

TEST(ExecutionGroupSize, AnExplicitSizeIsUsedAsGivenUpToThePartitions) {
  const std::vector<PhaseCost> phases = {{10, 2}, {1, 1}};
  EXPECT_EQ(ExecutionGroupSize(3, phases, 1000, 0.1), 3u);
  EXPECT_EQ(ExecutionGroupSize(3000, phases, 1000, 0.1), 1000u);
  EXPECT_EQ(ExecutionGroupSize(std::nullopt, phases, 1000, 0.1), 50u);
  EXPECT_DOUBLE_EQ(InitializationOverheadRatio(phases, 3), 10.0 / 6.0);
}

TEST(ExecutionGroupSize, AutoIsCappedAtThePartitions) {
  EXPECT_EQ(AutoExecutionGroupSize({{10, 2}}, 8, 0.1), 8u);
  EXPECT_EQ(AutoExecutionGroupSize({{10, 0}}, 8, 0.1), 8u);  // no measured time: everything
  EXPECT_EQ(AutoExecutionGroupSize({{0, 2}}, 8, 0.1), 1u);   // free initialization
  EXPECT_EQ(AutoExecutionGroupSize({}, 0, 0.1), 1u);
}

TEST(ExecutionGroupSize, PhaseSecondsComeFromItsSlowestStage) {
  std::vector<PlannerDevice> one = {{"cuda:0", 80 * kGiB, 80 * kGiB}};
  PlannerLimits l = Roomy();
  l.cpu_threads = 1;  // one replica each
  PlannerStage a = Stage(1, 100, 50 * kGiB, 0, 0), b = Stage(2, 50, 50 * kGiB, 0, 0);
  b.input_ratio = 0.5;
  const ReplicaPlan p = PlanReplicas({a, b}, one, l);
  ASSERT_EQ(p.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(PhaseSecondsPerPartition({a, b}, p, 0, 1000), 10.0);  // 1000 / 100
  EXPECT_DOUBLE_EQ(PhaseSecondsPerPartition({a, b}, p, 1, 1000), 10.0);  // 500 / 50
}

}  // namespace
TEST(ReplicaPlan, CpuMemoryHoldingFewerReplicasThanThreadsLowersTheExecutorThreads) {
  // Measured on the CPU: 4 GiB of weights once, 2 GiB of activations per
  // replica; 10 GiB free holds 3 replicas of the 8 threads.
  PlannerLimits limits;
  limits.max_workers_per_device = 8;
  limits.cpu_threads = 8;
  limits.max_batches_in_flight = 16;
  const ReplicaPlan p = PlanReplicas({Stage(1, 50, 4 * kGiB, 2 * kGiB, 0.0)},
                                     {{"cpu", 16 * kGiB, 10 * kGiB}}, limits);
  EXPECT_EQ(p.stages[0].replicas, 3);
  EXPECT_EQ(p.stages[0].bound, "memory");
  EXPECT_EQ(CpuExecutorThreads(p, 8), 3);
}

TEST(ReplicaPlan, CpuPlanBoundByThreadsKeepsTheExecutorThreads) {
  PlannerLimits limits;
  limits.max_workers_per_device = 2;
  limits.cpu_threads = 2;
  limits.max_batches_in_flight = 4;
  const ReplicaPlan p = PlanReplicas({Stage(1, 50, 400 << 20, 70 << 20, 0.0)},
                                     {{"cpu", 16 * kGiB, 10 * kGiB}}, limits);
  EXPECT_EQ(p.stages[0].replicas, 2);
  EXPECT_EQ(CpuExecutorThreads(p, 2), 2);
  EXPECT_EQ(CpuExecutorThreads(ReplicaPlan{}, 4), 4);  // no model stage
}

}  // namespace djshard::preflight

namespace djshard::preflight {
namespace {

TEST(GpuReplicaShare, AnExplicitShareBelowTheMeasuredOneIsRaisedWithAWarning) {
  std::string warning;
  // Nothing asked, nothing measured: the per-device cap's floor.
  EXPECT_DOUBLE_EQ(GpuReplicaShare(std::nullopt, std::nullopt, 5, &warning), 0.2);
  EXPECT_TRUE(warning.empty());
  // Measured: that fraction, at least the floor.
  EXPECT_DOUBLE_EQ(GpuReplicaShare(std::nullopt, 0.35, 5, &warning), 0.35);
  EXPECT_DOUBLE_EQ(GpuReplicaShare(std::nullopt, 0.05, 5, &warning), 0.2);
  EXPECT_TRUE(warning.empty());
  // Asked above the measured share: honoured.
  EXPECT_DOUBLE_EQ(GpuReplicaShare(0.5, 0.35, 5, &warning), 0.5);
  EXPECT_TRUE(warning.empty());
  // Asked below it: raised, with a warning naming both.
  EXPECT_DOUBLE_EQ(GpuReplicaShare(0.25, 0.35, 5, &warning), 0.35);
  EXPECT_NE(warning.find("num_gpus 0.25 is below the measured share 0.35"), std::string::npos)
      << warning;
  // Asked, not measured (this build does not read device memory): as asked.
  warning.clear();
  EXPECT_DOUBLE_EQ(GpuReplicaShare(0.5, std::nullopt, 5, &warning), 0.5);
  EXPECT_TRUE(warning.empty());
}

}  // namespace
}  // namespace djshard::preflight
