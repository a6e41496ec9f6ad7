#include "src/coord/coordinator_claim.h"

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"

namespace djshard::coord {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

CoordinatorHolder ParseHolder(const std::string& content) {
  CoordinatorHolder h;
  try {
    const json j = json::parse(content);
    h.hostname = j.value("hostname", std::string("?"));
    h.pid = j.value("pid", int64_t{0});
    h.token = j.value("token", std::string());
    h.lease_secs = j.value("lease_secs", 0.0);
  } catch (const std::exception&) {
    // A lock cut short by a crash (or one written before leases): no holder known.
  }
  return h;
}

std::string ParentOf(const std::string& path) { return fs::path(path).parent_path().string(); }

}  // namespace

// Forwards every operation to the claim's Disk; renames (and so atomic
// writes) happen only under the claim's fence.
class CoordinatorClaim::FencedDisk : public io::Disk {
 public:
  FencedDisk(io::Disk& inner, const store::LeasedLock& lock) : inner_(inner), lock_(lock) {}

  std::string Read(const std::string& p) override { return inner_.Read(p); }
  std::optional<io::FileStat> Stat(const std::string& p) override { return inner_.Stat(p); }
  io::FileStat StatFd(int fd, const std::string& p) override { return inner_.StatFd(fd, p); }
  bool Unlink(const std::string& p) override { return inner_.Unlink(p); }
  void MakeDirs(const std::string& p) override { inner_.MakeDirs(p); }
  int OpenExisting(const std::string& p) override { return inner_.OpenExisting(p); }
  bool Flock(int fd, bool blocking) override { return inner_.Flock(fd, blocking); }
  void Unflock(int fd) override { inner_.Unflock(fd); }
  void Rewrite(int fd, std::string_view c, const std::string& p) override {
    inner_.Rewrite(fd, c, p);
  }
  bool CreateExclusive(const std::string& p, std::string_view c, bool durable) override {
    return inner_.CreateExclusive(p, c, durable);
  }
  void WriteReplace(const std::string& p, std::string_view c) override {
    inner_.WriteReplace(p, c);
  }
  bool PublishLink(const std::string& p, std::string_view c, const std::string& t) override {
    return inner_.PublishLink(p, c, t);
  }
  bool Link(const std::string& from, const std::string& to) override {
    return inner_.Link(from, to);
  }
  void SyncDir(const std::string& d) override { inner_.SyncDir(d); }

  void Rename(const std::string& from, const std::string& to) override {
    if (!lock_.AsOwner([&] { inner_.Rename(from, to); })) {
      throw Error(to, 0, "this instance lost its coordinator lease; not publishing",
                  "another instance took the phase over after the lease went stale");
    }
  }
  // The content is written and fsynced before the fence, which then holds
  // only the rename.
  void WriteAtomic(const std::string& p, std::string_view c) override {
    const std::string staged = p + ".staged." + RandomHex(8);
    inner_.WriteAtomic(staged, c);
    try {
      Rename(staged, p);
    } catch (...) {
      inner_.Unlink(staged);
      throw;
    }
    inner_.SyncDir(ParentOf(p));
  }

 private:
  io::Disk& inner_;
  const store::LeasedLock& lock_;
};

CoordinatorClaim::CoordinatorClaim(io::Disk& disk, store::LeasedLock lock)
    : disk_(disk), lock_(std::move(lock)), fenced_(std::make_unique<FencedDisk>(disk, lock_)) {}

CoordinatorClaim::~CoordinatorClaim() {
  if (heartbeat_) heartbeat_->Stop();
}

