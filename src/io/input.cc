#include "djshard/io/input.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/checksum.h"
#include "djshard/io/fd.h"

namespace djshard::io {

namespace {

constexpr size_t kReadBlock = 4 << 20;

class FileSource : public ByteSource {
 public:
  FileSource(const std::string& path, ChecksumHasher* raw_hash) : path_(path), raw_hash_(raw_hash) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) ThrowSystemError(path, "cannot open");
    posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  ~FileSource() override { ::close(fd_); }

  size_t Read(char* buf, size_t capacity) override {
    for (;;) {
      const ssize_t n = ::read(fd_, buf, capacity);
      if (n < 0) {
        if (errno == EINTR) continue;
        ThrowSystemError(path_, "cannot read");
      }
      if (raw_hash_ != nullptr) raw_hash_->Update(buf, static_cast<size_t>(n));
      return static_cast<size_t>(n);
    }
  }

 private:
  std::string path_;
  ChecksumHasher* raw_hash_;
  int fd_ = -1;
};

class GzipSource : public ByteSource {
 public:
  GzipSource(const std::string& path, ChecksumHasher* raw_hash)
      : path_(path), file_(path, raw_hash), in_(kReadBlock) {
    std::memset(&zs_, 0, sizeof zs_);
    // 15 + 32: zlib or gzip header, detected automatically.
    if (inflateInit2(&zs_, 15 + 32) != Z_OK) throw Error(path, 0, "zlib: cannot initialise");
  }
  ~GzipSource() override { inflateEnd(&zs_); }

  size_t Read(char* buf, size_t capacity) override {
    zs_.next_out = reinterpret_cast<Bytef*>(buf);
    zs_.avail_out = static_cast<uInt>(capacity);
    while (zs_.avail_out == capacity) {
      if (zs_.avail_in == 0) {
        if (input_done_) break;
        const size_t n = file_.Read(in_.data(), in_.size());
        if (n == 0) {
          input_done_ = true;
          if (!member_ended_) {
            throw Error(path_, 0, "truncated gzip data", "the file ends inside a gzip member");
          }
          break;
        }
        zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
        zs_.avail_in = static_cast<uInt>(n);
      }
      if (member_ended_) {
        // Concatenated gzip members decode as one stream, as gzip -d does.
        inflateReset(&zs_);
        member_ended_ = false;
      }
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_ended_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw Error(path_, 0, std::string("corrupt gzip data: ") + (zs_.msg ? zs_.msg : "error"),
                    "re-create the file with gzip");
      }
    }
    return capacity - zs_.avail_out;
  }

 private:
  std::string path_;
  FileSource file_;
  std::vector<char> in_;
  z_stream zs_;
  bool input_done_ = false;
  bool member_ended_ = false;
};

class ZstdSource : public ByteSource {
 public:
  ZstdSource(const std::string& path, ChecksumHasher* raw_hash)
      : path_(path), file_(path, raw_hash), in_(ZSTD_DStreamInSize()) {
    ds_ = ZSTD_createDStream();
    if (ds_ == nullptr) throw Error(path, 0, "zstd: cannot initialise");
    ZSTD_initDStream(ds_);
  }
  ~ZstdSource() override { ZSTD_freeDStream(ds_); }

  size_t Read(char* buf, size_t capacity) override {
    ZSTD_outBuffer out{buf, capacity, 0};
    while (out.pos == 0) {
      if (input_.pos == input_.size) {
        const size_t n = file_.Read(in_.data(), in_.size());
        if (n == 0) {
          if (!frame_complete_) {
            throw Error(path_, 0, "truncated zstd data", "the file ends inside a zstd frame");
          }
          break;
        }
        input_ = ZSTD_inBuffer{in_.data(), n, 0};
      }
      const size_t rc = ZSTD_decompressStream(ds_, &out, &input_);
      if (ZSTD_isError(rc)) {
        throw Error(path_, 0, std::string("corrupt zstd data: ") + ZSTD_getErrorName(rc),
                    "re-create the file with zstd");
      }
      frame_complete_ = (rc == 0);
    }
    return out.pos;
  }

