#pragma once
// Distributed prepare (SPEC-elastic-sharding "Distributed prepare"): the input
// of a reference job is scanned by tasks that any dlc instance claims, each a
// byte range of one input file of about `task_bytes`; the coordinator then
// cuts the shards from the tasks' small results, reading no input.
//
// Task k of a file covers the file's bytes [k*T, (k+1)*T) (T = task_bytes)
// for hashing, and the lines that start in that range for validating and
// counting: a line belongs to the task where it starts. Each task records
//   - the SHA-256 of its T bytes: the file's tree hash is the SHA-256 of those
//     digests, each as 64 lowercase hex digits and '\n', in order (what
//     `split -b T` and `sha256sum` give); a file of one task has its plain
//     SHA-256 instead;
//   - the XXH3-128 of each `check_block_bytes` block of its bytes, which
//     workers check as they read their ranges;
//   - each line's raw and normalized sizes, from which the cut is computed
//     exactly as a one-node prepare computes it;
//   - the SHA-256 of its normalized lines (the normalized stream's tree hash
//     is the SHA-256 of those digests as above, tasks in order);
//   - the first bad line, if any.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/io/checksum.h"
#include "djshard/io/discover.h"
#include "djshard/io/sha256.h"
#include "djshard/store/manifest.h"

namespace djshard::store {

// The default size of a scan task, and the granularity of task sizes.
inline constexpr uint64_t kDefaultScanTaskBytes = 256ull << 20;
inline constexpr uint64_t kScanTaskUnitBytes = 64ull << 10;

// The scan of one job's input: its files (as the coordinator found them) and
// tasks, written by the coordinator to plan.json for every instance.
struct ScanPlan {
  struct File {
    std::string path;  // absolute
    std::string display_path;
    std::string relative_path;
    uint64_t size_bytes = 0;
    int64_t mtime_ns = 0;
  };
  struct Task {
    size_t file = 0;
    uint64_t index = 0;  // in its file: bytes [index*task_bytes, (index+1)*task_bytes)
  };
  uint64_t task_bytes = kDefaultScanTaskBytes;
  uint64_t check_block_bytes = 0;
  std::vector<std::string> media_keys;
  std::string media_root;
  std::vector<File> files;
  std::vector<Task> tasks;  // in input order

  // "scan-00003": the task's lock and result names.
  std::string TaskId(size_t task) const;
  std::string ToJson() const;
  static ScanPlan FromJson(const std::string& text, const std::string& path);
};

// The plan for `inputs`: one task per `task_bytes` of each file (one for an
// empty file). `task_bytes` must be a positive multiple of kScanTaskUnitBytes.
ScanPlan PlanScan(const std::vector<io::InputCandidate>& inputs,
                  const std::vector<std::string>& media_keys, const std::string& media_root,
                  uint64_t task_bytes);

// The normalized stream's SHA-256 when one process runs every scan task in
// input order. A task that starts the stream with a whole file hashes its
// lines only once while they are the file's bytes unchanged (an input already
// minified): the stream then takes the SHA-256 state of the file's bytes.
struct NormalizedStream {
  io::Sha256 sha256;
  uint64_t bytes = 0;  // hashed into sha256 so far
};

// What one scan task found; its data file holds the check blocks (one line of
// 32 hex digits each) and then each line's raw and normalized sizes (two
// LEB128 varints per line).
struct ScanTaskResult {
  uint64_t task = 0;
  uint64_t begin = 0, end = 0;  // the task's lines: bytes [begin, end) of the file
  uint64_t rows = 0;
  uint64_t normalized_bytes = 0;
  std::string normalized_sha256;
  std::string block_sha256;   // of the task's bytes [index*T, (index+1)*T)
  std::string normalization;  // "copy", "minify", "normalize"
  uint64_t size_bytes = 0;    // of the file, as the task saw it before and after
  int64_t mtime_ns = 0;
  uint64_t check_blocks = 0;
  std::string data_file;  // its name in the task's directory (the reader makes it absolute)
  uint64_t data_bytes = 0;
  io::Checksum data_checksum;
  // The task's failure: a bad line (error_line, 1-based among the task's
  // lines, in the file) or any other Error (error_line 0); empty when none.
  std::string error_file, error_message, error_hint;
  uint64_t error_line = 0;
  int error_code = 0;
  bool failed() const { return !error_message.empty(); }