std::unique_ptr<CoordinatorClaim> CoordinatorClaim::TryClaim(io::Disk& disk,
                                                             const CoordinatorLockPaths& paths,
                                                             double lease_secs,
                                                             double heartbeat_secs) {
  const std::string token = RandomHex(32);
  const json record = {{"phase", paths.phase},
                       {"token", token},
                       {"hostname", HostName()},
                       {"pid", static_cast<int64_t>(::getpid())},
                       {"claimed_at", FormatUtcIso8601(NowNanos())},
                       {"lease_secs", lease_secs},
                       {"heartbeat_secs", heartbeat_secs}};
  std::optional<store::LeasedLock> lock =
      store::LeasedLock::Create(disk, paths.Lock(), record.dump() + "\n", token, /*durable=*/true);
  if (!lock) return nullptr;
  std::unique_ptr<CoordinatorClaim> claim(new CoordinatorClaim(disk, std::move(*lock)));
  CoordinatorClaim* self = claim.get();
  claim->heartbeat_ = std::make_unique<store::HeartbeatThread>(
      [self] { return self->lock_.Heartbeat(); }, heartbeat_secs, &claim->lost_);
  return claim;
}

bool CoordinatorClaim::Owned() const {
  return lock_.AsOwner([] {});
}

bool CoordinatorClaim::PublishAndRelease(const std::string& path, std::string_view content) {
  // Written and fsynced before the fence, as a shard's done record is; a
  // crash before the link leaves only the staged file, which the next
  // coordinator's result replaces nothing of.
  const std::string staged = path + ".staged." + token();
  disk_.WriteAtomic(staged, content);
  bool linked = false;
  const bool owned = lock_.AsOwner([&] {
    linked = disk_.Link(staged, path);
    disk_.Unlink(lock_.path());
  });
  disk_.Unlink(staged);
  if (!owned) return false;
  heartbeat_->Stop();
  disk_.SyncDir(ParentOf(path));
  return linked || disk_.Stat(path).has_value();
}

bool CoordinatorClaim::Release() {
  const bool owned = lock_.AsOwner([&] { disk_.Unlink(lock_.path()); });
  heartbeat_->Stop();
  return owned;
}

io::Disk& CoordinatorClaim::fenced_disk() { return *fenced_; }

CoordinatorLook LookAtCoordinator(io::Disk& disk, const CoordinatorLockPaths& paths,
                                  double default_lease_secs) {
  CoordinatorLook look;
  const std::optional<io::FileStat> st = disk.Stat(paths.Lock());
  if (!st) return look;
  try {
    look.holder = ParseHolder(disk.Read(paths.Lock()));
  } catch (const Error&) {
    if (!disk.Stat(paths.Lock())) return look;  // released meanwhile
    throw;
  }
  const int64_t now = io::FilesystemNowNanos(paths.dir + "/.clock-probe." + RandomHex(8));
  look.age_secs = static_cast<double>(now - st->mtime_ns) / 1e9;
  const double lease = look.holder.lease_secs > 0 ? look.holder.lease_secs : default_lease_secs;
  look.state = look.age_secs > lease ? CoordinatorLook::kStale : CoordinatorLook::kLive;
  return look;
}

std::optional<CoordinatorHolder> TakeOverCoordinator(io::Disk& disk,
                                                     const CoordinatorLockPaths& paths,
                                                     double lease_secs) {
  disk.MakeDirs(paths.StaleLocksDir());
  store::StaleTakeover how;
  how.lease_secs = lease_secs;
  how.fs_now_ns = [&] {
    return io::FilesystemNowNanos(paths.dir + "/.clock-probe." + RandomHex(8));
  };
  how.stale_path = paths.StaleLocksDir() + "/" + paths.phase + "." +
                   std::to_string(NowNanos() / 1000000000) + "." + RandomHex(8) + ".lock";
  const std::optional<store::StaleLock> stale = store::TakeOverStaleLock(disk, paths.Lock(), how);
  if (!stale) return std::nullopt;
  return ParseHolder(stale->content);
}

std::vector<CoordinatorHolder> StaleCoordinators(const CoordinatorLockPaths& paths) {
  std::vector<CoordinatorHolder> holders;
  std::error_code ec;
  for (auto it = fs::directory_iterator(paths.StaleLocksDir(), ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().rfind(paths.phase + ".", 0) != 0) continue;
    try {
      holders.push_back(ParseHolder(io::ReadFile(it->path().string())));
    } catch (const Error&) {
      // Unreadable: names nothing to clean.
    }
  }
  return holders;
}

}  // namespace djshard::coord
