#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "djshard/io/discover.h"
#include "djshard/store/manifest.h"

namespace djshard::store {

// How prepare normalizes records (store/normalize.h).
struct NormalizeRules {
  std::vector<std::string> media_keys;
  std::string media_root;
  std::vector<std::string> index_keys;
};

// What one pass over the input found.
struct NormalizedInput {
  uint64_t rows = 0;
  uint64_t bytes = 0;            // normalized, newlines included
  std::string digest;            // sha256 of the normalized stream
  std::vector<InputFile> files;  // per input file: size, mtime, rows, raw sha256
};

// Reads every input file once, in order: validates and normalizes each line
// on `threads` threads and appends the normalized stream, in input order, to
// the new file `out_path`. A bad line is an Error naming its file and line
// (the first one in input order); a file that changes while it is read is an
// Error too. Memory is bounded by a few 1 MB chunks per thread.
NormalizedInput NormalizeInput(const std::vector<io::InputCandidate>& inputs,
                               const NormalizeRules& rules, const std::string& out_path,
                               int threads);

// One shard cut out of a normalized stream.
struct ShardRange {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t rows = 0;
};

// The byte-balanced cut of SPEC "prepare" (ShardCutter) over the normalized
// stream in `path`, whose totals are `rows` and `bytes`.
std::vector<ShardRange> CutNormalized(const std::string& path, uint64_t rows, uint64_t bytes,
                                      uint64_t num_shards);

// Copies each range of `path` into its own new file (`shard_paths`, same
// order), fsynced, on `threads` threads; returns each shard's sha256.
std::vector<std::string> WriteShards(const std::string& path, const std::vector<ShardRange>& ranges,
                                     const std::vector<std::string>& shard_paths, int threads);

}  // namespace djshard::store
