// Black-box tests of `djshard prepare`: the real binary, real files.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <utime.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "djshard/io/checksum.h"
#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class PrepareCli : public CliTest {
 protected:
  // Runs prepare into job/ and expects exit 2, an error naming `where`, and
  // neither the job directory nor a staging directory left behind.
  void ExpectRefused(const std::vector<std::string>& extra, const std::string& where,
                     const std::string& what) {
    std::vector<std::string> args = {"prepare", "--config", "recipe.yaml", "--job-dir", "job"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("ERROR: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(where), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    ExpectNothingPublished();
  }
  // Neither the job directory nor a staging directory is there.
  void ExpectNothingPublished() const {
    EXPECT_FALSE(Exists("job"));
    for (const std::string& name : List()) {
      EXPECT_EQ(name.find(".preparing."), std::string::npos) << "staging left: " << name;
    }
  }
};

TEST_F(PrepareCli, DirectoryInputKeepsSortedOrderAndAddsGlobalIndexes) {
  Write("in/b/2.jsonl", "{\"text\":\"third\"}\n{\"text\":\"fourth\"}\n");
  Write("in/a.jsonl", "{\"text\":\"first\"}\n{\"text\":\"second\",\"idx\":null}\n");
  Write("in/c/.hidden.JSONL", "{\"text\":\"fifth\"}");  // hidden, upper case, no final newline
  Write("in/notes.txt", "not an input");
  DemoRecipe("in", "  - words_num_filter:\n      index_key: idx\n");
  const CliResult r =
      Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("job/shards/part-00000-of-00002.jsonl"),
            "{\"text\":\"first\",\"idx\":0}\n{\"text\":\"second\",\"idx\":null}\n"
            "{\"text\":\"third\",\"idx\":2}\n");
  EXPECT_EQ(Read("job/shards/part-00001-of-00002.jsonl"),
            "{\"text\":\"fourth\",\"idx\":3}\n{\"text\":\"fifth\",\"idx\":4}\n");
  const json m = json::parse(Read("job/manifest.json"));
  EXPECT_EQ(m["schema_version"], 3);
  EXPECT_EQ(m["job_id"], "job");
  EXPECT_EQ(m["total_rows"], 5);
  EXPECT_EQ(m["index_keys"], json::array({"idx"}));
  ASSERT_EQ(m["input_files"].size(), 3u);
  EXPECT_EQ(m["input_files"][0]["relative_path"], "a.jsonl");
  EXPECT_EQ(m["input_files"][1]["relative_path"], "b/2.jsonl");
  EXPECT_EQ(m["input_files"][2]["relative_path"], "c/.hidden.JSONL");
  EXPECT_EQ(m["input_files"][2]["rows"], 1);
  EXPECT_EQ(m["shards"][1]["id"], "part-00001-of-00002");
  EXPECT_EQ(m["shards"][1]["path"], "shards/part-00001-of-00002.jsonl");
  // The shard's checksum is the XXH3-128 that xxh128sum prints for the file.
  EXPECT_EQ(m["shards"][1]["xxh3_128"],
            io::ChecksumOfFile(Path("job/shards/part-00001-of-00002.jsonl")).hex);
  EXPECT_FALSE(m["shards"][1].contains("sha256"));
  EXPECT_EQ(m["recipe"]["snapshot_path"], "recipe.yaml");
  EXPECT_EQ(m["engine"]["name"], "djshard");
  EXPECT_EQ(m["policy"]["lease_secs"], 300);
  EXPECT_EQ(m["policy"]["max_retries"], 3);
  EXPECT_EQ(m["policy"]["poll_interval_secs"], 20);
  EXPECT_EQ(Read("job/recipe.yaml"), Read("recipe.yaml"));
  for (const char* dir : {"state/locks", "state/stale_locks", "state/done", "state/failed",
                          "state/history", "attempts"}) {
    EXPECT_TRUE(fs::is_directory(Path(std::string("job/") + dir))) << dir;
  }
}

