// Black-box tests of reference shards (`--shards reference`: the job holds no
// copy of the data, workers read byte ranges of the input files and normalize
// them) and of the parts layout (`--layout parts`: one part per shard, hard
// linked, and a _manifest.json). The merged bytes are those of a copy job
// whatever the shards, workers and layout; an input changed after prepare
// fails the job, not the shard.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "djshard/io/sha256.h"
#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class ReferenceCli : public CliTest {
 protected:
  // Three input files, one per way prepare normalizes lines: a.jsonl is
  // compact (copied), b.jsonl has spaces (minified), c.jsonl has relative
  // image paths (rewritten) and no newline after its last line.
  void WriteCorpus(int rows_per_file = 40) const {
    std::string a, b, c;
    for (int i = 0; i < rows_per_file; ++i) {
      const std::string n = std::to_string(i);
      a += "{\"text\":\"alpha row " + n + " of the first file\",\"n\":" + n + "}\n";
      b += "{ \"text\" : \"beta row " + n + " with  spaces\" , \"n\" : " + n + " }\n";
      c += "{\"text\":\"gamma row " + n + "\",\"images\":[\"img/" + n + ".png\"]}";
      if (i + 1 < rows_per_file) c += "\n";
    }
    Write("in/a.jsonl", a);
    Write("in/b.jsonl", b);
    Write("in/sub/c.jsonl", c);
  }
  // Puts a line that is not JSON at line 2000 of in/a.jsonl; returns the
  // file as it was.
  std::string BreakLine2000OfA() const {
    const std::string before = Read("in/a.jsonl");
    std::string a = before;
    size_t at = 0;
    for (int line = 1; line < 2000; ++line) at = a.find('\n', at) + 1;
    a.insert(at, "{\"text\": broken}\n");
    Write("in/a.jsonl", a);
    return before;
  }

  CliResult Prepare(const std::string& job, int shards, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "prepare", "--config",     "recipe.yaml",          "--job-dir",
        job,       "--num-shards", std::to_string(shards), "--dataset-path",
        "in"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Run(args);
  }

  // Prepares, runs `workers` workers at once and merges into `output`.
  std::string RunJob(const std::string& job, int shards, int workers,
                     const std::vector<std::string>& extra, const std::string& output) {
    const CliResult p = Prepare(job, shards, extra);
    EXPECT_EQ(p.exit_code, 0) << p.err;
    std::vector<Spawned> running;
    for (int w = 0; w < workers; ++w) {
      running.push_back(Spawn({"worker", "--job-dir", job, "--threads", "1"}));
    }
    for (const Spawned& s : running) {
      const CliResult r = WaitFor(s);
      EXPECT_EQ(r.exit_code, 0) << r.err;
    }
    const CliResult m = Run({"merge", "--job-dir", job, "--output", output, "--layout", "file"});
    EXPECT_EQ(m.exit_code, 0) << m.err;
    return Read(output);
  }

  // Replaces the byte at `offset` of `rel` and restores its mtime.
  void FlipByteKeepingMtime(const std::string& rel, size_t offset, char to) const {
    struct stat st {};
    ASSERT_EQ(::stat(Path(rel).c_str(), &st), 0);
    std::string content = Read(rel);
    ASSERT_LT(offset, content.size());
    content[offset] = to;
    Write(rel, content);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, Path(rel).c_str(), times, 0), 0);
  }

  // `djshard dlc` of the three-file corpus on its own hostname (UTS
  // namespace), 3 nodes, reference shards unless `shards` says otherwise.
  Spawned DlcOn(const std::string& host, const std::string& run_id,
                const std::vector<std::string>& extra, const std::vector<std::string>& env = {},
                const std::string& shards = "reference") {
    std::vector<std::string> args = {
        "dlc",         "--job-dir",
        "job",         "--config",
        "recipe.yaml", "--dataset-path",
        "in",          "--nodes",
        "3",           "--num-shards",
        "7",           "--run-id",
        run_id,        "--poll-interval-secs",
        "0.5",         "--threads",
        "1",           "--shards",
        shards,
    };
    args.insert(args.end(), extra.begin(), extra.end());
    return Spawn(args, env, OnHost(host));
  }

  // Waits for every instance; each must pass. Their logs, joined.
  std::string AllPass(const std::vector<Spawned>& nodes) {
    std::string logs;
    for (const Spawned& n : nodes) {
      const CliResult r = WaitFor(n);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      logs += r.out;
    }
    return logs;
  }

  // node-a, node-b and node-c at once, tasks of 64 KiB; each must pass. Their
  // logs, joined.
  std::string ThreeNodesPass(const std::string& layout, const std::string& shards = "reference") {
    std::vector<Spawned> nodes;
    for (const char* host : {"node-a", "node-b", "node-c"}) {
      nodes.push_back(DlcOn(host, "r1", {"--layout", layout, "--task-mib", "0.0625"}, {}, shards));
    }
    return AllPass(nodes);
  }

  // node-a alone is killed at `kill_at`; node-b and node-c then finish the
  // run (leases of 2 s). Their logs, joined.
  std::string KilledThenFinished(const std::string& layout, const std::string& kill_at) {
    const std::vector<std::string> fast = {"--layout",     layout, "--task-mib",       "0.0625",
                                           "--lease-secs", "2",    "--heartbeat-secs", "0.5"};
    const Spawned dead = DlcOn("node-a", "r1", fast, {"DJSHARD_TEST_KILL_AT=" + kill_at});
    EXPECT_EQ(WaitFor(dead).exit_code, 128 + SIGKILL);
    return AllPass({DlcOn("node-b", "r1", fast), DlcOn("node-c", "r1", fast)});
  }

  // `djshard prepare --distributed` of the three-file corpus into "job", 7
  // shards, tasks of 64 KiB, on node-a.
  Spawned DistributedPrepare(const std::string& shards, const std::vector<std::string>& env = {},
                             const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"prepare",
                                     "--config",
                                     "recipe.yaml",
                                     "--job-dir",
                                     "job",
                                     "--num-shards",
                                     "7",
                                     "--dataset-path",
                                     "in",
                                     "--shards",
                                     shards,
                                     "--distributed",
                                     "--task-mib",
                                     "0.0625",
                                     "--poll-interval-secs",
                                     "0.2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Spawn(args, env, OnHost("node-a"));
  }
  // `djshard prepare-worker` for "job" on its own hostname.
  Spawned PrepareWorkerOn(const std::string& host, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"prepare-worker",       "--job-dir", "job", "--threads", "1",
                                     "--poll-interval-secs", "0.2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Spawn(args, {}, OnHost(host));
  }
  // `status` of the job being prepared says "prepare: <done> of <total> scan tasks done".
  bool ScanTasksDone(int done, int* total = nullptr) {
    const std::string out = Run({"status", "--job-dir", "job"}).out;
    int d = 0, t = 0;
    const size_t at = out.find("prepare: ");
    if (at == std::string::npos ||
        std::sscanf(out.c_str() + at, "prepare: %d of %d scan tasks done", &d, &t) != 2) {
      return false;
    }
    if (total != nullptr) *total = t;
    return d == (done < 0 ? t + done : done);
  }
  // Runs 2 workers over the prepared "job" and merges it as parts.
  std::string WorkAndMergeParts() {
    const Spawned a = Spawn({"worker", "--job-dir", "job", "--threads", "1"});
    const Spawned b = Spawn({"worker", "--job-dir", "job", "--threads", "1"});
    EXPECT_EQ(WaitFor(a).exit_code, 0);
    EXPECT_EQ(WaitFor(b).exit_code, 0);
    const CliResult m = Run({"merge", "--job-dir", "job", "--layout", "parts"});
    EXPECT_EQ(m.exit_code, 0) << m.err;
    return JoinedParts("job/merged");
  }

  // The parts of a parts-layout output, joined in their manifest's order.
  std::string JoinedParts(const std::string& dir) const {
    const json manifest = json::parse(Read(dir + "/_manifest.json"));
    std::string joined;
    for (const json& part : manifest["parts"])
      joined += Read(dir + "/" + part["file"].get<std::string>());
    return joined;
  }

  static std::string Sha256(const std::string& bytes) {
    io::Sha256 hash;
    hash.Update(bytes);
    return hash.HexDigest();
  }
};

