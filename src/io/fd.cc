#include "djshard/io/fd.h"

#include <unistd.h>

#include <cerrno>
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

void PwriteFully(int fd, std::string_view bytes, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      ThrowSystemError(path, "cannot write");
    }
    done += static_cast<size_t>(n);
  }
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
