// The shared probe records of an elastic job (SPEC-checkpoints §10.5): one
// prober per cache key, the others wait and read its record or its failure.
#include "djshard/preflight/probe_records.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "djshard/io/disk.h"

namespace djshard::preflight {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using State = ProbeRecords::State;

class ProbeRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/djshard-probe-records-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = std::string(tmpl) + "/probe";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::path(dir_).parent_path(), ec);
  }
  // Sets the mtime of `path` `secs` into the past.
  static void Age(const std::string& path, int secs) {
    const auto t = fs::last_write_time(path);
    fs::last_write_time(path, t - std::chrono::seconds(secs));
  }

  std::string dir_;
  const std::string key_ = std::string(64, 'a');
};

TEST_F(ProbeRecordsTest, OneProberPerKeyTheOthersWaitAndThenReadItsRecord) {
  ProbeRecords first(dir_, 10, 1, io::RealDisk());
  ProbeRecords second(dir_, 10, 1, io::RealDisk());
  EXPECT_EQ(first.TryKey(key_).state, State::kMine);
  EXPECT_TRUE(fs::exists(first.LockPath(key_)));
  const ProbeRecords::Look busy = second.TryKey(key_);
  EXPECT_EQ(busy.state, State::kBusy);
  const std::string pid = std::to_string(::getpid());
  EXPECT_EQ(busy.holder.substr(busy.holder.size() - pid.size()), pid) << busy.holder;
  first.Publish(key_, {{"cache_key", key_}, {"steady_rows_per_sec", 5.0}});
  EXPECT_FALSE(fs::exists(first.LockPath(key_)));
  const ProbeRecords::Look read = second.TryKey(key_);
  ASSERT_EQ(read.state, State::kRecord);
  EXPECT_EQ(read.record["steady_rows_per_sec"], 5.0);
}

TEST_F(ProbeRecordsTest, APublishedRecordIsNeverReplaced) {
  ProbeRecords first(dir_, 10, 1, io::RealDisk());
  ASSERT_EQ(first.TryKey(key_).state, State::kMine);
  first.Publish(key_, {{"hostname", "first"}});
  // A second prober (of a lock taken over as stale) keeps the first record.
  ProbeRecords late(dir_, 10, 1, io::RealDisk());
  ASSERT_EQ(late.TryKey(std::string(64, 'b')).state, State::kMine);
  const json standing = late.Publish(key_, {{"hostname", "late"}});
  EXPECT_EQ(standing["hostname"], "first");
}

TEST_F(ProbeRecordsTest, AFailureStopsTheOthersOnlyWhileYoungerThanTheLease) {
  ProbeRecords prober(dir_, 10, 1, io::RealDisk());
  ASSERT_EQ(prober.TryKey(key_).state, State::kMine);
  prober.PublishFailure(key_, {{"op_name", "m"}, {"error_type", "timeout"}});
  EXPECT_FALSE(fs::exists(prober.LockPath(key_)));
  ProbeRecords reader(dir_, 10, 1, io::RealDisk());
  const ProbeRecords::Look failed = reader.TryKey(key_);
  ASSERT_EQ(failed.state, State::kFailed);
  EXPECT_EQ(failed.record["error_type"], "timeout");
  // Older than the lease: history; the next worker probes again.
  Age(reader.FailurePath(key_), 60);
  EXPECT_EQ(reader.TryKey(key_).state, State::kMine);
}

TEST_F(ProbeRecordsTest, ALockOlderThanTheLeaseIsTakenOverAndAFreshOneIsNot) {
  auto dead = std::make_unique<ProbeRecords>(dir_, 10, 1, io::RealDisk());
  ASSERT_EQ(dead->TryKey(key_).state, State::kMine);
  ProbeRecords other(dir_, 10, 1, io::RealDisk());
  EXPECT_EQ(other.TryKey(key_).state, State::kBusy);
  Age(other.LockPath(key_), 60);
  EXPECT_EQ(other.TryKey(key_).state, State::kMine);
  // The old holder, when it ends, leaves the new holder's lock alone.
  dead.reset();
  EXPECT_TRUE(fs::exists(other.LockPath(key_)));
}

TEST_F(ProbeRecordsTest, RefreshKeepsAHeldLockFreshAndTheDestructorRemovesIt) {
  std::string lock;
  {
    ProbeRecords holder(dir_, 10, 0, io::RealDisk());
    ASSERT_EQ(holder.TryKey(key_).state, State::kMine);
    lock = holder.LockPath(key_);
    Age(lock, 60);
    holder.Refresh();
    EXPECT_LT(fs::file_time_type::clock::now() - fs::last_write_time(lock),
              std::chrono::seconds(30));
    ProbeRecords other(dir_, 10, 1, io::RealDisk());
    EXPECT_EQ(other.TryKey(key_).state, State::kBusy);
  }
  EXPECT_FALSE(fs::exists(lock));
}

}  // namespace
}  // namespace djshard::preflight
