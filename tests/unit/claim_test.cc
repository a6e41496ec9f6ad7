// Claims on a real job directory: the O_EXCL lock, fencing and publishing.
#include "djshard/store/claim.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <vector>

#include "djshard/store/job.h"
#include "djshard/store/prepare.h"

namespace djshard::store {
namespace {

namespace fs = std::filesystem;

class ClaimStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/djshard-claim-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/data.jsonl") << "{\"text\":\"a\"}\n{\"text\":\"b\"}\n";
    std::ofstream(dir_ + "/r.yaml") << "process:\n  - text_length_filter:\n";
    PrepareRequest req;
    req.config_path = dir_ + "/r.yaml";
    req.dataset_path = dir_ + "/data.jsonl";
    req.job_dir = dir_ + "/job";
    req.num_shards = 1;
    Prepare(req);
    job_ = JobDir::Open(dir_ + "/job");
    store_.emplace(*job_);
    shard_ = job_->manifest().shards.front().id;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
  std::optional<JobDir> job_;
  std::optional<ClaimStore> store_;
  std::string shard_;
};

TEST_F(ClaimStoreTest, OnlyOneOfTwoClaimsOfAShardWins) {
  const JobDir& job = *job_;
  ClaimStore& store = *store_;
  const std::string& shard = shard_;
  std::optional<Claim> first = store.TryClaim(shard);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(store.TryClaim(shard).has_value());
  EXPECT_TRUE(fs::exists(job.LockPath(shard)));
}

// A claimant that listed the shard as pending before another worker published
// it creates the lock after the publisher removed its own: it must not run the
// shard a second time, and must not leave its lock behind.
TEST_F(ClaimStoreTest, AClaimAfterTheDoneRecordIsRefusedAndLeavesNoLock) {
  const JobDir& job = *job_;
  ClaimStore& store = *store_;
  const std::string& shard = shard_;
  std::optional<Claim> owner = store.TryClaim(shard);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(store.PublishDone(*owner, DoneRecord{}), ClaimStore::PublishResult::kPublished);
  EXPECT_FALSE(fs::exists(job.LockPath(shard)));
  EXPECT_FALSE(store.TryClaim(shard).has_value());
  EXPECT_FALSE(fs::exists(job.LockPath(shard)));
}

TEST_F(ClaimStoreTest, AClaimAfterTheFailedRecordIsRefused) {
  const JobDir& job = *job_;
  ClaimStore& store = *store_;
  const std::string& shard = shard_;
  std::optional<Claim> owner = store.TryClaim(shard);
  ASSERT_TRUE(owner.has_value());
  EXPECT_TRUE(store.Release(*owner, FailedRecord{}));
  EXPECT_TRUE(fs::exists(job.FailedPath(shard)));
  EXPECT_FALSE(store.TryClaim(shard).has_value());
  EXPECT_FALSE(fs::exists(job.LockPath(shard)));
}

// A disk on which another worker removes each new lock right after its
// create, as ClearFinishedLock does to a lock made after the shard's record.
class LockRemovedAfterCreate : public io::Disk {
 public:
  bool CreateExclusive(const std::string& path, std::string_view content, bool durable) override {
    const bool created = io::Disk::CreateExclusive(path, content, durable);
    if (created) ::unlink(path.c_str());
    return created;
  }
};

TEST_F(ClaimStoreTest, ALockRemovedBeforeItsClaimantOpensItIsNoClaimAndNoError) {
  LockRemovedAfterCreate disk;
  ClaimStore racing(*job_, disk);
  EXPECT_FALSE(racing.TryClaim(shard_).has_value());
  EXPECT_FALSE(fs::exists(job_->LockPath(shard_)));
  // The shard stays claimable.
  EXPECT_TRUE(store_->TryClaim(shard_).has_value());
}

// Records every write of data and every fsync made while this process holds a
// flock on a lock: none may happen there, because a process frozen inside a
// fenced section keeps every other worker from taking its shard over.
class FenceWatchDisk : public io::Disk {
 public:
  bool Flock(int fd, bool blocking) override {
    const bool held = io::Disk::Flock(fd, blocking);
    if (held) ++held_;
    return held;
  }
  void Unflock(int fd) override {
    --held_;
    io::Disk::Unflock(fd);
  }
  void Rewrite(int fd, std::string_view content, const std::string& path) override {
    Note("rewrite " + path);
    io::Disk::Rewrite(fd, content, path);
  }
  void WriteAtomic(const std::string& path, std::string_view content) override {
    Note("write " + path);
    io::Disk::WriteAtomic(path, content);
    if (after_write) after_write(path);
  }
  void WriteReplace(const std::string& path, std::string_view content) override {
    Note("replace " + path);
    io::Disk::WriteReplace(path, content);
  }
  bool CreateExclusive(const std::string& path, std::string_view content, bool durable) override {
    // The claim's own O_EXCL create holds no flock; any other would be noted.
    Note("create " + path);
    return io::Disk::CreateExclusive(path, content, durable);
  }
  bool PublishLink(const std::string& path, std::string_view content,
                   const std::string& temp_dir) override {
    Note("publish " + path);
    return io::Disk::PublishLink(path, content, temp_dir);
  }
  void SyncDir(const std::string& dir) override {
    Note("fsync " + dir);
    io::Disk::SyncDir(dir);
  }

