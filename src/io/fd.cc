#include "djshard/io/fd.h"

#include <fcntl.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "djshard/common/error.h"

namespace djshard::io {

void WriteFully(int fd, std::string_view bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ThrowSystemError(path, "cannot write");
    }
    done += static_cast<size_t>(n);
  }
}

namespace {
// The pwrite loop. With `refusable`, an EINVAL before the first byte (a
// direct write the filesystem will not take) returns false instead.
bool PwriteLoop(int fd, std::string_view bytes, uint64_t offset, const std::string& path,
                bool refusable) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (refusable && errno == EINVAL && done == 0) return false;
      ThrowSystemError(path, "cannot write");
    }
    done += static_cast<size_t>(n);
  }
  return true;
}
}  // namespace

void PwriteFully(int fd, std::string_view bytes, uint64_t offset, const std::string& path) {
  PwriteLoop(fd, bytes, offset, path, /*refusable=*/false);
}

void FreeAligned::operator()(char* p) const { std::free(p); }

AlignedBuffer NewAlignedBuffer(size_t size) {
  void* p = nullptr;
  if (::posix_memalign(&p, kDirectWriteAlign, size) != 0) throw std::bad_alloc();
  return AlignedBuffer(static_cast<char*>(p));
}

bool TryDirectWrites(int fd) {
#ifdef __linux__
  constexpr long kExt4 = 0xEF53, kXfs = 0x58465342, kBtrfs = 0x9123683E;
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return false;
  const long type = static_cast<long>(fs.f_type);
  if (type != kExt4 && type != kXfs && type != kBtrfs) return false;
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0;
#else
  (void)fd;
  return false;
#endif
}

void EndDirectWrites(int fd, const std::string& path) {
#ifdef __linux__
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) {
    ThrowSystemError(path, "cannot turn direct writes off");
  }
#else
  (void)fd;
  (void)path;
#endif
}

namespace {
std::atomic<int> direct_writes_left{-1};  // RefuseDirectWritesAfterForTesting
}  // namespace

void RefuseDirectWritesAfterForTesting(int n) { direct_writes_left.store(n < 0 ? -1 : n); }

bool PwriteDirect(int fd, std::string_view bytes, uint64_t offset, const std::string& path) {
  for (int left = direct_writes_left.load(std::memory_order_relaxed); left >= 0;) {
    if (left == 0) return false;
    if (direct_writes_left.compare_exchange_weak(left, left - 1)) break;
  }
  return PwriteLoop(fd, bytes, offset, path, /*refusable=*/true);
}

OffsetWriter::OffsetWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
  // The same file as `fd`, whatever its name points at now.
  const std::string same = "/proc/self/fd/" + std::to_string(fd);
  direct_fd_ = ::open(same.c_str(), O_WRONLY | O_CLOEXEC);
  if (direct_fd_ >= 0 && !TryDirectWrites(direct_fd_)) {
    ::close(direct_fd_);
    direct_fd_ = -1;
  }
}

OffsetWriter::~OffsetWriter() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

void OffsetWriter::Write(std::string_view bytes, uint64_t offset) {
  constexpr size_t kBounce = 1 << 20;
  // Blocks of a whole page at least: a direct write must not share a page
  // of the page cache with another thread's buffered write.
  static const uint64_t block =
      std::max<uint64_t>(kDirectWriteAlign, static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  const uint64_t first_block = (offset + block - 1) / block;
  const uint64_t end_block = (offset + bytes.size()) / block;
  // Small writes stay buffered: a direct one waits for the disk.
  const uint64_t min_blocks = std::max<uint64_t>(1, (64 << 10) / block);
  if (direct_fd_ < 0 || refused_.load(std::memory_order_relaxed) ||
      end_block < first_block + min_blocks) {
    PwriteFully(fd_, bytes, offset, path_);
    return;
  }
  const size_t head = static_cast<size_t>(first_block * block - offset);
  const size_t middle = static_cast<size_t>((end_block - first_block) * block);
  PwriteFully(fd_, bytes.substr(0, head), offset, path_);
  // One block-aligned copy buffer per thread, kept: allocating it per write
  // would fault its pages in every time.
  thread_local AlignedBuffer bounce;
  if (!bounce) bounce = NewAlignedBuffer(kBounce);
  for (size_t done = 0; done < middle;) {
    const size_t n = std::min(kBounce, middle - done);
    std::memcpy(bounce.get(), bytes.data() + head + done, n);
    const uint64_t at = offset + head + done;
    if (refused_.load(std::memory_order_relaxed) ||
        !PwriteDirect(direct_fd_, std::string_view(bounce.get(), n), at, path_)) {
      refused_.store(true, std::memory_order_relaxed);  // the rest goes buffered
      PwriteFully(fd_, bytes.substr(head + done, n), at, path_);
    }
    done += n;
  }
  PwriteFully(fd_, bytes.substr(head + middle), offset + head + middle, path_);
}

size_t PreadFully(int fd, char* buf, size_t want, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < want) {
    const ssize_t n = ::pread(fd, buf + done, want - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      ThrowSystemError(path, "cannot read");
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

void ReadChunks(int fd, const std::string& path, size_t chunk_size,
                const std::function<void(std::string_view)>& sink) {
  std::vector<char> buf(chunk_size);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      ThrowSystemError(path, "cannot read");
    }
    if (n == 0) return;
    sink(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
}

std::string ReadFromStart(int fd, const std::string& path) {
  std::string out;
  char buf[4096];
  for (off_t off = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      ThrowSystemError(path, "cannot read");
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

void ScopedFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

}  // namespace djshard::io