TEST_F(PrepareCli, NormalizesCompactlyAndMakesMediaPathsAbsolute) {
  Write("d/x.jsonl",
        "{ \"text\" : \"caf\\u00e9\", \"n\": 1.0, \"e\": 1e5, \"images\": [\"a/../b.jpg\", \"\", "
        "\"/abs.png\", \"s3://bucket/k\", \"./c.jpg\"], \"videos\": null }\r\n");
  DemoRecipe("d");
  ASSERT_EQ(Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "1"})
                .exit_code,
            0);
  const std::string root = Path("d");
  EXPECT_EQ(Read("job/shards/part-00000-of-00001.jsonl"),
            "{\"text\":\"caf\\u00e9\",\"n\":1.0,\"e\":1e5,\"images\":[\"" + root +
                "/b.jpg\",\"\",\"/abs.png\",\"s3://bucket/k\",\"" + root +
                "/c.jpg\"],\"videos\":null}\n");
  EXPECT_EQ(json::parse(Read("job/manifest.json"))["media_root"], root);
}

TEST_F(PrepareCli, SingleFileMediaRootIsTheFilesDirectoryAndKeysComeFromTheRecipe) {
  Write("sub/one.jsonl", "{\"text\":\"t\",\"pics\":[\"p.png\"],\"images\":[\"i.png\"]}\n");
  Write("recipe.yaml",
        "dataset_path: sub/one.jsonl\nimage_key: pics\nprocess:\n  - text_length_filter:\n");
  ASSERT_EQ(Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "1"})
                .exit_code,
            0);
  EXPECT_EQ(Read("job/shards/part-00000-of-00001.jsonl"),
            "{\"text\":\"t\",\"pics\":[\"" + Path("sub/p.png") + "\"],\"images\":[\"i.png\"]}\n");
}

TEST_F(PrepareCli, ReadsGzipAndZstdInputs) {
  Write("plain/a.jsonl", "{\"text\":\"a\"}\n{\"text\":\"b\"}\n");
  ASSERT_EQ(std::system(("mkdir -p " + Path("z") + " && gzip -c " + Path("plain/a.jsonl") + " > " +
                         Path("z/1.jsonl.gz") + " && zstd -q -c " + Path("plain/a.jsonl") + " > " +
                         Path("z/2.jsonl.zst"))
                            .c_str()),
            0);
  DemoRecipe("z");
  const CliResult r =
      Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("job/shards/part-00000-of-00001.jsonl"),
            "{\"text\":\"a\"}\n{\"text\":\"b\"}\n{\"text\":\"a\"}\n{\"text\":\"b\"}\n");
}

TEST_F(PrepareCli, CutsByBytesWithWideIds) {
  std::string rows;
  for (int i = 0; i < 10; ++i) rows += "{\"text\":\"row" + std::to_string(i) + "\"}\n";
  Write("data.jsonl", rows);
  DemoRecipe();
  ASSERT_EQ(Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "3"})
                .exit_code,
            0);
  const json m = json::parse(Read("job/manifest.json"));
  ASSERT_EQ(m["shards"].size(), 3u);
  EXPECT_EQ(m["shards"][0]["rows"], 4);
  EXPECT_EQ(m["shards"][1]["rows"], 3);
  EXPECT_EQ(m["shards"][2]["rows"], 3);
  EXPECT_EQ(m["total_size_bytes"], rows.size());
}

TEST_F(PrepareCli, RefusesBlankLine) {
  Write("data.jsonl", "{\"text\":\"a\"}\n   \n{\"text\":\"b\"}\n");
  DemoRecipe();
  ExpectRefused({"--num-shards", "1"}, "data.jsonl:2:", "blank line");
}

TEST_F(PrepareCli, RefusesInvalidUtf8) {
  Write("data.jsonl", "{\"text\":\"a\"}\n{\"text\":\"\xff\xfe\"}\n");
  DemoRecipe();
  ExpectRefused({"--num-shards", "1"}, "data.jsonl:2:", "invalid UTF-8");
}

TEST_F(PrepareCli, RefusesInvalidJson) {
  Write("data.jsonl", "{\"text\":\"a\"}\n{\"text\":\"a\"}\n{\"text\": }\n");
  DemoRecipe();
  ExpectRefused({"--num-shards", "1"}, "data.jsonl:3:", "invalid JSON");
}

TEST_F(PrepareCli, RefusesArrayLine) {
  Write("data.jsonl", "[1,2]\n");
  DemoRecipe();
  ExpectRefused({"--num-shards", "1"}, "data.jsonl:1:", "record is not a JSON object (got array)");
}

