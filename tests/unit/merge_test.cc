// Merge and verify on a real job directory whose shards were finished through
// the ClaimStore: order, rows/bytes/sha256 checks, and refusals that leave
// nothing behind.
#include "djshard/store/merge.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "djshard/common/error.h"
#include "djshard/io/input.h"
#include "tests/unit/small_job.h"

namespace djshard::store {
namespace {

using nlohmann::json;

class MergeTest : public testing::SmallJob {
 protected:
  // The shard inputs concatenated in manifest order: what an unchanged merge holds.
  std::string ShardsInOrder() const {
    std::string all;
    for (const ShardEntry& s : job().manifest().shards) all += tmp_.Read("job/" + s.path);
    return all;
  }
  std::optional<Error> MergeRefusal(const MergeRequest& request = {}) {
    try {
      Merge(job(), request);
    } catch (const Error& e) {
      return e;
    }
    return std::nullopt;
  }
  std::optional<Error> VerifyRefusal(const VerifyRequest& request = {}) {
    try {
      Verify(job(), request);
    } catch (const Error& e) {
      return e;
    }
    return std::nullopt;
  }
  // Names in the job directory other than the ones prepare and the workers made.
  void ExpectNoMergeLeftovers() const {
    for (const std::string& name : tmp_.List("job")) {
      EXPECT_TRUE(name == "manifest.json" || name == "recipe.yaml" || name == "shards" ||
                  name == "attempts" || name == "state" || name == "job_summary.json")
          << name;
    }
  }
};

TEST_F(MergeTest, ConcatenatesShardOutputsInManifestOrderWhateverTheFinishingOrder) {
  Finish(2, "node-b");
  Finish(0, "node-a");
  Finish(1, "node-b");
  const MergeOutcome o = Merge(job(), {});
  const std::string merged = tmp_.Read("job/merged.jsonl");
  EXPECT_EQ(merged, ShardsInOrder());
  EXPECT_EQ(merged.substr(0, 24), "{\"id\":0,\"text\":\"row 0\"}\n");
  EXPECT_EQ(o.output_path, tmp_.Path("job/merged.jsonl"));
  EXPECT_EQ(o.rows, 12u);
  EXPECT_EQ(o.bytes, merged.size());
  EXPECT_EQ(o.sha256, io::Sha256OfFile(tmp_.Path("job/merged.jsonl")));
  EXPECT_EQ(o.num_shards, 3u);
  EXPECT_EQ(o.nodes, 2u);
  const json record = json::parse(tmp_.Read("job/merge.json"));
  EXPECT_EQ(record["rows"], 12);
  EXPECT_EQ(record["sha256"], o.sha256);
  EXPECT_EQ(record["output_path"], o.output_path);
  EXPECT_EQ(record["num_shards"], 3);
  EXPECT_EQ(record["job_id"], job().manifest().job_id);
  EXPECT_EQ(PassLine(o), "PASS: 3 shards were completed by 2 node(s); merged 12 rows into " +
                             tmp_.Path("job/merged.jsonl"));
}

TEST_F(MergeTest, MergesTheOutputsAsTheWorkersWroteThem) {
  Finish(0, "node-a", "{\"id\":0,\"text\":\"ROW 0\"}\n");
  Finish(1, "node-a", "");  // every row of this shard was filtered out
  Finish(2, "node-a", "{\"a\":1}\n{\"b\":2}\n");
  const MergeOutcome o = Merge(job(), {tmp_.Path("out/m.jsonl"), false, {}});
  EXPECT_EQ(tmp_.Read("out/m.jsonl"), "{\"id\":0,\"text\":\"ROW 0\"}\n{\"a\":1}\n{\"b\":2}\n");
  EXPECT_EQ(o.rows, 3u);
  EXPECT_EQ(o.nodes, 1u);
}

TEST_F(MergeTest, RefusesAnIncompleteJobAndWritesNothing) {
  Finish(0);
  Fail(1);
  const std::optional<Error> e = MergeRefusal();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), job().dir());
  EXPECT_EQ(e->message().rfind("cannot merge: job is not complete", 0), 0u) << e->message();
  EXPECT_EQ(e->hint(), "run 'djshard retry --all-failed' and the workers again");
  ExpectNoMergeLeftovers();
}

