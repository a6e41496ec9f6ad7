// Claims on a real job directory: the O_EXCL lock, fencing and publishing.
#include "djshard/store/claim.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace djshard::store
