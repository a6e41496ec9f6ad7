// dlc's phases in one process: election, prepare, work, finalize; a stored
// result; a failed prepare; an abort published by another instance.
#include "djshard/coord/dlc.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "djshard/common/error.h"
#include "djshard/io/sha256.h"
#include "djshard/store/job.h"

namespace djshard::coord {
namespace {

namespace fs = std::filesystem;

class DlcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/djshard-dlc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream data(dir_ + "/data.jsonl");
    for (int i = 0; i < 12; ++i) data << "{\"text\":\"row " << i << "\"}\n";
    data.close();
    std::ofstream(dir_ + "/r.yaml") << "process:\n  - whitespace_normalization_mapper:\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  DlcOptions Options(const std::string& run_id) {
    DlcOptions o;
    o.job_dir = dir_ + "/job";
    o.config = dir_ + "/r.yaml";
    o.dataset_path = dir_ + "/data.jsonl";
    o.num_shards = 3;
    o.run_id = run_id;
    o.poll_interval_secs = 0.1;
    o.threads = 1;
    o.log = [this](const LogRecord& r) {
      (r.level == LogLevel::kError ? errors_ : said_) += r.message + "\n";
    };
    return o;
  }
  std::string CoordinationDir(const std::string& run_id) {
    io::Sha256 h;
    h.Update(run_id);
    return store::JobPaths(dir_ + "/job").CoordinationDir(h.HexDigest().substr(0, 20));
  }

  std::string dir_, said_, errors_;
};

TEST_F(DlcTest, OneInstanceElectsItselfForEveryPhaseAndPasses) {
  const DlcOutcome out = RunDlc(Options("run-1"));
  EXPECT_EQ(out.end, DlcEnd::kPassed);
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_EQ(out.message, "PASS: 3 shards were completed by 1 node(s); merged 12 rows into " + dir_ +
                             "/job/merged.jsonl");
  EXPECT_NE(said_.find("elected as DLC prepare coordinator"), std::string::npos) << said_;
  EXPECT_NE(said_.find("elected as DLC finalize coordinator"), std::string::npos) << said_;
  EXPECT_TRUE(errors_.empty()) << errors_;

  // The same run id returns its stored result without doing anything.
  said_.clear();
  const DlcOutcome again = RunDlc(Options("run-1"));
  EXPECT_EQ(again.end, DlcEnd::kStoredResult);
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_EQ(again.message, out.message);
  EXPECT_TRUE(said_.empty()) << said_;
}

TEST_F(DlcTest, AFailedPrepareEndsTheRunWithItsCodeAndNoJob) {
  std::ofstream(dir_ + "/r.yaml") << "process:\n  - no_such_mapper:\n";
  const DlcOutcome out = RunDlc(Options("run-2"));
  EXPECT_EQ(out.end, DlcEnd::kPrepareFailed);
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.message.find("no_such_mapper"), std::string::npos) << out.message;
  EXPECT_NE(errors_.find("no_such_mapper"), std::string::npos) << errors_;
  EXPECT_FALSE(fs::exists(dir_ + "/job"));
}

// Another instance published a failure while this one prepared: this one
// claims nothing and ends with that instance's code and reason.
TEST_F(DlcTest, AnAbortFromAnotherInstanceEndsThisOneWithItsCode) {
  const std::string coord = CoordinationDir("run-3");
  fs::create_directories(coord);
  std::ofstream(coord + "/abort.json") << R"({"return_code": 7, "error": "node-b failed"})";
  const DlcOutcome out = RunDlc(Options("run-3"));
  EXPECT_EQ(out.end, DlcEnd::kAborted);
  EXPECT_EQ(out.exit_code, 7);
  EXPECT_EQ(out.message, "node-b failed");
  EXPECT_TRUE(fs::is_empty(dir_ + "/job/attempts"));
}

TEST_F(DlcTest, StrictModeThatCannotGiveEveryNodeAShardIsRefusedUpFront) {
  DlcOptions o = Options("run-4");
  o.require_all_nodes = true;
  o.nodes = 4;
  o.num_shards = 3;
  EXPECT_THROW(RunDlc(o), Error);
  o.nodes = 0;
  EXPECT_THROW(RunDlc(o), Error);
  EXPECT_FALSE(fs::exists(dir_ + "/job"));
}

// A disk on which the merged output cannot be renamed into place.
class MergedOutputFails : public io::Disk {
 public:
  void Rename(const std::string& from, const std::string& to) override {
    if (to.ends_with("/merged.jsonl")) throw Error(to, 0, "cannot rename: No space left on device");
    io::Disk::Rename(from, to);
  }
};

