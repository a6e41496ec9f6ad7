#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/io/disk.h"
#include "djshard/store/job.h"
#include "djshard/store/records.h"

namespace djshard::store {

// What streaming the published shard outputs found.
struct VerifiedOutputs {
  uint64_t rows = 0;
  uint64_t bytes = 0;
  std::string sha256;           // of the concatenation, in manifest order
  std::set<std::string> hosts;  // distinct hostnames of the done records
  ShardsByModelDevices shards_by_model_devices;
};

// Streams every shard's published output in manifest order, checking rows,
// size and checksum against its done record while reading it (`deep` also
// re-validates each line as a JSON object); `sink` receives the bytes in
// order. The job must be complete. Throws Error naming the shard and the
// mismatch.
VerifiedOutputs StreamVerifiedOutputs(const JobDir& job,
                                      const std::function<void(std::string_view)>& sink, bool deep);

struct MergeRequest {
  // Empty: <job-dir>/merged.jsonl, or for the parts layout <job-dir>/merged.
  std::string output;
  bool overwrite = false;
  std::optional<OutputLayout> layout;  // unset: the layout the job was prepared for
};

struct MergeOutcome {
  std::string output_path;  // the merged file, or the directory of parts
  uint64_t rows = 0;
  uint64_t bytes = 0;  // uncompressed content
  std::string sha256;  // of the merged file's content ("" for parts: each has its own)
  uint64_t num_shards = 0;
  uint64_t nodes = 0;
  std::string model_devices_warning;  // MixedModelDevicesWarning, or empty
  double seconds = 0;                 // how long Verify took
  uint64_t stage_files = 0;           // Verify: dedup stage files checked
  uint64_t stage_files_removed = 0;   // Verify: dedup stage files gc removed
  OutputLayout layout = OutputLayout::kFile;
};

// Concatenates verified shard outputs into one file (temp + fsync + rename;
// gzip or zstd when its name ends in .gz or .zst) and writes merge.json, whose
// sha256 is that of the uncompressed content. With the parts layout the
// output is a directory of one part per shard, in order (hard links of the
// published outputs, copies across filesystems) and a _manifest.json with each
// part's rows, bytes, xxh3_128 and SHA-256, published with one rename. On any
// problem the old output stays untouched.
MergeOutcome Merge(const JobDir& job, const MergeRequest& request, io::Disk& disk = io::RealDisk());

struct VerifyRequest {
  std::string output;         // empty: merge.json's output, else <job-dir>/merged.jsonl
  uint64_t expect_nodes = 1;  // distinct hostnames required among done records
  bool deep = false;          // also re-parse every line of every shard output
};

// Re-checks a finished job end to end: every shard done and intact, enough
// distinct nodes, and the merged output equal to the shard outputs in order.
MergeOutcome Verify(const JobDir& job, const VerifyRequest& request);

// Re-reads a merged output (decompressing .gz/.zst) and checks rows, bytes and
// content sha256 against `expected`. Throws Error naming the file on any
// difference.
void CheckMergedOutput(const MergeOutcome& expected);

// "PASS: N shards were completed by K node(s); merged R rows into <path>"
// (" as N parts" after the parts layout's directory)
std::string PassLine(const MergeOutcome& outcome);

}  // namespace djshard::store
