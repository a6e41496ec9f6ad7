#include "djshard/io/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/checksum.h"
#include "djshard/io/disk.h"
#include "djshard/io/fd.h"
#include "djshard/io/input.h"
#include "djshard/io/sha256.h"

namespace djshard::io {

namespace {
constexpr size_t kBufferSize = 1 << 20;
}

// Whole buffers written with O_DIRECT, in the order handed over, on a thread
// of its own: the writer fills the next buffer while the disk takes the last
// one. The first failure is kept, what was queued after it is dropped, and
// the writer gets the failure at its next call.
struct AtomicFileWriter::DirectQueue {
  struct Job {
    char* buffer;
    uint64_t offset;
  };

  DirectQueue(int fd, const std::string& path, std::vector<char*> spare)
      : fd_(fd), path_(path), spare_(std::move(spare)), thread_([this] { Run(); }) {}
  ~DirectQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Queues the full buffer `job.buffer`; returns an empty one to fill.
  char* Submit(Job job) {
    std::unique_lock<std::mutex> lock(mu_);
    // After a failure nothing more is queued: the caller's buffer stays its own.
    if (error_) std::rethrow_exception(error_);
    todo_.push_back(job);
    cv_.notify_all();
    cv_.wait(lock, [&] { return !spare_.empty() || error_; });
    if (error_) std::rethrow_exception(error_);
    char* next = spare_.back();
    spare_.pop_back();
    return next;
  }

  // Waits until every queued buffer is written.
  void Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return (todo_.empty() && !busy_) || error_; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !todo_.empty(); });
      if (stop_) return;
      const Job job = todo_.front();
      todo_.pop_front();
      busy_ = true;
      lock.unlock();
      std::exception_ptr failed;
      try {
        const std::string_view bytes(job.buffer, kBufferSize);
        if (!PwriteDirect(fd_, bytes, job.offset, path_)) {
          // Refused: this and every later buffer go through the page cache.
          EndDirectWrites(fd_, path_);
          PwriteFully(fd_, bytes, job.offset, path_);
        }
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      busy_ = false;
      spare_.push_back(job.buffer);
      if (failed && !error_) error_ = failed;
      if (error_) {
        for (const Job& dropped : todo_) spare_.push_back(dropped.buffer);
        todo_.clear();
      }
      cv_.notify_all();
    }
  }

  const int fd_;
  const std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> todo_;
  std::vector<char*> spare_;
  std::exception_ptr error_;
  bool busy_ = false;  // a buffer is being written
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

std::string TempPrefix(const std::string& path, const std::string& temp_tag) {
  return path + ".tmp." + (temp_tag.empty() ? "" : temp_tag + ".");
}

AtomicFileWriter::AtomicFileWriter(std::string path, bool overwrite, Disk& disk,
                                   const std::string& temp_tag)
    : path_(std::move(path)), overwrite_(overwrite), disk_(disk) {
  temp_path_ = TempPrefix(path_, temp_tag) + RandomHex(16);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) ThrowSystemError(temp_path_, "cannot create");
  buffers_.reserve(3);
  buffers_.push_back(NewAlignedBuffer(kBufferSize));
  buffer_ = buffers_.back().get();
  direct_ = TryDirectWrites(fd_);
}

