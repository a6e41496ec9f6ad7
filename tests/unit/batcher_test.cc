// model::BucketBatcher with a forward function in place of a model: rows of
// several threads share calls of one shape, errors and out-of-memory reach
// only the rows they concern.
#include "djshard/model/batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "djshard/model/device_model.h"

namespace djshard::model {
namespace {

// The fake model's output for one row: the sum of its ids and its length.
void FakeRow(const int64_t* ids, const int64_t* mask, int64_t seq, float* out) {
  float sum = 0, len = 0;
  for (int64_t i = 0; i < seq; ++i) {
    if (mask[i] == 0) continue;
    sum += static_cast<float>(ids[i]);
    len += 1;
  }
  out[0] = sum;
  out[1] = len;
}

struct Shapes {
  std::mutex mu;
  std::set<std::pair<int64_t, int64_t>> seen;  // (batch, seq)
};

BatchForward Fake(Shapes* shapes) {
  return [shapes](const int64_t* ids, const int64_t* mask, const int64_t*, int64_t batch,
                  int64_t seq, float* out) {
    {
      std::lock_guard<std::mutex> lock(shapes->mu);
      shapes->seen.insert({batch, seq});
    }
    for (int64_t r = 0; r < batch; ++r) FakeRow(ids + r * seq, mask + r * seq, seq, out + 2 * r);
  };
}

std::vector<std::vector<int64_t>> RandomRows(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(n));
  for (auto& r : rows) {
    r.resize(1 + rng() % 100);
    for (auto& id : r) id = 1 + static_cast<int64_t>(rng() % 1000);
  }
  return rows;
}

TEST(BucketBatcher, RowsOfManyThreadsShareCallsOfBatchSizeTimesBucket) {
  Shapes shapes;
  BatcherOptions options;
  options.batch_size = 8;
  options.out_dim = 2;
  options.max_tokens = 128;
  options.fill_token_id = 7;
  BucketBatcher batcher(options, Fake(&shapes));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        auto ids = RandomRows(13, t * 100 + static_cast<unsigned>(round));
        std::vector<float> out(ids.size() * 2);
        std::vector<ModelRow> rows;
        for (size_t i = 0; i < ids.size(); ++i) rows.push_back({&ids[i], 0, &out[2 * i], false});
        batcher.Run(rows);
        for (size_t i = 0; i < ids.size(); ++i) {
          const float sum = static_cast<float>(std::accumulate(ids[i].begin(), ids[i].end(), 0L));
          if (out[2 * i] != sum || out[2 * i + 1] != static_cast<float>(ids[i].size())) ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong, 0);
  for (const auto& [batch, seq] : shapes.seen) {
    EXPECT_EQ(batch, 8);
    EXPECT_TRUE(seq == 16 || seq == 32 || seq == 64 || seq == 128) << seq;
  }
  const BatcherCounters c = batcher.counters();
  EXPECT_EQ(c.rows, 3u * 20 * 13);
  EXPECT_EQ(c.batches * 8, c.rows + c.pad_rows);
}

TEST(BucketBatcher, AFailedCallFailsOnlyTheRunsWhoseRowsItHeld) {
  BatcherOptions options;
  options.batch_size = 4;
  options.out_dim = 2;
  options.max_tokens = 64;
  BucketBatcher batcher(options, [](const int64_t* ids, const int64_t* mask, const int64_t*,
                                    int64_t batch, int64_t seq, float* out) {
    for (int64_t r = 0; r < batch; ++r) {
      if (ids[r * seq] == 666) throw std::runtime_error("device broke");
      FakeRow(ids + r * seq, mask + r * seq, seq, out + 2 * r);
    }
  });
  std::vector<int64_t> bad = {666, 1}, good = {1, 2, 3};
  std::vector<float> out(2);
  ModelRow row{&bad, 0, out.data(), false};
  EXPECT_THROW(batcher.Run(std::span<ModelRow>(&row, 1)), std::runtime_error);
  ModelRow ok{&good, 0, out.data(), false};
  batcher.Run(std::span<ModelRow>(&ok, 1));
  EXPECT_EQ(out[0], 6.0f);
}

TEST(BucketBatcher, OutOfMemorySplitsTheBatchAndMarksARowThatNeverFits) {
  BatcherOptions options;
  options.batch_size = 8;
  options.out_dim = 2;
  options.max_tokens = 64;
  BucketBatcher batcher(options, [](const int64_t* ids, const int64_t* mask, const int64_t*,
                                    int64_t batch, int64_t seq, float* out) {
    if (batch > 2) throw DeviceOutOfMemory("out of memory", "");
    for (int64_t r = 0; r < batch; ++r) {
      if (ids[r * seq] == 999) throw DeviceOutOfMemory("out of memory", "");
      FakeRow(ids + r * seq, mask + r * seq, seq, out + 2 * r);
    }
  });
  auto ids = RandomRows(6, 3);
  for (auto& r : ids) r.resize(std::min<size_t>(r.size(), 10));
  ids[4][0] = 999;  // never fits, even alone
  std::vector<float> out(ids.size() * 2, -1);
  std::vector<ModelRow> rows;
  for (size_t i = 0; i < ids.size(); ++i) rows.push_back({&ids[i], 0, &out[2 * i], false});
  batcher.Run(rows);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == 4) {
      EXPECT_TRUE(rows[i].out_of_memory);
      continue;
    }
    EXPECT_FALSE(rows[i].out_of_memory) << i;
    EXPECT_EQ(out[2 * i + 1], static_cast<float>(ids[i].size())) << i;
  }
  EXPECT_GT(batcher.counters().oom_splits, 0u);
}

TEST(BucketBatcher, DirectModeRunsAtOnceWithoutPadRows) {
  Shapes shapes;
  BatcherOptions options;
  options.batch_size = 4;
  options.out_dim = 2;
  options.max_tokens = 128;
  options.direct = true;
  options.max_batch_wait = std::chrono::milliseconds(60000);  // never waited for
  BucketBatcher batcher(options, Fake(&shapes));
  auto ids = RandomRows(10, 9);
  std::vector<float> out(ids.size() * 2);
  std::vector<ModelRow> rows;
  for (size_t i = 0; i < ids.size(); ++i) rows.push_back({&ids[i], 0, &out[2 * i], false});
  batcher.Run(rows);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(out[2 * i + 1], static_cast<float>(ids[i].size()));
  }
  EXPECT_EQ(batcher.counters().pad_rows, 0u);
  EXPECT_EQ(batcher.counters().batches, 3u);  // 4 + 4 + 2
}

TEST(BucketBatcher, BucketsRoundUpAndStopAtTheModelsPositions) {
  EXPECT_EQ(BucketBatcher::BucketOf(1, 512), 16);
  EXPECT_EQ(BucketBatcher::BucketOf(17, 512), 32);
  EXPECT_EQ(BucketBatcher::BucketOf(300, 512), 384);
  EXPECT_EQ(BucketBatcher::BucketOf(513, 2048), 768);
  EXPECT_EQ(BucketBatcher::BucketOf(70, 77), 77);
}

}  // namespace
}  // namespace djshard::model