TEST_F(PrepareCli, RefusesMediaThatIsNotAListOfStrings) {
  Write("data.jsonl",
        "{\"text\":\"a\",\"images\":[\"x.png\"]}\n{\"text\":\"a\",\"images\":\"x.png\"}\n");
  DemoRecipe();
  ExpectRefused({"--num-shards", "1"}, "data.jsonl:2:", "media field 'images' must be a list");
  Write("data.jsonl", "{\"text\":\"a\",\"audios\":[1]}\n");
  ExpectRefused({"--num-shards", "1"}, "data.jsonl:1:", "media field 'audios' must be a list");
}

TEST_F(PrepareCli, RefusesMoreShardsThanRows) {
  Write("data.jsonl", "{\"text\":\"a\"}\n{\"text\":\"b\"}\n");
  DemoRecipe();
  ExpectRefused({"--num-shards", "3"}, "--num-shards 3", "more than the 2 rows");
}

TEST_F(PrepareCli, RefusesZeroShards) {
  Write("data.jsonl", "{\"text\":\"a\"}\n");
  DemoRecipe();
  ExpectRefused({"--num-shards", "0"}, "--num-shards", "greater than 0");
}

TEST_F(PrepareCli, RefusesGlobalOperators) {
  Write("data.jsonl", "{\"text\":\"a\"}\n");
  DemoRecipe("data.jsonl", "  - topk_specified_field_selector:\n");
  ExpectRefused({"--num-shards", "1"}, "recipe.yaml:7:", "is a selector");
}

TEST_F(PrepareCli, RefusesStatsExportPath) {
  Write("data.jsonl", "{\"text\":\"a\"}\n");
  DemoRecipe("data.jsonl", "  - words_num_filter:\n      stats_export_path: /tmp/s.jsonl\n");
  ExpectRefused({"--num-shards", "1"}, "recipe.yaml:8:", "stats_export_path is not allowed");
}

TEST_F(PrepareCli, RefusesUnknownOperator) {
  Write("data.jsonl", "{\"text\":\"a\"}\n");
  DemoRecipe("data.jsonl", "  - no_such_mapper:\n");
  ExpectRefused({"--num-shards", "1"}, "recipe.yaml:7:",
                "Unknown operator 'no_such_mapper'; cannot prove it is shard-safe");
}

TEST_F(PrepareCli, RefusesMissingDataset) {
  DemoRecipe("missing.jsonl");
  ExpectRefused({"--num-shards", "1"}, "missing.jsonl", "dataset path does not exist");
}

TEST_F(PrepareCli, RefusesEmptyInputAndDirectoryWithoutJsonl) {
  Write("data.jsonl", "");
  DemoRecipe();
  ExpectRefused({"--num-shards", "1"}, "data.jsonl", "no records found");
  Write("empty/readme.txt", "x");
  DemoRecipe("empty");
  ExpectRefused({"--num-shards", "1"}, "empty", "no input files found");
}

