#pragma once
// The normalizing pipeline of prepare's passes over the input: a reader cuts
// the input into chunks of whole lines, normalizer threads normalize them, a
// sink sees them in input order and says what to write where.

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "djshard/common/error.h"
#include "djshard/io/fd.h"
#include "djshard/io/input.h"
#include "src/store/normalize_pass.h"

namespace djshard::store {

inline constexpr size_t kChunkBytes = 1 << 20;

// One shard file being written by pass 2.
struct ShardFile {
  std::string path;
  io::ScopedFd fd;
  int pending = 0;                           // pieces placed and not yet written
  bool complete = false;                     // the cut has closed it: no more pieces
};

// A run of a chunk's normalized bytes that goes into one shard file.
struct Piece {
  std::shared_ptr<ShardFile> file;
  uint64_t offset = 0;  // in the file
  size_t begin = 0;     // in the chunk's normalized bytes
  size_t size = 0;
};

// A run of whole lines of one input file, and what normalizing it gave.
struct Chunk {
  uint64_t seq = 0;
  uint64_t first_row = 0;  // 0-based global row number of its first line
  io::LineChunk lines;
  std::string normalized;                      // the normalized lines, each ending in '\n'
  SecondPass second_pass = SecondPass::kCopy;  // pass 1: what these lines need in pass 2
  std::exception_ptr error;   // the chunk's first bad line, or the reader's failure
  std::vector<Piece> pieces;  // what of it must be written where
};

struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

// The size and mtime of `path` now.
FileStamp Stamp(const std::string& path);

// "input changed between passes", naming `what`.
Error ChangedBetweenPasses(const std::string& what);

// Where the chunks come from: runs on one thread, in input order.
class ChunkReader {
 public:
  virtual ~ChunkReader() = default;
  // Fills c->lines and c->first_row with the next chunk; false after the last.
  virtual bool Next(Chunk* c) = 0;
};

// What becomes of the normalized chunks.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  // Each chunk in input order, on one thread: fills c->pieces with what must
  // be written.
  virtual void Place(Chunk& c) = 0;
  // After a chunk's pieces are written, on any thread.
  virtual void Written(Chunk& c) = 0;
};

// Reads chunks from `reader` (on the caller's thread), normalizes them on
// `threads` threads, hands them to `sink` in input order (on a placer thread)
// and writes their pieces on the normalizer threads. `second_pass`, when
// given (pass 2), says per file which lines are copied or minified rather
// than normalized again. Rethrows the first failure in input order.
void RunNormalizePipeline(const std::vector<io::InputCandidate>& inputs,
                          const NormalizeRules& rules, int threads, ChunkReader& reader,
                          ChunkSink& sink, const std::vector<SecondPass>* second_pass = nullptr);

}  // namespace djshard::store
