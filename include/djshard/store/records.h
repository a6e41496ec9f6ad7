#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "djshard/exec/executor.h"
#include "djshard/io/checksum.h"

namespace djshard::store {

// Version of the lock, attempt, done and failed records below. Readers accept
// records without one (written before records carried it) and refuse newer ones.
// Version 2: done records hold their output's xxh3_128 (version 1: sha256).
inline constexpr int kRecordSchemaVersion = 2;
// Version 3, written only by a done record whose output is in another task's
// file (output_source), so that builds that cannot read it refuse it; readers
// accept versions up to this one.
inline constexpr int kSourcedDoneRecordSchemaVersion = 3;

// What became of an attempt (attempts/<shard>/<NNNN>-<token>/attempt.json).
enum class AttemptStatus {
  kRunning,      // claimed and working (or its owner died)
  kDone,         // published the shard's done record
  kFailed,       // an error; counts toward max_retries
  kStale,        // its lease expired and another worker took it over; counts too
  kLost,         // its claim went away before it could publish; does not count
  kInterrupted,  // stopped by SIGINT/SIGTERM and handed back; does not count
  kSuperseded,   // finished, but another attempt had published first
};
const char* AttemptStatusName(AttemptStatus status);
// nullopt for a name no djshard writes.
std::optional<AttemptStatus> ParseAttemptStatus(const std::string& name);
// Failed and stale attempts use up the shard's retries.
inline bool CountsAsFailure(AttemptStatus s) {
  return s == AttemptStatus::kFailed || s == AttemptStatus::kStale;
}

// state/locks/<shard>.lock: who claimed the shard and where its attempt lives.
struct LockRecord {
  std::string shard_id;
  std::string token;
  std::string hostname;
  int64_t pid = 0;
  std::string claimed_at;
  int64_t attempt_number = 0;
  std::string attempt_dir;  // relative to the job dir

  // One JSON line, without the newline.
  std::string ToJson() const;
  // Throws Error naming `path` for text that is not a lock record.
  static LockRecord FromJson(const std::string& text, const std::string& path);
};

// attempts/<shard>/<NNNN>-<token>/attempt.json: the claim and its outcome.
struct AttemptRecord {
  LockRecord claim;
  AttemptStatus status = AttemptStatus::kRunning;
  std::string input_path;  // the shard's file, relative to the job dir
  std::string started_at;
  std::string finished_at;  // empty while running
  std::string error;        // why it failed, was lost or interrupted
  // A checkpointed shard: {total, resumed, computed} partitions, and per
  // partition resumed from an earlier attempt's commit {partition_id, op_idx,
  // commit, origin_attempt_token}. Null when the shard is not checkpointed.
  nlohmann::json partitions;
  nlohmann::json resumed_from;
  // This node's replica plan of the job's model stages (SPEC-checkpoints §8,
  // §10: stages, execution_groups, probe). Null without model operators.
  nlohmann::json plan;

  std::string ToJson() const;
  static AttemptRecord FromJson(const std::string& text, const std::string& path);
};

// Where a done record's output is when it is not in its output file: byte
// ranges of another file in the job directory, in order. A dedup stage's
// shard task with nothing to run after the last deduplicator publishes the
// kept lines of its sign task's rows.jsonl this way instead of copying them
// (docs/dedup-stage.md).
struct OutputSource {
  std::string path;                                   // relative to the job dir
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // (offset, bytes), ascending

  bool empty() const { return path.empty(); }
};

// state/done/<shard>.json, published once by the attempt that finished the shard.
struct DoneRecord {
  std::string shard_id;
  std::string hostname;
  int64_t pid = 0;
  std::string token;
  int64_t attempt_number = 0;
  std::string output_path;  // relative to the job dir
  // Set when the output's bytes are ranges of another file: output_path
  // then names the attempt's (empty) output file, and the rows, bytes and
  // checksums below are those of the ranges' bytes.
  OutputSource output_source;
  uint64_t rows = 0;
  uint64_t size_bytes = 0;
  io::Checksum checksum;  // of the output's uncompressed bytes
  // The output's SHA-256, written when the job is prepared for the parts
  // layout (merge's _manifest.json lists it); empty otherwise.
  std::string output_sha256;
  std::string completed_at;
  std::string engine_version;
  std::string engine_git_commit;
  std::vector<exec::OperatorCounters> op_stats;
  std::vector<exec::RegionCounters> region_stats;  // expand/gather regions ("regions")
  double seconds = 0;
  // What computed the recipe's model operators (exec::ModelDevices): shards
  // computed by different ones may differ in the last bits of model outputs.
  std::vector<std::string> model_devices;
  // A checkpointed shard: its partitions {total, resumed, computed} as the
  // publishing attempt's attempt.json has them; null when not checkpointed.
  nlohmann::json partitions;
  // A dedup stage's task (store/dedup_stage.h): its files, each with bytes
  // and xxh3_128, and its counts; null for a shard.
  nlohmann::json stage;

  std::string ToJson() const;
  // Throws Error naming `path` when a field that merge relies on is missing.
  static DoneRecord FromJson(const std::string& text, const std::string& path);
};

// Shard ids by the model devices of their done records (an empty list: the
// recipe has no model operator).
using ShardsByModelDevices = std::map<std::vector<std::string>, std::vector<std::string>>;

// A warning when shards' model outputs were computed on more than one kind of
// device: they may differ in the last bits from the output of one kind. Empty
// when all agree.
std::string MixedModelDevicesWarning(const ShardsByModelDevices& shards);

// state/failed/<shard>.json, published when a shard used up its retries.
struct FailedRecord {
  std::string shard_id;
  int64_t failures = 0;
  std::string last_error;
  std::string last_attempt;  // attempt dir, relative to the job dir
  std::string last_log;      // its process.log, relative to the job dir
  std::string failed_at;
  std::string hostname;

  std::string ToJson() const;
  static FailedRecord FromJson(const std::string& text, const std::string& path);
};

}  // namespace djshard::store