TEST_F(ReferenceCli, MergedBytesEqualACopyJobWhateverTheShardsAndWorkers) {
  WriteCorpus();
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 7, 1, {}, "copy.jsonl");
  ASSERT_FALSE(copy.empty());
  for (const auto& [shards, workers] : std::vector<std::pair<int, int>>{{1, 1}, {7, 3}, {64, 2}}) {
    const std::string job = "ref" + std::to_string(shards);
    const std::string out = job + ".jsonl";
    EXPECT_EQ(RunJob(job, shards, workers, {"--shards", "reference"}, out), copy)
        << shards << " shards";
    EXPECT_TRUE(List(job + "/shards").empty()) << "a reference job holds no copy of the data";
    const json m = json::parse(Read(job + "/manifest.json"));
    EXPECT_EQ(m["shards_mode"], "reference");
    EXPECT_EQ(m["schema_version"], 4);
    std::vector<std::string> how;
    for (const json& f : m["input_files"]) how.push_back(f["normalization"]);
    EXPECT_EQ(how, (std::vector<std::string>{"copy", "minify", "normalize"}));
    uint64_t rows = 0;
    for (const json& s : m["shards"]) {
      EXPECT_EQ(s["path"], "");
      ASSERT_FALSE(s["ranges"].empty());
      for (const json& r : s["ranges"]) rows += r["rows"].get<uint64_t>();
    }
    EXPECT_EQ(rows, 120u);
  }
  // One shard spans the three files: three ranges.
  const json one = json::parse(Read("ref1/manifest.json"));
  EXPECT_EQ(one["shards"][0]["ranges"].size(), 3u);
  EXPECT_EQ(one["shards"][0]["ranges"][2]["first_line"], 1);
}

