#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "djshard/io/checksum.h"
#include "djshard/io/discover.h"
#include "djshard/store/manifest.h"

namespace djshard::store {

// How prepare normalizes records (store/normalize.h).
struct NormalizeRules {
  std::vector<std::string> media_keys;
  std::string media_root;
  std::vector<std::string> index_keys;
};

// What pass 2 of prepare does with an input file's lines, from what pass 1
// found in them: copy them (every line already normalized: compact JSON,
// nothing to add or rewrite), minify them (nothing to add or rewrite), or
// normalize them again. Only the last one parses the JSON a second time.
enum class SecondPass : uint8_t { kCopy, kMinify, kNormalize };

// How a reference job's manifest names them (an input file's
// `normalization`): "copy", "minify", "normalize"; and back, an unknown name
// being an Error naming `manifest`.
const char* SecondPassName(SecondPass how);
SecondPass SecondPassNamed(const std::string& name, const std::string& manifest);

// What the first pass over the input found.
struct NormalizedInput {
  uint64_t rows = 0;
  uint64_t bytes = 0;            // normalized, newlines included
  std::string digest;            // sha256 of the normalized stream
  std::string check;             // xxh3_128 of the normalized stream, for the second pass
  std::vector<InputFile> files;  // per input file: size, mtime, rows, raw sha256
  // Per input file: how pass 2 turns its lines into their normalized form.
  std::vector<SecondPass> second_pass;
};

// Pass 1 of prepare: reads every input file once, in order, validating and
// normalizing each line on `threads` threads, and hashes the raw files and the
// normalized stream; writes nothing. A bad line is an Error naming its file
// and line (the first one in input order); a file that changes while it is
// read is an Error too. Memory is bounded by a few 1 MB chunks per thread.
NormalizedInput ScanNormalized(const std::vector<io::InputCandidate>& inputs,
                               const NormalizeRules& rules, int threads);

// One shard as pass 2 wrote it (or, for a reference shard, cut it).
struct ShardWritten {
  uint64_t rows = 0;
  uint64_t bytes = 0;
  io::Checksum checksum;           // xxh3_128 of the file (of the normalized lines)
  std::vector<ShardRange> ranges;  // a reference shard's runs of input lines
};

// Pass 2 of prepare: reads and normalizes the input again, cuts the normalized
// stream into `shard_paths.size()` byte-balanced shards (SPEC "prepare",
// ShardCutter over the totals of `scanned`) and writes each into its new file,
// fsynced, hashing it as it is written. The data is written once: there is no
// intermediate copy. Files are copied or minified as `scanned.second_pass`
// says; only files with media paths or index keys to write are parsed again. Rows, bytes and the
// normalized stream's hash must equal pass 1's, and every file's size and mtime too
// ("input changed between passes" otherwise), so a file that changed since
// pass 1 is refused whichever way it was read.
std::vector<ShardWritten> WriteNormalizedShards(const std::vector<io::InputCandidate>& inputs,
                                                const NormalizeRules& rules, int threads,
                                                const NormalizedInput& scanned,
                                                const std::vector<std::string>& shard_paths);

// Pass 2 of prepare for reference shards: reads and normalizes the input
// again, as WriteNormalizedShards does, and cuts it into `num_shards` shards
// by the same rule, writing nothing: each shard is its ranges of the input
// files (one per file it touches, with the raw bytes' xxh3_128) and the totals
// and xxh3_128 of its normalized lines. Every input must be uncompressed.
std::vector<ShardWritten> CutReferenceShards(const std::vector<io::InputCandidate>& inputs,
                                             const NormalizeRules& rules, int threads,
                                             const NormalizedInput& scanned, uint64_t num_shards);

}  // namespace djshard::store