 private:
  std::string path_;
  FileSource file_;
  std::vector<char> in_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  ZSTD_DStream* ds_ = nullptr;
  bool frame_complete_ = true;
};

}  // namespace

bool IsCompressedInput(const std::string& path) {
  return EndsWithIgnoreCase(path, ".gz") || EndsWithIgnoreCase(path, ".zst");
}

std::unique_ptr<ByteSource> OpenInput(const std::string& path, ChecksumHasher* raw_hash) {
  if (EndsWithIgnoreCase(path, ".gz")) return std::make_unique<GzipSource>(path, raw_hash);
  if (EndsWithIgnoreCase(path, ".zst")) return std::make_unique<ZstdSource>(path, raw_hash);
  return std::make_unique<FileSource>(path, raw_hash);
}

namespace {

class RangesSource : public ByteSource {
 public:
  RangesSource(const std::string& path, std::vector<std::pair<uint64_t, uint64_t>> ranges,
               const std::string& changed_hint)
      : path_(path), hint_(changed_hint), ranges_(std::move(ranges)) {
    fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd_.get() < 0 && errno == ENOENT) throw Error(path, 0, "file is missing", hint_);
    if (fd_.get() < 0) ThrowSystemError(path, "cannot open");
  }

  // Fills `buf` from as many ranges as it holds.
  size_t Read(char* buf, size_t capacity) override {
    size_t filled = 0;
    while (filled < capacity) {
      while (next_ < ranges_.size() && done_ == ranges_[next_].second) {
        ++next_;
        done_ = 0;
      }
      if (next_ == ranges_.size()) break;
      const auto [offset, bytes] = ranges_[next_];
      const size_t want = static_cast<size_t>(std::min<uint64_t>(capacity - filled, bytes - done_));
      const size_t n = PreadFully(fd_.get(), buf + filled, want, offset + done_, path_);
      if (n < want) {
        throw Error(path_, 0,
                    "file ends at byte " + std::to_string(offset + done_ + n) +
                        ", inside the range it should hold from byte " + std::to_string(offset),
                    hint_);
      }
      done_ += n;
      filled += n;
    }
    return filled;
  }

 private:
  std::string path_, hint_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;
  ScopedFd fd_;
  size_t next_ = 0;    // the range being read
  uint64_t done_ = 0;  // its bytes read
};

}  // namespace

std::unique_ptr<ByteSource> OpenRanges(const std::string& path,
                                       std::vector<std::pair<uint64_t, uint64_t>> ranges,
                                       const std::string& changed_hint) {
  return std::make_unique<RangesSource>(path, std::move(ranges), changed_hint);
}

LineReader::LineReader(std::unique_ptr<ByteSource> source, std::string display_path)
    : source_(std::move(source)), display_path_(std::move(display_path)) {
  capacity_ = kReadBlock;
  buf_ = static_cast<char*>(std::malloc(capacity_ + kPadding));
  if (buf_ == nullptr) throw Error("out of memory reading " + display_path_);
  std::memset(buf_ + capacity_, 0, kPadding);
}

LineReader::~LineReader() { std::free(buf_); }

