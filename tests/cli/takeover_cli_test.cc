// Black-box tests of takeover resume (SPEC-checkpoints §7, §11 tests 7 and
// 8): workers in separate UTS namespaces checkpoint each shard's partitions;
// a worker that takes a shard over after kill -9 resumes from the commits of
// the dead attempt, rejects damaged ones, and the merged output never changes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "djshard/io/sha256.h"
#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::vector<std::string> kTestOps = {"DJSHARD_ENABLE_TEST_OPERATORS=1"};
const std::string kShard = "part-00000-of-00001";

class TakeoverCli : public CliTest {
 protected:
  void WriteCorpus(int rows) {
    std::string text;
    for (int i = 0; i < rows; ++i) {
      text += "{\"id\":" + std::to_string(i) + ",\"text\":\"  row " + std::to_string(i) +
              (i % 3 ? " has\\u3000some\\ttext" : "") + " \"}\n";
    }
    Write("data.jsonl", text);
  }
  // Three operators (a sleep, whitespace normalization, a length filter) in
  // `partitions` manual partitions, a tap after every operator.
  void WriteRecipe(int partitions, double sleep_secs, const std::string& checkpoint_extra = "") {
    Write("recipe.yaml",
          "dataset_path: data.jsonl\n"
          "partition:\n  mode: manual\n  num_of_partitions: " +
              std::to_string(partitions) +
              "\n  max_concurrent_partitions: 1\n"
              "checkpoint:\n  strategy: every_op\n" +
              checkpoint_extra +
              "process:\n"
              "  - djshard_test_sleep_mapper:\n      seconds: " +
              std::to_string(sleep_secs) +
              "\n  - whitespace_normalization_mapper:\n"
              "  - text_length_filter:\n      min_len: 6\n");
  }
  void Prepare(const std::string& job, int shards, const std::string& lease = "2",
               const std::string& heartbeat = "0.5") {
    const CliResult r =
        WaitFor(Spawn({"prepare", "--config", "recipe.yaml", "--job-dir", job, "--num-shards",
                       std::to_string(shards), "--lease-secs", lease, "--heartbeat-secs", heartbeat,
                       "--poll-interval-secs", "0.2"},
                      kTestOps));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // A worker on its own hostname (UTS namespace).
  Spawned WorkerOn(const std::string& host, const std::string& job = "job",
                   const std::vector<std::string>& env = {}) {
    std::vector<std::string> e = kTestOps;
    e.insert(e.end(), env.begin(), env.end());
    return Spawn({"worker", "--job-dir", job, "--threads", "1"}, e, OnHost(host));
  }
  std::string ReferenceSha() {
    const CliResult r = WaitFor(Spawn(
        {"run", "--config", "recipe.yaml", "--export-path", "reference.jsonl", "--threads", "1"},
        kTestOps));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return io::Sha256OfFile(Path("reference.jsonl"));
  }
  std::string MergedSha(const std::string& job = "job") {
    const CliResult r =
        Run({"merge", "--job-dir", job, "--output", job + "-merged.jsonl", "--overwrite"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return io::Sha256OfFile(Path(job + "-merged.jsonl"));
  }
  // attempts/<shard>/ entries in order (NNNN-<token>).
  std::vector<std::string> Attempts(const std::string& job, const std::string& shard) const {
    if (!Exists(job + "/attempts/" + shard)) return {};
    std::vector<std::string> a = List(job + "/attempts/" + shard);
    std::sort(a.begin(), a.end());
    return a;
  }
  json AttemptJson(const std::string& job, const std::string& shard, size_t i) const {
    return json::parse(
        Read(job + "/attempts/" + shard + "/" + Attempts(job, shard).at(i) + "/attempt.json"));
  }
  // Every event of the job's events files whose name contains `host`.
  std::vector<json> Events(const std::string& job, const std::string& host = "") const {
    std::vector<json> out;
    for (const std::string& name : List(job)) {
      if (name.rfind("events_", 0) != 0 || name.find(host) == std::string::npos) continue;
      std::istringstream in(Read(job + "/" + name));
      for (std::string line; std::getline(in, line);) {
        const json e = json::parse(line, nullptr, false);
        if (e.is_object()) out.push_back(e);
      }
    }
    return out;
  }
  // Whether process `pid` holds a flock (/proc/locks).
  static bool HoldsFlock(int pid) {
    std::ifstream locks("/proc/locks");
    for (std::string line; std::getline(locks, line);) {
      std::istringstream in(line);
      std::string id, kind, mode, type;
      int owner = 0;
      in >> id >> kind >> mode >> type >> owner;
      if (kind == "FLOCK" && owner == pid) return true;
    }
    return false;
  }
  std::string Checkpoints(const std::string& job = "job") const {
    return job + "/checkpoints/" + kShard;
  }
  // Commit records in the shard's checkpoint directory.
  std::vector<std::string> CommitRecords(const std::string& job = "job") const {
    std::vector<std::string> out;
    if (!Exists(Checkpoints(job))) return out;
    for (const std::string& n : List(Checkpoints(job))) {
      if (n.size() > 12 && n.compare(n.size() - 12, 12, ".commit.json") == 0) out.push_back(n);
    }
    return out;
  }
  // Kills the first worker right after its third final commit (3 ops, one
  // partition at a time: the 9th commit), then a worker on node-b takes the
  // shard over after the lease.
  void KillAfterThreeFinalCommits() {
    const CliResult a =
        WaitFor(WorkerOn("node-a", "job", {"DJSHARD_TEST_KILL_AT=tap_committed@9"}));
    ASSERT_EQ(a.exit_code, 128 + SIGKILL) << a.err;
    size_t finals = 0;
    for (const std::string& n : CommitRecords()) finals += n.rfind("checkpoint_op_0002_", 0) == 0;
    ASSERT_EQ(finals, 3u);
  }
};

TEST_F(TakeoverCli, TakeoverResumesTheDeadAttemptsFinishedPartitions) {
  WriteCorpus(48);
  WriteRecipe(8, 0.02);
  const std::string reference = ReferenceSha();
  Prepare("job", 1);
  const json plan = json::parse(Read("job/dag_execution_plan.json"));
  EXPECT_EQ(plan["checkpoint"], json({{"strategy", "every_op"}, {"taps", {0, 1, 2}}}));
  EXPECT_EQ(plan["partitioning"]["num_partitions"], 8);
  KillAfterThreeFinalCommits();
  const json first = AttemptJson("job", kShard, 0);
  EXPECT_EQ(first["hostname"], "node-a");

  const CliResult b = WaitFor(WorkerOn("node-b"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.err.find("took over stale lock"), std::string::npos) << b.err;
  const json second = AttemptJson("job", kShard, 1);
  EXPECT_EQ(second["hostname"], "node-b");
  EXPECT_EQ(second["status"], "done");
  EXPECT_EQ(second["partitions"], json({{"total", 8}, {"resumed", 3}, {"computed", 5}}));
  ASSERT_EQ(second["resumed_from"].size(), 3u);
  std::set<uint64_t> resumed;
  for (const json& r : second["resumed_from"]) {
    resumed.insert(r["partition_id"].get<uint64_t>());
    EXPECT_EQ(r["op_idx"], 2);
    EXPECT_EQ(r["origin_attempt_token"], first["token"]);
  }
  EXPECT_EQ(resumed, std::set<uint64_t>({0, 1, 2}));
  const std::string log =
      Read("job/attempts/" + kShard + "/" + Attempts("job", kShard)[1] + "/process.log");
  EXPECT_NE(log.find("resumed 3, computed 5"), std::string::npos) << log;
  EXPECT_NE(log.find(first["token"].get<std::string>()), std::string::npos) << log;

  // node-b's events: no operator ran for the resumed partitions, every other ran.
  std::set<uint64_t> started, loaded;
  for (const json& e : Events("job", "node-b")) {
    if (!e.contains("partition_id")) continue;
    EXPECT_EQ(e["shard_id"], kShard);
    if (e["event_type"] == "op_start") started.insert(e["partition_id"].get<uint64_t>());
    if (e["event_type"] == "checkpoint_load") loaded.insert(e["partition_id"].get<uint64_t>());
  }
  EXPECT_EQ(started, std::set<uint64_t>({3, 4, 5, 6, 7}));
  EXPECT_EQ(loaded, resumed);
  EXPECT_EQ(MergedSha(), reference);
  // The done record is out: the shard's checkpoints are gone.
  EXPECT_FALSE(Exists(Checkpoints()));
}

TEST_F(TakeoverCli, FrozenWorkerPastItsLeaseCommitsNoTapAfterSigcont) {
  WriteCorpus(48);
  WriteRecipe(8, 0.02, "  keep_after_done: true\n");
  const std::string reference = ReferenceSha();
  Prepare("job", 1, "1.5", "0.3");
  const Spawned a = WorkerOn("node-a");
  ASSERT_TRUE(WaitUntil([&] { return CommitRecords().size() >= 2; }));
  // Frozen outside its heartbeat's fenced section: a process frozen holding
  // the claim's flock keeps every worker from taking the shard over.
  ASSERT_TRUE(WaitUntil([&] {
    if (::kill(a.pid, SIGSTOP) != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!HoldsFlock(a.pid)) return true;
    ::kill(a.pid, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return false;
  }));
  const std::string token_a = AttemptJson("job", kShard, 0)["token"];
  // A commit's attempt: its attempt_token (a later commit may name an earlier
  // attempt's files, as a partition resumed from an intermediate tap does).
  auto by_a = [&](const std::string& n) {
    return json::parse(Read(Checkpoints() + "/" + n)).value("attempt_token", "") == token_a;
  };
  std::set<std::string> before;
  for (const std::string& n : CommitRecords()) {
    if (by_a(n)) before.insert(n);
  }
  // node-b takes the frozen worker's shard over after the lease and finishes it.
  const CliResult b = WaitFor(WorkerOn("node-b"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_EQ(::kill(a.pid, SIGCONT), 0);
  const CliResult ra = WaitFor(a);
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  const std::string status_a = AttemptJson("job", kShard, 0)["status"];
  EXPECT_TRUE(status_a == "stale" || status_a == "lost") << status_a;
  // Every commit of the frozen attempt was there before it froze.
  for (const std::string& n : CommitRecords()) {
    if (by_a(n)) {
      EXPECT_TRUE(before.count(n)) << n << " was committed after SIGCONT";
    }
  }
  EXPECT_EQ(MergedSha(), reference);
}

// A worker frozen (SIGSTOP, as a hung node stops) while it writes and fsyncs
// its heartbeat holds no flock: another worker takes the shard over once the
// lease has run out, not when the frozen one wakes.
TEST_F(TakeoverCli, WorkerFrozenInItsHeartbeatsWriteIsTakenOverAfterTheLease) {
  // Partitions of 1.2 s: when its first heartbeat freezes the worker, it is
  // inside the sleep of partition 0, far from any fenced commit.
  WriteCorpus(12);
  WriteRecipe(2, 0.2);
  const std::string reference = ReferenceSha();
  const double lease = 1.5;
  Prepare("job", 1, "1.5", "0.3");
  const Spawned a = WorkerOn("node-a", "job", {"DJSHARD_TEST_STOP_AT=heartbeat_write"});
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(a.pid); })) << ErrSoFar(a);
  EXPECT_FALSE(HoldsFlock(a.pid));
  const auto frozen = std::chrono::steady_clock::now();
  const Spawned b = WorkerOn("node-b");
  ASSERT_TRUE(
      WaitUntil([&] { return ErrSoFar(b).find("took over stale lock") != std::string::npos; },
                std::chrono::milliseconds(static_cast<int>((lease + 15) * 1000))))
      << ErrSoFar(b);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen).count(),
            lease + 15);
  const CliResult rb = WaitFor(b);
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  ASSERT_EQ(::kill(a.pid, SIGCONT), 0);
  const CliResult ra = WaitFor(a);
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(AttemptJson("job", kShard, 0)["status"], "stale");
  EXPECT_EQ(AttemptJson("job", kShard, 1)["status"], "done");
  EXPECT_FALSE(Exists("job/state/locks/" + kShard + ".lock"));
  EXPECT_EQ(MergedSha(), reference);
}

// A worker frozen after writing and fsyncing its done record, before the
// fenced link, holds no flock either: the shard is taken over after the
// lease, and after SIGCONT the frozen attempt publishes nothing.
TEST_F(TakeoverCli, WorkerFrozenWithItsDoneRecordWrittenPublishesNothingAfterATakeover) {
  WriteCorpus(48);
  WriteRecipe(8, 0.02);
  const std::string reference = ReferenceSha();
  const double lease = 2;
  // A slow heartbeat: it is unlikely to be verifying ownership (under the
  // flock) at the moment the publisher freezes the process.
  Prepare("job", 1, "2", "0.7");
  const Spawned a = WorkerOn("node-a", "job", {"DJSHARD_TEST_STOP_AT=record_staged"});
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(a.pid); })) << ErrSoFar(a);
  EXPECT_FALSE(HoldsFlock(a.pid));
  EXPECT_FALSE(Exists("job/state/done/" + kShard + ".json"));
  const auto frozen = std::chrono::steady_clock::now();
  const CliResult b = WaitFor(WorkerOn("node-b"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.err.find("took over stale lock"), std::string::npos) << b.err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen).count(),
            lease + 15);
  // node-b resumed every partition from node-a's final commits.
  const json second = AttemptJson("job", kShard, 1);
  EXPECT_EQ(second["partitions"], json({{"total", 8}, {"resumed", 8}, {"computed", 0}}));
  const json done = json::parse(Read("job/state/done/" + kShard + ".json"));
  EXPECT_EQ(done["token"], second["token"]);

  ASSERT_EQ(::kill(a.pid, SIGCONT), 0);
  const CliResult ra = WaitFor(a);
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(AttemptJson("job", kShard, 0)["status"], "stale");
  EXPECT_EQ(json::parse(Read("job/state/done/" + kShard + ".json")), done);
  // The frozen attempt's staged record went with it.
  const std::string first = "job/attempts/" + kShard + "/" + Attempts("job", kShard)[0];
  for (const std::string& n : List(first)) EXPECT_EQ(n.find(".staged."), std::string::npos) << n;
  EXPECT_EQ(MergedSha(), reference);
}