TEST_F(ReferenceCli, IndexKeysAreNumberedByGlobalRowAsInACopyJob) {
  WriteCorpus(25);
  DemoRecipe("in", "  - words_num_filter:\n      min_num: 1\n      index_key: idx\n");
  const std::string copy = RunJob("copy", 5, 1, {}, "copy.jsonl");
  EXPECT_NE(copy.find("\"idx\":74"), std::string::npos);
  EXPECT_EQ(RunJob("ref", 5, 2, {"--shards", "reference"}, "ref.jsonl"), copy);
  // Index keys need global rows: prepare's two passes, each range with its
  // own hash, which a changed line fails.
  const json m = json::parse(Read("ref/manifest.json"));
  EXPECT_FALSE(m.contains("input_check"));
  EXPECT_TRUE(m["shards"][0]["ranges"][0].contains("xxh3_128"));
  ASSERT_EQ(Prepare("again", 5, {"--shards", "reference"}).exit_code, 0);
  FlipByteKeepingMtime("in/a.jsonl", Read("in/a.jsonl").find("alpha row 3"), 'A');
  const CliResult r = Run({"worker", "--job-dir", "again"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(Path("in/a.jsonl") + ": input changed after prepare: the bytes of lines"),
            std::string::npos)
      << r.err;
}

TEST_F(ReferenceCli, ADedupStageSignsReferenceShardsAsItSignsCopiedOnes) {
  WriteCorpus(30);
  // Every b.jsonl row repeats an a.jsonl row's text once lowercased: half the rows go.
  std::string b;
  for (int i = 0; i < 30; ++i) {
    b += "{ \"text\" : \"ALPHA row " + std::to_string(i) + " of the first file\" }\n";
  }
  Write("in/b.jsonl", b);
  Write("recipe.yaml",
        "dataset_path: in\nprocess:\n  - document_deduplicator:\n      lowercase: true\n"
        "  - text_length_filter:\n      min_len: 1\n");
  const std::string copy = RunJob("copy", 4, 1, {}, "copy.jsonl");
  EXPECT_EQ(std::count(copy.begin(), copy.end(), '\n'), 60);
  EXPECT_EQ(RunJob("ref", 4, 2, {"--shards", "reference"}, "ref.jsonl"), copy);
}

TEST_F(ReferenceCli, AnInputChangedAfterPrepareFailsTheJobAndBurnsNoRetry) {
  WriteCorpus();
  DemoRecipe("in");
  ASSERT_EQ(Prepare("job", 4, {"--shards", "reference"}).exit_code, 0);
  // Same size, same mtime, one byte different: only the ranges' hashes see it.
  const std::string b = Read("in/b.jsonl");
  FlipByteKeepingMtime("in/b.jsonl", b.find("beta row 3"), 'B');
  const CliResult first = Run({"worker", "--job-dir", "job", "--max-retries", "5"});
  EXPECT_EQ(first.exit_code, 2) << first.err;
  EXPECT_NE(first.err.find("ERROR: " + Path("in/b.jsonl") + ": input changed after prepare"),
            std::string::npos)
      << first.err;
  EXPECT_TRUE(List("job/state/failed").empty()) << "the shard is not at fault";
  ASSERT_TRUE(Exists("job/state/input_changed.json"));
  // Every other worker ends at once with the job's error, before claiming.
  const CliResult second = Run({"worker", "--job-dir", "job"});
  EXPECT_EQ(second.exit_code, 2);
  EXPECT_NE(second.err.find("the job failed: input changed after prepare"), std::string::npos)
      << second.err;
  EXPECT_EQ(second.err.find("took part-"), std::string::npos) << second.err;
  const CliResult status = Run({"status", "--job-dir", "job"});
  EXPECT_EQ(status.exit_code, 2);
  EXPECT_NE(status.out.find("failed: " + Path("in/b.jsonl")), std::string::npos) << status.out;
  const json j = json::parse(Run({"status", "--job-dir", "job", "--json"}).out);
  EXPECT_TRUE(j["terminal"].get<bool>());
  EXPECT_EQ(j["input_changed"]["file"], Path("in/b.jsonl"));
  // The shard that read the changed line ended interrupted; none failed.
  std::multiset<std::string> statuses;
  for (const std::string& shard : List("job/attempts")) {
    for (const std::string& attempt : List("job/attempts/" + shard)) {
      const json a = json::parse(Read("job/attempts/" + shard + "/" + attempt + "/attempt.json"));
      statuses.insert(a["status"].get<std::string>());
    }
  }
  EXPECT_EQ(statuses.count("interrupted"), 1u);
  EXPECT_EQ(statuses.count("failed"), 0u);
}

TEST_F(ReferenceCli, ALineBrokenInAFileCopiedAsItIsFailsTheJobNotTheShard) {
  WriteCorpus();
  DemoRecipe("in");
  ASSERT_EQ(Prepare("job", 1, {"--shards", "reference", "--max-retries", "3"}).exit_code, 0);
  // a.jsonl is passed through unparsed: its check block's hash fails before
  // the executor meets the broken line.
  const std::string a = Read("in/a.jsonl");
  FlipByteKeepingMtime("in/a.jsonl", a.find("{\"text\":\"alpha row 5 "), '[');
  const CliResult r = Run({"worker", "--job-dir", "job"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(Path("in/a.jsonl") + ": input changed after prepare: its bytes 0-"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(List("job/state/failed").empty());
  EXPECT_TRUE(Exists("job/state/input_changed.json"));
}

TEST_F(ReferenceCli, ADeletedInputFailsTheJob) {
  WriteCorpus();
  DemoRecipe("in");
  ASSERT_EQ(Prepare("job", 2, {"--shards", "reference"}).exit_code, 0);
  fs::remove(Path("in/a.jsonl"));
  const CliResult r = Run({"worker", "--job-dir", "job"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(Path("in/a.jsonl") + ": input changed after prepare: it no longer exists"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(List("job/state/failed").empty());
}

TEST_F(ReferenceCli, ATruncatedInputIsNamedWithItsSize) {
  WriteCorpus();
  DemoRecipe("in");
  ASSERT_EQ(Prepare("job", 2, {"--shards", "reference"}).exit_code, 0);
  const std::string a = Read("in/a.jsonl");
  Write("in/a.jsonl", a.substr(0, a.size() / 2));
  const CliResult r = Run({"worker", "--job-dir", "job"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(Path("in/a.jsonl") + ": input changed after prepare: its size is " +
                       std::to_string(a.size() / 2) + " bytes, prepare recorded " +
                       std::to_string(a.size())),
            std::string::npos)
      << r.err;
}

TEST_F(ReferenceCli, ACompressedInputIsCopiedWithAWarning) {
  WriteCorpus(10);
  DemoRecipe("in");
  // zstd's frame of one stored block: what any .zst reader decodes.
  const std::string plain = Read("in/a.jsonl");
  ASSERT_EQ(std::system(("zstd -q --rm " + Path("in/a.jsonl")).c_str()), 0);
  const CliResult p = Prepare("job", 3, {"--shards", "reference"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.err.find("an input file is compressed, so the shards were copied"), std::string::npos)
      << p.err;
  const json m = json::parse(Read("job/manifest.json"));
  EXPECT_EQ(m["shards_mode"], "copy");
  EXPECT_EQ(List("job/shards").size(), 3u);
}

TEST_F(ReferenceCli, CheckpointSectionsAreRefusedBeforeAnythingIsWritten) {
  WriteCorpus(10);
  DemoRecipe("in", "checkpoint:\n  enabled: true\n");
  const CliResult p = Prepare("job", 2, {"--shards", "reference"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("--shards reference cannot be combined with partition: or checkpoint:"),
            std::string::npos)
      << p.err;
  EXPECT_FALSE(Exists("job"));
}

TEST_F(ReferenceCli, PartsAreHardLinksListedWithTheirSha256AndVerifyChecksThem) {
  WriteCorpus();
  DemoRecipe("in");
  const std::string whole = RunJob("job", 5, 2, {"--layout", "parts"}, "whole.jsonl");
  const CliResult m = Run({"merge", "--job-dir", "job"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_NE(m.out.find("into " + Path("job/merged") + " as 5 parts"), std::string::npos) << m.out;
  const json manifest = json::parse(Read("job/merged/_manifest.json"));
  ASSERT_EQ(manifest["parts"].size(), 5u);
  std::string joined;
  uint64_t rows = 0;
  for (const json& part : manifest["parts"]) {
    const std::string rel = "job/merged/" + part["file"].get<std::string>();
    const std::string bytes = Read(rel);
    EXPECT_EQ(part["sha256"], Sha256(bytes)) << rel;  // what sha256sum prints
    EXPECT_EQ(part["bytes"], bytes.size());
    struct stat st {};
    ASSERT_EQ(::stat(Path(rel).c_str(), &st), 0);
    EXPECT_EQ(st.st_nlink, 2u) << "a part is the published output itself, linked";
    joined += bytes;
    rows += part["rows"].get<uint64_t>();
  }
  EXPECT_EQ(joined, whole);
  EXPECT_EQ(manifest["rows"], rows);
  const json record = json::parse(Read("job/merge.json"));
  EXPECT_EQ(record["layout"], "parts");
  EXPECT_FALSE(record.contains("sha256"));
  const CliResult v = Run({"verify", "--job-dir", "job"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("as 5 parts"), std::string::npos) << v.out;
  // Merging again needs --overwrite, and leaves nothing staged behind; a
  // trailing slash names the same directory.
  EXPECT_EQ(Run({"merge", "--job-dir", "job"}).exit_code, 2);
  const CliResult again =
      Run({"merge", "--job-dir", "job", "--overwrite", "--output", Path("job/merged/")});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  for (const std::string& name : List("job")) EXPECT_EQ(name.find(".tmp."), std::string::npos);
  EXPECT_EQ(List("job/merged").size(), 6u);
  // --overwrite never replaces a directory that is not a parts output.
  Write("elsewhere/keep.txt", "mine");
  const CliResult refused =
      Run({"merge", "--job-dir", "job", "--overwrite", "--output", "elsewhere"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("output is a directory that is not a parts output"), std::string::npos)
      << refused.err;
  EXPECT_EQ(Read("elsewhere/keep.txt"), "mine");
  // A flipped byte in a part (and so in the output it is linked to) fails verify.
  const std::string part = "job/merged/" + manifest["parts"][2]["file"].get<std::string>();
  std::string bytes = Read(part);
  bytes[bytes.size() / 2] ^= 0x20;
  {
    std::FILE* f = std::fopen(Path(part).c_str(), "r+");
    ASSERT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  const CliResult bad = Run({"verify", "--job-dir", "job"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(part.substr(4)), std::string::npos) << bad.err;
}

TEST_F(ReferenceCli, APartsMergeOfAFileJobHashesThePartsItself) {
  WriteCorpus(15);
  DemoRecipe("in");
  const std::string whole = RunJob("job", 3, 1, {}, "whole.jsonl");
  const CliResult m = Run({"merge", "--job-dir", "job", "--layout", "parts", "--output", "parts"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const json manifest = json::parse(Read("parts/_manifest.json"));
  std::string joined;
  for (const json& part : manifest["parts"]) {
    const std::string bytes = Read("parts/" + part["file"].get<std::string>());
    EXPECT_EQ(part["sha256"], Sha256(bytes));
    joined += bytes;
  }
  EXPECT_EQ(joined, whole);
  EXPECT_EQ(Run({"verify", "--job-dir", "job"}).exit_code, 0);
}

TEST_F(ReferenceCli, DlcOnThreeNodesWithReferenceShardsAndParts) {
  WriteCorpus();
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 6, 1, {}, "copy.jsonl");
  std::vector<Spawned> nodes;
  for (const char* host : {"node-a", "node-b", "node-c"}) {
    nodes.push_back(Spawn({"dlc",         "--job-dir",
                           "job",         "--config",
                           "recipe.yaml", "--dataset-path",
                           "in",          "--nodes",
                           "3",           "--num-shards",
                           "6",           "--run-id",
                           "r1",          "--poll-interval-secs",
                           "1",           "--threads",
                           "1",           "--shards",
                           "reference",   "--layout",
                           "parts"},
                          {}, OnHost(host)));
  }
  for (const Spawned& n : nodes) {
    const CliResult r = WaitFor(n);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("PASS: 6 shards were completed by"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("into " + Path("job/merged") + " as 6 parts"), std::string::npos) << r.out;
  }
  const json manifest = json::parse(Read("job/merged/_manifest.json"));
  std::string joined;
  for (const json& part : manifest["parts"]) {
    joined += Read("job/merged/" + part["file"].get<std::string>());
  }
  EXPECT_EQ(joined, copy);
  EXPECT_TRUE(List("job/shards").empty());
}

// Distributed prepare: every instance scans tasks of 64 KiB; the shards cut
// from their results are those of a one-node prepare, and the bytes those of
// a copy job.
TEST_F(ReferenceCli, DlcInstancesScanTheInputInTasksAndCutTheShardsOfOnePrepare) {
  WriteCorpus(2500);
  Write("in/sub/d.jsonl", "{\"text\":\"delta one\"}\n{\"text\":\"delta two\"}\n");
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 7, 1, {}, "copy.jsonl");
  ASSERT_EQ(Prepare("one", 7, {"--shards", "reference"}).exit_code, 0);
  const std::string logs = ThreeNodesPass("parts");
  EXPECT_NE(logs.find("task(s) that every instance claims"), std::string::npos) << logs;
  EXPECT_NE(logs.find("scan-00000: scanned "), std::string::npos) << logs;
  EXPECT_TRUE(JoinedParts("job/merged") == copy) << "the parts differ from the copy job's output";
  const json m = json::parse(Read("job/manifest.json"));
  const json one = json::parse(Read("one/manifest.json"));
  EXPECT_EQ(m["prepare_scan"]["task_bytes"], 65536);
  EXPECT_EQ(m["input_check"]["path"], "input_blocks.xxh3");
  for (size_t i = 0; i < m["shards"].size(); ++i) {
    json ranges = one["shards"][i]["ranges"];
    for (json& r : ranges) r.erase("xxh3_128");
    EXPECT_EQ(m["shards"][i]["ranges"], ranges) << i;
  }
  // a.jsonl is several tasks: its tree hash; d.jsonl one: its SHA-256.
  const std::string a = Read("in/a.jsonl");
  ASSERT_GT(a.size(), 65536u);
  std::string blocks;
  for (size_t at = 0; at < a.size(); at += 65536) blocks += Sha256(a.substr(at, 65536)) + "\n";
  EXPECT_EQ(m["input_files"][0]["tree_sha256"], Sha256(blocks));
  EXPECT_EQ(m["input_files"][3]["sha256"], Sha256(Read("in/sub/d.jsonl")));
  EXPECT_FALSE(
      Exists(".job.dlc-coordination/" + List(".job.dlc-coordination").front() + "/scan-plan.json"))
      << "the scan's files go once the job is published";
}

// The instance that leads the prepare dies inside a scan task: another one
// takes the coordinator over, plans the same tasks and takes the dead task's
// claim over once its lease is stale.
TEST_F(ReferenceCli, AnInstanceKilledInAScanTaskIsTakenOverToTheSameBytes) {
  WriteCorpus(2500);
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 5, 1, {}, "copy.jsonl");
  const std::string logs = KilledThenFinished("parts", "prepare_scan_task");
  // One of them leads the prepare again: elected once the stale lock moved.
  EXPECT_NE(logs.find(" as DLC prepare coordinator (node-"), std::string::npos) << logs;
  EXPECT_NE(logs.find("took over scan-00000 from node-a"), std::string::npos) << logs;
  EXPECT_TRUE(JoinedParts("job/merged") == copy) << "the parts differ from the copy job's output";
}

// A bad line found by a later scan task fails every instance with exit 2,
// named by its line in the file.
TEST_F(ReferenceCli, ABadLineFoundByAScanTaskFailsEveryInstanceNamingItsLine) {
  WriteCorpus(2500);
  BreakLine2000OfA();
  DemoRecipe("in");
  std::vector<Spawned> nodes;
  for (const char* host : {"node-a", "node-b"}) {
    nodes.push_back(DlcOn(host, "r1", {"--layout", "parts", "--task-mib", "0.0625"}));
  }
  for (const Spawned& n : nodes) {
    const CliResult r = WaitFor(n);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE((r.out + r.err).find("a.jsonl:2000: "), std::string::npos) << r.out << r.err;
  }
  EXPECT_FALSE(Exists("job"));
}

// Distributed merge: with the file layout every instance copies its share of
// the outputs into the merged file; merge.json lists each part's SHA-256 and
// their tree hash, and the whole file's only with --sha256. verify checks
// them.
TEST_F(ReferenceCli, DlcInstancesCopyTheOutputsIntoTheMergedFileByTasks) {
  WriteCorpus(600);
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 7, 1, {}, "copy.jsonl");
  const std::string logs = ThreeNodesPass("file");
  EXPECT_NE(logs.find("merged 1800 rows into " + Path("job/merged.jsonl")), std::string::npos)
      << logs;
  EXPECT_NE(logs.find("copy task(s) that every instance claims"), std::string::npos) << logs;
  const std::string merged = Read("job/merged.jsonl");
  EXPECT_TRUE(merged == copy) << "the merged bytes differ from the copy job's";
  const json record = json::parse(Read("job/merge.json"));
  EXPECT_FALSE(record.contains("sha256")) << "one serial pass, only with --sha256";
  ASSERT_EQ(record["parts"].size(), 7u);
  std::string tree;
  for (const json& part : record["parts"]) {
    const std::string bytes =
        merged.substr(part["offset"].get<size_t>(), part["bytes"].get<size_t>());
    EXPECT_EQ(part["sha256"], Sha256(bytes)) << part["shard_id"];
    tree += Sha256(bytes) + "\n";
  }
  EXPECT_EQ(record["tree_sha256"], Sha256(tree));
  EXPECT_EQ(Run({"verify", "--job-dir", "job"}).exit_code, 0);
  // A byte changed in the merged file: verify names the part.
  std::string changed = merged;
  changed[merged.size() / 2] = changed[merged.size() / 2] == 'a' ? 'b' : 'a';
  Write("job/merged.jsonl", changed);
  const CliResult bad = Run({"verify", "--job-dir", "job"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("merged output differs"), std::string::npos) << bad.err;
  // Rows appended after the last part: the parts still match, the file not.
  const std::string row = merged.substr(0, merged.find('\n') + 1);
  Write("job/merged.jsonl", merged + row);
  const CliResult longer = Run({"verify", "--job-dir", "job"});
  EXPECT_EQ(longer.exit_code, 2);
  EXPECT_NE(longer.err.find("merged output has " + std::to_string(merged.size() + row.size()) +
                            " bytes, its parts " + std::to_string(merged.size())),
            std::string::npos)
      << longer.err;

  // --sha256: the whole file's too, as sha256sum prints it.
  const CliResult again = WaitFor(DlcOn(
      "node-a", "r2",
      {"--layout", "file", "--sha256", "--output", "with-sha.jsonl", "--task-mib", "0.0625"}));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(json::parse(Read("job/merge.json"))["sha256"], Sha256(copy));
}

// The finalize coordinator dies inside its second copy task: the instance
// that takes it over plans the same tasks into the same file, keeps the first
// task's result and takes the dead task's claim over.
TEST_F(ReferenceCli, AnInstanceKilledInACopyTaskIsTakenOverToTheSameBytes) {
  WriteCorpus(3000);  // parts of more than 64 KiB: one per copy task
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 7, 1, {}, "copy.jsonl");
  const std::string logs = KilledThenFinished("file", "merge_shard_copied@2");
  EXPECT_NE(logs.find("took over copy-00001 from node-a"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("copy-00000: copied"), std::string::npos) << "its result stands: " << logs;
  EXPECT_TRUE(Read("job/merged.jsonl") == copy) << "the merged bytes differ from the copy job's";
  EXPECT_EQ(Run({"verify", "--job-dir", "job"}).exit_code, 0);
}

// A copy job's distributed prepare: the instances scan the input, then write
// the shard files; the job is the one a one-node prepare makes.
TEST_F(ReferenceCli, DlcInstancesWriteTheShardFilesOfACopyJob) {
  WriteCorpus(2500);
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 7, 1, {}, "copy.jsonl");
  const std::string logs = ThreeNodesPass("file", "copy");
  EXPECT_NE(logs.find("writing the shard files in "), std::string::npos) << logs;
  EXPECT_NE(logs.find("write-00000: wrote "), std::string::npos) << logs;
  EXPECT_TRUE(Read("job/merged.jsonl") == copy) << "the merged bytes differ from the copy job's";
  const json m = json::parse(Read("job/manifest.json"));
  const json one = json::parse(Read("copy/manifest.json"));
  EXPECT_EQ(m["schema_version"], 3);
  EXPECT_EQ(m["shards_mode"], "copy");
  EXPECT_FALSE(m.contains("input_check"));
  EXPECT_FALSE(Exists("job/input_blocks.xxh3"));
  ASSERT_EQ(m["shards"].size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(m["shards"][i], one["shards"][i]) << i;
    const std::string file = m["shards"][i]["path"].get<std::string>();
    EXPECT_TRUE(Read("job/" + file) == Read("copy/" + file)) << file;
  }
  for (const std::string& name : List("job/shards")) {
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  }
}

// The prepare coordinator hangs in its second write task: another instance
// takes the prepare over, keeps the results of the scan tasks and of the
// first write task, and takes the frozen one's claim over.
TEST_F(ReferenceCli, APrepareCoordinatorFrozenInAWriteTaskIsTakenOver) {
  WriteCorpus(2500);
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 7, 1, {}, "copy.jsonl");
  const std::vector<std::string> fast = {"--layout",     "file", "--task-mib",       "0.0625",
                                         "--lease-secs", "2",    "--heartbeat-secs", "0.5"};
  const Spawned frozen =
      DlcOn("node-a", "r1", fast, {"DJSHARD_TEST_STOP_AT=prepare_shard_cut@3"}, "copy");
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(frozen.pid); }));
  const CliResult b = WaitFor(DlcOn("node-b", "r1", fast, {}, "copy"));
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("took over as DLC prepare coordinator (node-b) from node-a"),
            std::string::npos)
      << b.out;
  EXPECT_EQ(b.out.find("scan-00000: scanned"), std::string::npos)
      << "scan results stand: " << b.out;
  EXPECT_EQ(b.out.find("write-00000: wrote"), std::string::npos)
      << "the first write task's result stands: " << b.out;
  EXPECT_NE(b.out.find("took over write-00001 from node-a"), std::string::npos) << b.out;
  ::kill(frozen.pid, SIGKILL);
  WaitFor(frozen);
  EXPECT_TRUE(Read("job/merged.jsonl") == copy) << "the merged bytes differ from the copy job's";
  EXPECT_EQ(Run({"verify", "--job-dir", "job"}).exit_code, 0);
}

// status and monitor show the scan tasks while the job is being prepared
// (no job dir yet) and the copy tasks while it is being merged.
TEST_F(ReferenceCli, StatusAndMonitorShowTheScanAndCopyTasksOfDlcInstances) {
  WriteCorpus(2500);
  DemoRecipe("in");
  const std::vector<std::string> tasks = {"--layout", "file", "--task-mib", "0.0625"};
  const Spawned scanning = DlcOn("node-a", "r1", tasks, {"DJSHARD_TEST_STOP_AT=prepare_scan_task"});
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(scanning.pid); }));
  const CliResult status = Run({"status", "--job-dir", "job"});
  EXPECT_EQ(status.exit_code, 1) << status.err;
  EXPECT_NE(status.out.find("dlc prepare: 0 of 7 scan tasks done; running: scan-00000 on node-a"),
            std::string::npos)
      << status.out;
  const CliResult monitor = Run({"monitor", "--job-dir", "job"});
  EXPECT_EQ(monitor.exit_code, 1) << monitor.err;
  EXPECT_NE(monitor.out.find("dlc prepare: 0 of 7 scan tasks done"), std::string::npos)
      << monitor.out;
  ASSERT_EQ(kill(scanning.pid, SIGCONT), 0);
  EXPECT_EQ(WaitFor(scanning).exit_code, 0);

  const Spawned merging = DlcOn("node-a", "r2", tasks, {"DJSHARD_TEST_STOP_AT=merge_shard_copied"});
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(merging.pid); }));
  const CliResult during = Run({"status", "--job-dir", "job"});
  EXPECT_EQ(during.exit_code, 0) << "every shard is done";
  EXPECT_NE(during.out.find("dlc merge: 0 of "), std::string::npos) << during.out;
  EXPECT_NE(during.out.find(" copy tasks done; running: copy-00000 on node-a"), std::string::npos)
      << during.out;
  ASSERT_EQ(kill(merging.pid, SIGCONT), 0);
  EXPECT_EQ(WaitFor(merging).exit_code, 0);
  EXPECT_EQ(Run({"status", "--job-dir", "job"}).out.find("dlc "), std::string::npos)
      << "the tasks' files go with the phase";
}

// Manual flow: `prepare --distributed` on one node, `prepare-worker` on two
// others. The preparer hangs in its first scan task; the prepare-workers scan
// the others meanwhile (status shows it), then write the shard files with
// it. The shards are those of a one-node prepare, the job's bytes a copy job's.
TEST_F(ReferenceCli, PrepareWorkersOnOtherNodesScanAndWriteAPreparersTasks) {
  WriteCorpus(2500);
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 7, 1, {}, "copy.jsonl");
  const Spawned preparer = DistributedPrepare("copy", {"DJSHARD_TEST_STOP_AT=prepare_scan_task"});
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(preparer.pid); }));
  const Spawned b = PrepareWorkerOn("node-b");
  // A worker may join the prepare too, and then work on the shards.
  const Spawned c = Spawn({"worker", "--job-dir", "job", "--threads", "1", "--join-prepare",
                           "--poll-interval-secs", "0.2"},
                          {}, OnHost("node-c"));
  int total = 0;
  ASSERT_TRUE(WaitUntil([&] { return ScanTasksDone(-1, &total); }))
      << Run({"status", "--job-dir", "job"}).out;
  EXPECT_GE(total, 5);
  EXPECT_NE(Run({"status", "--job-dir", "job"}).out.find("running: scan-00000 on node-a"),
            std::string::npos);
  ASSERT_EQ(::kill(preparer.pid, SIGCONT), 0);
  const CliResult p = WaitFor(preparer);
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("Prepared job job: 7500 rows in 3 input file(s), 7 shards"),
            std::string::npos)
      << p.out;
  const CliResult rb = WaitFor(b);
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_NE(rb.out.find("Job is prepared: job ("), std::string::npos) << rb.out;
  const CliResult rc = WaitFor(c);
  EXPECT_EQ(rc.exit_code, 0) << rc.err;
  EXPECT_NE(rc.err.find("node-c:"), std::string::npos) << "it took shards: " << rc.err;
  EXPECT_EQ(json::parse(Run({"status", "--job-dir", "job", "--json"}).out)["complete"], true);
  const std::string helped = rb.err + rc.err;
  for (int task = 1; task < total; ++task) {
    char id[32];
    std::snprintf(id, sizeof(id), "scan-%05d: scanned ", task);
    EXPECT_NE(helped.find(id), std::string::npos) << id << " ran on node-b or node-c: " << helped;
  }
  // A one-node prepare cuts the same shard files.
  ASSERT_EQ(Prepare("one", 7, {}).exit_code, 0);
  for (const std::string& shard : List("one/shards")) {
    EXPECT_TRUE(Read("job/shards/" + shard) == Read("one/shards/" + shard)) << shard;
  }
  EXPECT_TRUE(WorkAndMergeParts() == copy) << "the parts differ from the copy job's output";
  EXPECT_EQ(Run({"status", "--job-dir", "job"}).out.find("scan tasks"), std::string::npos)
      << "the tasks' files go once the job is published";
}