  nlohmann::json ToJson() const;
  static ScanTaskResult FromJson(const nlohmann::json& j);
};

// Runs task `task` of `plan` on `threads` threads and writes its data file
// into `dir` (named after the task and `tag`, written and fsynced). A bad line
// is the result's failure; a file that changed since the plan, or a failing
// read or write, is an Error. With `stream`, the task's normalized lines go
// on with that digest (one process running every task in order: the
// stream's plain SHA-256) and its result has no normalized_sha256.
ScanTaskResult RunScanTask(const ScanPlan& plan, size_t task, int threads, const std::string& dir,
                           const std::string& tag, NormalizedStream* stream = nullptr);

// What the cut from scan results gave, for the manifest.
struct ScannedInput {
  uint64_t rows = 0;
  uint64_t bytes = 0;             // normalized
  std::string normalized_sha256;  // one task: the stream's SHA-256, else ""
  std::string normalized_tree_sha256;
  std::vector<InputFile> files;
  std::vector<ShardEntry> shards;  // rows, size_bytes, ranges (no checksums)
  std::string check_blocks;        // input_blocks.xxh3: every file's blocks in order
};

// Throws the first bad line the tasks found, in input order, as an Error
// naming its file and line; and an Error when a file differs from the plan,
// in the tasks' results or now.
void CheckScanResults(const ScanPlan& plan, const std::vector<ScanTaskResult>& results);

// The tree hash of a file (blocks of `block_bytes`), as a distributed prepare
// records it for a file of several tasks.
std::string FileTreeSha256(const std::string& path, uint64_t block_bytes);

// Cuts `num_shards` reference shards from the results of every task of
// `plan` (in task order) by the rule of a one-node prepare, checking each
// data file against its result. The first bad line in input order is an
// Error naming its file and line; a file that differs from the plan now, or
// between tasks, is an Error too.
ScannedInput CutScannedShards(const ScanPlan& plan, const std::vector<ScanTaskResult>& results,
                              uint64_t num_shards);

// A copy job of a distributed prepare: its shard files are written by tasks
// that any instance claims, each reading its shards' ranges as a worker of a
// reference job would (normalized, check blocks verified) and writing each
// into its task directory, hashed and fsynced; the coordinator links them
// into the staged job. The plan names no coordinator's files: one that takes
// over plans the same tasks and keeps their results.
struct ShardWritePlan {
  std::string blocks_dir;  // absolute: holds the input's input_blocks.xxh3
  std::string manifest;    // the cut as a reference job's manifest, which the tasks read
  std::vector<std::pair<size_t, size_t>> tasks;  // shards [first, end)

  std::string ToJson() const;
  static ShardWritePlan FromJson(const std::string& text, const std::string& path);
};

// Tasks of about `task_bytes` of normalized shard bytes (whole shards).
std::vector<std::pair<size_t, size_t>> PlanShardWrites(const std::vector<ShardEntry>& shards,
                                                       uint64_t task_bytes);

// Any instance: writes task `task`'s shards (<id>.<tag>.jsonl in `dir`, the
// task's directory), checking `owned` (its claim is still its own) before
// each write; a file it could not finish is removed. Its result: per shard
// its id, file (its name in `dir`), rows, size_bytes and xxh3_128; or the
// Error that stopped it ("error").
nlohmann::json RunShardWriteTask(const ShardWritePlan& plan, size_t task, const std::string& dir,
                                 const std::string& tag, const std::function<bool()>& owned);

}  // namespace djshard::store
