#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "djshard/io/checksum.h"
#include "djshard/io/discover.h"
#include "djshard/recipe/recipe.h"

namespace djshard::job {

// A contiguous range of input rows [start, end): the unit of checkpoint and
// resume (SPEC-checkpoints §3).
struct PartitionBounds {
  uint64_t start = 0;  // inclusive
  uint64_t end = 0;    // exclusive
  uint64_t rows() const { return end - start; }
};

// The exact bounds of `parts` partitions over `rows` rows: partition i has
// rows / parts rows, one more when i < rows % parts, each starting where the
// previous one ends (10/4 -> 3,3,2,2). Requires 0 < parts <= rows, or
// parts == rows == 0.
std::vector<PartitionBounds> ExactBounds(uint64_t rows, uint64_t parts);

enum class Modality { kText, kImage, kAudio, kVideo, kMultimodal };
const char* ModalityName(Modality m);

// The auto-mode seed table row of a modality.
struct ModalitySizing {
  uint64_t default_rows;
  uint64_t max_rows;
  double memory_multiplier;
};
ModalitySizing SizingOf(Modality m);

// Auto mode's rows per partition: clamp(floor(min(target_mb, max_size_mb) MiB
// / (mean_row_bytes x multiplier)), 1, max rows); when the estimate is 0,
// `fallback_rows` when set, else the default rows of the modality.
uint64_t AutoRowsPerPartition(Modality modality, double mean_row_bytes, uint64_t target_size_mb,
                              uint64_t max_size_mb, std::optional<uint64_t> fallback_rows);
// ceil(rows / rows_per_partition).
uint64_t AutoPartitionCount(uint64_t rows, uint64_t rows_per_partition);

// One read of the input that hashes nothing: rows, bytes, and the first 1000
// rows' mean size and modality (auto mode's sample). The hashes come from
// HashPartitions once the bounds are known.
struct InputScan {
  uint64_t rows = 0;
  uint64_t bytes = 0;  // decoded bytes, terminators included
  uint64_t sample_rows = 0;
  uint64_t sample_bytes = 0;
  Modality modality = Modality::kText;
};
InputScan ScanInput(const std::vector<io::InputCandidate>& inputs, const recipe::Recipe& recipe);

// What a partition holds: its decoded bytes and their hash (sha256-lines-v1's
// bytes, hashed with XXH3-128, or SHA-256 in partition sets of older jobs).
struct PartitionDigest {
  uint64_t size_bytes = 0;
  io::Checksum checksum;
};
// Which hashes one read of the input takes.
struct InputHashes {
  io::ChecksumKind partitions = io::ChecksumKind::kXxh3_128;
  // The whole input's, if any: SHA-256 for a run job's partitioning_info (a
  // fingerprint people compare), XXH3-128 to check a shard file.
  std::optional<io::ChecksumKind> whole;
};
// Reads the input once and hashes each partition of `bounds` (which must be
// contiguous from row 0). `total_rows` is set to the rows actually read;
// `*whole` to the hash of all of them when `hashes.whole` is set (computed on
// a second thread from the same read).
std::vector<PartitionDigest> HashPartitions(const std::vector<io::InputCandidate>& inputs,
                                            const std::vector<PartitionBounds>& bounds,
                                            uint64_t* total_rows, const InputHashes& hashes,
                                            io::Checksum* whole = nullptr);

}  // namespace djshard::job