// The preparer dies inside a scan task. Started again, it takes its own dead
// claim over and keeps every scan task already finished, by it or by the
// prepare-worker, which waited meanwhile and ends once the job is published.
TEST_F(ReferenceCli, APreparerKilledInAScanTaskIsStartedAgainAndKeepsFinishedTasks) {
  WriteCorpus(2500);
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 7, 1, {}, "copy.jsonl");
  const std::vector<std::string> fast = {"--lease-secs", "2", "--heartbeat-secs", "0.5"};
  const Spawned killed =
      DistributedPrepare("reference", {"DJSHARD_TEST_KILL_AT=prepare_scan_task@3"}, fast);
  const CliResult dead = WaitFor(killed);
  EXPECT_EQ(dead.exit_code, 128 + SIGKILL);
  const Spawned helper = PrepareWorkerOn("node-b", fast);
  const CliResult again = WaitFor(DistributedPrepare("reference", {}, fast));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("took the prepare over from node-a pid " + std::to_string(killed.pid) +
                           ": no heartbeat for "),
            std::string::npos)
      << again.err;
  EXPECT_EQ((again.err + ErrSoFar(helper)).find("scan-00000: scanned"), std::string::npos)
      << "scan-00000 was finished before the kill";
  const CliResult h = WaitFor(helper);
  EXPECT_EQ(h.exit_code, 0) << h.err;
  EXPECT_TRUE(WorkAndMergeParts() == copy) << "the parts differ from the copy job's output";
}

