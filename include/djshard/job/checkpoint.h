#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "djshard/preflight/preflight.h"
#include "djshard/recipe/recipe.h"

namespace djshard::job {

// A dotted recipe key set on the command line ("checkpoint.n_ops" = "3").
using ConfigOverride = std::pair<std::string, std::string>;

enum class PartitionMode { kAuto, kManual };
enum class TapStrategy { kEveryNOps, kEveryOp, kManual, kDisabled };
const char* TapStrategyName(TapStrategy s);

// The recipe's partition:, checkpoint: and event_logging: sections and its
// job_id and work_dir, with Data-Juicer's key names and defaults
// (SPEC-checkpoints §2).
struct JobSettings {
  PartitionMode mode = PartitionMode::kAuto;
  uint64_t num_of_partitions = 4;  // manual
  uint64_t target_size_mb = 256;   // auto: 128, 256, 512 or 1024
  std::optional<uint64_t> size;    // auto: rows when a row's size estimate is 0
  uint64_t max_size_mb = 256;      // auto: byte cap
  // Partitions in flight at once in one process; `auto` is 2.
  uint64_t max_concurrent_partitions = 2;
  bool checkpoint_enabled = true;
  TapStrategy strategy = TapStrategy::kEveryNOps;
  uint64_t n_ops = 5;
  std::vector<std::string> op_names;  // manual
  bool compress = true;               // compression: zstd (true) or none
  bool keep_all = false;              // keep: all (true) or latest
  // Workers: keep checkpoints/<shard>/ after the shard's done record (`run`
  // always keeps its checkpoints).
  bool keep_after_done = false;
  // checkpoint.dir (alias: the top-level checkpoint_dir) as written: where
  // checkpoints go instead of <job_dir>/checkpoints.
  std::optional<std::string> checkpoint_dir;
  preflight::PreflightSettings preflight;
  bool event_logging = true;
  std::optional<std::string> job_id;    // recipe job_id
  std::optional<std::string> work_dir;  // recipe work_dir

  // Whether partitions leave taps (and a job can be resumed).
  bool checkpointing() const { return checkpoint_enabled && strategy != TapStrategy::kDisabled; }
};

// A copy of `root` with each override set at its dotted path (a value of
// checkpoint.op_names becomes a list split at commas).
YAML::Node ApplyOverrides(const YAML::Node& root, const std::vector<ConfigOverride>& overrides);

// Reads the sections of `root` (the recipe with overrides applied). An
// unknown key or a bad value is an Error naming the recipe line.
JobSettings ParseJobSettings(const YAML::Node& root, const std::string& recipe_path);

// Indexes of the operators after which a partition is tapped, ascending; with
// checkpointing on the last operator is always one (the final tap). A manual
// name that is not in `process` is an Error.
std::vector<size_t> TapPositions(const JobSettings& settings, const recipe::Recipe& recipe);

// The configuration that decides output bytes: the recipe with overrides as
// canonical JSON, the effective dataset and export paths, minus what does not
// (np, work_dir, job_id, event_logging, partition.max_concurrent_partitions
// and the preflight keys of partition:). A top-level checkpoint_dir counts as
// checkpoint.dir, which stays: SPEC-checkpoints §6 does not list it as
// non-semantic.
nlohmann::json EffectiveConfig(const YAML::Node& root, const std::string& dataset_path,
                               const std::string& export_path);

// Dotted keys whose values differ between two canonical configs.
std::vector<std::string> DifferingKeys(const nlohmann::json& a, const nlohmann::json& b);

// SHA-256 of the canonical JSON of process[0..op_idx] with their arguments.
std::string OpsPrefixSha256(const YAML::Node& root, size_t op_idx);

// Sets an event's `checkpoint_xxh3_128` (`checkpoint_sha256` for a commit of
// an older job) to the checksum a commit or journal record holds, if any.
void AddCheckpointChecksum(nlohmann::json& fields, const nlohmann::json& record);

}  // namespace djshard::job
