#pragma once

#include <cstdint>
#include <functional>
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