struct Tamper {
  const char* name;
  std::string (*change)(std::string);
};

class MergeTamper : public MergeTest, public ::testing::WithParamInterface<Tamper> {};

TEST_P(MergeTamper, AShardOutputChangedAfterPublishingIsRefused) {
  FinishAll();
  const std::string output = DoneOutput(1);
  tmp_.Write(output, GetParam().change(tmp_.Read(output)));
  const std::optional<Error> e = MergeRefusal();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), tmp_.Path(output));
  EXPECT_EQ(e->message().rfind("shard output does not match its done record", 0), 0u)
      << e->message();
  EXPECT_NE(e->hint().find("djshard retry --shard-id " + ShardId(1)), std::string::npos)
      << e->hint();
  ExpectNoMergeLeftovers();
  // verify finds the same.
  const std::optional<Error> v = VerifyRefusal();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->file(), tmp_.Path(output));
}

INSTANTIATE_TEST_SUITE_P(
    Changes, MergeTamper,
    ::testing::Values(Tamper{"OneByte",
                             [](std::string s) {
                               s[s.find("row") + 1] = 'X';  // same size, same rows, still JSON
                               return s;
                             }},
                      Tamper{"ExtraRow", [](std::string s) { return s + "{\"extra\":1}\n"; }},
                      Tamper{"LostNewline",
                             [](std::string s) { return s.substr(0, s.size() - 1); }},
                      Tamper{"LostRow", [](std::string s) { return s.substr(s.find('\n') + 1); }}),
    [](const ::testing::TestParamInfo<Tamper>& info) { return std::string(info.param.name); });

TEST_F(MergeTest, AnOutputThatIsNoLongerJsonIsRefusedAndADeepCheckNamesItsLine) {
  FinishAll();
  const std::string output = DoneOutput(2);
  std::string bytes = tmp_.Read(output);
  bytes[bytes.find('\n') + 1] = '[';  // line 2 starts an array
  tmp_.Write(output, bytes);
  // Merge does not parse the lines again: the checksum finds the change.
  const std::optional<Error> e = MergeRefusal();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), tmp_.Path(output));
  EXPECT_NE(e->message().find("does not match its done record"), std::string::npos) << e->message();
  ExpectNoMergeLeftovers();
  // The deep check parses every line and names the first bad one.
  try {
    StreamVerifiedOutputs(
        job(), [](std::string_view) {}, /*deep=*/true);
    ADD_FAILURE() << "the deep check passed";
  } catch (const Error& deep) {
    EXPECT_EQ(deep.file(), tmp_.Path(output));
    EXPECT_EQ(deep.line(), 2u);
  }
}

TEST_F(MergeTest, ADoneRecordOfAnotherShardOrPointingOutsideTheJobIsRefused) {
  FinishAll();
  const std::string record0 = "job/state/done/" + ShardId(0) + ".json";
  json done = json::parse(tmp_.Read(record0));
  const json original = done;
  done["shard_id"] = ShardId(1);
  tmp_.Write(record0, done.dump());
  std::optional<Error> e = MergeRefusal();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), tmp_.Path(record0));
  EXPECT_EQ(e->message(), "done record names shard '" + ShardId(1) + "'");

  done = original;
  done["output_path"] = "../data.jsonl";
  tmp_.Write(record0, done.dump());
  e = MergeRefusal();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message(), "output_path '../data.jsonl' leaves the job directory");
  ExpectNoMergeLeftovers();
}