// A bad line fails the preparer with exit 2 naming its line, and every
// prepare-worker with the same; a prepare-worker without a preparer gives up
// after --wait-timeout-secs, and one for a prepared job ends at once.
TEST_F(ReferenceCli, PrepareWorkersEndWithThePreparersFailureOrWhenNoneRuns) {
  WriteCorpus(2500);
  DemoRecipe("in");
  const CliResult alone = WaitFor(PrepareWorkerOn("node-b", {"--wait-timeout-secs", "0.5"}));
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("gave up waiting for the job to be prepared: no prepare of it is "
                           "running (start djshard prepare --distributed"),
            std::string::npos)
      << alone.err;

  const std::string unbroken = BreakLine2000OfA();
  const Spawned helper = PrepareWorkerOn("node-b");
  ASSERT_TRUE(WaitUntil([&] { return ErrSoFar(helper).find("waiting") != std::string::npos; }));
  const CliResult p = WaitFor(DistributedPrepare("reference"));
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("a.jsonl:2000: "), std::string::npos) << p.err;
  const CliResult h = WaitFor(helper);
  EXPECT_EQ(h.exit_code, 2);
  EXPECT_NE(h.err.find("ERROR: prepare failed on node-a: "), std::string::npos) << h.err;
  EXPECT_NE(h.err.find("a.jsonl:2000: "), std::string::npos) << h.err;
  EXPECT_FALSE(Exists("job"));

  Write("in/a.jsonl", unbroken);
  EXPECT_EQ(WaitFor(DistributedPrepare("reference")).exit_code, 0);
  const CliResult late = WaitFor(PrepareWorkerOn("node-c"));
  EXPECT_EQ(late.exit_code, 0) << late.err;
  EXPECT_NE(late.out.find("Job is prepared: job (0 task(s) run here)"), std::string::npos);
}

