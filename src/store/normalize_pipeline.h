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
#include "djshard/io/sha256.h"
#include "src/store/normalize_pass.h"

namespace djshard::store {

inline constexpr size_t kChunkBytes = 1 << 20;

// One shard file being written by pass 2.
struct ShardFile {
  std::string path;
  io::ScopedFd fd;
  int pending = 0;        // pieces placed and not yet written
  bool complete = false;  // the cut has closed it: no more pieces
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
  // The SHA-256 state of its file's stored bytes before this chunk, from a
  // reader that hashes them chunk by chunk (for FollowingDigest); else null.
  std::shared_ptr<const io::Sha256> raw_before;
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

// The normalized stream's SHA-256 where the stream may begin as one file's
// stored bytes (an input already minified): while that file's chunks come
// unchanged (kCopy), they are not hashed a second time. A chunk that differs
// takes the state of the file's bytes before it (Chunk::raw_before), and the
// file's end the state of all of them, which its reader keeps
// (HashStoredChunk). Used by the placer thread, in input order.
class FollowingDigest {
 public:
  explicit FollowingDigest(io::Sha256* sha) : sha_(sha) {}

  // Before a file's first chunk. `kept`: its reader hashes its stored bytes
  // chunk by chunk and keeps the states. It is followed when nothing was
  // hashed yet.
  void StartFile(bool kept);
  // Each chunk, in input order.
  void Add(const Chunk& c);
  // After the file's last chunk: `raw`, the SHA-256 state of its `size`
  // stored bytes (needed when it was followed). The chunker ends a last line
  // lacking '\n' with one.
  void EndFile(const io::Sha256* raw, uint64_t size);
  // The normalized bytes in the stream so far.
  uint64_t bytes() const { return bytes_ + followed_; }

 private:
  io::Sha256* sha_;
  uint64_t bytes_ = 0;  // hashed into *sha_
  bool following_ = false;
  uint64_t followed_ = 0;  // bytes of the file's start not hashed into *sha_
};

// A reader's part of FollowingDigest: hashes chunk `c` of a file of `size`
// stored bytes into `file_sha` (without the '\n' the chunker ends a last line
// with when the file lacks it), `*hashed` counting the bytes hashed; with
// `keep`, c->raw_before first takes the state before it.
void HashStoredChunk(io::Sha256& file_sha, uint64_t size, uint64_t* hashed, bool keep, Chunk* c);

// Reads chunks from `reader` (on the caller's thread), normalizes them on
// `threads` threads, hands them to `sink` in input order (on a placer thread)
// and writes their pieces on the normalizer threads. `second_pass`, when
// given (pass 2), says per file which lines are copied or minified rather
// than normalized again. Rethrows the first failure in input order.
void RunNormalizePipeline(const std::vector<io::InputCandidate>& inputs,
                          const NormalizeRules& rules, int threads, ChunkReader& reader,
                          ChunkSink& sink, const std::vector<SecondPass>* second_pass = nullptr);

}  // namespace djshard::store
