#include "djshard/io/disk.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/fd.h"

namespace djshard::io {

namespace {

FileStat ToFileStat(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size), MtimeNanos(st), S_ISDIR(st.st_mode)};
}

// Writes (and with `sync`, fsyncs) a new file at `path`, which must not exist.
void WriteNewFile(const std::string& path, std::string_view content, bool sync = true) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) ThrowSystemError(path, "cannot create");
  try {
    WriteFully(fd, content, path);
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
    WriteFully(fd, content, path);
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

namespace {

// link() over NFS can answer EEXIST for a link it made (the request was
// sent again after its reply was lost): then `to` is `from`'s inode.
bool SameInode(const std::string& from, const std::string& to) {
  struct stat a {
  }, b{};
  return ::stat(from.c_str(), &a) == 0 && ::stat(to.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

}  // namespace

bool Disk::PublishLink(const std::string& path, std::string_view content,
                       const std::string& temp_dir) {
  const std::string tmp =
      temp_dir.empty()
          ? TempBeside(path)
          : TempBeside(temp_dir + "/" + std::filesystem::path(path).filename().string());
  WriteNewFile(tmp, content);
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  const bool ours = rc != 0 && err == EEXIST && SameInode(tmp, path);
  ::unlink(tmp.c_str());
  if (rc != 0 && !ours) {
    if (err == EEXIST) return false;
    errno = err;
    ThrowSystemError(path, "cannot publish");
  }
  SyncDir(ParentDir(path));
  return true;
}

bool Disk::Link(const std::string& from, const std::string& to) {
  if (::link(from.c_str(), to.c_str()) == 0) return true;
  if (errno == EEXIST) return SameInode(from, to);
  ThrowSystemError(to, "cannot link " + from);
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

std::string Disk::Read(const std::string& path) { return ReadFile(path); }

std::optional<FileStat> Disk::Stat(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    ThrowSystemError(path, "cannot stat");
  }
  return ToFileStat(st);
}

FileStat Disk::StatFd(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) ThrowSystemError(path, "cannot stat");
  return ToFileStat(st);
}

bool Disk::Unlink(const std::string& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  ThrowSystemError(path, "cannot remove");
}

void Disk::MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw Error::FromErrno(path, "cannot create directory", ec.value());
}

int Disk::OpenExisting(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno != ENOENT) ThrowSystemError(path, "cannot open");
  return fd;
}

bool Disk::Flock(int fd, bool blocking) {
  for (;;) {
    if (::flock(fd, LOCK_EX | (blocking ? 0 : LOCK_NB)) == 0) return true;
    if (errno != EINTR) return false;
  }
}

void Disk::Unflock(int fd) { ::flock(fd, LOCK_UN); }

void Disk::Rewrite(int fd, std::string_view content, const std::string& path) {
  if (::pwrite(fd, content.data(), content.size(), 0) != static_cast<ssize_t>(content.size()) ||
      ::fsync(fd) != 0) {
    ThrowSystemError(path, "cannot rewrite");
  }
}

Disk& RealDisk() {
  static Disk disk;
  return disk;
}

int64_t FilesystemNowNanos(const std::string& probe_path) {
  const int fd = ::open(probe_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return NowNanos();
  struct stat st {};
  const int rc = ::fstat(fd, &st);
  ::close(fd);
  ::unlink(probe_path.c_str());
  return rc == 0 ? MtimeNanos(st) : NowNanos();
}

std::string ReadFile(const std::string& path) {
  const ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) ThrowSystemError(path, "cannot open");
  std::string out;
  ReadChunks(fd.get(), path, 65536, [&](std::string_view chunk) { out.append(chunk); });
  return out;
}

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void RemoveTreeQuietly(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace djshard::io
