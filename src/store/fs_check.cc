#include "djshard/store/fs_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/fd.h"

namespace djshard::store {

namespace fs = std::filesystem;

std::string DescribeMount(const std::string& path) {
  std::error_code ec;
  const std::string real = fs::weakly_canonical(path, ec).string();
  std::ifstream in("/proc/self/mountinfo");
  std::string line, best_point, best_type;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point options ... - type source super-options
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, field;
    fields >> id >> parent >> dev >> root >> point;
    while (fields >> field && field != "-") {
    }
    std::string type;
    fields >> type;
    const bool contains =
        real == point || point == "/" || real.compare(0, point.size() + 1, point + "/") == 0;
    if (contains && point.size() >= best_point.size()) {
      best_point = point;
      best_type = type;
    }
  }
  if (best_point.empty()) return "unknown filesystem";
  return best_type + " on " + best_point;
}

namespace {

// Removes the probe directory and what is in it.
class ProbeDir {
 public:
  explicit ProbeDir(std::string path) : path_(std::move(path)) {}
  ~ProbeDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

void CheckJobFilesystem(const std::string& dir, io::Disk& disk) {
  const auto missing = [&](const std::string& operation, const std::string& why) {
    return Error(
        dir, 0,
        "the filesystem (" + DescribeMount(dir) + ") does not support " + operation + ": " + why,
        "djshard's claims and records need it; put the job directory on a POSIX "
        "filesystem such as ext4, xfs, NFS, CPFS or Lustre");
  };
  const ProbeDir probe(dir + "/.djshard-fs-probe." + HostName() + "." + std::to_string(::getpid()) +
                       "." + RandomHex(8));
  disk.MakeDirs(probe.path());
  const std::string a = probe.path() + "/a", b = probe.path() + "/b", c = probe.path() + "/c";

  if (!disk.CreateExclusive(a, "probe\n", /*durable=*/false)) {
    throw missing("O_EXCL create", "a new file was reported as existing");
  }
  if (disk.CreateExclusive(a, "again\n", /*durable=*/false)) {
    throw missing("O_EXCL create", "an existing file was created again");
  }
  try {
    if (!disk.PublishLink(b, "record\n", probe.path()) || !disk.Stat(b)) {
      throw missing("link()", "the linked file is not there");
    }
  } catch (const Error& e) {
    if (e.message().rfind("the filesystem", 0) == 0) throw;
    throw missing("link()", e.message());
  }
  try {
    disk.CreateExclusive(c, "replacement\n", /*durable=*/false);
    disk.Rename(c, a);
  } catch (const Error& e) {
    throw missing("rename() over an existing file", e.message());
  }
  if (disk.Read(a) != "replacement\n") {
    throw missing("rename() over an existing file", "the old content is still there");
  }

  const io::ScopedFd first(disk.OpenExisting(a)), second(disk.OpenExisting(a));
  if (first.get() < 0 || second.get() < 0) throw missing("flock()", "cannot open the probe");
  if (!disk.Flock(first.get(), /*blocking=*/false)) {
    throw missing("flock()", "an unheld lock cannot be taken");
  }
  if (disk.Flock(second.get(), /*blocking=*/false)) {
    throw missing("flock()", "a second holder was let in");
  }
  disk.Unflock(first.get());

  // A lease is an mtime that the heartbeat moves: set it far in the past, then
  // rewrite the file as a heartbeat does.
  const struct timespec old[2] = {{1000, 0}, {1000, 0}};
  if (::utimensat(AT_FDCWD, a.c_str(), old, 0) != 0) {
    throw missing("setting an mtime", std::strerror(errno));
  }
  disk.Rewrite(first.get(), "heartbeat\n", a);
  const std::optional<io::FileStat> after = disk.Stat(a);
  if (!after || after->mtime_ns <= int64_t{1000} * 1000000000) {
    throw missing("an mtime that moves on write", "a rewritten file kept its old mtime");
  }
}

}  // namespace djshard::store
