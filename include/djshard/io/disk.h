#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace djshard::io {

// What the protocol needs to know of a file: identity, size and mtime.
struct FileStat {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // by the clock of the filesystem that holds the file
  bool is_directory = false;

  bool SameFile(const FileStat& other) const { return dev == other.dev && ino == other.ino; }
};

// The filesystem operations that the job-directory protocol relies on. Every
// state change other nodes can see, and every look that decides one, goes
// through one of these, so a test can replace the Disk to inject a crash or an
// EIO/ENOSPC between any two steps. Every method may be called from any
// thread: the real one keeps no state.
class Disk {
 public:
  virtual ~Disk() = default;

  // The whole (small) file. Throws Error naming the path.
  virtual std::string Read(const std::string& path);

  // stat(2); nullopt when nothing is at `path`. Throws on other errors.
  virtual std::optional<FileStat> Stat(const std::string& path);

  // fstat(2) of an open descriptor. Throws Error naming `path`.
  virtual FileStat StatFd(int fd, const std::string& path);

  // unlink(2); false when nothing was at `path`. Throws on other errors.
  virtual bool Unlink(const std::string& path);

  // Creates `path` and its missing parents (mkdir -p). Throws on failure.
  virtual void MakeDirs(const std::string& path);

  // Opens an existing file for reading and writing (a lock file): the
  // descriptor, or -1 when nothing is at `path`. Throws on other errors.
  virtual int OpenExisting(const std::string& path);

  // flock(LOCK_EX) on `fd`, waiting when `blocking`; true when held. A
  // non-blocking call returns false while another process holds it.
  virtual bool Flock(int fd, bool blocking);
  // Releases a flock taken by Flock.
  virtual void Unflock(int fd);

  // Rewrites the file behind `fd` with `content` from offset 0 and fsyncs it,
  // so that its filesystem stamps a new mtime (a heartbeat). Throws on failure.
  virtual void Rewrite(int fd, std::string_view content, const std::string& path);

  // Writes `content` to a temporary file beside `path`, fsyncs it, renames it
  // over `path` and fsyncs the directory. Readers see the old file or the new one.
  virtual void WriteAtomic(const std::string& path, std::string_view content);

  // Creates `path` with O_CREAT|O_EXCL and writes `content`; with `durable`,
  // fsyncs it and its directory. Returns false, touching nothing, when `path`
  // already exists. The create itself is atomic either way.
  virtual bool CreateExclusive(const std::string& path, std::string_view content,
                               bool durable = true);

  // Like WriteAtomic without the fsyncs: for records that help people (an
  // attempt's status) but that no protocol decision needs after a crash.
  virtual void WriteReplace(const std::string& path, std::string_view content);

  // Publishes `content` at `path` by link() of a fsynced temporary file: the
  // first writer wins and a published file is never replaced. Returns false
  // when `path` already existed. The temporary file goes into `temp_dir` (on
  // the same filesystem; beside `path` when empty), so that a crash leaves it
  // there rather than among the published files.
  virtual bool PublishLink(const std::string& path, std::string_view content,
                           const std::string& temp_dir = "");

  // link(2) of an existing file at a new name: false when `to` already
  // exists. Throws on other errors. No fsync: the caller syncs the directory.
  virtual bool Link(const std::string& from, const std::string& to);

  // rename(2); throws on failure. Both paths must be on one filesystem.
  virtual void Rename(const std::string& from, const std::string& to);

  // fsync(2) of a directory, so that a rename or create inside it is durable.
  virtual void SyncDir(const std::string& dir);
};

// The process-wide real filesystem.
Disk& RealDisk();
// `*disk`, or the real filesystem when `disk` is null (options whose tests
// may pass a failing one).
inline Disk& DiskOr(Disk* disk) { return disk != nullptr ? *disk : RealDisk(); }

// Reads a whole (small) file from the real filesystem. Throws Error naming the path.
std::string ReadFile(const std::string& path);

// The clock of the filesystem that holds `probe_path`: the mtime of a file
// created there now (then removed), so that hosts with skewed clocks agree on
// ages; this host's clock when the file cannot be made.
int64_t FilesystemNowNanos(const std::string& probe_path);

// Whether `path` is a regular file on the real filesystem (following links).
bool IsRegularFile(const std::string& path);

// Removes a directory tree, ignoring errors (used to clean up staging areas).
void RemoveTreeQuietly(const std::string& path);

// A directory built before it is published by a rename: removed with
// everything in it when it goes out of scope unless it was published.
class StagingDir {
 public:
  explicit StagingDir(std::string path) : path_(std::move(path)) {}
  ~StagingDir() {
    if (!published_) RemoveTreeQuietly(path_);
  }
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  const std::string& path() const { return path_; }
  void MarkPublished() { published_ = true; }

 private:
  std::string path_;
  bool published_ = false;
};

}  // namespace djshard::io
