// Retry on a real job directory: every selected shard is validated before
// anything moves; a retried shard's failure history goes to state/history and
// the shard can be claimed again.
#include "djshard/store/retry.h"

#include <gtest/gtest.h>

#include "djshard/common/error.h"
#include "tests/unit/small_job.h"

namespace djshard::store {
namespace {

class RetryTest : public testing::SmallJob {
 protected:
  std::optional<Error> Refusal(const RetryRequest& request) {
    try {
      Retry(job(), request);
    } catch (const Error& e) {
      return e;
    }
    return std::nullopt;
  }
  RetryRequest Shards(std::vector<std::string> ids) {
    RetryRequest r;
    r.shard_ids = std::move(ids);
    return r;
  }
  void ExpectStillFailed(size_t i) {
    EXPECT_TRUE(tmp_.Exists("job/state/failed/" + ShardId(i) + ".json"));
    EXPECT_EQ(tmp_.List("job/attempts/" + ShardId(i)).size(), 1u);
    EXPECT_EQ(HistoryEntries(), 0u);
  }
  // Files and directories under state/history.
  size_t HistoryEntries() const {
    size_t n = 0;
    for (auto it = std::filesystem::recursive_directory_iterator(tmp_.Path("job/state/history"));
         it != std::filesystem::recursive_directory_iterator(); ++it) {
      ++n;
    }
    return n;
  }
};

TEST_F(RetryTest, AllFailedMovesEachFailureHistoryAsideAndTheShardIsClaimableAgain) {
  Fail(0);
  Finish(1);
  Fail(2);
  ClaimStore claims(job());
  EXPECT_FALSE(claims.TryClaim(ShardId(0)).has_value());

  RetryRequest all;
  all.all_failed = true;
  const RetryOutcome o = Retry(job(), all);
  EXPECT_EQ(o.retried, (std::vector<std::string>{ShardId(0), ShardId(2)}));
  EXPECT_TRUE(tmp_.List("job/state/failed").empty());
  EXPECT_FALSE(tmp_.Exists("job/attempts/" + ShardId(0)));
  EXPECT_FALSE(tmp_.Exists("job/attempts/" + ShardId(2)));
  // The done shard is untouched.
  EXPECT_TRUE(tmp_.Exists("job/state/done/" + ShardId(1) + ".json"));
  EXPECT_EQ(tmp_.List("job/attempts/" + ShardId(1)).size(), 1u);
  // Each failure is kept under a unique name, its log with it.
  const std::vector<std::string> failed = tmp_.List("job/state/history/failed");
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].rfind(ShardId(0) + ".", 0), 0u) << failed[0];
  EXPECT_EQ(failed[1].rfind(ShardId(2) + ".", 0), 0u) << failed[1];
  const std::vector<std::string> attempts = tmp_.List("job/state/history/attempts");
  ASSERT_EQ(attempts.size(), 2u);
  const std::string moved = "job/state/history/attempts/" + attempts[0];
  ASSERT_EQ(tmp_.List(moved).size(), 1u);
  EXPECT_EQ(tmp_.Read(moved + "/" + tmp_.List(moved)[0] + "/process.log"), "failed: test\n");

  EXPECT_TRUE(claims.TryClaim(ShardId(0)).has_value());
}

TEST_F(RetryTest, ARetriedShardCanFailAndBeRetriedAgain) {
  Fail(0);
  EXPECT_EQ(Retry(job(), Shards({ShardId(0)})).retried, (std::vector<std::string>{ShardId(0)}));
  Fail(0);
  EXPECT_EQ(Retry(job(), Shards({ShardId(0)})).retried, (std::vector<std::string>{ShardId(0)}));
  EXPECT_EQ(tmp_.List("job/state/history/failed").size(), 2u);
  EXPECT_EQ(tmp_.List("job/state/history/attempts").size(), 2u);
}

TEST_F(RetryTest, ALockedShardIsRefusedAndNothingMoves) {
  Fail(0);
  ClaimStore claims(job());
  const std::optional<Claim> running = claims.TryClaim(ShardId(1));
  ASSERT_TRUE(running.has_value());
  const std::optional<Error> e = Refusal(Shards({ShardId(0), ShardId(1)}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message(), "Cannot retry " + ShardId(1) + ": a lock still exists");
  ExpectStillFailed(0);
  EXPECT_TRUE(tmp_.Exists("job/state/locks/" + ShardId(1) + ".lock"));
}

TEST_F(RetryTest, ADoneShardIsRefusedAndNothingMoves) {
  Fail(0);
  Finish(2);
  const std::optional<Error> e = Refusal(Shards({ShardId(0), ShardId(2)}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message(), "Cannot retry " + ShardId(2) + ": already complete");
  EXPECT_EQ(e->hint(), "only failed shards can be retried");
  ExpectStillFailed(0);
  EXPECT_TRUE(tmp_.Exists("job/state/done/" + ShardId(2) + ".json"));
}

TEST_F(RetryTest, UnknownAndPathLikeShardIdsAreRefusedAndNothingMoves) {
  Fail(0);
  std::optional<Error> e = Refusal(Shards({ShardId(0), "part-00009-of-00010"}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message(), "unknown shard id 'part-00009-of-00010'");
  for (const std::string& bad : std::vector<std::string>{"../" + ShardId(0), "", "a/b"}) {
    e = Refusal(Shards({ShardId(0), bad}));
    ASSERT_TRUE(e.has_value()) << bad;
    EXPECT_EQ(e->message(), "invalid shard id '" + bad + "'");
  }
  ExpectStillFailed(0);
}

TEST_F(RetryTest, AShardWithoutHistoryIsNotRetried) {
  EXPECT_TRUE(Retry(job(), Shards({ShardId(1)})).retried.empty());
  RetryRequest all;
  all.all_failed = true;
  EXPECT_TRUE(Retry(job(), all).retried.empty());
  EXPECT_EQ(HistoryEntries(), 0u);
}

}  // namespace
}  // namespace djshard::store
