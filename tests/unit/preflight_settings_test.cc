// The preflight keys of the partition: section (SPEC-checkpoints §10).
#include <gtest/gtest.h>

#include "djshard/common/error.h"
#include "djshard/job/checkpoint.h"

namespace djshard::job {
namespace {

preflight::PreflightSettings Parse(const std::string& yaml) {
  return ParseJobSettings(YAML::Load(yaml), "recipe.yaml").preflight;
}

std::string ErrorOf(const std::string& yaml) {
  try {
    Parse(yaml);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PreflightSettings, DefaultsAreDataJuicers) {
  const preflight::PreflightSettings p = Parse("process: []");
  EXPECT_TRUE(p.enabled);
  EXPECT_EQ(p.max_gpu_workers_per_device, 5u);
  EXPECT_EQ(p.max_concurrent_probes, 1u);
  EXPECT_FALSE(p.timeout_seconds.has_value());
  EXPECT_EQ(p.warmup_batches, 1u);
  EXPECT_EQ(p.steady_batches, 3u);
  EXPECT_EQ(p.sample_offset, 0u);
  EXPECT_FALSE(p.sample_shuffle);
  EXPECT_EQ(p.sample_seed, std::optional<uint64_t>(42));
  EXPECT_FALSE(p.execution_group_size.has_value());
  EXPECT_DOUBLE_EQ(p.max_initialization_overhead_ratio, 0.1);
}

TEST(PreflightSettings, EveryKeyIsRead) {
  const preflight::PreflightSettings p = Parse(R"(partition:
  gpu_preflight_enabled: false
  max_gpu_workers_per_device: 2
  max_concurrent_gpu_probes: auto
  gpu_probe_timeout_seconds: 1.5
  gpu_probe_warmup_batches: 0
  gpu_probe_steady_batches: 5
  gpu_probe_sample_offset: 100
  gpu_probe_sample_shuffle: true
  gpu_probe_sample_seed: null
  execution_group_size: 3
  max_initialization_overhead_ratio: 0.25
)");
  EXPECT_FALSE(p.enabled);
  EXPECT_EQ(p.max_gpu_workers_per_device, 2u);
  EXPECT_EQ(p.max_concurrent_probes, 1u);
  EXPECT_EQ(p.timeout_seconds, std::optional<double>(1.5));
  EXPECT_EQ(p.warmup_batches, 0u);
  EXPECT_EQ(p.steady_batches, 5u);
  EXPECT_EQ(p.sample_offset, 100u);
  EXPECT_TRUE(p.sample_shuffle);
  EXPECT_FALSE(p.sample_seed.has_value());
  EXPECT_EQ(p.execution_group_size, std::optional<uint64_t>(3));
  EXPECT_DOUBLE_EQ(p.max_initialization_overhead_ratio, 0.25);
}

TEST(PreflightSettings, BadValuesNameTheKeyAndTheRecipeLine) {
  {
    const std::string e = ErrorOf("partition:\n  mode: auto\n  gpu_probe_steady_batches: 0\n");
    EXPECT_NE(e.find("recipe.yaml:3"), std::string::npos) << e;
    EXPECT_NE(e.find("partition.gpu_probe_steady_batches"), std::string::npos) << e;
  }
  EXPECT_NE(ErrorOf("partition: {gpu_probe_timeout_seconds: 0}").find("gpu_probe_timeout_seconds"),
            std::string::npos);
  EXPECT_NE(ErrorOf("partition: {max_gpu_workers_per_device: -1}").find("max_gpu_workers"),
            std::string::npos);
  EXPECT_NE(ErrorOf("partition: {execution_group_size: many}").find("execution_group_size"),
            std::string::npos);
  EXPECT_NE(ErrorOf("partition: {max_initialization_overhead_ratio: 2}")
                .find("max_initialization_overhead_ratio"),
            std::string::npos);
  EXPECT_NE(ErrorOf("partition: {gpu_preflight_enabled: maybe}").find("gpu_preflight_enabled"),
            std::string::npos);
  EXPECT_NE(ErrorOf("partition: {gpu_probe_cycles: 3}").find("unknown key"), std::string::npos);
}

TEST(PreflightSettings, KeysDoNotCountInTheEffectiveConfiguration) {
  const auto plain = EffectiveConfig(YAML::Load("partition: {mode: manual}"), "d", "e");
  const auto tuned =
      EffectiveConfig(YAML::Load("partition: {mode: manual, gpu_preflight_enabled: false, "
                                 "gpu_probe_sample_seed: 7, execution_group_size: 2, "
                                 "max_gpu_workers_per_device: 3}"),
                      "d", "e");
  EXPECT_EQ(plain, tuned);
}

}  // namespace
}  // namespace djshard::job