// A taker frozen during its takeover, with the old attempt's stale mark
// staged, holds no flock: a third worker takes the shard over and finishes
// it; after SIGCONT the frozen taker moves nothing, its staged record goes,
// and it finds every shard done.
TEST_F(TakeoverCli, TakerFrozenInItsTakeoverDoesNotBlockAnotherTakeover) {
  WriteCorpus(12);
  WriteRecipe(2, 0.2);
  const std::string reference = ReferenceSha();
  const double lease = 1.5;
  Prepare("job", 1, "1.5", "0.3");
  const Spawned a = WorkerOn("node-a", "job", {"DJSHARD_TEST_STOP_AT=heartbeat_write"});
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(a.pid); })) << ErrSoFar(a);
  const Spawned b = WorkerOn("node-b", "job", {"DJSHARD_TEST_STOP_AT=takeover_staged"});
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(b.pid); },
                        std::chrono::milliseconds(static_cast<int>((lease + 15) * 1000))))
      << ErrSoFar(b);
  EXPECT_FALSE(HoldsFlock(b.pid));
  const std::string first = "job/attempts/" + kShard + "/" + Attempts("job", kShard).at(0);
  size_t staged = 0;
  for (const std::string& n : List(first)) staged += n.find(".staged.") != std::string::npos;
  EXPECT_EQ(staged, 1u);
  EXPECT_TRUE(Exists("job/state/locks/" + kShard + ".lock"));

  const CliResult c = WaitFor(WorkerOn("node-c"));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.err.find("took over stale lock"), std::string::npos) << c.err;
  ASSERT_EQ(Attempts("job", kShard).size(), 2u);
  const json second = AttemptJson("job", kShard, 1);
  EXPECT_EQ(second["hostname"], "node-c");
  EXPECT_EQ(second["status"], "done");

  ASSERT_EQ(::kill(b.pid, SIGCONT), 0);
  const CliResult rb = WaitFor(b);
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(rb.err.find("took over stale lock"), std::string::npos) << rb.err;
  ASSERT_EQ(::kill(a.pid, SIGCONT), 0);
  EXPECT_EQ(WaitFor(a).exit_code, 0);
  EXPECT_EQ(AttemptJson("job", kShard, 0)["status"], "stale");
  EXPECT_EQ(Attempts("job", kShard).size(), 2u);
  EXPECT_EQ(List("job/state/stale_locks").size(), 1u);
  for (const std::string& n : List(first)) EXPECT_EQ(n.find(".staged."), std::string::npos) << n;
  EXPECT_EQ(json::parse(Read("job/state/done/" + kShard + ".json"))["token"], second["token"]);
  EXPECT_EQ(MergedSha(), reference);
}

