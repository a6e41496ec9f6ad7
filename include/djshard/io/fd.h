#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace djshard::io {

// The read and write loops over a file descriptor, with EINTR and short
// counts handled once. Errors throw Error naming `path`.

// Writes every byte of `bytes` at the descriptor's current offset.
void WriteFully(int fd, std::string_view bytes, const std::string& path);

// Writes every byte of `bytes` at file offset `offset` (pwrite), leaving the
// descriptor's offset alone: several threads may write one file at once.
void PwriteFully(int fd, std::string_view bytes, uint64_t offset, const std::string& path);

// Direct writes (O_DIRECT): the bytes go from the writer's buffer to the
// disk without a copy into the page cache. For a file written once,
// fsynced and read at most once more, as djshard's outputs are, that copy
// and the writeback that follows it are most of the write's cost. Offsets,
// lengths and buffer addresses must then be multiples of kDirectWriteAlign.
constexpr size_t kDirectWriteAlign = 4096;
// A buffer whose address is a multiple of kDirectWriteAlign.
struct FreeAligned {
  void operator()(char* p) const;
};
using AlignedBuffer = std::unique_ptr<char, FreeAligned>;
AlignedBuffer NewAlignedBuffer(size_t size);
// Turns O_DIRECT on for `fd` (a regular file open for writing) when its
// filesystem is a local block one (ext4, XFS, btrfs) and returns whether it
// did. Elsewhere (NFS, FUSE, tmpfs, ...) writes stay buffered: a direct
// write there waits for the server on every call.
bool TryDirectWrites(int fd);
// Turns O_DIRECT off for `fd` again, for bytes that are not whole blocks.
void EndDirectWrites(int fd, const std::string& path);
// Writes `bytes` at `offset` with O_DIRECT on `fd`: false, nothing written,
// when the filesystem refuses this write (EINVAL), so the caller can write
// it buffered instead. Other errors throw.
bool PwriteDirect(int fd, std::string_view bytes, uint64_t offset, const std::string& path);
// For tests of the fallbacks: PwriteDirect takes the next `n` direct writes
// of this process and refuses every one after them, as a filesystem that
// will not take them would; a negative `n` (the default) refuses none.
void RefuseDirectWritesAfterForTesting(int n);

// Writes at offsets into one file, from any number of threads at once: the
// whole blocks of each write of 64 KiB or more go with O_DIRECT (through a block-aligned copy,
// on a descriptor of its own) where TryDirectWrites allows it, the partial
// blocks at its ends through `fd` and the page cache. Writes that do not
// overlap never share a direct block, so every block is written one way.
// The caller still fsyncs `fd` when the file is complete.
class OffsetWriter {
 public:
  OffsetWriter(int fd, std::string path);
  ~OffsetWriter();
  OffsetWriter(const OffsetWriter&) = delete;
  OffsetWriter& operator=(const OffsetWriter&) = delete;

  void Write(std::string_view bytes, uint64_t offset);

 private:
  int fd_;
  int direct_fd_ = -1;  // -1: every write is buffered
  std::string path_;
  std::atomic<bool> refused_{false};  // the filesystem refused a direct write
};

// Reads `want` bytes at file offset `offset` (pread) into `buf`; fewer only
// when the file ends first. Returns the bytes read.
size_t PreadFully(int fd, char* buf, size_t want, uint64_t offset, const std::string& path);

// Reads from the current offset to the end, handing each chunk to `sink`.
void ReadChunks(int fd, const std::string& path, size_t chunk_size,
                const std::function<void(std::string_view)>& sink);

// The whole (small) file behind `fd`, read with pread(2) from offset 0, so
// that the descriptor's offset does not matter.
std::string ReadFromStart(int fd, const std::string& path);

// Closes a descriptor when it goes out of scope.
class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ~ScopedFd();
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  // Closes the descriptor held, if any, and holds `fd`.
  void reset(int fd = -1);
  // Gives up ownership.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace djshard::io
