// The stop request file of `djshard stop` (SPEC-checkpoints §9). The watcher
// is exercised by the CLI tests: it records a process-wide stop.
#include "djshard/job/stop_request.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "djshard/common/error.h"
#include "tests/unit/temp_dir.h"

namespace djshard::job {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(StopRequest, RoundTripsThroughItsJson) {
  StopRequest r = StopRequest::Now("graceful", "maintenance", 12.5);
  const StopRequest back = StopRequest::FromJson(r.ToJson(), "x");
  EXPECT_EQ(back.requested_at, r.requested_at);
  EXPECT_EQ(back.hostname, r.hostname);
  EXPECT_EQ(back.pid, r.pid);
  EXPECT_EQ(back.user, r.user);
  EXPECT_EQ(back.mode, "graceful");
  EXPECT_EQ(back.reason, "maintenance");
  EXPECT_EQ(back.grace_secs, 12.5);
  EXPECT_THROW(StopRequest::FromJson("[1]", "x"), djshard::Error);
}

TEST(StopRequest, TheFirstRequestWinsAndAForceFileMakesItForced) {
  TempDir dir;
  EXPECT_FALSE(ReadStopRequest(dir.dir()));
  EXPECT_TRUE(PublishStopRequest(dir.dir(), StopRequest::Now("graceful", "first", 60)));
  EXPECT_FALSE(PublishStopRequest(dir.dir(), StopRequest::Now("graceful", "second", 60)));
  EXPECT_EQ(ReadStopRequest(dir.dir())->reason, "first");
  EXPECT_EQ(ReadStopRequest(dir.dir())->mode, "graceful");
  EXPECT_TRUE(PublishForceStop(dir.dir(), StopRequest::Now("force", "now", 60)));
  EXPECT_FALSE(PublishForceStop(dir.dir(), StopRequest::Now("force", "again", 60)));
  const std::optional<StopRequest> r = ReadStopRequest(dir.dir());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->mode, "force");
  EXPECT_EQ(r->reason, "first");
}

TEST(StopRequest, AForceFileAloneIsAForcedRequest) {
  TempDir dir;
  EXPECT_TRUE(PublishForceStop(dir.dir(), StopRequest::Now("force", "only", 60)));
  EXPECT_EQ(ReadStopRequest(dir.dir())->mode, "force");
}

TEST(StopRequest, ClearMovesBothFilesIntoTheHistory) {
  TempDir dir;
  EXPECT_FALSE(ClearStopRequest(dir.dir(), dir.Path("history")));
  PublishStopRequest(dir.dir(), StopRequest::Now("graceful", "", 60));
  PublishForceStop(dir.dir(), StopRequest::Now("force", "", 60));
  EXPECT_TRUE(ClearStopRequest(dir.dir(), dir.Path("history")));
  EXPECT_FALSE(ReadStopRequest(dir.dir()));
  size_t kept = 0;
  for (const auto& e : fs::directory_iterator(dir.Path("history"))) {
    kept += e.path().filename().string().rfind("stop_request.", 0) == 0;
  }
  EXPECT_EQ(kept, 2u);
  // The job can be stopped again.
  EXPECT_TRUE(PublishStopRequest(dir.dir(), StopRequest::Now("graceful", "", 60)));
}

}  // namespace
}  // namespace djshard::job