// A recipe with index_key (whose values are global rows) is prepared by the
// preparer alone, which says so; its prepare-worker ends once it is published.
TEST_F(ReferenceCli, ADistributedPrepareOfIndexKeysRunsOnThePreparerAloneAndSaysSo) {
  WriteCorpus(25);
  DemoRecipe("in", "  - words_num_filter:\n      min_num: 1\n      index_key: idx\n");
  const Spawned helper = PrepareWorkerOn("node-b");
  const CliResult p = WaitFor(DistributedPrepare("reference"));
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.err.find("WARNING: prepared on this node alone: a recipe with index_key"),
            std::string::npos)
      << p.err;
  const CliResult h = WaitFor(helper);
  EXPECT_EQ(h.exit_code, 0) << h.err;
  EXPECT_NE(h.out.find("Job is prepared: job (0 task(s) run here)"), std::string::npos) << h.out;
}

// A prepare-worker frozen in a scan task: the preparer takes the task over
// once its lease is stale, publishes the job and removes the tasks' files;
// the prepare-worker, continued, finds them gone and the job prepared: exit 0.
TEST_F(ReferenceCli, APrepareWorkerFrozenInATaskEndsWellOnceThePrepareIsOver) {
  WriteCorpus(2500);
  DemoRecipe("in");
  const std::vector<std::string> fast = {"--lease-secs", "2", "--heartbeat-secs", "0.5"};
  std::vector<std::string> args = {"prepare-worker",       "--job-dir", "job", "--threads", "1",
                                   "--poll-interval-secs", "0.2"};
  args.insert(args.end(), fast.begin(), fast.end());
  // The preparer holds scan-00000 (stopped) while the prepare-worker takes
  // scan-00001 and stops in it; then the preparer goes on.
  const Spawned preparer =
      DistributedPrepare("reference", {"DJSHARD_TEST_STOP_AT=prepare_scan_task"}, fast);
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(preparer.pid); }));
  const Spawned frozen = Spawn(args, {"DJSHARD_TEST_STOP_AT=prepare_scan_task"}, OnHost("node-b"));
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(frozen.pid); }));
  ASSERT_EQ(::kill(preparer.pid, SIGCONT), 0);
  const CliResult p = WaitFor(preparer);
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.err.find("took over scan-00001 from node-b pid "), std::string::npos) << p.err;
  ASSERT_EQ(::kill(frozen.pid, SIGCONT), 0);
  const CliResult h = WaitFor(frozen);
  EXPECT_EQ(h.exit_code, 0) << h.err;
  EXPECT_NE(h.out.find("Job is prepared: job"), std::string::npos) << h.out;
}