  std::vector<std::string> fenced;    // writes and fsyncs made under a flock
  std::vector<std::string> unfenced;  // those made outside
  std::function<void(const std::string&)> after_write;

 private:
  void Note(const std::string& what) { (held_ > 0 ? fenced : unfenced).push_back(what); }
  int held_ = 0;
};

bool Mentions(const std::vector<std::string>& list, const std::string& text) {
  for (const std::string& s : list) {
    if (s.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST_F(ClaimStoreTest, HeartbeatsAndRecordsWriteAndFsyncOutsideTheFencedSection) {
  FenceWatchDisk disk;
  ClaimStore store(*job_, disk);
  std::optional<Claim> owner = store.TryClaim(shard_);
  ASSERT_TRUE(owner.has_value());
  store.StartAttempt(*owner, "shards/x.jsonl");
  EXPECT_TRUE(store.Heartbeat(*owner));
  EXPECT_TRUE(Mentions(disk.unfenced, "rewrite " + job_->LockPath(shard_)));
  DoneRecord done;
  done.shard_id = shard_;
  done.token = owner->token();
  EXPECT_EQ(store.PublishDone(*owner, done), ClaimStore::PublishResult::kPublished);
  EXPECT_TRUE(fs::exists(job_->DonePath(shard_)));
  EXPECT_FALSE(fs::exists(job_->LockPath(shard_)));
  EXPECT_TRUE(Mentions(disk.unfenced, "fsync " + job_->DoneDir()));
  EXPECT_TRUE(disk.fenced.empty()) << disk.fenced.front();
  // The staged record is gone from the attempt's directory.
  for (const auto& e : fs::directory_iterator(owner->attempt_dir())) {
    EXPECT_EQ(e.path().filename().string().find(".staged."), std::string::npos) << e.path();
  }
}

TEST_F(ClaimStoreTest, FailedRecordsAndReleasesWriteAndFsyncOutsideTheFencedSection) {
  FenceWatchDisk disk;
  ClaimStore store(*job_, disk);
  std::optional<Claim> owner = store.TryClaim(shard_);
  ASSERT_TRUE(owner.has_value());
  EXPECT_TRUE(store.Release(*owner, FailedRecord{shard_, 4, "boom", "", "", "", "node-a"}));
  EXPECT_TRUE(fs::exists(job_->FailedPath(shard_)));
  EXPECT_FALSE(fs::exists(job_->LockPath(shard_)));
  EXPECT_TRUE(Mentions(disk.unfenced, "fsync " + job_->LocksDir()));
  EXPECT_TRUE(disk.fenced.empty()) << disk.fenced.front();
}

// The owner was frozen between staging its done record and the fence; the
// lease ran out and another worker took the lock over: nothing is published,
// and the staged record does not stay behind.
TEST_F(ClaimStoreTest, ADoneRecordStagedBeforeATakeoverIsNeverPublished) {
  FenceWatchDisk disk;
  ClaimStore store(*job_, disk);
  std::optional<Claim> owner = store.TryClaim(shard_);
  ASSERT_TRUE(owner.has_value());
  store.StartAttempt(*owner, "shards/x.jsonl");
  disk.after_write = [&](const std::string& path) {
    if (path.find(".staged.") == std::string::npos) return;
    ASSERT_TRUE(store_->TakeOverStale(shard_, -1));
  };
  EXPECT_EQ(store.PublishDone(*owner, DoneRecord{}), ClaimStore::PublishResult::kLost);
  EXPECT_FALSE(fs::exists(job_->DonePath(shard_)));
  for (const auto& e : fs::directory_iterator(owner->attempt_dir())) {
    EXPECT_EQ(e.path().filename().string().find(".staged."), std::string::npos) << e.path();
  }
  // The shard is claimable again; the late owner's heartbeat says it is lost
  // and leaves the new owner's lock alone.
  std::optional<Claim> next = store_->TryClaim(shard_);
  ASSERT_TRUE(next.has_value());
  const auto before = fs::last_write_time(job_->LockPath(shard_));
  EXPECT_FALSE(store.Heartbeat(*owner));
  EXPECT_EQ(fs::last_write_time(job_->LockPath(shard_)), before);
}

AttemptStatus StatusOf(const std::string& attempt_dir) {
  const std::string path = JobPaths::AttemptRecordPath(attempt_dir);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return AttemptRecord::FromJson(text, path).status;
}

size_t StagedFiles(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    n += e.path().filename().string().find(".staged.") != std::string::npos;
  }
  return n;
}

size_t Entries(const std::string& dir) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    ++n;
  }
  return n;
}

TEST_F(ClaimStoreTest, TakeoversWriteAndFsyncOutsideTheFencedSection) {
  std::optional<Claim> owner = store_->TryClaim(shard_);
  ASSERT_TRUE(owner.has_value());
  store_->StartAttempt(*owner, "shards/x.jsonl");
  FenceWatchDisk disk;
  ClaimStore taker(*job_, disk);
  ASSERT_TRUE(taker.TakeOverStale(shard_, -1));
  EXPECT_FALSE(fs::exists(job_->LockPath(shard_)));
  EXPECT_EQ(Entries(job_->StaleLocksDir()), 1u);
  // The old attempt is marked stale: staged first, renamed under the fence.
  EXPECT_EQ(StatusOf(owner->attempt_dir()), AttemptStatus::kStale);
  EXPECT_TRUE(Mentions(disk.unfenced, "write " + owner->attempt_dir()));
  EXPECT_TRUE(Mentions(disk.unfenced, "fsync " + job_->LocksDir()));
  EXPECT_TRUE(disk.fenced.empty()) << disk.fenced.front();
  EXPECT_EQ(StagedFiles(owner->attempt_dir()), 0u);
  EXPECT_FALSE(store_->Heartbeat(*owner));
}

// A taker frozen after staging the stale mark, before its fence, holds no
// flock: another worker takes the shard over; the first then finds another
// lock at the path, moves nothing and removes its staged record.
TEST_F(ClaimStoreTest, ATakerFrozenBeforeItsFenceLetsAnotherTakeTheShardOver) {
  std::optional<Claim> owner = store_->TryClaim(shard_);
  ASSERT_TRUE(owner.has_value());
  store_->StartAttempt(*owner, "shards/x.jsonl");
  FenceWatchDisk disk;
  ClaimStore frozen(*job_, disk);
  std::optional<Claim> next;
  disk.after_write = [&](const std::string& path) {
    if (path.find(".staged.") == std::string::npos) return;
    ASSERT_TRUE(store_->TakeOverStale(shard_, -1));
    next = store_->TryClaim(shard_);
    ASSERT_TRUE(next.has_value());
  };
  EXPECT_FALSE(frozen.TakeOverStale(shard_, -1));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(Entries(job_->StaleLocksDir()), 1u);
  EXPECT_TRUE(store_->Heartbeat(*next));
  EXPECT_EQ(StatusOf(owner->attempt_dir()), AttemptStatus::kStale);
  EXPECT_EQ(StagedFiles(owner->attempt_dir()), 0u);
  EXPECT_TRUE(disk.fenced.empty()) << disk.fenced.front();
}

// The owner published its done record and died before removing its lock:
// the leftover lock goes and the attempt becomes done, with its record
// staged before the fence.
TEST_F(ClaimStoreTest, ClearingAFinishedLockWritesAndFsyncsOutsideTheFencedSection) {
  std::optional<Claim> owner = store_->TryClaim(shard_);
  ASSERT_TRUE(owner.has_value());
  store_->StartAttempt(*owner, "shards/x.jsonl");
  DoneRecord done;
  done.shard_id = shard_;
  done.token = owner->token();
  std::ofstream(job_->DonePath(shard_)) << done.ToJson();
  FenceWatchDisk disk;
  ClaimStore clearer(*job_, disk);
  ASSERT_TRUE(clearer.ClearFinishedLock(shard_));
  EXPECT_FALSE(fs::exists(job_->LockPath(shard_)));
  EXPECT_EQ(StatusOf(owner->attempt_dir()), AttemptStatus::kDone);
  EXPECT_TRUE(Mentions(disk.unfenced, "replace " + owner->attempt_dir()));
  EXPECT_TRUE(Mentions(disk.unfenced, "fsync " + job_->LocksDir()));
  EXPECT_TRUE(disk.fenced.empty()) << disk.fenced.front();
  EXPECT_EQ(StagedFiles(owner->attempt_dir()), 0u);
  // The shard stays finished.
  EXPECT_FALSE(store_->TryClaim(shard_).has_value());
}

}  // namespace
}  // namespace djshard::store