bool LineReader::Fill() {
  if (begin_ > 0) {
    // Move the partial line to the front so the block can be refilled.
    std::memmove(buf_, buf_ + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == capacity_) {
    // One line longer than the buffer: grow (the line must fit in memory).
    const size_t grown = capacity_ * 2;
    char* bigger = static_cast<char*>(std::realloc(buf_, grown + kPadding));
    if (bigger == nullptr) throw Error(display_path_, line_number_ + 1, "line too long for memory");
    buf_ = bigger;
    capacity_ = grown;
  }
  const size_t n = source_->Read(buf_ + end_, capacity_ - end_);
  if (n == 0) {
    eof_ = true;
    return false;
  }
  end_ += n;
  return true;
}

bool LineReader::Next(std::string_view* line) {
  for (;;) {
    const char* start = buf_ + begin_ + scanned_;
    const size_t avail = end_ - begin_ - scanned_;
    const void* nl = avail > 0 ? std::memchr(start, '\n', avail) : nullptr;
    if (nl != nullptr) {
      const size_t len = static_cast<const char*>(nl) - (buf_ + begin_);
      *line = std::string_view(buf_ + begin_, len);
      begin_ += len + 1;
      scanned_ = 0;
      bytes_consumed_ += len + 1;
      ++line_number_;
      return true;
    }
    scanned_ = end_ - begin_;
    if (eof_ || !Fill()) {
      if (end_ == begin_) return false;
      // Last line without '\n'. Zero the padding after it for the parser.
      const size_t len = end_ - begin_;
      std::memset(buf_ + end_, 0, kPadding);
      *line = std::string_view(buf_ + begin_, len);
      begin_ = end_;
      scanned_ = 0;
      bytes_consumed_ += len;
      ++line_number_;
      return true;
    }
  }
}

LineChunker::LineChunker(size_t num_files, size_t chunk_bytes, size_t max_lines,
                         std::function<std::unique_ptr<ByteSource>(size_t)> open,
                         std::function<void(size_t, uint64_t)> file_done)
    : num_files_(num_files),
      chunk_bytes_(chunk_bytes),
      max_lines_(max_lines),
      open_(std::move(open)),
      file_done_(std::move(file_done)) {}

uint64_t LineChunker::SkipLines(uint64_t lines) {
  LineChunk scratch;
  uint64_t skipped = 0;
  limit_ = lines;
  while (skipped < lines && Next(&scratch)) skipped += scratch.lines;
  limit_ = UINT64_MAX;
  return skipped;
}

bool LineChunker::Next(LineChunk* chunk) {
  for (;;) {
    if (limit_ == 0) return false;
    if (!source_) {
      if (file_ >= num_files_) return false;
      source_ = open_(file_);
      exhausted_ = false;
      next_line_ = 1;
      carry_.clear();
    }
    // The carried bytes go to the front of the chunk's buffer, which keeps its
    // size from the chunk it held before: growing a string zero-fills what it
    // adds, a pass over every byte read.
    std::string& data = chunk->data;
    size_t len = carry_.size();
    if (data.size() < len) data.resize(len);
    if (len > 0) std::memcpy(data.data(), carry_.data(), len);
    carry_.clear();
    bool has_newline = len > 0 && std::memchr(data.data(), '\n', len) != nullptr;
    while (!exhausted_ && (len < chunk_bytes_ || !has_newline)) {
      const size_t want = std::max(chunk_bytes_, len + (64 << 10)) - len;
      if (data.size() < len + want) data.resize(len + want);
      const size_t n = source_->Read(data.data() + len, want);
      exhausted_ = (n == 0);
      has_newline = has_newline || std::memchr(data.data() + len, '\n', n) != nullptr;
      len += n;
    }
    data.resize(len);
    // The file's last line may lack its '\n'.
    if (exhausted_ && !data.empty() && data.back() != '\n') data.push_back('\n');
    size_t cut = exhausted_ ? data.size() : data.rfind('\n') + 1;
    size_t lines = 0;
    for (size_t pos = 0; pos < cut;) {
      pos = static_cast<size_t>(
                static_cast<const char*>(std::memchr(data.data() + pos, '\n', cut - pos)) -
                data.data()) +
            1;
      if (++lines == max_lines_ || lines == limit_) {
        cut = pos;
        break;
      }
    }
    carry_.assign(data, cut, std::string::npos);
    data.resize(cut);
    const size_t file = file_;
    const uint64_t first_line = next_line_;
    next_line_ += lines;
    if (limit_ != UINT64_MAX) limit_ -= lines;
    if (exhausted_ && carry_.empty()) {
      source_.reset();
      ++file_;
      if (file_done_) file_done_(file, next_line_ - 1);
    }
    if (data.empty()) continue;
    chunk->file = file;
    chunk->first_line = first_line;
    chunk->lines = lines;
    chunk->size = data.size();
    data.append(LineReader::kPadding, '\0');
    return true;
  }
}

}  // namespace djshard::io
