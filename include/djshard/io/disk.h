#pragma once

#include <string>
#include <string_view>

namespace djshard::io {

// The filesystem operations that the job-directory protocol relies on. Every
// state change other nodes can see goes through one of these, so a test can
// replace the Disk to inject a crash or an EIO/ENOSPC between any two steps.
class Disk {
 public:
  virtual ~Disk() = default;

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

  // rename(2); throws on failure. Both paths must be on one filesystem.
  virtual void Rename(const std::string& from, const std::string& to);

  // fsync(2) of a directory, so that a rename or create inside it is durable.
  virtual void SyncDir(const std::string& dir);
};

// The process-wide real filesystem.
Disk& RealDisk();

// Reads a whole (small) file. Throws Error naming the path.
std::string ReadFile(const std::string& path);

// Removes a directory tree, ignoring errors (used to clean up staging areas).
void RemoveTreeQuietly(const std::string& path);

}  // namespace djshard::io
