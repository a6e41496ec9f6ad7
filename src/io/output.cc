#include "djshard/io/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/disk.h"

namespace djshard::io {

namespace {
constexpr size_t kBufferSize = 1 << 20;
}

AtomicFileWriter::AtomicFileWriter(std::string path, bool overwrite)
    : path_(std::move(path)), overwrite_(overwrite) {
  temp_path_ = path_ + ".tmp." + RandomHex(16);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) ThrowSystemError(temp_path_, "cannot create");
  buffer_.reserve(kBufferSize);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::Append(std::string_view bytes) {
  bytes_written_ += bytes.size();
  if (buffer_.size() + bytes.size() > kBufferSize) Flush();
  if (bytes.size() >= kBufferSize) {
    buffer_.assign(bytes);
    Flush();
    return;
  }
  buffer_.append(bytes);
}

void AtomicFileWriter::Flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ThrowSystemError(temp_path_, "cannot write");
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

void AtomicFileWriter::Commit() {
  Flush();
  if (::fsync(fd_) != 0) ThrowSystemError(temp_path_, "cannot fsync");
  ::close(fd_);
  fd_ = -1;
  if (overwrite_) {
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
      ThrowSystemError(path_, "cannot rename into place");
    }
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
  std::string parent = std::filesystem::path(path_).parent_path().string();
  RealDisk().SyncDir(parent.empty() ? "." : parent);
}

}  // namespace djshard::io