// Finalize fails on this instance's disk: every instance ends with its code,
// nothing half-merged is visible, and a new run id on a healthy disk passes.
TEST_F(DlcTest, AFailedFinalizeEndsTheRunAndANewRunIdRecovers) {
  MergedOutputFails disk;
  DlcOptions o = Options("run-5");
  o.disk = &disk;
  const DlcOutcome out = RunDlc(o);
  EXPECT_EQ(out.end, DlcEnd::kFinalizeFailed);
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(errors_.find("No space left on device"), std::string::npos) << errors_;
  EXPECT_FALSE(fs::exists(dir_ + "/job/merged.jsonl"));
  for (const auto& e : fs::directory_iterator(dir_ + "/job")) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
  EXPECT_EQ(RunDlc(Options("run-5")).end, DlcEnd::kStoredResult);
  const DlcOutcome again = RunDlc(Options("run-6"));
  EXPECT_EQ(again.end, DlcEnd::kPassed);
  EXPECT_TRUE(fs::exists(dir_ + "/job/merged.jsonl"));
}

// A lock of `phase` left by a coordinator that died `age_secs` ago, with
// its token; returns the lock's path.
std::string DeadCoordinatorLock(const std::string& coord, const std::string& phase,
                                const std::string& token, int age_secs) {
  fs::create_directories(coord);
  const std::string lock = coord + "/" + phase + ".lock";
  std::ofstream(lock) << R"({"hostname": "node-z", "pid": 4242, "token": ")" << token
                      << R"(", "lease_secs": 1})"
                      << "\n";
  fs::last_write_time(lock, fs::file_time_type::clock::now() - std::chrono::seconds(age_secs));
  return lock;
}

TEST_F(DlcTest, AStalePrepareCoordinatorIsTakenOverAndItsStagingDirectoryRemoved) {
  const std::string token(32, 'a');
  const std::string lock = DeadCoordinatorLock(CoordinationDir("run-7"), "prepare", token, 60);
  const std::string staging = store::JobPaths(dir_ + "/job").StagingPath(token);
  fs::create_directories(staging + "/shards");
  DlcOptions o = Options("run-7");
  o.lease_secs = 1;
  o.heartbeat_secs = 0.2;
  const DlcOutcome out = RunDlc(o);
  EXPECT_EQ(out.end, DlcEnd::kPassed) << errors_;
  EXPECT_NE(said_.find("took over as DLC prepare coordinator"), std::string::npos) << said_;
  EXPECT_NE(said_.find("from node-z pid 4242"), std::string::npos) << said_;
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_FALSE(fs::exists(lock));  // released with the result
  EXPECT_EQ(fs::directory_iterator(CoordinationDir("run-7") + "/stale_locks")
                ->path()
                .filename()
                .string()
                .rfind("prepare.", 0),
            0u);
}

TEST_F(DlcTest, ALiveCoordinatorIsWaitedForPastTheWaitTimeout) {
  const std::string lock = DeadCoordinatorLock(CoordinationDir("run-8"), "prepare", "t", 0);
  // The lock's holder heartbeats for 3 s, then publishes a failure.
  std::thread holder([&] {
    for (int i = 0; i < 15; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      fs::last_write_time(lock, fs::file_time_type::clock::now());
    }
    std::ofstream(CoordinationDir("run-8") + "/prepare-result.json")
        << R"({"return_code": 5, "hostname": "node-z", "error": "held"})";
  });
  DlcOptions o = Options("run-8");
  o.lease_secs = 1;
  o.heartbeat_secs = 0.2;
  o.wait_timeout_secs = 0.5;
  const DlcOutcome out = RunDlc(o);
  holder.join();
  EXPECT_EQ(out.end, DlcEnd::kPrepareFailed);
  EXPECT_EQ(out.exit_code, 5);
  EXPECT_EQ(said_.find("coordinator"), std::string::npos) << said_;
}

// A disk on which no lock's flock can be taken without waiting, as when a
// taker froze inside its takeover.
class EveryFlockBusy : public io::Disk {
 public:
  bool Flock(int fd, bool blocking) override { return blocking && io::Disk::Flock(fd, true); }
};

TEST_F(DlcTest, AStaleCoordinatorThatCannotBeTakenOverEndsTheWaitAfterTheTimeout) {
  DeadCoordinatorLock(CoordinationDir("run-9"), "prepare", "t", 60);
  EveryFlockBusy disk;
  DlcOptions o = Options("run-9");
  o.disk = &disk;
  o.lease_secs = 1;
  o.heartbeat_secs = 0.2;
  o.wait_timeout_secs = 0.5;
  try {
    RunDlc(o);
    ADD_FAILURE() << "the wait did not end";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), 2);
    EXPECT_NE(std::string(e.what()).find("could not be taken over"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ + "/job"));
}

TEST_F(DlcTest, BadLeasePolicyIsRefusedUpFront) {
  DlcOptions o = Options("run-10");
  o.lease_secs = 2;
  o.heartbeat_secs = 2;
  EXPECT_THROW(RunDlc(o), Error);
  EXPECT_FALSE(fs::exists(dir_ + "/job"));
}

}  // namespace
}  // namespace djshard::coord