// A second preparer started while the first runs waits for it; when the
// first fails, the second ends with the same failure instead of preparing
// again.
TEST_F(ReferenceCli, APreparerWaitingForAnotherEndsWithItsFailure) {
  WriteCorpus(2500);
  BreakLine2000OfA();
  DemoRecipe("in");
  const Spawned first = DistributedPrepare("reference", {"DJSHARD_TEST_STOP_AT=prepare_scan_task"});
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(first.pid); }));
  const Spawned second = DistributedPrepare("reference");
  ASSERT_TRUE(WaitUntil([&] {
    return ErrSoFar(second).find("another prepare of this job is running on node-a") !=
           std::string::npos;
  }));
  ASSERT_EQ(::kill(first.pid, SIGCONT), 0);
  const CliResult r1 = WaitFor(first);
  EXPECT_EQ(r1.exit_code, 2);
  EXPECT_NE(r1.err.find("a.jsonl:2000: "), std::string::npos) << r1.err;
  const CliResult r2 = WaitFor(second);
  EXPECT_EQ(r2.exit_code, 2);
  EXPECT_NE(r2.err.find("ERROR: prepare failed on node-a: "), std::string::npos) << r2.err;
  EXPECT_EQ(r2.err.find("scanned"), std::string::npos) << "it did not prepare again: " << r2.err;
}