TEST_F(MergeTest, AnExistingOutputIsKeptUnlessOverwriteIsAsked) {
  FinishAll();
  tmp_.Write("job/merged.jsonl", "precious\n");
  const std::optional<Error> e = MergeRefusal();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message(), "output already exists");
  EXPECT_EQ(tmp_.Read("job/merged.jsonl"), "precious\n");
  EXPECT_FALSE(tmp_.Exists("job/merge.json"));
  MergeRequest again;
  again.overwrite = true;
  Merge(job(), again);
  EXPECT_EQ(tmp_.Read("job/merged.jsonl"), ShardsInOrder());
}

TEST_F(MergeTest, ACompressedMergeHashesItsContentAndVerifies) {
  FinishAll();
  const MergeOutcome o = Merge(job(), {tmp_.Path("m.jsonl.zst"), false, {}});
  std::unique_ptr<io::ByteSource> in = io::OpenInput(tmp_.Path("m.jsonl.zst"));
  std::string content;
  char buf[4096];
  for (size_t n; (n = in->Read(buf, sizeof buf)) > 0;) content.append(buf, n);
  EXPECT_EQ(content, ShardsInOrder());
  EXPECT_NE(tmp_.Read("m.jsonl.zst"), content);
  EXPECT_EQ(json::parse(tmp_.Read("job/merge.json"))["sha256"], o.sha256);
  // verify reads merge.json's output by default.
  const MergeOutcome v = Verify(job(), {});
  EXPECT_EQ(v.output_path, tmp_.Path("m.jsonl.zst"));
  EXPECT_EQ(v.sha256, o.sha256);
  EXPECT_EQ(v.rows, 12u);
}

TEST_F(MergeTest, VerifyFindsAChangedMergedOutput) {
  FinishAll();
  Merge(job(), {});
  std::string merged = tmp_.Read("job/merged.jsonl");
  merged[merged.size() - 4] = 'X';  // "row 11" becomes "row 1X"
  tmp_.Write("job/merged.jsonl", merged);
  const std::optional<Error> e = VerifyRefusal();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), tmp_.Path("job/merged.jsonl"));
  EXPECT_EQ(e->message(), "merged output differs from the shard outputs (12 rows vs 12)");
}

TEST_F(MergeTest, VerifyRequiresTheExpectedNumberOfNodes) {
  Finish(0, "node-a");
  Finish(1, "node-b");
  Finish(2, "node-a");
  Merge(job(), {});
  VerifyRequest two;
  two.expect_nodes = 2;
  EXPECT_EQ(Verify(job(), two).nodes, 2u);
  VerifyRequest three;
  three.expect_nodes = 3;
  const std::optional<Error> e = VerifyRefusal(three);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message(), "shards were completed by 2 distinct node(s), expected at least 3");
}

TEST_F(MergeTest, VerifyWithoutAMergedOutputSaysSo) {
  FinishAll();
  const std::optional<Error> e = VerifyRefusal();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), tmp_.Path("job/merged.jsonl"));
  EXPECT_EQ(e->message(), "merged output does not exist");
}

// An --output naming one of the job's own files would destroy what merge and
// verify check against: refused, with everything left as it was.
TEST_F(MergeTest, RefusesAnOutputThatIsAFileOfTheJob) {
  FinishAll();
  for (const std::string& rel : {DoneOutput(0), std::string("job/manifest.json"),
                                 std::string("job/shards/") + ShardId(0) + ".jsonl"}) {
    MergeRequest request;
    request.output = tmp_.Path(rel);
    request.overwrite = true;
    try {
      Merge(job(), request);
      ADD_FAILURE() << "merge wrote over " << rel;
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("would replace a file of the job"), std::string::npos)
          << e.message();
    }
  }
  EXPECT_NO_THROW(StreamVerifiedOutputs(
      job(), [](std::string_view) {}, /*deep=*/true));
}

}  // namespace
}  // namespace djshard::store