// The job summary's checkpointing.last_checkpoint_time (SPEC-checkpoints §8):
// null before any commit, then the newest commit record's created_at across
// the shards' checkpoints when merge writes the summary.
TEST_F(TakeoverCli, JobSummaryNamesTheLastCheckpointTime) {
  WriteCorpus(24);
  WriteRecipe(3, 0, "  keep_after_done: true\n");
  Prepare("job", 2);
  EXPECT_TRUE(
      json::parse(Read("job/job_summary.json"))["checkpointing"]["last_checkpoint_time"].is_null());
  const CliResult w = WaitFor(WorkerOn("node-a"));
  ASSERT_EQ(w.exit_code, 0) << w.err;
  std::string newest;
  size_t commits = 0;
  for (const std::string& shard : List("job/checkpoints")) {
    if (!fs::is_directory(Path("job/checkpoints/" + shard))) continue;
    for (const std::string& n : List("job/checkpoints/" + shard)) {
      if (n.find(".commit.json") == std::string::npos) continue;
      ++commits;
      newest = std::max(
          newest,
          json::parse(Read("job/checkpoints/" + shard + "/" + n))["created_at"].get<std::string>());
    }
  }
  ASSERT_GE(commits, 2u);
  MergedSha();
  const json summary = json::parse(Read("job/job_summary.json"));
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["checkpointing"]["last_checkpoint_time"], newest) << summary.dump(2);
}