// A preparer that published the job and then lost its lease before writing
// its result (frozen past the lease, taken over) ends with a warning, not an
// error: the job is prepared, and the one that took over says so too.
TEST_F(ReferenceCli, APreparerThatLostItsLeaseAfterPublishingTheJobSucceeds) {
  WriteCorpus(2500);
  DemoRecipe("in");
  const std::string copy = RunJob("copy", 7, 1, {}, "copy.jsonl");
  const std::vector<std::string> fast = {"--lease-secs", "2", "--heartbeat-secs", "0.5"};
  const Spawned first =
      DistributedPrepare("reference", {"DJSHARD_TEST_STOP_AT=prepare_before_result"}, fast);
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(first.pid); }));
  ASSERT_TRUE(Exists("job/manifest.json"));
  const CliResult second = WaitFor(DistributedPrepare("reference", {}, fast));
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("took the prepare over from node-a pid " + std::to_string(first.pid)),
            std::string::npos)
      << second.err;
  ASSERT_EQ(::kill(first.pid, SIGCONT), 0);
  const CliResult r1 = WaitFor(first);
  EXPECT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_NE(r1.err.find("WARNING: the job is prepared, but this prepare's lease went stale"),
            std::string::npos)
      << r1.err;
  EXPECT_EQ(r1.err.find("ERROR"), std::string::npos) << r1.err;
  EXPECT_TRUE(WorkAndMergeParts() == copy) << "the parts differ from the copy job's output";
}

}  // namespace
}  // namespace djshard::testing
