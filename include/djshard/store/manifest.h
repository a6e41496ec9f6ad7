#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "djshard/io/checksum.h"

namespace djshard::store {

// Schema 3 holds each shard's xxh3_128; schema 2 (its sha256) stays readable.
// Schema 4 is a job of reference shards (`shards_mode` "reference"), which a
// build that reads only shard files must refuse; copy jobs stay schema 3.
inline constexpr int kManifestSchemaVersion = 3;
inline constexpr int kReferenceManifestSchemaVersion = 4;
inline constexpr int kOldestManifestSchemaVersion = 2;

// The input check blocks of a distributed prepare, in the job dir.
inline constexpr const char* kInputBlocksFile = "input_blocks.xxh3";

// How workers treat claims of this job (fixed at prepare time). Durations
// are seconds, fractions allowed, as Data-Juicer takes them.
struct Policy {
  double lease_secs = 300;
  double heartbeat_secs = 15;
  int64_t max_retries = 3;
  double poll_interval_secs = 20;
  // The n-th retry of a failed shard waits retry_backoff_secs * 2^(n-1),
  // at most kMaxRetryBackoffSecs; 0 retries at once.
  double retry_backoff_secs = 10;
};

inline constexpr double kMaxRetryBackoffSecs = 600;

struct InputFile {
  std::string path;           // absolute
  std::string relative_path;  // to the dataset path ("" parts for a single file: its name)
  uint64_t size_bytes = 0;
  int64_t mtime_ns = 0;
  uint64_t rows = 0;
  std::string sha256;  // of the raw file bytes
  // Reference shards only: what turns the file's lines into their normalized
  // form ("copy": nothing, "minify", "normalize": media paths or index keys).
  std::string normalization;
  // A file scanned by several tasks of a distributed prepare: `sha256` is
  // empty and this is its tree hash (store/prepare_scan.h).
  std::string tree_sha256;
  // A job whose input is checked by blocks (Manifest::check_block_bytes):
  // the index of the file's first block in input_blocks.xxh3.
  uint64_t check_first_block = 0;
};

// How a job holds its shards: files in the job dir, or byte ranges of the
// input files that workers read and normalize themselves.
enum class ShardsMode { kCopy, kReference };

// How merge writes the job's output: one file, or a directory of parts (one
// per shard) with a _manifest.json. A job prepared for parts has its workers
// record each output's SHA-256, so that merge reads no data.
enum class OutputLayout { kFile, kParts };

// One run of whole lines of an input file, in a reference shard.
struct ShardRange {
  uint64_t file = 0;    // index into the manifest's input_files
  uint64_t offset = 0;  // of its first byte in the file
  uint64_t length = 0;  // raw bytes, newlines included
  uint64_t rows = 0;
  uint64_t first_row = 0;   // 0-based global row of its first line
  uint64_t first_line = 1;  // 1-based line of its first line in the file
  io::Checksum checksum;    // xxh3_128 of the raw bytes
};

// One deduplicator of the recipe, run as a dedup stage (docs/dedup-stage.md).
struct DedupStageEntry {
  std::string op;         // the operator's name
  uint64_t op_index = 0;  // its index in the recipe's process list
  // Grouping tasks (each a range of the keys); 0 when the deduplicator groups
  // by the hash field an earlier one of the same kind left, and keeps every row.
  uint64_t key_ranges = 0;
};

struct Manifest;

struct ShardEntry {
  std::string id;  // part-00003-of-00016
  uint64_t index = 0;
  std::string path;  // relative to the job dir: shards/<id>.jsonl ("" for a reference shard)
  uint64_t rows = 0;
  uint64_t size_bytes = 0;
  io::Checksum checksum;           // of the file's bytes (a reference shard: its normalized lines)
  std::vector<ShardRange> ranges;  // a reference shard's lines, in order

  // How logs and records name the shard: its file, or its ranges' first input.
  std::string Describe(const Manifest& m) const;
};

// manifest.json of a job directory (SPEC-elastic-sharding.md, "prepare").
struct Manifest {
  int schema_version = kManifestSchemaVersion;
  std::string job_id;
  std::string created_at;
  std::string dataset_path;
  std::string media_root;
  std::vector<std::string> media_keys;
  std::vector<std::string> index_keys;
  std::vector<InputFile> input_files;
  uint64_t total_rows = 0;
  uint64_t total_size_bytes = 0;
  std::string normalized_sha256;
  // A distributed prepare (store/prepare_scan.h): its scan task size (the
  // block of the tree hashes), the tree hash of the normalized stream when it
  // had several tasks (normalized_sha256 is then empty), and the input check:
  // the XXH3-128 of every `check_block_bytes` block of each input file,
  // one line of hex each, in input_blocks.xxh3 (bytes and xxh3_128 below).
  // Reference shards of such a job carry no xxh3_128 of their own.
  uint64_t scan_task_bytes = 0;
  std::string normalized_tree_sha256;
  uint64_t check_block_bytes = 0;
  uint64_t check_blocks_bytes = 0;
  io::Checksum check_blocks_checksum;
  uint64_t num_shards = 0;
  ShardsMode shards_mode = ShardsMode::kCopy;
  OutputLayout output_layout = OutputLayout::kFile;
  std::vector<ShardEntry> shards;
  std::string recipe_source_path;
  std::string recipe_snapshot_path = "recipe.yaml";
  std::string recipe_sha256;
  std::string engine_name = "djshard";
  std::string engine_version;
  std::string engine_git_commit;
  Policy policy;
  std::vector<std::string> warnings;
  // The recipe's deduplicators, in order; empty for a recipe without one.
  std::vector<DedupStageEntry> dedup_stages;

  // JSON with sorted keys, two-space indented, ending in '\n'.
  std::string ToJson() const;
  // Parses manifest text; errors name `path`.
  static Manifest FromJson(const std::string& text, const std::string& path);
};

// "part-{i}-of-{N}" with both numbers zero-padded to max(5, digits(N)).
std::string ShardId(uint64_t index, uint64_t num_shards);

// Rows per shard for the byte-balanced cut, given each row's normalized size
// (newline included). Exposed for tests; prepare applies the same rule while
// streaming.
std::vector<uint64_t> CutShards(const std::vector<uint64_t>& row_bytes, uint64_t num_shards);

// Streaming form of the cut: feed rows in order; Add() returns true when the
// current shard closes after this row.
class ShardCutter {
 public:
  ShardCutter(uint64_t total_rows, uint64_t total_bytes, uint64_t num_shards);
  bool Add(uint64_t row_bytes);
  uint64_t current_shard() const { return shard_; }

 private:
  uint64_t total_rows_, total_bytes_, num_shards_;
  uint64_t written_rows_ = 0, written_bytes_ = 0, shard_ = 0;
};

}  // namespace djshard::store
