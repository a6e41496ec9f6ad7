// A small prepared job in a temporary directory, with shards finished or
// failed by hand through the real ClaimStore, as a worker would.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "djshard/io/sha256.h"
#include "djshard/store/claim.h"
#include "djshard/store/job.h"
#include "djshard/store/prepare.h"
#include "djshard/store/records.h"
#include "tests/unit/temp_dir.h"

namespace djshard::testing {

class SmallJob : public ::testing::Test {
 protected:
  // 12 rows in 3 shards of 4.
  void SetUp() override {
    std::string data;
    for (int i = 0; i < 12; ++i) {
      data += "{\"id\":" + std::to_string(i) + ",\"text\":\"row " + std::to_string(i) + "\"}\n";
    }
    tmp_.Write("data.jsonl", data);
    tmp_.Write("r.yaml", "process:\n  - text_length_filter:\n");
    store::PrepareRequest req;
    req.config_path = tmp_.Path("r.yaml");
    req.dataset_path = tmp_.Path("data.jsonl");
    req.job_dir = tmp_.Path("job");
    req.num_shards = 3;
    store::Prepare(req);
    job_.emplace(store::JobDir::Open(tmp_.Path("job")));
    ASSERT_EQ(job_->manifest().shards.size(), 3u);
  }

  const store::JobDir& job() const { return *job_; }
  std::string ShardId(size_t i) const { return job_->manifest().shards.at(i).id; }

  // Claims shard `i`, writes `output` (the shard's own bytes when nullopt) as
  // the attempt's processed.jsonl and publishes its done record.
  void Finish(size_t i, const std::string& hostname = "node-a",
              const std::optional<std::string>& output = std::nullopt) {
    const store::ShardEntry& shard = job_->manifest().shards.at(i);
    store::ClaimStore claims(*job_);
    std::optional<store::Claim> claim = claims.TryClaim(shard.id);
    ASSERT_TRUE(claim.has_value());
    std::filesystem::create_directories(claim->attempt_dir());
    const std::string rel = claim->attempt_rel() + "/processed.jsonl";
    const std::string bytes = output ? *output : tmp_.Read("job/" + shard.path);
    tmp_.Write("job/" + rel, bytes);
    uint64_t rows = 0;
    for (char c : bytes) rows += c == '\n';
    store::DoneRecord done;
    done.shard_id = shard.id;
    done.completed_at = "2026-12-01T00:00:00.000Z";
    done.hostname = hostname;
    done.pid = 4242;
    done.token = claim->token();
    done.attempt_number = claim->attempt_number();
    done.output_path = rel;
    done.rows = rows;
    done.size_bytes = bytes.size();
    done.checksum = io::ChecksumOfFile(tmp_.Path("job/" + rel));
    ASSERT_EQ(claims.PublishDone(*claim, done), store::ClaimStore::PublishResult::kPublished);
  }
  void FinishAll() {
    for (size_t i = 0; i < job_->manifest().shards.size(); ++i) Finish(i);
  }

  // Claims shard `i` and releases it with a failed record.
  void Fail(size_t i) {
    const std::string id = ShardId(i);
    store::ClaimStore claims(*job_);
    std::optional<store::Claim> claim = claims.TryClaim(id);
    ASSERT_TRUE(claim.has_value());
    std::filesystem::create_directories(claim->attempt_dir());
    tmp_.Write("job/" + claim->attempt_rel() + "/process.log", "failed: test\n");
    store::FailedRecord failed;
    failed.shard_id = id;
    failed.failures = 1;
    failed.last_error = "test failure";
    ASSERT_TRUE(claims.Release(*claim, failed));
  }

  // The shard's output path (relative to the test dir) named by its done record.
  std::string DoneOutput(size_t i) const {
    const std::string done = tmp_.Read("job/state/done/" + ShardId(i) + ".json");
    return "job/" + nlohmann::json::parse(done)["output_path"].get<std::string>();
  }

  TempDir tmp_;
  std::optional<store::JobDir> job_;
};

}  // namespace djshard::testing