TEST_F(PrepareCli, RefusesUnreadableOrNonMappingRecipe) {
  Write("data.jsonl", "{\"text\":\"a\"}\n");
  const CliResult r =
      Run({"prepare", "--config", "nope.yaml", "--job-dir", "job", "--num-shards", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ERROR: nope.yaml: recipe is not a readable file"), std::string::npos);
  Write("recipe.yaml", "- just\n- a list\n");
  ExpectRefused({"--num-shards", "1"}, "recipe.yaml", "recipe must be a YAML mapping");
  Write("recipe.yaml", "process:\n  - text_length_filter: 5\n");
  ExpectRefused({"--num-shards", "1"}, "recipe.yaml:2:", "must be a mapping");
  Write("recipe.yaml", "process:\n  - text_length_filter:\n    executor_type: spark\n");
  ExpectRefused({"--num-shards", "1"}, "recipe.yaml:2:", "exactly one key");
}

TEST_F(PrepareCli, ChecksConfigBeforeShardCount) {
  const CliResult r =
      Run({"prepare", "--config", "nope.yaml", "--job-dir", "job", "--num-shards", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("recipe is not a readable file"), std::string::npos) << r.err;
}

TEST_F(PrepareCli, RefusesEmptyIndexKeyAndForeignExecutor) {
  Write("data.jsonl", "{\"text\":\"a\"}\n");
  DemoRecipe("data.jsonl", "  - words_num_filter:\n      index_key: ''\n");
  ExpectRefused({"--num-shards", "1"}, "recipe.yaml:8:", "index_key must be a non-empty string");
  Write("recipe.yaml",
        "dataset_path: data.jsonl\nexecutor_type: spark\nprocess:\n"
        "  - text_length_filter:\n");
  ExpectRefused({"--num-shards", "1"}, "recipe.yaml", "executor_type 'spark' is not supported");
}

TEST_F(PrepareCli, RepeatIsIdempotentButDetectsChangedContentWithRestoredMtime) {
  Write("data.jsonl", "{\"text\":\"hello\"}\n");
  DemoRecipe();
  const std::vector<std::string> args = {
      "prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "1"};
  ASSERT_EQ(Run(args).exit_code, 0);
  const CliResult again = Run(args);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("Job is already prepared and unchanged"), std::string::npos);

  struct stat st {};
  ASSERT_EQ(stat(Path("data.jsonl").c_str(), &st), 0);
  Write("data.jsonl", "{\"text\":\"jello\"}\n");  // same size
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, Path("data.jsonl").c_str(), times, 0), 0);
  const CliResult changed = Run(args);
  EXPECT_EQ(changed.exit_code, 2);
  EXPECT_NE(changed.err.find("Job directory already exists and does not match this request"),
            std::string::npos)
      << changed.err;
  EXPECT_NE(changed.err.find("Choose a new --job-dir"), std::string::npos);
  EXPECT_EQ(Read("job/shards/part-00000-of-00001.jsonl"), "{\"text\":\"hello\"}\n");

  std::vector<std::string> more_shards = args;
  more_shards.back() = "2";
  EXPECT_EQ(Run(more_shards).exit_code, 2);
}

// Pass 2 copies a file whose lines are already normalized, minifies one with
// nothing to add and normalizes one with an index key to add; whichever it
// does, a file rewritten between the passes with its size and mtime restored
// is refused, and nothing is published.
TEST_F(PrepareCli, RefusesAFileChangedBetweenThePasses) {
  struct Case {
    const char* how;
    std::string before, after, extra_ops;
  };
  const std::string index_op = "  - words_num_filter:\n      index_key: idx\n";
  const std::vector<Case> cases = {
      {"copied", "{\"text\":\"hello\"}\n{\"text\":\"world\"}\n",
       "{\"text\":\"jello\"}\n{\"text\":\"world\"}\n", ""},
      {"minified", "{\"text\" : \"hello\"}\n{\"text\" : \"world\"}\n",
       "{\"text\" : \"jello\"}\n{\"text\" : \"world\"}\n", ""},
      {"minified, no longer JSON", "{\"text\" : \"hello\"}\n{\"text\" : \"world\"}\n",
       "{\"text\" : \"hello }\n{\"text\" : \"world\"}\n", ""},
      {"normalized", "{\"text\":\"hello\"}\n{\"text\":\"world\"}\n",
       "{\"text\":\"jello\"}\n{\"text\":\"world\"}\n", index_op},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.how);
    Write("data.jsonl", c.before);
    DemoRecipe("data.jsonl", c.extra_ops);
    const Spawned p =
        Spawn({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "2"},
              {"DJSHARD_TEST_STOP_AT=prepare_normalized"});
    ASSERT_TRUE(WaitUntil([&] { return IsStopped(p.pid); })) << ErrSoFar(p);
    struct stat st {};
    ASSERT_EQ(stat(Path("data.jsonl").c_str(), &st), 0);
    Write("data.jsonl", c.after);
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    ASSERT_EQ(utimensat(AT_FDCWD, Path("data.jsonl").c_str(), times, 0), 0);
    ASSERT_EQ(kill(p.pid, SIGCONT), 0);
    const CliResult r = WaitFor(p);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("input changed between passes"), std::string::npos) << r.err;
    ExpectNothingPublished();
  }
}

