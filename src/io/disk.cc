#include "djshard/io/disk.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "djshard/common/error.h"
#include "djshard/common/text.h"

namespace djshard::io {

namespace {

void WriteAll(int fd, std::string_view content, const std::string& path) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ThrowSystemError(path, "cannot write");
    }
    done += static_cast<size_t>(n);
  }
}

// Writes (and with `sync`, fsyncs) a new file at `path`, which must not exist.
void WriteNewFile(const std::string& path, std::string_view content, bool sync = true) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) ThrowSystemError(path, "cannot create");
  try {
    WriteAll(fd, content, path);
    if (sync && ::fsync(fd) != 0) ThrowSystemError(path, "cannot fsync");
  } catch (...) {
    ::close(fd);
    ::unlink(path.c_str());
    throw;
  }
  ::close(fd);
}

std::string TempBeside(const std::string& path) { return path + ".tmp." + RandomHex(16); }

std::string ParentDir(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

void Disk::WriteAtomic(const std::string& path, std::string_view content) {
  const std::string tmp = TempBeside(path);
  WriteNewFile(tmp, content);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    ThrowSystemError(path, "cannot rename into place");
  }
  SyncDir(ParentDir(path));
}

bool Disk::CreateExclusive(const std::string& path, std::string_view content, bool durable) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    ThrowSystemError(path, "cannot create");
  }
  try {
    WriteAll(fd, content, path);
    if (durable && ::fsync(fd) != 0) ThrowSystemError(path, "cannot fsync");
  } catch (...) {
    ::close(fd);
    ::unlink(path.c_str());
    throw;
  }
  ::close(fd);
  if (durable) SyncDir(ParentDir(path));
  return true;
}

void Disk::WriteReplace(const std::string& path, std::string_view content) {
  const std::string tmp = TempBeside(path);
  WriteNewFile(tmp, content, /*sync=*/false);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    ThrowSystemError(path, "cannot rename into place");
  }
}

bool Disk::PublishLink(const std::string& path, std::string_view content,
                       const std::string& temp_dir) {
  const std::string tmp =
      temp_dir.empty()
          ? TempBeside(path)
          : TempBeside(temp_dir + "/" + std::filesystem::path(path).filename().string());
  WriteNewFile(tmp, content);
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0) {
    if (err == EEXIST) return false;
    errno = err;
    ThrowSystemError(path, "cannot publish");
  }
  SyncDir(ParentDir(path));
  return true;
}

void Disk::Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) ThrowSystemError(to, "cannot rename " + from);
}

void Disk::SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) ThrowSystemError(dir, "cannot open directory");
  // Some network filesystems refuse fsync on directories; their renames are
  // already synchronous, so EINVAL is not an error here.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    ::close(fd);
    ThrowSystemError(dir, "cannot fsync directory");
  }
  ::close(fd);
}

Disk& RealDisk() {
  static Disk disk;
  return disk;
}

std::string ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ThrowSystemError(path, "cannot open");
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      ThrowSystemError(path, "cannot read");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

void RemoveTreeQuietly(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace djshard::io