TEST_F(TakeoverCli, DamagedCommitIsRejectedAndItsPartitionRecomputed) {
  WriteCorpus(48);
  WriteRecipe(8, 0.02, "  compression: none\n  keep_after_done: true\n");
  const std::string reference = ReferenceSha();
  Prepare("job", 1);
  KillAfterThreeFinalCommits();
  // Partition 1's committed final tap: same size, other bytes.
  const json commit =
      json::parse(Read(Checkpoints() + "/checkpoint_op_0002_partition_00001.commit.json"));
  const std::string data = Checkpoints() + "/" + commit["data_path"].get<std::string>();
  std::string bytes = Read(data);
  ASSERT_GT(bytes.size(), 10u);
  bytes[5] = bytes[5] == 'x' ? 'y' : 'x';
  Write(data, bytes);

  const CliResult b = WaitFor(WorkerOn("node-b"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const json second = AttemptJson("job", kShard, 1);
  EXPECT_EQ(second["partitions"], json({{"total", 8}, {"resumed", 2}, {"computed", 6}}));
  std::set<uint64_t> resumed;
  for (const json& r : second["resumed_from"]) resumed.insert(r["partition_id"].get<uint64_t>());
  EXPECT_EQ(resumed, std::set<uint64_t>({0, 2}));
  // The commit moved to rejected/ with its data file; the event says why.
  const std::vector<std::string> rejected = List(Checkpoints() + "/rejected");
  bool record = false, moved_data = false;
  for (const std::string& n : rejected) {
    record = record || n.rfind("checkpoint_op_0002_partition_00001.commit.json.", 0) == 0;
    moved_data = moved_data || n == commit["data_path"].get<std::string>();
  }
  EXPECT_TRUE(record && moved_data) << rejected.size();
  bool event = false;
  std::set<uint64_t> started;
  for (const json& e : Events("job", "node-b")) {
    if (e["event_type"] == "checkpoint_rejected") {
      event = true;
      EXPECT_EQ(e["partition_id"], 1);
      EXPECT_NE(e["error_message"].get<std::string>().find("xxh3_128 differs"), std::string::npos)
          << e.dump();
    }
    if (e["event_type"] == "op_start") started.insert(e["partition_id"].get<uint64_t>());
  }
  EXPECT_TRUE(event);
  EXPECT_EQ(started, std::set<uint64_t>({1, 3, 4, 5, 6, 7}));
  // Partition 1 was committed again, by node-b.
  EXPECT_NE(Read(Checkpoints() + "/checkpoint_op_0002_partition_00001.commit.json")
                .find(second["token"].get<std::string>()),
            std::string::npos);
  EXPECT_EQ(MergedSha(), reference);
}

TEST_F(TakeoverCli, PrepareRefusesMorePartitionsThanTheSmallestShardHas) {
  WriteCorpus(20);
  WriteRecipe(11, 0);
  const CliResult r = WaitFor(Spawn(
      {"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "2"}, kTestOps));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ERROR: num_of_partitions (11) exceeds the rows of part-0000"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(Exists("job"));
  for (const std::string& n : List()) EXPECT_EQ(n.find(".job.preparing"), std::string::npos) << n;
}

// Three workers drain a checkpointing job while a random one is kill -9ed at
// a random moment and replaced, round after round. DJSHARD_SOAK_ROUNDS sets
// the rounds (30 by default).
TEST_F(TakeoverCli, SoakRandomKillsNeverChangeTheOutputAndResumeSavesWork) {
  WriteCorpus(60);
  WriteRecipe(5, 0.02);
  const std::string reference = ReferenceSha();
  const uint64_t reference_rows = [&] {
    uint64_t n = 0;
    for (const char c : Read("reference.jsonl")) n += c == '\n';
    return n;
  }();
  int rounds = 30;
  if (const char* env = std::getenv("DJSHARD_SOAK_ROUNDS")) rounds = std::max(1, std::atoi(env));
  std::mt19937 rng(std::random_device{}());
  uint64_t computed = 0, from_zero = 0, kills = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::string job = "job" + std::to_string(round);
    Prepare(job, 3, "0.6", "0.15");
    std::vector<Spawned> workers;
    for (int i = 0; i < 3; ++i) {
      workers.push_back(Spawn({"worker", "--job-dir", job, "--threads", "1"}, kTestOps));
    }
    // Kill one at a random moment of its work, and start another in its place.
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 450)(rng)));
    const size_t victim = std::uniform_int_distribution<size_t>(0, 2)(rng);
    if (::kill(workers[victim].pid, SIGKILL) == 0) ++kills;
    workers.push_back(Spawn({"worker", "--job-dir", job, "--threads", "1"}, kTestOps));
    for (size_t i = 0; i < workers.size(); ++i) {
      const CliResult r = WaitFor(workers[i]);
      if (i != victim) {
        ASSERT_EQ(r.exit_code, 0) << "round " << round << ": " << r.err;
      }
    }
    ASSERT_EQ(MergedSha(job), reference) << "round " << round;
    uint64_t merged_rows = 0;
    for (const char c : Read(job + "-merged.jsonl")) merged_rows += c == '\n';
    ASSERT_EQ(merged_rows, reference_rows) << "round " << round;
    // Rows that went into the operators: each partition started, by any
    // attempt. Restarting from zero would have run every attempt's whole shard.
    for (const json& e : Events(job)) {
      if (e["event_type"] == "partition_start" && e.contains("partition_id")) {
        computed += e.value("input_rows", uint64_t{0});
      }
    }
    const json manifest = json::parse(Read(job + "/manifest.json"));
    for (const json& s : manifest["shards"]) {
      const std::string id = s["id"];
      uint64_t started = 0;
      for (const std::string& a : Attempts(job, id)) {
        const json rec = json::parse(Read(job + "/attempts/" + id + "/" + a + "/attempt.json"));
        started += rec.contains("partitions") ? 1 : 0;
      }
      from_zero += s["rows"].get<uint64_t>() * started;
    }
    fs::remove_all(Path(job));
  }
  EXPECT_EQ(kills, static_cast<uint64_t>(rounds));
  EXPECT_LT(computed, from_zero) << "rows computed " << computed << ", from zero " << from_zero;
  std::fprintf(stderr, "soak: %d rounds, %llu kills, rows computed %llu, from zero %llu\n", rounds,
               static_cast<unsigned long long>(kills), static_cast<unsigned long long>(computed),
               static_cast<unsigned long long>(from_zero));
}

// A shard that failed keeps its checkpoints for the next attempt; `retry
// --discard-checkpoints` deletes them, so that attempt starts from zero.
TEST_F(TakeoverCli, RetryKeepsCheckpointsUnlessAskedToDiscardThem) {
  std::string rows;
  for (int i = 0; i < 40; ++i) {
    rows += "{\"id\":" + std::to_string(i) + ",\"text\":\"row " + std::to_string(i) +
            (i == 35 ? " POISON" : "") + "\"}\n";
  }
  Write("data.jsonl", rows);
  Write("recipe.yaml",
        "dataset_path: data.jsonl\nskip_op_error: false\n"
        "partition:\n  mode: manual\n  num_of_partitions: 4\n  max_concurrent_partitions: 1\n"
        "checkpoint:\n  strategy: every_op\n"
        "process:\n  - whitespace_normalization_mapper:\n  - djshard_test_poison_mapper:\n");
  const CliResult prepared = WaitFor(Spawn({"prepare", "--config", "recipe.yaml", "--job-dir",
                                            "job", "--num-shards", "1", "--max-retries", "0"},
                                           kTestOps));
  ASSERT_EQ(prepared.exit_code, 0) << prepared.err;
  WaitFor(Spawn({"worker", "--job-dir", "job", "--threads", "1"}, kTestOps));
  ASSERT_TRUE(Exists("job/state/failed/" + kShard + ".json"));
  // Partitions 0-2 committed before partition 3 failed.
  const std::string ckpt = "job/checkpoints/" + kShard;
  ASSERT_TRUE(Exists(ckpt + "/checkpoint_op_0001_partition_00002.commit.json"));

  // gc on the elastic job: no live attempt holds the shard, so what no commit
  // names goes (a torn temp file here); the commits stay.
  Write(ckpt + "/checkpoint_op_0001_partition_00003.x.jsonl.tmp.0123", "torn");
  const std::vector<std::string> before = List(ckpt);
  CliResult r = Run({"gc", Path("job"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json gc = json::parse(r.out);
  ASSERT_EQ(gc["removed"].size(), 1u) << r.out;
  EXPECT_NE(gc["removed"][0].get<std::string>().find(".tmp.0123"), std::string::npos);
  EXPECT_EQ(List(ckpt).size(), before.size() - 1);

  r = Run({"retry", "--job-dir", "job", "--all-failed"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Exists(ckpt + "/checkpoint_op_0001_partition_00002.commit.json"));
  WaitFor(Spawn({"worker", "--job-dir", "job", "--threads", "1"}, kTestOps));
  ASSERT_TRUE(Exists("job/state/failed/" + kShard + ".json"));
  // The second attempt (the first is in state/history now) resumed partitions 0-2.
  EXPECT_EQ(AttemptJson("job", kShard, 0)["partitions"]["resumed"], 3);

  r = Run({"retry", "--job-dir", "job", "--all-failed", "--discard-checkpoints"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Discarded checkpoints"), std::string::npos) << r.out;
  EXPECT_FALSE(Exists(ckpt));
}

// gc in probe/ (SPEC-checkpoints §10.5): the work directory of a worker of
// this host that is gone goes, but for the log a failure record names; a live
// worker's, another host's, the records and a lock younger than the lease
// stay; a lock older than the lease goes.
TEST_F(TakeoverCli, GcRemovesDeadWorkersProbeFilesAndStaleProbeLocksOnly) {
  WriteCorpus(8);
  WriteRecipe(1, 0);
  Prepare("job", 1, "30", "5");
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  // A pid that is gone: a child that exited and was reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const std::string dead = "job/probe/work." + std::string(host) + "." + std::to_string(child);
  const std::string live = "job/probe/work." + std::string(host) + "." + std::to_string(::getpid());
  const std::string remote = "job/probe/work.node-elsewhere.12345";
  Write(dead + "/sample.jsonl", "{}\n");
  Write(dead + "/probe_op_1.log", "ERROR: out of memory\n");
  Write(dead + "/probe_op_2.log", "half a log\n");
  Write(dead + "/work_op_2/scratch.bin", "scratch");
  Write(live + "/sample.jsonl", "{}\n");
  Write(remote + "/sample.jsonl", "{}\n");
  Write("job/probe/k1.json", "{\"cache_key\": \"k1\"}\n");
  const std::string kept_log = dead.substr(4) + "/probe_op_1.log";
  Write("job/probe/k2.failed.json", json({{"cache_key", "k2"}, {"log", kept_log}}).dump() + "\n");
  fs::last_write_time(Path("job/probe/k2.failed.json"),
                      fs::file_time_type::clock::now() - std::chrono::hours(1));
  Write("job/probe/k3.lock", "{\"cache_key\": \"k3\", \"pid\": 1}\n");
  fs::last_write_time(Path("job/probe/k3.lock"),
                      fs::file_time_type::clock::now() - std::chrono::minutes(10));
  Write("job/probe/k4.lock", "{\"cache_key\": \"k4\", \"pid\": 1}\n");
  const std::set<std::string> garbage = {
      Path(dead + "/sample.jsonl"), Path(dead + "/probe_op_2.log"),
      Path(dead + "/work_op_2/scratch.bin"), Path("job/probe/k3.lock")};

  CliResult r = Run({"gc", Path("job"), "--dry-run", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json gc = json::parse(r.out);
  std::set<std::string> removed;
  for (const json& p : gc["removed"])
    removed.insert(fs::path(p.get<std::string>()).lexically_normal());
  EXPECT_EQ(removed, garbage) << r.out;
  for (const std::string& p : garbage) EXPECT_TRUE(fs::exists(p)) << p;

  r = Run({"gc", Path("job"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  gc = json::parse(r.out);
  removed.clear();
  for (const json& p : gc["removed"])
    removed.insert(fs::path(p.get<std::string>()).lexically_normal());
  EXPECT_EQ(removed, garbage) << r.out;
  for (const std::string& p : garbage) EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_FALSE(Exists(dead + "/work_op_2"));
  // Kept: the log the failure names (and so its directory), the live and the
  // remote workers' directories, the records and the fresh lock.
  EXPECT_EQ(Read(dead + "/probe_op_1.log"), "ERROR: out of memory\n");
  EXPECT_TRUE(Exists(live + "/sample.jsonl"));
  EXPECT_TRUE(Exists(remote + "/sample.jsonl"));
  EXPECT_TRUE(Exists("job/probe/k1.json"));
  EXPECT_TRUE(Exists("job/probe/k2.failed.json"));
  EXPECT_TRUE(Exists("job/probe/k4.lock"));
  EXPECT_EQ(gc["skipped_probe"].size(), 3u) << r.out;

  // Once the failure record is gone, the dead worker's directory goes whole.
  fs::remove(Path("job/probe/k2.failed.json"));
  r = Run({"gc", Path("job")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kept " + Path(live)), std::string::npos) << r.out;
  EXPECT_FALSE(Exists(dead));
}

// SPEC-lineage §8.12-13 for workers: a region's gather journal in a shard's
// checkpoints. Parents of plain ASCII text: short ones (under 6 characters)
// that the filter before the region drops, longer ones (15 to 89) split into
// chars:7 children.
class JournalTakeoverCli : public TakeoverCli {
 protected:
  static std::string TextOf(int i) {
    const int len = i % 5 == 0 ? i % 6 : 15 + (i * 37) % 75;
    std::string t;
    for (int k = 0; k < len; ++k) {
      t += (k % 6 == 5 && k + 1 < len) ? ' ' : static_cast<char>('a' + (i + k) % 26);
    }
    return t;
  }
  // Children of parent i, computed here (not by djshard).
  static uint64_t ChildrenOf(int i) {
    const size_t len = TextOf(i).size();
    return len < 10 ? 0 : (len + 6) / 7;
  }
  void WriteRegionJob(int rows, const std::string& child_op) {
    std::string docs;
    for (int i = 0; i < rows; ++i) {
      docs += "{\"id\":" + std::to_string(i) + ",\"text\":\"" + TextOf(i) + "\"}\n";
    }
    Write("data.jsonl", docs);
    Write("recipe.yaml",
          "dataset_path: data.jsonl\n"
          "partition: {mode: manual, num_of_partitions: 2, max_concurrent_partitions: 1}\n"
          "checkpoint: {keep_after_done: true}\n"
          "process:\n"
          "  - text_length_filter: {min_len: 10}\n"
          "  - expand: {name: p, by: \"chars:7\", max_inflight_parents: 4}\n"
          "  - " +
              child_op +
              "\n"
              "  - text_length_filter: {min_len: 4}\n"
              "  - gather: {name: p, journal_flush_parents: 4}\n"
              "  - whitespace_normalization_mapper:\n");
  }
  // Journal segment commit records in the shard's checkpoints: name -> record.
  std::map<std::string, json> SegmentRecords() const {
    std::map<std::string, json> out;
    for (const std::string& n : CommitRecords()) {
      if (n.rfind("lineage_p_partition_", 0) == 0) {
        out[n] = json::parse(Read(Checkpoints() + "/" + n));
      }
    }
    return out;
  }
  size_t LineageCommitEvents(const std::string& host) const {
    size_t n = 0;
    for (const json& e : Events("job", host)) n += e["event_type"] == "lineage_commit";
    return n;
  }
};

TEST_F(JournalTakeoverCli, TakeoverTakesTheKilledAttemptsJournalInsteadOfExpandingAgain) {
  const int rows = 60;
  WriteRegionJob(rows, "djshard_test_delay_mapper: {seed: 5, max_ms: 1}");
  const std::string reference = ReferenceSha();
  Prepare("job", 1);
  const CliResult a =
      WaitFor(WorkerOn("node-a", "job", {"DJSHARD_TEST_KILL_AT=lineage_segment_committed@2"}));
  ASSERT_EQ(a.exit_code, 128 + SIGKILL) << a.err;
  const std::map<std::string, json> segments = SegmentRecords();
  ASSERT_GE(segments.size(), 2u);
  const json info = json::parse(Read(Checkpoints() + "/partitioning_info.json"));
  std::set<int> journaled;
  for (const auto& [name, c] : segments) {
    const uint64_t start =
        info["partitions"][c["partition_id"].get<size_t>()]["start_row"].get<uint64_t>();
    for (const json& r : c["rows"]) journaled.insert(static_cast<int>(start + r.get<uint64_t>()));
  }
  uint64_t others = 0;
  for (int i = 0; i < rows; ++i) others += journaled.count(i) ? 0 : ChildrenOf(i);

  const CliResult b = WaitFor(WorkerOn("node-b"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.err.find("took over stale lock"), std::string::npos) << b.err;
  const json done = json::parse(Read("job/state/done/" + kShard + ".json"));
  EXPECT_EQ(done["regions"]["p"]["parents_from_journal"].get<size_t>(), journaled.size());
  EXPECT_EQ(done["regions"]["p"]["children_expanded"].get<uint64_t>(), others);
  size_t loads = 0;
  for (const json& e : Events("job", "node-b")) loads += e["event_type"] == "lineage_load";
  EXPECT_EQ(loads, segments.size());
  EXPECT_EQ(MergedSha(), reference);
  // Each partition's journal went once its final tap committed.
  EXPECT_TRUE(SegmentRecords().empty());
}

TEST_F(JournalTakeoverCli, TakeoverRejectsADamagedSegmentAndRecomputesItsParents) {
  const int rows = 60;
  WriteRegionJob(rows, "djshard_test_delay_mapper: {seed: 5, max_ms: 1}");
  const std::string reference = ReferenceSha();
  Prepare("job", 1);
  const CliResult a =
      WaitFor(WorkerOn("node-a", "job", {"DJSHARD_TEST_KILL_AT=lineage_segment_committed@3"}));
  ASSERT_EQ(a.exit_code, 128 + SIGKILL) << a.err;
  std::map<std::string, json> segments = SegmentRecords();
  ASSERT_EQ(segments.size(), 3u);
  // The last segment loses its tail.
  const std::string bad = segments.rbegin()->first;
  const std::string data =
      Checkpoints() + "/" + segments.rbegin()->second["data_path"].get<std::string>();
  const std::string bytes = Read(data);
  Write(data, bytes.substr(0, bytes.size() - 3));
  segments.erase(bad);
  size_t kept = 0;
  for (const auto& [name, c] : segments) kept += c["rows"].size();

  const CliResult b = WaitFor(WorkerOn("node-b"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const json done = json::parse(Read("job/state/done/" + kShard + ".json"));
  EXPECT_EQ(done["regions"]["p"]["parents_from_journal"].get<size_t>(), kept);
  EXPECT_EQ(MergedSha(), reference);
  bool logged = false;
  for (const json& e : Events("job", "node-b")) {
    if (e["event_type"] != "checkpoint_rejected") continue;
    logged = true;
    EXPECT_EQ(e["metadata"]["commit"], bad);
  }
  EXPECT_TRUE(logged);
  bool moved = false;
  for (const std::string& n : List(Checkpoints() + "/rejected")) moved |= n.rfind(bad, 0) == 0;
  EXPECT_TRUE(moved);
}

TEST_F(JournalTakeoverCli, FrozenWorkerPastItsLeaseCommitsNoJournalSegment) {
  WriteRegionJob(24, "djshard_test_sleep_mapper: {seconds: 0.02}");
  const std::string reference = ReferenceSha();
  Prepare("job", 1, "1.5", "0.3");
  const Spawned a = WorkerOn("node-a");
  // A segment committed (its event follows the commit record).
  ASSERT_TRUE(WaitUntil([&] { return LineageCommitEvents("node-a") >= 1; }));
  ASSERT_TRUE(WaitUntil([&] {
    if (::kill(a.pid, SIGSTOP) != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!HoldsFlock(a.pid)) return true;
    ::kill(a.pid, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return false;
  }));
  const std::string token_a = AttemptJson("job", kShard, 0)["token"];
  std::set<std::string> before;
  for (const auto& [name, c] : SegmentRecords()) {
    if (c["attempt_token"] == token_a) before.insert(name);
  }
  const size_t commits_before = LineageCommitEvents("node-a");
  ASSERT_GE(commits_before, 1u);
  const CliResult b = WaitFor(WorkerOn("node-b"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_EQ(::kill(a.pid, SIGCONT), 0);
  const CliResult ra = WaitFor(a);
  const std::string status_a = AttemptJson("job", kShard, 0)["status"];
  EXPECT_TRUE(status_a == "stale" || status_a == "lost") << status_a << ra.err;
  EXPECT_EQ(LineageCommitEvents("node-a"), commits_before);
  for (const auto& [name, c] : SegmentRecords()) {
    if (c["attempt_token"] == token_a) {
      EXPECT_TRUE(before.count(name)) << name << " was committed after SIGCONT";
    }
  }
  EXPECT_EQ(MergedSha(), reference);
}

}  // namespace
}  // namespace djshard::testing