AtomicFileWriter::~AtomicFileWriter() {
  queue_.reset();  // its thread may be writing to fd_
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::Append(std::string_view bytes) {
  bytes_written_ += bytes.size();
  if (!direct_ && bytes.size() >= kBufferSize) {
    Flush();
    WriteAll(bytes);  // large pieces skip the buffer
    return;
  }
  // Whole buffers only, so that a direct write stays block-aligned.
  while (!bytes.empty()) {
    const size_t take = std::min(kBufferSize - buffered_, bytes.size());
    std::memcpy(buffer_ + buffered_, bytes.data(), take);
    buffered_ += take;
    bytes.remove_prefix(take);
    if (buffered_ < kBufferSize) continue;
    if (!direct_) {
      WriteAll(std::string_view(buffer_, buffered_));
    } else {
      if (!queue_) {
        buffers_.push_back(NewAlignedBuffer(kBufferSize));
        buffers_.push_back(NewAlignedBuffer(kBufferSize));
        queue_ = std::make_unique<DirectQueue>(
            fd_, temp_path_, std::vector<char*>{buffers_[1].get(), buffers_[2].get()});
      }
      buffer_ = queue_->Submit({buffer_, file_offset_});
      file_offset_ += kBufferSize;
    }
    buffered_ = 0;
  }
}

void AtomicFileWriter::WriteAll(std::string_view bytes) {
  if (bytes.empty()) return;
  if (linked_) {
    throw Error(temp_path_, 0, "cannot append to a file that is another file's link",
                "report this: djshard appends nothing after linking");
  }
  PwriteFully(fd_, bytes, file_offset_, temp_path_);
  file_offset_ += bytes.size();
#ifdef __linux__
  // Start writeback of what is written so far, so that the fsync in Commit()
  // has little left to wait for.
  constexpr uint64_t kWritebackChunk = 4 << 20;
  if (file_offset_ - writeback_offset_ >= kWritebackChunk) {
    sync_file_range(fd_, static_cast<off_t>(writeback_offset_),
                    static_cast<off_t>(file_offset_ - writeback_offset_), SYNC_FILE_RANGE_WRITE);
    writeback_offset_ = file_offset_;
  }
#endif
}

uint64_t AtomicFileWriter::AppendFileContents(const std::string& source) {
  Flush();
  const ScopedFd in(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) ThrowSystemError(source, "cannot open");
  uint64_t copied = 0;
  bool kernel_copy = true;
  std::vector<char> buf;
  for (;;) {
    ssize_t n = -1;
    if (kernel_copy) {
      // Writes go at explicit offsets: the descriptor's own offset is not kept.
      loff_t at = static_cast<loff_t>(file_offset_ + copied);
      n = ::copy_file_range(in.get(), nullptr, fd_, &at, 64 << 20, 0);
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) {
        kernel_copy = false;  // not between these filesystems: copy through memory
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ThrowSystemError(source + " -> " + temp_path_, "cannot copy");
    } else {
      if (buf.empty()) buf.resize(kBufferSize);
      n = ::read(in.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ThrowSystemError(source, "cannot read");
      if (n > 0) {
        PwriteFully(fd_, std::string_view(buf.data(), static_cast<size_t>(n)),
                    file_offset_ + copied, temp_path_);
      }
    }
    if (n == 0) break;
    copied += static_cast<uint64_t>(n);
  }
  bytes_written_ += copied;
  file_offset_ += copied;
  return copied;
}

bool AtomicFileWriter::LinkContents(const std::string& source) {
  if (linked_ || file_offset_ != 0 || buffered_ != 0) return false;
  // A link beside the temp file, then renamed over it: the empty temp file
  // stays as it was when the filesystem refuses the link.
  const std::string link = temp_path_ + ".link";
  if (::link(source.c_str(), link.c_str()) != 0) return false;
  if (::rename(link.c_str(), temp_path_.c_str()) != 0) {
    ::unlink(link.c_str());
    return false;
  }
  const int fd = ::open(temp_path_.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    if (fd >= 0) ::close(fd);
    ThrowSystemError(temp_path_, "cannot open the link of " + source);
  }
  ::close(fd_);
  fd_ = fd;
  linked_ = true;
  bytes_written_ = static_cast<uint64_t>(st.st_size);
  file_offset_ = bytes_written_;
  writeback_offset_ = file_offset_;
  return true;
}

void AtomicFileWriter::Flush() {
  // A file smaller than one buffer is written through the page cache, as a
  // small file is best written. What ends a larger one goes direct in whole
  // blocks, and only its last partial block through the page cache, at a
  // block-aligned offset, as does everything after it.
  if (queue_) queue_->Drain();
  if (direct_ && queue_) {
    const size_t blocks = buffered_ - buffered_ % kDirectWriteAlign;
    if (blocks > 0 &&
        PwriteDirect(fd_, std::string_view(buffer_, blocks), file_offset_, temp_path_)) {
      file_offset_ += blocks;
      buffered_ -= blocks;
      std::memmove(buffer_, buffer_ + blocks, buffered_);
    }
  }
  if (direct_) {
    EndDirectWrites(fd_, temp_path_);
    direct_ = false;
  }
  WriteAll(std::string_view(buffer_, buffered_));
  buffered_ = 0;
}

void AtomicFileWriter::Commit(bool durable) {
  Flush();
  if (durable && ::fsync(fd_) != 0) ThrowSystemError(temp_path_, "cannot fsync");
  ::close(fd_);
  fd_ = -1;
  if (overwrite_) {
    disk_.Rename(temp_path_, path_);
    // Where `path_` was already a link of the same file, rename(2) leaves
    // both names: the temporary one goes.
    if (linked_) ::unlink(temp_path_.c_str());
  } else {
    // link() fails with EEXIST instead of replacing a file that appeared meanwhile.
    if (::link(temp_path_.c_str(), path_.c_str()) != 0) {
      if (errno == EEXIST) {
        throw Error(path_, 0, "output already exists", "pass --overwrite to replace it");
      }
      ThrowSystemError(path_, "cannot publish");
    }
    ::unlink(temp_path_.c_str());
  }
  committed_ = true;
  if (!durable) return;
  std::string parent = std::filesystem::path(path_).parent_path().string();
  disk_.SyncDir(parent.empty() ? "." : parent);
}

}  // namespace djshard::io

#include <zlib.h>
#include <zstd.h>

#include <vector>

namespace djshard::io {

struct OutputStream::Codec {
  enum Kind { kGzip, kZstd } kind;
  z_stream zs{};
  ZSTD_CCtx* zstd = nullptr;
  std::vector<char> buf = std::vector<char>(1 << 20);
  ~Codec() {
    if (kind == kGzip) deflateEnd(&zs);
    ZSTD_freeCCtx(zstd);
  }
};

OutputStream::OutputStream(std::string path, bool overwrite, Disk& disk,
                           const std::string& temp_tag)
    : file_(path, overwrite, disk, temp_tag) {
  if (EndsWithIgnoreCase(path, ".gz")) {
    codec_ = std::make_unique<Codec>();
    codec_->kind = Codec::kGzip;
    // 15 + 16: a gzip header and trailer, as gzip(1) writes.
    if (deflateInit2(&codec_->zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw Error(path, 0, "zlib: cannot initialise compression");
    }
  } else if (EndsWithIgnoreCase(path, ".zst")) {
    codec_ = std::make_unique<Codec>();
    codec_->kind = Codec::kZstd;
    codec_->zstd = ZSTD_createCCtx();
    if (codec_->zstd == nullptr) throw Error(path, 0, "zstd: cannot initialise compression");
    ZSTD_CCtx_setParameter(codec_->zstd, ZSTD_c_compressionLevel, 3);
  }
}

OutputStream::~OutputStream() = default;

void OutputStream::HashContent(bool sha256) {
  if (!hash_) hash_ = std::make_unique<Xxh3>();
  if (sha256 && !sha256_) sha256_ = std::make_unique<Sha256>();
}

std::string OutputStream::ContentSha256() {
  if (!sha256_) throw Error(file_.path(), 0, "content hashing with sha256 was not enabled");
  if (sha256_digest_.empty()) sha256_digest_ = sha256_->HexDigest();
  return sha256_digest_;
}

std::string OutputStream::ContentXxh3() {
  if (!hash_) throw Error(file_.path(), 0, "content hashing was not enabled");
  if (digest_.empty()) digest_ = hash_->HexDigest();
  return digest_;
}

void OutputStream::Append(std::string_view bytes) {
  bytes_in_ += bytes.size();
  if (hash_) hash_->Update(bytes);
  if (sha256_) sha256_->Update(bytes);
  if (!codec_) {
    file_.Append(bytes);
    return;
  }
  Codec& c = *codec_;
  if (c.kind == Codec::kGzip) {
    c.zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    c.zs.avail_in = static_cast<uInt>(bytes.size());
    while (c.zs.avail_in > 0) {
      c.zs.next_out = reinterpret_cast<Bytef*>(c.buf.data());
      c.zs.avail_out = static_cast<uInt>(c.buf.size());
      deflate(&c.zs, Z_NO_FLUSH);
      file_.Append(std::string_view(c.buf.data(), c.buf.size() - c.zs.avail_out));
    }
    return;
  }
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  while (in.pos < in.size) {
    ZSTD_outBuffer out{c.buf.data(), c.buf.size(), 0};
    const size_t rc = ZSTD_compressStream2(c.zstd, &out, &in, ZSTD_e_continue);
    if (ZSTD_isError(rc))
      throw Error(file_.path(), 0, std::string("zstd: ") + ZSTD_getErrorName(rc));
    file_.Append(std::string_view(c.buf.data(), out.pos));
  }
}

uint64_t OutputStream::AppendFile(const std::string& source) {
  if (!codec_ && !hash_ && !EndsWithIgnoreCase(source, ".gz") &&
      !EndsWithIgnoreCase(source, ".zst")) {
    const uint64_t n = file_.AppendFileContents(source);
    bytes_in_ += n;
    return n;
  }
  std::unique_ptr<ByteSource> in = OpenInput(source);
  std::vector<char> buf(kBufferSize);
  uint64_t n = 0;
  for (size_t got; (got = in->Read(buf.data(), buf.size())) > 0;) {
    Append(std::string_view(buf.data(), got));
    n += got;
  }
  return n;
}

bool OutputStream::LinkFile(const std::string& source) {
  if (codec_ || hash_ || bytes_in_ != 0 || EndsWithIgnoreCase(source, ".gz") ||
      EndsWithIgnoreCase(source, ".zst") || !file_.LinkContents(source)) {
    return false;
  }
  bytes_in_ = file_.bytes_written();
  return true;
}

void OutputStream::Commit(bool durable) {
  if (codec_) {
    Codec& c = *codec_;
    if (c.kind == Codec::kGzip) {
      int rc = Z_OK;
      c.zs.avail_in = 0;
      while (rc != Z_STREAM_END) {
        c.zs.next_out = reinterpret_cast<Bytef*>(c.buf.data());
        c.zs.avail_out = static_cast<uInt>(c.buf.size());
        rc = deflate(&c.zs, Z_FINISH);
        file_.Append(std::string_view(c.buf.data(), c.buf.size() - c.zs.avail_out));
      }
    } else {
      ZSTD_inBuffer in{nullptr, 0, 0};
      size_t remaining = 1;
      while (remaining != 0) {
        ZSTD_outBuffer out{c.buf.data(), c.buf.size(), 0};
        remaining = ZSTD_compressStream2(c.zstd, &out, &in, ZSTD_e_end);
        if (ZSTD_isError(remaining)) {
          throw Error(file_.path(), 0, std::string("zstd: ") + ZSTD_getErrorName(remaining));
        }
        file_.Append(std::string_view(c.buf.data(), out.pos));
      }
    }
  }
  file_.Commit(durable);
}

void AppendZstdFrame(std::string_view bytes, std::string* out, int level) {
  const size_t old = out->size();
  out->resize(old + ZSTD_compressBound(bytes.size()));
  // One context per thread: ZSTD_compress would allocate and clear a new one
  // for every frame, which costs as much as compressing a small batch.
  thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> ctx(ZSTD_createCCtx(),
                                                                      ZSTD_freeCCtx);
  if (ctx == nullptr) throw Error("zstd: cannot create a compression context");
  const size_t n = ZSTD_compressCCtx(ctx.get(), out->data() + old, out->size() - old, bytes.data(),
                                     bytes.size(), level);
  if (ZSTD_isError(n)) throw Error(std::string("zstd: ") + ZSTD_getErrorName(n));
  out->resize(old + n);
}

}  // namespace djshard::io
