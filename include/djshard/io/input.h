#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace djshard::io {

class ChecksumHasher;

// A stream of decoded bytes (plain file, gzip or zstd).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `capacity` bytes into `buf`; returns 0 only at the end of input.
  virtual size_t Read(char* buf, size_t capacity) = 0;
};

// Opens `path` for reading, decoding gzip (".gz") or zstd (".zst") by the
// name's suffix (case-insensitive). When `raw_hash` is given, every byte read
// from the file itself (before decoding) is fed to it; it must outlive the source.
std::unique_ptr<ByteSource> OpenInput(const std::string& path, ChecksumHasher* raw_hash = nullptr);

// Reads the byte ranges (offset, bytes) of the plain file `path`, one after
// another. A range that ends past the end of the file is an Error naming
// `path`, with `changed_hint` as its hint.
std::unique_ptr<ByteSource> OpenRanges(const std::string& path,
                                       std::vector<std::pair<uint64_t, uint64_t>> ranges,
                                       const std::string& changed_hint);

// Whether OpenInput decodes `path` (its name ends in .gz or .zst).
bool IsCompressedInput(const std::string& path);

// Splits a ByteSource into lines. Memory is one read block plus the longest line.
class LineReader {
 public:
  // Bytes after every returned line that are always readable (simdjson's padding).
  static constexpr size_t kPadding = 64;

  LineReader(std::unique_ptr<ByteSource> source, std::string display_path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Sets *line to the next line without its '\n'. Returns false at the end.
  // The view, and kPadding bytes after it, stay valid until the next call.
  bool Next(std::string_view* line);

  // 1-based number of the line last returned.
  uint64_t line_number() const { return line_number_; }
  // Decoded bytes consumed so far, newlines included.
  uint64_t bytes_consumed() const { return bytes_consumed_; }
  const std::string& display_path() const { return display_path_; }

 private:
  bool Fill();

  std::unique_ptr<ByteSource> source_;
  std::string display_path_;
  char* buf_ = nullptr;
  size_t capacity_ = 0;  // usable bytes; kPadding more are allocated
  size_t begin_ = 0;     // first unread byte
  size_t end_ = 0;       // one past the last valid byte
  size_t scanned_ = 0;   // bytes after begin_ known to hold no '\n'
  bool eof_ = false;
  uint64_t line_number_ = 0;
  uint64_t bytes_consumed_ = 0;
};

// A run of whole lines of one input file, as LineChunker cuts it.
struct LineChunk {
  size_t file = 0;          // index into the chunker's files
  uint64_t first_line = 1;  // 1-based line number of its first line in that file
  uint64_t lines = 0;
  std::string data;  // the lines, each ending in '\n' (one is added to a last line
                     // without it), then LineReader::kPadding zero bytes
  size_t size = 0;   // bytes of lines in data, without the padding
};

// Cuts a sequence of inputs into chunks of whole lines, in order: a chunk
// never spans two files and closes at about `chunk_bytes` or at `max_lines`
// lines (0: no limit), whichever comes first; a longer line is one chunk.
// Not thread-safe: one reader thread calls Next.
class LineChunker {
 public:
  // `open(i)` opens input i when the chunker reaches it; `file_done(i, lines)`
  // (when set) runs once input i has been read to its end.
  LineChunker(size_t num_files, size_t chunk_bytes, size_t max_lines,
              std::function<std::unique_ptr<ByteSource>(size_t)> open,
              std::function<void(size_t, uint64_t)> file_done = nullptr);

  // Fills *chunk (reusing its buffer) with the next chunk; false after the last.
  bool Next(LineChunk* chunk);

  // From now on Next returns at most `lines` more lines in all (chunks close
  // there) and then false until the limit is set again: a chunk never spans a
  // partition boundary.
  void LimitLines(uint64_t lines) { limit_ = lines; }
  // Reads and drops the next `lines` lines (fewer at the end of input);
  // returns how many were dropped. Clears the limit afterwards.
  uint64_t SkipLines(uint64_t lines);

 private:
  size_t num_files_, chunk_bytes_, max_lines_;
  std::function<std::unique_ptr<ByteSource>(size_t)> open_;
  std::function<void(size_t, uint64_t)> file_done_;
  size_t file_ = 0;
  std::unique_ptr<ByteSource> source_;
  bool exhausted_ = false;
  std::string carry_;
  uint64_t next_line_ = 1;
  uint64_t limit_ = UINT64_MAX;  // lines Next may still return
};

}  // namespace djshard::io
