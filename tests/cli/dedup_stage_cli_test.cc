// Black-box tests of deduplicators in elastic jobs (docs/dedup-stage.md):
// prepare records the dedup stages, workers claim their sign, group and
// components tasks like shards, and the merged output is byte for byte what
// `djshard run` writes over the same normalized input, whatever the number of
// shards, workers, threads, kills and takeovers. status, verify, gc and dlc
// see the stages; a changed stage file fails the task that reads it.
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A filter on "score" (it never reads the text, so rows without a text or
// with a number reach the deduplicator, which drops them as errors), then
// document_simhash_deduplicator (case-sensitive: case changes survive it), a
// mapper, document_deduplicator (lowercase: it removes the case changes) and a
// filter.
const std::string kSimhashRecipe =
    "dataset_path: data.jsonl\n"
    "process:\n"
    "  - specified_numeric_field_filter:\n"
    "      field_key: score\n"
    "      min_value: 1\n"
    "      max_value: 100\n"
    "  - document_simhash_deduplicator:\n"
    "      tokenization: space\n"
    "      window_size: 3\n"
    "      lowercase: false\n"
    "  - whitespace_normalization_mapper:\n"
    "  - document_deduplicator:\n"
    "      lowercase: true\n"
    "  - words_num_filter:\n"
    "      min_num: 4\n";

// document_minhash_deduplicator drops texts shorter than its window too.
const std::string kMinhashRecipe =
    "dataset_path: data.jsonl\n"
    "process:\n"
    "  - specified_numeric_field_filter:\n"
    "      field_key: score\n"
    "      min_value: 1\n"
    "      max_value: 100\n"
    "  - document_minhash_deduplicator:\n"
    "      tokenization: space\n"
    "      window_size: 3\n"
    "      num_permutations: 64\n"
    "      jaccard_threshold: 0.5\n"
    "  - whitespace_normalization_mapper:\n"
    "  - words_num_filter:\n"
    "      min_num: 4\n";

// A deduplicator with nothing after it: a shard's output is what its sign
// task wrote, less the duplicates.
const std::string kLastRecipe =
    "dataset_path: data.jsonl\n"
    "process:\n"
    "  - document_deduplicator:\n";

// The simhash recipe's stages: (operator, its index in the recipe).
const std::vector<std::pair<std::string, size_t>> kSimhashStages = {
    {"document_simhash_deduplicator", 1}, {"document_deduplicator", 3}};

// A deterministic corpus of near duplicates from a small vocabulary: exact
// copies, case changes, one-word edits, an ideographic space, empty texts,
// rows without "text" and rows whose text is a number.
std::string Corpus(int rows) {
  std::mt19937 rng(20261202);  // the standard fixes mt19937's sequence
  const auto pick = [&rng](size_t n) { return static_cast<size_t>(rng() % n); };
  const std::vector<std::string> vocab = {"alpha", "beta",  "gamma", "delta", "epsilon", "zeta",
                                          "eta",   "theta", "iota",  "kappa", "lambda",  "mu"};
  std::vector<std::string> bases;
  for (int i = 0; i < 200; ++i) {
    std::string text;
    const size_t words = 2 + pick(13);
    for (size_t w = 0; w < words; ++w) text += (w ? " " : "") + vocab[pick(vocab.size())];
    bases.push_back(text);
  }
  std::string out;
  for (int i = 0; i < rows; ++i) {
    json row = {{"id", i}, {"score", i % 10}};
    if (i % 23 == 5) {
      row["text"] = "";
    } else if (i % 69 == 7) {
      row["body"] = "no text";
    } else if (i % 69 == 11) {
      row["text"] = 42;
    } else {
      std::string text = bases[pick(bases.size())];
      switch (pick(5)) {
        case 1:
          std::transform(text.begin(), pick(2) ? text.end() : text.begin() + 1, text.begin(),
                         [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
          break;
        case 2: {
          const size_t space = text.find(' ');
          text = vocab[pick(vocab.size())] + (space == std::string::npos ? "" : text.substr(space));
          break;
        }
        case 3:
          if (const size_t space = text.find(' '); space != std::string::npos) {
            text.replace(space, 1, "\u3000");
          }
          break;
        default:
          break;
      }
      row["text"] = text;
    }
    out += row.dump() + "\n";
  }
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Whether `name` is a file a dedup stage task writes into its attempt.
bool IsStageFile(const std::string& name) {
  return name == "rows.jsonl" || name == "rows.u64" || name == "keys.bin" || name == "keys.idx" ||
         name == "forest.u64" || name == "duplicates.u64" || name == "duplicates.idx";
}

class DedupStageCli : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    Write("data.jsonl", Corpus(3000));
    Write("simhash.yaml", kSimhashRecipe);
    Write("minhash.yaml", kMinhashRecipe);
  }
  void Prepare(const std::string& job, int shards, const std::string& recipe = "simhash.yaml") {
    const CliResult r = Run({"prepare", "--config", recipe, "--job-dir", job, "--num-shards",
                             std::to_string(shards), "--lease-secs", "2", "--heartbeat-secs", "0.5",
                             "--poll-interval-secs", "0.2", "--retry-backoff-secs", "0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // A worker with `threads` threads on its own hostname (UTS namespace).
  Spawned WorkerOn(const std::string& host, const std::string& job,
                   const std::vector<std::string>& extra = {},
                   const std::vector<std::string>& env = {}, int threads = 1) {
    std::vector<std::string> args = {"worker", "--job-dir", job, "--threads",
                                     std::to_string(threads)};
    args.insert(args.end(), extra.begin(), extra.end());
    return Spawn(args, env, OnHost(host));
  }
  // `dlc` of `recipe` on node-a and node-b at once (--nodes 2,
  // --require-all-nodes, 7 shards) into "job"; both must pass.
  void DlcOnTwoNodes(const std::string& recipe, const std::string& run_id) {
    std::vector<Spawned> nodes;
    for (const char* host : {"node-a", "node-b"}) {
      nodes.push_back(
          Spawn({"dlc", "--job-dir", "job", "--config", recipe, "--dataset-path", "data.jsonl",
                 "--nodes", "2", "--num-shards", "7", "--require-all-nodes", "--run-id", run_id,
                 "--poll-interval-secs", "0.2", "--threads", "1"},
                {}, OnHost(host)));
    }
    for (const Spawned& n : nodes) {
      const CliResult r = WaitFor(n);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.out.find("PASS: 7 shards were completed by"), std::string::npos) << r.out;
    }
  }
  void RunWorker(const std::string& job, const std::vector<std::string>& extra = {},
                 int threads = 1) {
    const CliResult r = WaitFor(WorkerOn("node-a", job, extra, {}, threads));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  json Manifest(const std::string& job) const { return json::parse(Read(job + "/manifest.json")); }
  // The job's shards in manifest order, one after the other: the normalized
  // input that `djshard run` gets to compare with.
  std::string ShardsConcatenated(const std::string& job) const {
    std::string out;
    const json manifest = Manifest(job);
    for (const json& s : manifest["shards"]) out += Read(job + "/" + s["path"].get<std::string>());
    return out;
  }
  // `djshard run` of `recipe` over the job's shards: <job>-reference.jsonl.
  void RunReference(const std::string& job, const std::string& recipe) {
    Write(job + "-input.jsonl", ShardsConcatenated(job));
    const CliResult r =
        Run({"run", "--config", recipe, "--dataset-path", Path(job + "-input.jsonl"),
             "--export-path", job + "-reference.jsonl", "--threads", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // Each error record as "<input row> <op>: <error>", the row counted over the
  // job's shards in manifest order (run's file names the concatenation, merge's
  // the shard), sorted.
  std::vector<std::string> ErrorRecords(const std::string& rel, const std::string& job) const {
    std::map<std::string, uint64_t> first_rows = {{Path(job + "-input.jsonl"), 0}};
    uint64_t first = 0;
    const json manifest = Manifest(job);
    for (const json& s : manifest["shards"]) {
      first_rows[Path(job + "/" + s["path"].get<std::string>())] = first;
      first += s["rows"].get<uint64_t>();
    }
    std::vector<std::string> out;
    for (const std::string& line : Lines(Read(rel))) {
      const json e = json::parse(line);
      const auto at = first_rows.find(e["file"].get<std::string>());
      if (at == first_rows.end()) {
        ADD_FAILURE() << rel << " names a file outside the job: " << line;
        return {};
      }
      out.push_back(std::to_string(at->second + e["line"].get<uint64_t>()) + " " +
                    e["op"].get<std::string>() + ": " + e["error"].get<std::string>());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // The merged output of `job` (`merged` when given, else a fresh merge) is
  // the bytes `djshard run` writes over its shards, and its errors file holds
  // the same records.
  void ExpectSameAsRun(const std::string& job, const std::string& recipe, std::string merged = "") {
    if (merged.empty()) {
      merged = job + "-merged.jsonl";
      const CliResult m = Run({"merge", "--job-dir", job, "--output", merged});
      ASSERT_EQ(m.exit_code, 0) << m.err;
    }
    RunReference(job, recipe);
    const std::string reference = Read(job + "-reference.jsonl");
    ASSERT_FALSE(reference.empty());
    EXPECT_TRUE(Read(merged) == reference)
        << job << ": merged output differs from djshard run's (" << Lines(Read(merged)).size()
        << " vs " << Lines(reference).size() << " rows)";
    const std::vector<std::string> errors =
        ErrorRecords(job + "-reference.jsonl.errors.jsonl", job);
    EXPECT_FALSE(errors.empty());
    EXPECT_EQ(ErrorRecords(merged + ".errors.jsonl", job), errors) << job;
  }
  // Paths (relative) of the dedup stages' files under the job's attempts.
  std::vector<std::string> StageFiles(const std::string& job) const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(Path(job + "/attempts"))) {
      if (e.is_regular_file() && IsStageFile(e.path().filename().string())) {
        out.push_back(e.path().string().substr(dir_.size() + 1));
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // The ids of every stage task of `job` in claim order, from its manifest.
  std::vector<std::string> StageTaskIds(const std::string& job) const {
    const json m = Manifest(job);
    std::vector<std::string> ids;
    for (size_t k = 0; k < m["dedup_stages"].size(); ++k) {
      const std::string stage = "dedup" + std::to_string(k + 1);
      for (const json& s : m["shards"]) {
        ids.push_back(stage + "-sign-" + s["id"].get<std::string>());
      }
      for (uint64_t r = 0; r < m["dedup_stages"][k]["key_ranges"].get<uint64_t>(); ++r) {
        char range[24];
        std::snprintf(range, sizeof range, "%04llu", static_cast<unsigned long long>(r));
        ids.push_back(stage + "-group-" + range);
      }
      ids.push_back(stage + "-components");
    }
    return ids;
  }
  size_t Count(const std::string& rel) const { return Exists(rel) ? List(rel).size() : 0; }
  json Done(const std::string& job, const std::string& id) const {
    return json::parse(Read(job + "/state/done/" + id + ".json"));
  }
};

// One worker over 1, 7 and 64 shards: the manifest records both stages with
// min(4, shards) key ranges, and the merged rows and errors are run's. Each
// deduplicator removes rows and the first drops unsignable ones, so the
// comparison is not between two outputs that nothing changed.
TEST_F(DedupStageCli, TheMergedOutputIsRunsWhateverTheNumberOfShards) {
  std::string first_input;
  for (int shards : {1, 7, 64}) {
    SCOPED_TRACE(std::to_string(shards) + " shards");
    const std::string job = "job" + std::to_string(shards);
    Prepare(job, shards);
    const json stages = Manifest(job)["dedup_stages"];
    ASSERT_EQ(stages.size(), kSimhashStages.size()) << stages.dump();
    for (size_t k = 0; k < stages.size(); ++k) {
      EXPECT_EQ(stages[k]["op"], kSimhashStages[k].first);
      EXPECT_EQ(stages[k]["op_index"], kSimhashStages[k].second);
      EXPECT_EQ(stages[k]["key_ranges"], std::min(shards, 4));
    }
    RunWorker(job);
    ExpectSameAsRun(job, "simhash.yaml");
    // The normalized input does not depend on the number of shards.
    if (first_input.empty()) first_input = ShardsConcatenated(job);
    EXPECT_TRUE(ShardsConcatenated(job) == first_input);
  }
  const json stats = json::parse(Read("job7-reference.jsonl.stats.json"));
  const json& ops = stats["operators"];
  ASSERT_EQ(ops.size(), 5u);
  for (const auto& [name, index] : kSimhashStages) {
    EXPECT_LT(ops[index]["rows_out"], ops[index]["rows_in"]) << name << " removed nothing";
  }
  EXPECT_GT(ops[1]["errors"], 0) << "every row reaching the deduplicator was signed";
  EXPECT_LT(ops[4]["rows_out"], ops[4]["rows_in"]);
}

TEST_F(DedupStageCli, ThreeConcurrentWorkersOnDistinctHostsWriteRunsBytes) {
  Prepare("job", 7);
  std::vector<Spawned> workers;
  const std::vector<std::string> hosts = {"node-a", "node-b", "node-c"};
  for (size_t i = 0; i < hosts.size(); ++i) {
    workers.push_back(WorkerOn(hosts[i], "job", {}, {}, static_cast<int>(i + 1)));
  }
  for (const Spawned& w : workers) {
    const CliResult r = WaitFor(w);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  const std::vector<std::string> tasks = StageTaskIds("job");
  EXPECT_EQ(tasks.size(), 24u);
  for (const std::string& id : tasks) {
    ASSERT_TRUE(Exists("job/state/done/" + id + ".json")) << id;
    EXPECT_EQ(Count("job/attempts/" + id), 1u) << id << " ran more than once";
    const std::string host = Done("job", id)["hostname"];
    EXPECT_TRUE(std::find(hosts.begin(), hosts.end(), host) != hosts.end()) << host;
  }
  ExpectSameAsRun("job", "simhash.yaml");
}

TEST_F(DedupStageCli, AMinhashRecipeWritesRunsBytes) {
  Prepare("job", 7, "minhash.yaml");
  const json stages = Manifest("job")["dedup_stages"];
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0]["op"], "document_minhash_deduplicator");
  RunWorker("job", {}, 2);
  ExpectSameAsRun("job", "minhash.yaml");
  const json ops = json::parse(Read("job-reference.jsonl.stats.json"))["operators"];
  EXPECT_LT(ops[1]["rows_out"], ops[1]["rows_in"]);
  EXPECT_GT(ops[1]["errors"], 0);
}

// A deduplicator last in the recipe: its sign tasks write the rows as the
// output does, and the shards' tasks copy the kept lines, in runs, across the
// copy's 1 MiB blocks (a few texts of 1.5 MB, some of them duplicates).
TEST_F(DedupStageCli, ADeduplicatorLastInTheRecipeWritesRunsBytes) {
  std::string corpus = Corpus(600);
  const std::string long_text(1500000, 'x');
  for (int i = 0; i < 5; ++i) {
    corpus +=
        json({{"id", 1000 + i}, {"score", 5}, {"text", long_text + (i % 2 ? " y" : " z")}}).dump() +
        "\n";
    corpus += json({{"id", 2000 + i}, {"score", 5}, {"text", "alpha beta gamma"}}).dump() + "\n";
  }
  Write("data.jsonl", corpus);
  Write("last.yaml",
        "dataset_path: data.jsonl\n"
        "process:\n"
        "  - whitespace_normalization_mapper:\n"
        "  - document_deduplicator:\n"
        "      lowercase: true\n");
  Prepare("job", 3, "last.yaml");
  RunWorker("job", {}, 2);
  const json sign = Done("job", "dedup1-sign-part-00000-of-00003");
  EXPECT_EQ(sign["stage"]["rows_form"], "output");
  ExpectSameAsRun("job", "last.yaml");
  const std::string merged = Read("job-merged.jsonl");
  EXPECT_EQ(Lines(merged).size(), Lines(Read("job-reference.jsonl")).size());
  size_t long_rows = 0;
  for (const std::string& line : Lines(merged)) long_rows += line.size() > 1000000;
  EXPECT_EQ(long_rows, 2u);  // the two distinct long texts
}

// node-a is killed with its first stage task's files written and no done
// record (a sign task), node-b after taking that task over and doing the
// other sign tasks, at its eighth (a group task); node-c takes the group task
// over. Nothing is lost or counted twice. (A worker publishes a task while it
// runs the next, so a kill at a later sign task could lose the one before it
// too; a group task starts once every sign task is published.)
TEST_F(DedupStageCli, WorkersKilledInTheStageAreTakenOver) {
  Prepare("job", 7);
  const CliResult a =
      WaitFor(WorkerOn("node-a", "job", {}, {"DJSHARD_TEST_KILL_AT=dedup_task_written@1"}));
  ASSERT_EQ(a.exit_code, 128 + SIGKILL) << a.err;
  EXPECT_TRUE(Exists("job/state/locks/dedup1-sign-part-00000-of-00007.lock"));
  EXPECT_FALSE(Exists("job/state/done/dedup1-sign-part-00000-of-00007.json"));
  const CliResult b =
      WaitFor(WorkerOn("node-b", "job", {}, {"DJSHARD_TEST_KILL_AT=dedup_task_written@8"}));
  ASSERT_EQ(b.exit_code, 128 + SIGKILL) << b.err;
  EXPECT_NE(b.err.find("took over stale lock of dedup1-sign-part-00000-of-00007"),
            std::string::npos)
      << b.err;
  EXPECT_TRUE(Exists("job/state/locks/dedup1-group-0000.lock"));
  EXPECT_FALSE(Exists("job/state/done/dedup1-group-0000.json"));
  const CliResult c = WaitFor(WorkerOn("node-c", "job"));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.err.find("took over stale lock of dedup1-group-0000"), std::string::npos) << c.err;

  EXPECT_EQ(Done("job", "dedup1-sign-part-00000-of-00007")["hostname"], "node-b");
  EXPECT_EQ(Done("job", "dedup1-sign-part-00000-of-00007")["attempt_number"], 2);
  EXPECT_EQ(Done("job", "dedup1-group-0000")["hostname"], "node-c");
  EXPECT_EQ(Done("job", "dedup1-group-0000")["attempt_number"], 2);
  EXPECT_EQ(Count("job/state/stale_locks"), 2u);
  const CliResult status = Run({"status", "--job-dir", "job", "--json"});
  EXPECT_EQ(status.exit_code, 0) << status.out;
  const json s = json::parse(status.out);
  EXPECT_EQ(s["counts"]["done"], 7);
  ASSERT_EQ(s["dedup_stages"].size(), 2u);
  for (const json& stage : s["dedup_stages"]) {
    EXPECT_EQ(stage["counts"]["done"], 12) << stage.dump();
    for (const json& task : stage["tasks"]) EXPECT_EQ(task["status"], "done") << task.dump();
  }
  ExpectSameAsRun("job", "simhash.yaml");
  const CliResult verify = Run({"verify", "--job-dir", "job", "--output", "job-merged.jsonl"});
  EXPECT_EQ(verify.exit_code, 0) << verify.err;
}

// A worker killed after a shard's task located its kept lines, before its
// done record went out: another worker takes the shard over and publishes the
// same ranges; the merged bytes are run's.
TEST_F(DedupStageCli, AShardTaskKilledBeforeItsRecordIsTakenOver) {
  Write("last.yaml", kLastRecipe);
  Prepare("job", 3, "last.yaml");
  // Publishes 3 sign tasks, 3 group tasks and the components task first.
  const CliResult a =
      WaitFor(WorkerOn("node-a", "job", {}, {"DJSHARD_TEST_KILL_AT=after_output@8"}));
  ASSERT_EQ(a.exit_code, 128 + SIGKILL) << a.err;
  EXPECT_TRUE(Exists("job/state/done/dedup1-components.json"));
  std::vector<std::string> held;
  for (int i = 0; i < 3; ++i) {
    const std::string id = "part-0000" + std::to_string(i) + "-of-00003";
    if (Exists("job/state/locks/" + id + ".lock") && !Exists("job/state/done/" + id + ".json")) {
      held.push_back(id);
    }
  }
  ASSERT_FALSE(held.empty()) << "the kill left no shard task's lock";
  const CliResult b = WaitFor(WorkerOn("node-b", "job"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  bool second_attempt = false;  // the shard whose publish was killed
  for (const std::string& id : held) {
    EXPECT_NE(b.err.find("took over stale lock of " + id), std::string::npos) << b.err;
    second_attempt = second_attempt || Done("job", id)["attempt_number"] == 2;
    const json done = Done("job", id);
    // (The worker may also have claimed its next shard, killed before that
    // claim made an attempt: the takeover's attempt is then the first.)
    EXPECT_EQ(done["hostname"], "node-b");
    EXPECT_TRUE(done.contains("output_source")) << done.dump(2);
  }
  EXPECT_TRUE(second_attempt);
  ExpectSameAsRun("job", "last.yaml");
  const CliResult verify = Run({"verify", "--job-dir", "job", "--output", "job-merged.jsonl"});
  EXPECT_EQ(verify.exit_code, 0) << verify.err;
}

TEST_F(DedupStageCli, StatusShowsEachStageAndItsTasks) {
  Prepare("job", 7);
  const std::vector<std::string> tasks = StageTaskIds("job");
  ASSERT_EQ(tasks.size(), 24u);
  CliResult r = Run({"status", "--job-dir", "job"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out,
            "Job job: total=7 pending=7 running=0 stale=0 done=0 failed=0\n"
            "  dedup stage 1 (document_simhash_deduplicator): tasks=12 pending=12 running=0 "
            "stale=0 done=0 failed=0\n"
            "  dedup stage 2 (document_deduplicator): tasks=12 pending=12 running=0 stale=0 "
            "done=0 failed=0\n");
  r = Run({"status", "--job-dir", "job", "--all"});
  EXPECT_EQ(r.exit_code, 1);
  for (const std::string& id : tasks) {
    EXPECT_NE(r.out.find("\n  " + id + "  pending  rows="), std::string::npos) << id << r.out;
  }
  EXPECT_NE(r.out.find("\n  dedup1-sign-part-00000-of-00007  pending  rows=" +
                       std::to_string(Manifest("job")["shards"][0]["rows"].get<uint64_t>())),
            std::string::npos)
      << r.out;
  r = Run({"status", "--job-dir", "job", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  json s = json::parse(r.out);
  ASSERT_EQ(s["dedup_stages"].size(), 2u);
  std::vector<std::string> listed;
  for (size_t k = 0; k < 2; ++k) {
    const json& stage = s["dedup_stages"][k];
    EXPECT_EQ(stage["stage"], k + 1);
    EXPECT_EQ(stage["op"], kSimhashStages[k].first);
    EXPECT_EQ(stage["counts"],
              json({{"pending", 12}, {"running", 0}, {"stale", 0}, {"done", 0}, {"failed", 0}}));
    for (const json& task : stage["tasks"]) {
      listed.push_back(task["task_id"]);
      EXPECT_EQ(task["status"], "pending");
    }
  }
  EXPECT_EQ(listed, tasks);

  RunWorker("job");
  r = Run({"status", "--job-dir", "job"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Job job: total=7 pending=0 running=0 stale=0 done=7 failed=0\n"
            "  dedup stage 1 (document_simhash_deduplicator): tasks=12 pending=0 running=0 "
            "stale=0 done=12 failed=0\n"
            "  dedup stage 2 (document_deduplicator): tasks=12 pending=0 running=0 stale=0 "
            "done=12 failed=0\n");
  r = Run({"status", "--job-dir", "job", "--all"});
  EXPECT_EQ(r.exit_code, 0);
  for (const std::string& id : tasks) {
    EXPECT_NE(r.out.find("\n  " + id + "  done     rows="), std::string::npos) << id << r.out;
  }
  s = json::parse(Run({"status", "--job-dir", "job", "--json"}).out);
  for (const json& stage : s["dedup_stages"]) {
    EXPECT_EQ(stage["counts"]["done"], 12);
    for (const json& task : stage["tasks"]) {
      EXPECT_EQ(task["status"], "done");
      EXPECT_EQ(task["owner"], "node-a");
    }
  }
}

// gc leaves the stage files alone while shards are still to run, removes
// them all once every shard is done; verify checks them, then counts them as
// removed; the merged output does not change.
TEST_F(DedupStageCli, VerifyChecksTheStageFilesAndGcRemovesThemOnceTheJobIsDone) {
  Prepare("job", 7);
  RunWorker("job", {"--max-shards", "7"});  // the sign tasks of stage 1
  const std::vector<std::string> signed_files = StageFiles("job");
  EXPECT_EQ(signed_files.size(), 7u * 4);
  CliResult gc = Run({"gc", "job"});
  EXPECT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_EQ(StageFiles("job"), signed_files) << gc.out;

  RunWorker("job");
  const CliResult m = Run({"merge", "--job-dir", "job", "--output", "merged.jsonl"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const std::string merged = Read("merged.jsonl");
  // Per stage: rows.jsonl, rows.u64, keys.bin and keys.idx per shard (for
  // any number of key ranges), 4 forests, the duplicates and their index.
  const size_t files = 2 * (7 * 4 + 4 + 2);
  size_t listed = 0;
  for (const std::string& id : StageTaskIds("job"))
    listed += Done("job", id)["stage"]["files"].size();
  EXPECT_EQ(listed, files);
  ASSERT_EQ(StageFiles("job").size(), files);
  CliResult v = Run({"verify", "--job-dir", "job"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(v.out.rfind("PASS: 7 shards were completed by 1 node(s)", 0), 0u) << v.out;
  EXPECT_NE(v.err.find("dedup stages: " + std::to_string(files) +
                       " task file(s) match their done records\n"),
            std::string::npos)
      << v.err;

  const std::vector<std::string> stage_files = StageFiles("job");
  gc = Run({"gc", "job"});
  EXPECT_EQ(gc.exit_code, 0) << gc.err;
  for (const std::string& f : stage_files) {
    EXPECT_NE(gc.out.find("removed " + Path(f) + "\n"), std::string::npos) << f << "\n" << gc.out;
  }
  EXPECT_TRUE(StageFiles("job").empty()) << gc.out;
  for (const std::string& id : StageTaskIds("job")) {
    EXPECT_TRUE(Exists("job/state/done/" + id + ".json")) << id;
  }
  v = Run({"verify", "--job-dir", "job"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(v.out.rfind("PASS: 7 shards were completed by 1 node(s)", 0), 0u) << v.out;
  EXPECT_NE(v.err.find("dedup stages: 0 task file(s) match their done records, " +
                       std::to_string(files) + " removed by gc"),
            std::string::npos)
      << v.err;
  const CliResult again =
      Run({"merge", "--job-dir", "job", "--output", "merged.jsonl", "--overwrite"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(Read("merged.jsonl") == merged);
  ExpectSameAsRun("job", "simhash.yaml", "merged.jsonl");
}

// When nothing runs after the deduplicator, a shard's task reads the kept
// lines of its sign task's rows.jsonl as the worker publishes it; a changed
// rows.jsonl fails that task, naming the file, and nothing is published.
TEST_F(DedupStageCli, AChangedRowsFileFailsTheShardTaskThatReadsIt) {
  Write("data.jsonl", Corpus(300));
  Write("last.yaml", kLastRecipe);
  Prepare("job", 3, "last.yaml");
  RunWorker("job", {"--max-shards", "3"});  // the sign tasks
  const json sign = Done("job", "dedup1-sign-part-00000-of-00003");
  EXPECT_EQ(sign["stage"]["rows_form"], "output");
  const std::string output = sign["output_path"];
  const std::string rows = "job/" + output.substr(0, output.rfind('/')) + "/rows.jsonl";
  std::string bytes = Read(rows);
  const size_t at = bytes.find("\"text\":\"") + 9;
  ASSERT_LT(at, bytes.size());
  bytes[at] = static_cast<char>(bytes[at] == 'a' ? 'b' : 'a');  // the same lines, other bytes
  std::ofstream(Path(rows), std::ios::binary | std::ios::trunc) << bytes;

  const CliResult w = WaitFor(WorkerOn("node-a", "job", {"--max-retries", "0"}));
  EXPECT_EQ(w.exit_code, 2) << w.err;
  const json failed = json::parse(Read("job/state/failed/part-00000-of-00003.json"));
  const std::string error = failed["last_error"];
  EXPECT_NE(error.find(Path(rows) + ": file differs from its done record (rows or xxh3_128) of "
                                    "part-00000-of-00003"),
            std::string::npos)
      << error;
  EXPECT_FALSE(Exists("job/state/done/part-00000-of-00003.json"));
  EXPECT_TRUE(Exists("job/state/done/part-00001-of-00003.json"));
  const CliResult merge = Run({"merge", "--job-dir", "job"});
  EXPECT_EQ(merge.exit_code, 2);
  EXPECT_FALSE(Exists("job/merged.jsonl"));
}

// The phases of the test below, over one job of kLastRecipe in 3 shards.
class DedupSourcedOutputsCli : public DedupStageCli {
 protected:
  // Each shard's done record names the kept lines as ascending, separate
  // ranges of its sign task's rows.jsonl, and its own output is empty.
  // Returns those rows.jsonl files, in shard order.
  std::vector<std::string> ExpectOutputsAreRangesOfRowsFiles() {
    std::vector<std::string> rows_files;
    for (int i = 0; i < 3; ++i) {
      const std::string id = "part-0000" + std::to_string(i) + "-of-00003";
      const json sign = Done("job", "dedup1-sign-" + id);
      const json done = Done("job", id);
      const std::string sign_output = sign["output_path"];
      const std::string rows = sign_output.substr(0, sign_output.rfind('/')) + "/rows.jsonl";
      EXPECT_TRUE(done.contains("output_source")) << done.dump(2);
      EXPECT_EQ(done["output_source"]["path"], rows);
      EXPECT_EQ(done["schema_version"], 3);
      EXPECT_EQ(Read("job/" + done["output_path"].get<std::string>()), "") << id;
      const json& ranges = done["output_source"]["ranges"];
      EXPECT_GE(ranges.size(), 4u);
      uint64_t bytes = 0, end = 0;
      for (size_t r = 0; r + 1 < ranges.size(); r += 2) {
        EXPECT_TRUE(r == 0 || ranges[r].get<uint64_t>() > end) << "ranges are apart and ascending";
        bytes += ranges[r + 1].get<uint64_t>();
        end = ranges[r].get<uint64_t>() + ranges[r + 1].get<uint64_t>();
      }
      EXPECT_EQ(bytes, done["size_bytes"].get<uint64_t>());
      EXPECT_LT(done["rows"].get<uint64_t>(),
                sign["stage"]["files"]["rows.jsonl"]["rows"].get<uint64_t>());
      rows_files.push_back("job/" + rows);
    }
    return rows_files;
  }

  // The parts layout holds the file layout's bytes, and verify passes.
  void ExpectPartsAreTheMergedBytes(const std::string& merged) {
    CliResult r = Run({"merge", "--job-dir", "job", "--layout", "parts", "--output", "parts"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json parts = json::parse(Read("parts/_manifest.json"));
    std::string joined;
    for (const json& part : parts["parts"])
      joined += Read("parts/" + part["file"].get<std::string>());
    EXPECT_TRUE(joined == merged);
    r = Run({"verify", "--job-dir", "job", "--output", "parts"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }

  // gc keeps the rows files that outputs are ranges of and removes the rest;
  // verify and a new merge still find the same bytes.
  void ExpectGcKeepsTheRowsFiles(std::vector<std::string> rows_files, const std::string& merged) {
    CliResult r = Run({"gc", "job"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::sort(rows_files.begin(), rows_files.end());
    EXPECT_EQ(StageFiles("job"), rows_files) << r.out;
    r = Run({"verify", "--job-dir", "job", "--output", "job-merged.jsonl"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = Run({"merge", "--job-dir", "job", "--output", "again.jsonl"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(Read("again.jsonl") == merged);
  }

  // A byte of shard 0's kept lines changed, then the file cut short inside
  // them: merge and verify fail naming it; restored, all pass again.
  void ExpectAChangedRowsFileFails(const std::string& rows_file) {
    std::string bytes = Read(rows_file);
    const json ranges = Done("job", "part-00000-of-00003")["output_source"]["ranges"];
    const size_t at = ranges[0].get<size_t>() + 2;
    const char was = bytes[at];
    bytes[at] = static_cast<char>(was == 'a' ? 'b' : 'a');
    std::ofstream(Path(rows_file), std::ios::binary | std::ios::trunc) << bytes;
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"merge", "--job-dir", "job", "--output", "changed.jsonl"},
          std::vector<std::string>{"verify", "--job-dir", "job", "--output", "job-merged.jsonl"}}) {
      const CliResult r = Run(args);
      EXPECT_EQ(r.exit_code, 2) << args[0];
      EXPECT_NE(r.err.find(Path(rows_file) + ": shard output does not match its done record"),
                std::string::npos)
          << r.err;
      EXPECT_NE(r.err.find("`djshard retry` cannot repair this: prepare the job again"),
                std::string::npos)
          << r.err;
    }
    EXPECT_FALSE(Exists("changed.jsonl"));
    std::ofstream(Path(rows_file), std::ios::binary | std::ios::trunc)
        << bytes.substr(0, static_cast<size_t>(at));
    CliResult r = Run({"merge", "--job-dir", "job", "--output", "changed.jsonl"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(Path(rows_file) + ": file ends at byte " + std::to_string(at) +
                         ", inside the range it should hold from byte " +
                         std::to_string(ranges[0].get<size_t>())),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(Exists("changed.jsonl"));
    bytes[at] = was;
    std::ofstream(Path(rows_file), std::ios::binary | std::ios::trunc) << bytes;
    r = Run({"verify", "--job-dir", "job", "--output", "parts"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }

  // A rows file gone: verify fails for the parts output too (its parts are
  // copies, but the job no longer holds what its records publish), and
  // merge says what is missing.
  void ExpectAMissingRowsFileFails(const std::string& rows_file) {
    fs::remove(Path(rows_file));
    CliResult r = Run({"verify", "--job-dir", "job", "--output", "parts"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(Path(rows_file)), std::string::npos) << r.err;
    r = Run({"merge", "--job-dir", "job", "--output", "changed.jsonl"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("ERROR: " + Path(rows_file) +
                         ": file is missing (the file was changed after it was published; "
                         "`djshard retry` cannot repair this: prepare the job again)"),
              std::string::npos)
        << r.err;
  }
};

// When nothing runs after the deduplicator, a shard's done record publishes
// its kept lines where they are, as ranges of its sign task's rows.jsonl
// (output_source), and nothing is copied. Merge in both layouts, verify and
// gc read them there; once rows.jsonl changes, merge and verify fail naming
// it, and say that only preparing the job again repairs it.
TEST_F(DedupSourcedOutputsCli,
       ShardOutputsAreRangesOfTheSignTasksRowsWhenNothingRunsAfterTheDeduplicator) {
  Write("last.yaml", kLastRecipe);
  Prepare("job", 3, "last.yaml");
  RunWorker("job");
  const std::vector<std::string> rows_files = ExpectOutputsAreRangesOfRowsFiles();
  ASSERT_EQ(rows_files.size(), 3u);
  ExpectSameAsRun("job", "last.yaml");
  const std::string merged = Read("job-merged.jsonl");
  ExpectPartsAreTheMergedBytes(merged);
  ExpectGcKeepsTheRowsFiles(rows_files, merged);
  ExpectAChangedRowsFileFails(rows_files[0]);
  ExpectAMissingRowsFileFails(rows_files[1]);
}

// Kept lines that fall in more than 4096 ranges of rows.jsonl (every other
// row a duplicate) are copied into the shard task's output instead, so that
// done records stay small; the merged bytes are run's either way.
TEST_F(DedupStageCli, KeptLinesInManyRangesAreCopiedIntoTheShardOutput) {
  std::string data;
  for (int i = 0; i < 9000; ++i)
    data += json({{"text", "row " + std::to_string(i / 2)}}).dump() + "\n";
  Write("pairs.jsonl", data);
  Write("pairs.yaml",
        "dataset_path: pairs.jsonl\n"
        "process:\n"
        "  - document_deduplicator:\n");
  Prepare("job", 1, "pairs.yaml");
  RunWorker("job");
  const json done = Done("job", "part-00000-of-00001");
  EXPECT_FALSE(done.contains("output_source")) << done.dump(2);
  EXPECT_EQ(done["rows"], 4500);
  EXPECT_EQ(Read("job/" + done["output_path"].get<std::string>()).size(),
            done["size_bytes"].get<size_t>());
  CliResult r = Run({"merge", "--job-dir", "job", "--output", "merged.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Run({"run", "--config", "pairs.yaml", "--export-path", "run.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Lines(Read("run.jsonl")).size(), 4500u);
  EXPECT_TRUE(Read("merged.jsonl") == Read("run.jsonl"));
}

// Under dlc, instances that copy their share of the shard outputs into the
// merged file read ranges of rows.jsonl files as well.
TEST_F(DedupStageCli, DlcInstancesMergeOutputsThatAreRangesOfRowsFiles) {
  Write("last.yaml", kLastRecipe);
  DlcOnTwoNodes("last.yaml", "last");
  EXPECT_TRUE(Done("job", "part-00003-of-00007").contains("output_source"));
  ExpectSameAsRun("job", "last.yaml", "job/merged.jsonl");
}

// A flipped byte in key range 0 of a sign task's key file, after its done record is out:
// the group task that reads it fails, naming the file, and the job fails.
// With the byte put back, `djshard retry` of the group task lets the job finish.
TEST_F(DedupStageCli, AChangedKeyFileFailsTheGroupTaskThatReadsIt) {
  Prepare("job", 7);
  RunWorker("job", {"--max-shards", "7"});  // the sign tasks of stage 1
  ASSERT_EQ(Count("job/state/done"), 7u);
  const json sign = Done("job", "dedup1-sign-part-00000-of-00007");
  const std::string output = sign["output_path"];
  const std::string keys = "job/" + output.substr(0, output.rfind('/')) + "/keys.bin";
  std::string bytes = Read(keys);
  ASSERT_GT(bytes.size(), 100u);
  bytes[100] = static_cast<char>(bytes[100] ^ 1);
  std::ofstream(Path(keys), std::ios::binary | std::ios::trunc) << bytes;

  const CliResult w = WaitFor(WorkerOn("node-a", "job", {"--max-retries", "0"}));
  EXPECT_EQ(w.exit_code, 2) << w.err;
  EXPECT_NE(w.err.find("failed dedup1-group-0000"), std::string::npos) << w.err;
  const json failed = json::parse(Read("job/state/failed/dedup1-group-0000.json"));
  const std::string error = failed["last_error"];
  EXPECT_NE(error.find(Path(keys) + ": key range 0 differs from the done record of "
                                    "dedup1-sign-part-00000-of-00007"),
            std::string::npos)
      << error;
  EXPECT_FALSE(Exists("job/state/done/dedup1-group-0000.json"));
  EXPECT_FALSE(Exists("job/state/done/dedup1-components.json"));

  // What the user sees: the task failed with that error, the job is failed.
  const CliResult all = Run({"status", "--job-dir", "job", "--all"});
  EXPECT_NE(all.out.find("  dedup stage 1 (document_simhash_deduplicator): tasks=12 pending=1 "
                         "running=0 stale=0 done=10 failed=1\n"),
            std::string::npos)
      << all.out;
  EXPECT_NE(all.out.find("\n  dedup1-group-0000  failed   rows=0"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("error=" + error), std::string::npos) << all.out;
  EXPECT_EQ(all.exit_code, 2) << "status of a job with a failed dedup stage task\n" << all.out;
  const CliResult merge = Run({"merge", "--job-dir", "job"});
  EXPECT_EQ(merge.exit_code, 2);
  EXPECT_FALSE(Exists("job/merged.jsonl"));

  bytes[100] = static_cast<char>(bytes[100] ^ 1);
  std::ofstream(Path(keys), std::ios::binary | std::ios::trunc) << bytes;
  const CliResult retry = Run({"retry", "--job-dir", "job", "--shard-id", "dedup1-group-0000"});
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  EXPECT_NE(retry.out.find("Retrying dedup1-group-0000\n"), std::string::npos) << retry.out;
  RunWorker("job");
  EXPECT_EQ(Done("job", "dedup1-group-0000")["attempt_number"], 1);
  ExpectSameAsRun("job", "simhash.yaml");
}

TEST_F(DedupStageCli, PrepareRefusesADedupRecipeWithCheckpointOrPartitionSections) {
  for (const std::string section : {"checkpoint:\n  strategy: every_op\n",
                                    "partition:\n  mode: manual\n  num_of_partitions: 2\n"}) {
    SCOPED_TRACE(section);
    Write("sections.yaml", section + kSimhashRecipe);
    const CliResult r =
        Run({"prepare", "--config", "sections.yaml", "--job-dir", "job", "--num-shards", "2"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("document_simhash_deduplicator' runs as a dedup stage"), std::string::npos)
        << r.err;
    EXPECT_FALSE(Exists("job"));
  }
}

TEST_F(DedupStageCli, DlcOnOneNodeWritesRunsBytes) {
  const CliResult r = Run({"dlc", "--job-dir", "job", "--config", "simhash.yaml", "--dataset-path",
                           "data.jsonl", "--nodes", "1", "--num-shards", "7", "--run-id", "r1",
                           "--poll-interval-secs", "0.2", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("PASS: 7 shards were completed by 1 node(s)"), std::string::npos) << r.out;
  EXPECT_EQ(Manifest("job")["dedup_stages"].size(), 2u);
  ExpectSameAsRun("job", "simhash.yaml", "job/merged.jsonl");
}

// Strict mode: each instance takes its share of the shards and the stage's
// tasks, and both count as nodes that took part.
TEST_F(DedupStageCli, DlcInStrictModeSharesTheStageTasksAmongTheNodes) {
  DlcOnTwoNodes("simhash.yaml", "strict");
  std::set<std::string> owners;
  for (const std::string& f : List("job/state/done")) {
    owners.insert(json::parse(Read("job/state/done/" + f))["hostname"].get<std::string>());
  }
  EXPECT_EQ(owners, (std::set<std::string>{"node-a", "node-b"}));
  ExpectSameAsRun("job", "simhash.yaml", "job/merged.jsonl");
}

// A record the deduplicator cannot sign, with skip_op_error: false, fails
// its sign task for good: both workers end with exit 2, later phases are
// never claimed, and status says the job failed.
TEST_F(DedupStageCli, ASignTaskThatFailsForGoodEndsEveryWorker) {
  std::string recipe = kSimhashRecipe;
  const std::string entry = "  - document_simhash_deduplicator:\n";
  recipe.insert(recipe.find(entry) + entry.size(), "      skip_op_error: false\n");
  Write("strict.yaml", recipe);
  const CliResult p = Run({"prepare", "--config", "strict.yaml", "--job-dir", "job", "--num-shards",
                           "7", "--max-retries", "0", "--poll-interval-secs", "0.2"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const Spawned a = WorkerOn("node-a", "job");
  const Spawned b = WorkerOn("node-b", "job");
  for (const Spawned& w : {a, b}) {
    const CliResult r = WaitFor(w);
    EXPECT_EQ(r.exit_code, 2) << r.err;
  }
  bool named = false;
  for (const std::string& f : List("job/state/failed")) {
    const std::string error = json::parse(Read("job/state/failed/" + f))["last_error"];
    EXPECT_EQ(f.rfind("dedup1-sign-", 0), 0u) << f;
    named = named || error.find(
                         "operator 'document_simhash_deduplicator' failed: the text "
                         "field 'text' is a number, not a string") != std::string::npos;
  }
  EXPECT_TRUE(named);
  EXPECT_FALSE(Exists("job/state/done/dedup1-group-0000.json"));
  const CliResult status = Run({"status", "--job-dir", "job"});
  EXPECT_EQ(status.exit_code, 2) << status.out;
  EXPECT_NE(status.out.find("dedup stage task(s) failed: the shards wait for them)"),
            std::string::npos)
      << status.out;
  const CliResult merge = Run({"merge", "--job-dir", "job"});
  EXPECT_EQ(merge.exit_code, 2);
  EXPECT_NE(merge.err.find("(run 'djshard retry --all-failed' and the workers again)"),
            std::string::npos)
      << merge.err;
}

}  // namespace
}  // namespace djshard::testing