// Pass 2 copies a.jsonl (already normalized), minifies b.jsonl and normalizes
// c.jsonl again (a media path to make absolute): the shards hold each file's
// normalized lines, in order, cut as the totals say.
TEST_F(PrepareCli, ShardsAreTheSameWhetherLinesAreCopiedMinifiedOrNormalized) {
  Write("in/a.jsonl", "{\"text\":\"one\"}\n{\"text\":\"two\"}\n");
  Write("in/b.jsonl", "{\"text\" : \"three\",  \"n\": [1, 2]}\r\n{ \"text\":\"four\"}");
  Write("in/c.jsonl", "{\"text\":\"five\",\"images\":[\"x.png\"]}\n{\"text\": \"six\"}\n");
  DemoRecipe("in");
  const CliResult r =
      Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("job/shards/part-00000-of-00003.jsonl") +
                Read("job/shards/part-00001-of-00003.jsonl") +
                Read("job/shards/part-00002-of-00003.jsonl"),
            "{\"text\":\"one\"}\n{\"text\":\"two\"}\n{\"text\":\"three\",\"n\":[1,2]}\n"
            "{\"text\":\"four\"}\n{\"text\":\"five\",\"images\":[\"" +
                Path("in") + "/x.png\"]}\n{\"text\":\"six\"}\n");
  const json m = json::parse(Read("job/manifest.json"));
  EXPECT_EQ(m["total_rows"], 6);
}

TEST_F(PrepareCli, DatasetPathResolvesAgainstTheRecipeDirectoryFirst) {
  Write("conf/data.jsonl", "{\"text\":\"beside recipe\"}\n");
  Write("data.jsonl", "{\"text\":\"in cwd\"}\n");
  Write("conf/r.yaml", "dataset_path: data.jsonl\nprocess:\n  - text_length_filter:\n");
  Write("conf/only-cwd.yaml", "dataset_path: other.jsonl\nprocess:\n  - text_length_filter:\n");
  Write("other.jsonl", "{\"text\":\"cwd fallback\"}\n");
  ASSERT_EQ(
      Run({"prepare", "--config", "conf/r.yaml", "--job-dir", "j1", "--num-shards", "1"}).exit_code,
      0);
  EXPECT_EQ(Read("j1/shards/part-00000-of-00001.jsonl"), "{\"text\":\"beside recipe\"}\n");
  ASSERT_EQ(
      Run({"prepare", "--config", "conf/only-cwd.yaml", "--job-dir", "j2", "--num-shards", "1"})
          .exit_code,
      0);
  EXPECT_EQ(Read("j2/shards/part-00000-of-00001.jsonl"), "{\"text\":\"cwd fallback\"}\n");
  // The command line overrides the recipe and resolves against the current directory.
  ASSERT_EQ(Run({"prepare", "--config", "conf/r.yaml", "--dataset-path", "data.jsonl", "--job-dir",
                 "j3", "--num-shards", "1"})
                .exit_code,
            0);
  EXPECT_EQ(Read("j3/shards/part-00000-of-00001.jsonl"), "{\"text\":\"in cwd\"}\n");
}

TEST_F(PrepareCli, RecordsPolicyAndWarnings) {
  Write("data.jsonl", "{\"text\":\"a\"}\n");
  Write("recipe.yaml",
        "dataset_path: data.jsonl\nexecutor_type: ray\nprocess:\n"
        "  - text_length_filter:\n      save_dir: /tmp/x\n");
  const CliResult r = Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards",
                           "1", "--lock-timeout-secs", "60", "--heartbeat-secs", "5",
                           "--max-retries", "1", "--poll-interval-secs", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> warnings = {
      "executor_type 'ray' is run in-process by djshard's executor",
      "operator 'text_length_filter': save_dir is shared by every worker; files written there "
      "are not part of the job's verified output"};
  // Each warning is printed once, on its own line, and recorded in the manifest.
  for (const std::string& w : warnings) {
    const std::string line = "WARNING: " + w + "\n";
    const size_t at = r.err.find(line);
    ASSERT_NE(at, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(line, at + 1), std::string::npos) << r.err;
  }
  const json m = json::parse(Read("job/manifest.json"));
  EXPECT_EQ(m["policy"]["lease_secs"], 60);
  EXPECT_EQ(m["policy"]["heartbeat_secs"], 5);
  EXPECT_EQ(m["policy"]["max_retries"], 1);
  EXPECT_EQ(m["policy"]["poll_interval_secs"], 2);
  EXPECT_EQ(m["warnings"], json(warnings));
}

}  // namespace
}  // namespace djshard::testing
