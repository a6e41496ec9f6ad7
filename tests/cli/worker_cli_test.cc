// Black-box tests of elastic workers and dlc: real processes racing on a real
// job directory, kill -9 and SIGTERM in the middle of shards, clock skew,
// distinct hostnames (unshare --uts) and mpirun.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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

class WorkerCli : public CliTest {
 protected:
  // Compact rows, so that a single-process run and the sharded job see the same bytes.
  void WriteCorpus(int rows) {
    std::string text;
    for (int i = 0; i < rows; ++i) {
      text += "{\"id\":" + std::to_string(i) + ",\"text\":\"  row " + std::to_string(i) +
              (i % 3 ? " has\\u3000some\\ttext" : "") + " \"}\n";
    }
    Write("data.jsonl", text);
  }
  // The recipe: optional slow step, whitespace normalization, a length filter.
  void WriteRecipe(double sleep_secs = 0, const std::string& extra = "") {
    std::string ops = "process:\n";
    if (sleep_secs > 0) {
      ops += "  - djshard_test_sleep_mapper:\n      seconds: " + std::to_string(sleep_secs) + "\n";
    }
    ops +=
        "  - whitespace_normalization_mapper:\n  - text_length_filter:\n      min_len: 6\n" + extra;
    Write("recipe.yaml", "dataset_path: data.jsonl\n" + ops);
  }
  void Prepare(int shards, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"prepare",
                                     "--config",
                                     "recipe.yaml",
                                     "--job-dir",
                                     "job",
                                     "--num-shards",
                                     std::to_string(shards),
                                     "--lease-secs",
                                     "2",
                                     "--heartbeat-secs",
                                     "1",
                                     "--poll-interval-secs",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = WaitFor(Spawn(args, kTestOps));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  Spawned Worker(const std::vector<std::string>& extra = {},
                 const std::vector<std::string>& env = kTestOps,
                 const std::vector<std::string>& prefix = {}) {
    std::vector<std::string> args = {"worker", "--job-dir", "job", "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Spawn(args, env, prefix);
  }
  size_t Count(const std::string& rel) const {
    if (!Exists(rel)) return 0;
    return List(rel).size();
  }
  // Waits until `rel` exists.
  bool WaitForFile(const std::string& rel) const {
    return WaitUntil([&] { return Exists(rel); });
  }
  std::string OnlyAttempt(const std::string& shard) const {
    if (!Exists("job/attempts/" + shard)) return "";
    const std::vector<std::string> attempts = List("job/attempts/" + shard);
    return attempts.empty() ? "" : "job/attempts/" + shard + "/" + attempts.front();
  }
  // Waits until the first attempt of `shard` runs its operators: claimed,
  // attempt.json written, the executor started.
  bool WaitForRunningAttempt(const std::string& shard) const {
    return WaitUntil([&] {
      const std::string attempt = OnlyAttempt(shard);
      return !attempt.empty() && Contains(attempt + "/process.log", " running ");
    });
  }
  // sha256 of a single-process `djshard run` of the same recipe and input.
  std::string ReferenceSha() {
    const CliResult r = WaitFor(Spawn(
        {"run", "--config", "recipe.yaml", "--export-path", "reference.jsonl", "--threads", "1"},
        kTestOps));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return io::Sha256OfFile(Path("reference.jsonl"));
  }
  // A worker killed (-9) while it runs the first of 2 shards; a second one
  // takes the shard over after the lease and the merged bytes are run's.
  void KillNineAndTakeOver(const std::vector<std::string>& prepare_args) {
    WriteCorpus(8);
    WriteRecipe(0.4);
    const std::string reference = ReferenceSha();
    Prepare(2, prepare_args);
    const Spawned a = Worker();
    ASSERT_TRUE(WaitForRunningAttempt("part-00000-of-00002"));
    kill(a.pid, SIGKILL);
    EXPECT_EQ(WaitFor(a).exit_code, 128 + SIGKILL);
    const CliResult b = WaitFor(Worker());
    EXPECT_EQ(b.exit_code, 0) << b.err;
    EXPECT_NE(b.err.find("took over stale lock of part-00000-of-00002"), std::string::npos)
        << b.err;
    EXPECT_EQ(MergedSha(), reference);
  }
  std::string MergedSha() {
    const CliResult r =
        Run({"merge", "--job-dir", "job", "--output", "merged.jsonl", "--overwrite"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return io::Sha256OfFile(Path("merged.jsonl"));
  }
};

TEST_F(WorkerCli, SixteenWorkersRaceForOneShardAndExactlyOneClaims) {
  WriteCorpus(20);
  WriteRecipe();
  Prepare(1);
  std::vector<Spawned> workers;
  for (int i = 0; i < 16; ++i) workers.push_back(Worker());
  for (const Spawned& w : workers) EXPECT_EQ(WaitFor(w).exit_code, 0);
  EXPECT_EQ(Count("job/attempts/part-00000-of-00001"), 1u);
  EXPECT_EQ(Count("job/state/stale_locks"), 0u);
  EXPECT_TRUE(Exists("job/state/done/part-00000-of-00001.json"));
  EXPECT_EQ(Run({"status", "--job-dir", "job"}).exit_code, 0);
}

// Many workers on many tiny shards: every claim, publish and leftover-lock
// cleanup races with another worker's scan, all the time.
TEST_F(WorkerCli, EightWorkersDrainManyTinyShardsRunningEachExactlyOnce) {
  WriteCorpus(600);
  WriteRecipe();
  const std::string reference = ReferenceSha();
  Prepare(300);
  std::vector<Spawned> workers;
  for (int i = 0; i < 8; ++i) workers.push_back(Worker());
  for (const Spawned& w : workers) {
    const CliResult r = WaitFor(w);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_EQ(Count("job/state/done"), 300u);
  EXPECT_EQ(Count("job/state/locks"), 0u);
  size_t attempts = 0;
  for (const std::string& shard : List("job/attempts")) attempts += Count("job/attempts/" + shard);
  EXPECT_EQ(attempts, 300u);
  EXPECT_EQ(MergedSha(), reference);
}

TEST_F(WorkerCli, AStaleLockIsTakenOverAndItsOldOwnerCanNoLongerPublish) {
  WriteCorpus(4);
  WriteRecipe(1.0);  // 4 s of work
  Prepare(1);
  // A never refreshes its lease within the 2 s lease.
  const Spawned a = Worker({"--heartbeat-secs", "30"});
  ASSERT_TRUE(WaitForRunningAttempt("part-00000-of-00001"));
  const std::string a_attempt = OnlyAttempt("part-00000-of-00001");
  ASSERT_TRUE(WaitUntil([&] { return AgeSecs("job/state/locks/part-00000-of-00001.lock") > 2.2; }));
  // A is held while B starts and takes the shard over, so that A cannot
  // finish first however slowly B starts.
  ASSERT_EQ(kill(a.pid, SIGSTOP), 0);
  const Spawned b = Worker();
  const bool taken_over = WaitUntil([&] { return Count("job/state/stale_locks") == 1; });
  ASSERT_EQ(kill(a.pid, SIGCONT), 0);
  ASSERT_TRUE(taken_over);
  // A ends its attempt without publishing while B holds the lock.
  ASSERT_TRUE(WaitUntil([&] { return Contains(a_attempt + "/process.log", "lost the claim"); }))
      << Read(a_attempt + "/process.log");
  EXPECT_FALSE(Exists("job/state/done/part-00000-of-00001.json"));
  const json a_record = json::parse(Read(a_attempt + "/attempt.json"));
  EXPECT_EQ(a_record["status"], "stale");
  const std::string lock = Read("job/state/locks/part-00000-of-00001.lock");
  EXPECT_EQ(lock.find(a_record["token"].get<std::string>()), std::string::npos) << lock;

  EXPECT_EQ(WaitFor(b).exit_code, 0);
  EXPECT_EQ(WaitFor(a).exit_code, 0);
  EXPECT_EQ(Count("job/state/stale_locks"), 1u);
  EXPECT_EQ(Count("job/attempts/part-00000-of-00001"), 2u);
  const json done = json::parse(Read("job/state/done/part-00000-of-00001.json"));
  EXPECT_NE(done["token"], a_record["token"]);
  EXPECT_EQ(done["attempt_number"], 2);
}

TEST_F(WorkerCli, ALiveWorkerKeepsAShardLongerThanTheLease) {
  WriteCorpus(5);
  WriteRecipe(1.0);  // 5 s of work under a 2 s lease
  Prepare(1);
  const Spawned a = Worker();
  ASSERT_TRUE(WaitForFile("job/state/locks/part-00000-of-00001.lock"));
  const Spawned b = Worker();
  EXPECT_EQ(WaitFor(a).exit_code, 0);
  const CliResult rb = WaitFor(b);
  EXPECT_EQ(rb.exit_code, 0);
  EXPECT_NE(rb.err.find("waiting for 1 shard(s) held by other workers"), std::string::npos);
  EXPECT_EQ(Count("job/state/stale_locks"), 0u);
  EXPECT_EQ(Count("job/attempts/part-00000-of-00001"), 1u);
}

TEST_F(WorkerCli, AWaitingWorkerEndsSoonAfterTheLastShardNotAfterItsPollInterval) {
  WriteCorpus(3);
  WriteRecipe(0.5);  // 1.5 s of work
  Prepare(1);
  const Spawned a = Worker();
  ASSERT_TRUE(WaitForRunningAttempt("part-00000-of-00001"));
  // A is held, its lease kept alive as its heartbeat would, until B has found
  // the shard held and gone to sleep: B waits however slowly it starts.
  const std::string lock = "job/state/locks/part-00000-of-00001.lock";
  ASSERT_EQ(kill(a.pid, SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  const Spawned b = Worker({"--poll-interval-secs", "60"});
  const bool b_waits = WaitUntil([&] {
    Touch(lock);
    return ErrSoFar(b).find("next look in 60 s") != std::string::npos;
  });
  ASSERT_EQ(kill(a.pid, SIGCONT), 0);
  ASSERT_TRUE(b_waits) << ErrSoFar(b);
  EXPECT_EQ(WaitFor(a).exit_code, 0);
  const CliResult rb = WaitFor(b);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_NE(rb.err.find("next look in 60 s, or when one of them is released"), std::string::npos)
      << rb.err;
  EXPECT_NE(rb.err.find("every shard is done"), std::string::npos) << rb.err;
  EXPECT_LT(waited, 20.0);
}

TEST_F(WorkerCli, AWorkerWithASkewedClockNeitherStealsNorLooksStale) {
  WriteCorpus(6);
  WriteRecipe(1.0);  // 3 s per shard
  Prepare(2);
  const Spawned a = Worker({"--max-shards", "1"});
  ASSERT_TRUE(WaitForFile("job/state/locks/part-00000-of-00002.lock"));
  const Spawned ahead = Worker({"--max-shards", "1"}, kTestOps, {"faketime", "-m", "-f", "+3h"});
  ASSERT_TRUE(WaitForFile("job/state/locks/part-00001-of-00002.lock"));
  // A third worker, three hours behind, finds two live locks and waits.
  const Spawned behind = Worker({}, kTestOps, {"faketime", "-m", "-f", "-3h"});
  EXPECT_EQ(WaitFor(a).exit_code, 0);
  EXPECT_EQ(WaitFor(ahead).exit_code, 0);
  EXPECT_EQ(WaitFor(behind).exit_code, 0);
  EXPECT_EQ(Count("job/state/stale_locks"), 0u);
  EXPECT_EQ(Count("job/attempts/part-00000-of-00002"), 1u);
  EXPECT_EQ(Count("job/attempts/part-00001-of-00002"), 1u);
  EXPECT_EQ(Run({"status", "--job-dir", "job"}).exit_code, 0);
}

TEST_F(WorkerCli, KillNineAtEveryStepLosesAndDuplicatesNothing) {
  WriteCorpus(200);
  WriteRecipe();
  const std::string reference = ReferenceSha();
  for (const char* point : {"before_claim", "after_claim", "after_output", "after_link"}) {
    SCOPED_TRACE(point);
    fs::remove_all(Path("job"));
    Prepare(4);
    const Spawned victim = Worker(
        {}, {std::string("DJSHARD_TEST_KILL_AT=") + point, "DJSHARD_ENABLE_TEST_OPERATORS=1"});
    const CliResult killed = WaitFor(victim);
    EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
    const CliResult rescue = WaitFor(Worker());
    EXPECT_EQ(rescue.exit_code, 0) << rescue.err;
    EXPECT_EQ(Run({"status", "--job-dir", "job"}).exit_code, 0);
    EXPECT_EQ(MergedSha(), reference);
    // Nothing is left looking alive: no lock, no attempt still "running".
    EXPECT_EQ(Count("job/state/locks"), 0u);
    for (const std::string& shard : List("job/attempts")) {
      for (const std::string& attempt : List("job/attempts/" + shard)) {
        const std::string path = "job/attempts/" + shard + "/" + attempt + "/attempt.json";
        if (!Exists(path)) continue;  // killed before its attempt started
        EXPECT_NE(json::parse(Read(path))["status"], "running") << path;
      }
    }
    if (std::string(point) != "after_link") continue;
    // The owner killed between publishing and unlocking published its shard:
    // its attempt is "done". Which shard that is depends on which of the
    // worker's overlapping publishes reached its link first.
    size_t published_by_victim = 0;
    size_t marked_done = 0;
    for (const std::string& shard : List("job/attempts")) {
      const json done = json::parse(Read("job/state/done/" + shard + ".json"));
      if (done["pid"] != victim.pid) continue;
      ++published_by_victim;
      for (const std::string& attempt : List("job/attempts/" + shard)) {
        const std::string path = "job/attempts/" + shard + "/" + attempt + "/attempt.json";
        if (!Exists(path)) continue;
        const json record = json::parse(Read(path));
        if (record["token"] == done["token"] && record["status"] == "done") ++marked_done;
      }
    }
    EXPECT_GE(published_by_victim, 1u);
    EXPECT_EQ(marked_done, published_by_victim);
  }
}

TEST_F(WorkerCli, KillNineInTheMiddleOfAShardIsTakenOverAfterTheLease) {
  KillNineAndTakeOver({});
  const std::string dead = OnlyAttempt("part-00000-of-00002");
  const json old = json::parse(Read(dead + "/attempt.json"));
  EXPECT_EQ(old["status"], "stale");
  // gc removes the dead attempt's partial output, and nothing merge reads.
  std::set<std::string> partial;  // its output and errors, as the kill left them
  for (const std::string& name : List(dead)) {
    if (name.find(".tmp.") != std::string::npos) partial.insert(Path(dead + "/" + name));
  }
  ASSERT_EQ(partial.size(), 2u);
  const std::string merged = Read("merged.jsonl");
  const CliResult gc = Run({"gc", Path("job"), "--json"});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_EQ(json::parse(gc.out)["removed"].get<std::set<std::string>>(), partial) << gc.out;
  EXPECT_TRUE(Exists(dead + "/attempt.json"));
  EXPECT_TRUE(Exists(dead + "/process.log"));
  EXPECT_EQ(Run({"verify", "--job-dir", "job"}).exit_code, 0);
  MergedSha();
  EXPECT_TRUE(Read("merged.jsonl") == merged);
  EXPECT_TRUE(json::parse(Run({"gc", Path("job"), "--json"}).out)["removed"].empty());
}

TEST_F(WorkerCli, KillNineInAReferenceShardIsTakenOverToTheSameBytes) {
  KillNineAndTakeOver({"--shards", "reference"});
  EXPECT_TRUE(List("job/shards").empty());
}

TEST_F(WorkerCli, SigtermHandsTheShardBackAtOnceWithoutCountingAFailure) {
  WriteCorpus(4);
  WriteRecipe(1.0);
  Prepare(1, {"--max-retries", "0"});
  const Spawned a = Worker();
  ASSERT_TRUE(WaitForRunningAttempt("part-00000-of-00001"));
  const auto sent = std::chrono::steady_clock::now();
  kill(a.pid, SIGTERM);
  const CliResult ra = WaitFor(a);
  EXPECT_EQ(ra.exit_code, 143);
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::milliseconds(1000));
  EXPECT_FALSE(Exists("job/state/locks/part-00000-of-00001.lock"));
  EXPECT_EQ(json::parse(Read(OnlyAttempt("part-00000-of-00001") + "/attempt.json"))["status"],
            "interrupted");
  const CliResult rb = WaitFor(Worker());
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(Run({"status", "--job-dir", "job"}).exit_code, 0);
}

TEST_F(WorkerCli, DeterministicFailuresExhaustRetriesThenRetrySucceeds) {
  WriteCorpus(10);
  // Every record fails while the file "cause" exists.
  Write("cause", "");
  WriteRecipe(0, "  - djshard_test_sleep_mapper:\n      seconds: 0\n      fail_while_exists: " +
                     Path("cause") + "\n      skip_op_error: false\n");
  Prepare(2, {"--max-retries", "2", "--retry-backoff-secs", "0.3"});
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = WaitFor(Worker());
  EXPECT_EQ(r.exit_code, 2);
  // Each shard's retries backed off 0.3 s, then 0.6 s, while the other shard ran.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  EXPECT_NE(r.err.find("retry backoff"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("job ended with 2 failed shard(s)"), std::string::npos) << r.err;
  EXPECT_EQ(Count("job/attempts/part-00000-of-00002"), 3u);
  const json failed = json::parse(Read("job/state/failed/part-00000-of-00002.json"));
  EXPECT_EQ(failed["failures"], 3);
  EXPECT_NE(failed["last_error"].get<std::string>().find("failing while"), std::string::npos)
      << failed.dump();
  EXPECT_EQ(Run({"status", "--job-dir", "job"}).exit_code, 2);

  // The cause goes away; retry and finish.
  fs::remove(Path("cause"));
  EXPECT_EQ(Run({"retry", "--job-dir", "job", "--all-failed"}).exit_code, 0);
  EXPECT_EQ(WaitFor(Worker()).exit_code, 0);
  EXPECT_EQ(Run({"status", "--job-dir", "job"}).exit_code, 0);
}

TEST_F(WorkerCli, RefusesAnEditedRecipeUnlessAllowed) {
  WriteCorpus(10);
  WriteRecipe();
  Prepare(2);
  Write("job/recipe.yaml", Read("job/recipe.yaml") + "# edited after prepare\n");
  const CliResult refused = WaitFor(Worker());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("recipe snapshot does not match the manifest's sha256"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(Count("job/attempts"), 0u);
  EXPECT_EQ(WaitFor(Worker({"--allow-version-mismatch"})).exit_code, 0);
  EXPECT_EQ(Run({"status", "--job-dir", "job"}).exit_code, 0);
}

// A shard file changed after prepare (one byte, same size) is found while the
// worker reads it: the attempt fails naming the file and publishes nothing.
TEST_F(WorkerCli, AFlippedByteInAShardFailsTheAttemptAndPublishesNothing) {
  WriteCorpus(10);
  WriteRecipe();
  Prepare(2, {"--max-retries", "0"});
  const std::string shard = "job/shards/part-00001-of-00002.jsonl";
  std::string bytes = Read(shard);
  bytes[bytes.find("row")] = 'R';
  Write(shard, bytes);
  EXPECT_EQ(WaitFor(Worker()).exit_code, 2);  // the job ended with a failed shard
  EXPECT_EQ(Count("job/state/done"), 1u);
  const std::string failed = Read("job/state/failed/part-00001-of-00002.json");
  EXPECT_NE(failed.find("shard file differs from the manifest (rows or xxh3_128)"),
            std::string::npos)
      << failed;
  EXPECT_NE(failed.find(shard), std::string::npos) << failed;
}

// A job prepared by an older build (manifest schema 2 and done records with
// sha256) still runs, merges and verifies: records are checked with the hash
// they carry.
TEST_F(WorkerCli, AJobOfAnOlderSchemaStillRunsMergesAndVerifies) {
  WriteCorpus(30);
  WriteRecipe();
  Prepare(3);
  json m = json::parse(Read("job/manifest.json"));
  m["schema_version"] = 2;
  for (json& shard : m["shards"]) {
    shard.erase("xxh3_128");
    shard["sha256"] = io::Sha256OfFile(Path("job/" + shard["path"].get<std::string>()));
  }
  Write("job/manifest.json", m.dump(2) + "\n");
  const std::string reference = ReferenceSha();
  // Two shards done by this build, then their records rewritten as an older
  // build wrote them; the third shard is done by this build.
  ASSERT_EQ(WaitFor(Worker({"--max-shards", "2"})).exit_code, 0);
  for (const std::string& name : List("job/state/done")) {
    json done = json::parse(Read("job/state/done/" + name));
    done.erase("xxh3_128");
    done["schema_version"] = 1;
    done["sha256"] = io::Sha256OfFile(Path("job/" + done["output_path"].get<std::string>()));
    Write("job/state/done/" + name, done.dump(2) + "\n");
  }
  ASSERT_EQ(WaitFor(Worker()).exit_code, 0);
  EXPECT_EQ(MergedSha(), reference);
  const CliResult v = Run({"verify", "--job-dir", "job", "--output", "merged.jsonl", "--deep"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("PASS: 3 shards"), std::string::npos) << v.out;
  EXPECT_NE(v.err.find("deep check: every line of the 3 shard outputs parsed as JSON in "),
            std::string::npos)
      << v.err;
  // A record of the old schema still catches a changed output.
  json done = json::parse(Read("job/state/done/part-00000-of-00003.json"));
  ASSERT_TRUE(done.contains("sha256"));
  const std::string output = "job/" + done["output_path"].get<std::string>();
  Write(output, Read(output) + "{\"text\":\"extra\"}\n");
  const CliResult bad = Run({"verify", "--job-dir", "job", "--output", "merged.jsonl"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("does not match its done record"), std::string::npos) << bad.err;
}

TEST_F(WorkerCli, StatusWatchFollowsAJobUntilItIsTerminal) {
  WriteCorpus(6);
  WriteRecipe(0.5);
  Prepare(2);
  const Spawned worker = Worker();
  const CliResult watch = Run({"status", "--job-dir", "job", "--watch", "--interval", "0.5"});
  EXPECT_EQ(watch.exit_code, 0) << watch.err;
  EXPECT_NE(watch.out.find("Job job: total=2 pending=0 running=0 stale=0 done=2 failed=0"),
            std::string::npos)
      << watch.out;
  EXPECT_NE(watch.out.find("heartbeat"), std::string::npos) << watch.out;
  EXPECT_NE(watch.out.find("rows done: 6 of 6"), std::string::npos) << watch.out;
  EXPECT_EQ(WaitFor(worker).exit_code, 0);
}

class DlcCli : public WorkerCli {
 protected:
  Spawned Instance(const std::string& host, const std::vector<std::string>& extra,
                   const std::string& run_id = "run-1",
                   const std::vector<std::string>& extra_env = {}) {
    std::vector<std::string> args = {"dlc",
                                     "--job-dir",
                                     "job",
                                     "--config",
                                     "recipe.yaml",
                                     "--dataset-path",
                                     "data.jsonl",
                                     "--run-id",
                                     run_id,
                                     "--poll-interval-secs",
                                     "1",
                                     "--threads",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> env = kTestOps;
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    return Spawn(args, env, OnHost(host));
  }
};

TEST_F(DlcCli, StrictModeNeedsAndGetsEveryNode) {
  WriteCorpus(60);
  WriteRecipe(0.05);
  std::vector<Spawned> nodes;
  for (const char* host : {"node-a", "node-b", "node-c"}) {
    nodes.push_back(Instance(host, {"--nodes", "3", "--num-shards", "6", "--require-all-nodes"}));
  }
  int elected = 0;
  for (const Spawned& n : nodes) {
    const CliResult r = WaitFor(n);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("PASS: 6 shards were completed by 3 node(s)"), std::string::npos) << r.out;
    elected += r.out.find("elected as DLC finalize coordinator") != std::string::npos;
  }
  EXPECT_EQ(elected, 1);
  std::set<std::string> owners;
  for (const std::string& f : List("job/state/done")) {
    owners.insert(json::parse(Read("job/state/done/" + f))["hostname"].get<std::string>());
  }
  EXPECT_EQ(owners, (std::set<std::string>{"node-a", "node-b", "node-c"}));
}

TEST_F(DlcCli, ElasticModeFinishesWithFewerLiveNodes) {
  WriteCorpus(40);
  WriteRecipe();
  const Spawned a = Instance("node-a", {"--nodes", "4", "--num-shards", "8"});
  const Spawned b = Instance("node-b", {"--nodes", "4", "--num-shards", "8"});
  for (const Spawned& n : {a, b}) {
    const CliResult r = WaitFor(n);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("PASS: 8 shards were completed by"), std::string::npos) << r.out;
  }
  EXPECT_EQ(Count("job/state/done"), 8u);
  EXPECT_TRUE(Exists("job/merged.jsonl"));
}

TEST_F(DlcCli, AFailedPrepareStopsEveryInstanceAndANewRunIdRecovers) {
  WriteRecipe();  // data.jsonl does not exist yet: prepare fails
  std::vector<Spawned> nodes;
  for (const char* host : {"node-a", "node-b", "node-c"}) nodes.push_back(Instance(host, {}));
  for (const Spawned& n : nodes) EXPECT_EQ(WaitFor(n).exit_code, 2);
  EXPECT_FALSE(Exists("job"));
  // The cause is fixed; the same run id keeps its stored result, a new one runs.
  WriteCorpus(30);
  EXPECT_EQ(WaitFor(Instance("node-a", {})).exit_code, 2);
  const Spawned a = Instance("node-a", {}, "run-2");
  const Spawned b = Instance("node-b", {}, "run-2");
  EXPECT_EQ(WaitFor(a).exit_code, 0);
  EXPECT_EQ(WaitFor(b).exit_code, 0);
  // A repeated run id after success returns the stored result at once.
  const auto start = std::chrono::steady_clock::now();
  const CliResult again = WaitFor(Instance("node-c", {}, "run-2"));
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.out.find("PASS: 4 shards"), std::string::npos) << again.out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // Not once the job directory is gone: its PASS no longer holds.
  std::filesystem::remove_all(Path("job"));
  const CliResult gone = WaitFor(Instance("node-c", {}, "run-2"));
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_EQ(gone.out.find("PASS"), std::string::npos) << gone.out;
  EXPECT_NE(gone.err.find("ERROR: " + Path("job") +
                          ": run run-2 passed before, but the job directory holds no job now "
                          "(pass a new --run-id to prepare and run the job again)"),
            std::string::npos)
      << gone.err;
  EXPECT_FALSE(Exists("job"));
  const CliResult fresh = WaitFor(Instance("node-c", {}, "run-3"));
  EXPECT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_TRUE(Exists("job/merged.jsonl"));
}

TEST_F(DlcCli, AWorkerFailureMakesEveryInstanceExitWithItsCode) {
  WriteCorpus(30);
  WriteRecipe(0, "  - language_id_score_filter:\n      model_path: " + Path("missing.bin") + "\n");
  std::vector<Spawned> nodes;
  for (const char* host : {"node-a", "node-b", "node-c"}) nodes.push_back(Instance(host, {}));
  for (const Spawned& n : nodes) EXPECT_EQ(WaitFor(n).exit_code, 2);
  EXPECT_FALSE(Exists("job/merged.jsonl"));
}

TEST_F(DlcCli, RunsUnderMpirun) {
  WriteCorpus(50);
  WriteRecipe();
  const CliResult r = WaitFor(Spawn(
      {"dlc", "--job-dir", "job", "--config", "recipe.yaml", "--dataset-path", "data.jsonl",
       "--num-shards", "6", "--poll-interval-secs", "1", "--threads", "1"},
      {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_plm=isolated",
       "OMPI_MCA_btl_vader_single_copy_mechanism=none", "OMPI_MCA_rmaps_base_oversubscribe=1"},
      {"mpirun", "-np", "3"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("PASS: 6 shards were completed by 1 node(s)"), std::string::npos) << r.out;
  EXPECT_EQ(Count("job/state/done"), 6u);
}

// A dlc coordinator lost at the wrong moment (SPEC "dlc" 7): node-a is frozen
// (SIGSTOP) at a point of its prepare or finalize, then killed with SIGKILL or
// let go; node-b and node-c take the phase over on the same run id.
class DlcCoordinatorLossCli : public DlcCli {
 protected:
  // Three rows per shard are too few to matter: enough rows that every
  // shard and the merge take a while.
  void SetUpJob() {
    WriteCorpus(3000);
    WriteRecipe();
    reference_ = ReferenceSha();
  }
  Spawned Node(const std::string& host, const std::vector<std::string>& env = {}) {
    return Instance(host,
                    {"--num-shards", "6", "--lease-secs", "3", "--heartbeat-secs", "1",
                     "--wait-timeout-secs", "20"},
                    "run-1", env);
  }
  // Starts node-a stopped at `point` (SIGSTOP, as a hung node) and waits until it is there.
  Spawned FrozenCoordinator(const std::string& point) {
    const Spawned a = Node("node-a", {"DJSHARD_TEST_STOP_AT=" + point});
    EXPECT_TRUE(WaitUntil([&] { return IsStopped(a.pid); })) << ErrSoFar(a);
    return a;
  }
  // The job finished as a single run would have, with nothing half-done left.
  void ExpectFinishedJob() {
    EXPECT_EQ(io::Sha256OfFile(Path("job/merged.jsonl")), reference_);
    EXPECT_EQ(Run({"status", "--job-dir", "job"}).exit_code, 0);
    const CliResult verify = Run({"verify", "--job-dir", "job"});
    EXPECT_EQ(verify.exit_code, 0) << verify.err;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      for (const char* temporary : {".tmp.", ".staged.", ".preparing."}) {
        EXPECT_EQ(name.find(temporary), std::string::npos) << e.path();
      }
    }
  }
  // Lines of `out` that say an instance became the phase's coordinator.
  static int Coordinators(const std::string& out, const std::string& phase) {
    return (out.find("elected as DLC " + phase + " coordinator") != std::string::npos) +
           (out.find("took over as DLC " + phase + " coordinator") != std::string::npos);
  }
  // Kills node-a, frozen at a point of `phase`, once node-b and node-c run;
  // they finish the job.
  // Whether a staging directory or a temporary output is visible.
  bool HalfDone() const {
    for (const std::string& where : {std::string(), std::string("job")}) {
      if (!Exists(where.empty() ? "." : where)) continue;
      for (const std::string& name : List(where)) {
        if (name.find(".preparing.") != std::string::npos ||
            name.find(".tmp.") != std::string::npos) {
          return true;
        }
      }
    }
    return false;
  }
  // `half_done`: whether node-a leaves a staging directory or a temporary
  // output at `point`, which the taker must remove, or (`goes_on`: the file
  // that copy tasks write) keep and go on with.
  void KillFrozenCoordinatorAndFinish(const std::string& phase, const std::string& point,
                                      bool half_done, bool goes_on = false) {
    const Spawned a = FrozenCoordinator(point);
    EXPECT_EQ(HalfDone(), half_done);
    const Spawned b = Node("node-b"), c = Node("node-c");
    ::kill(a.pid, SIGKILL);
    EXPECT_EQ(WaitFor(a).exit_code, 128 + SIGKILL);
    int coordinators = 0, removed = 0;
    for (const Spawned& n : {b, c}) {
      const CliResult r = WaitFor(n);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.out.find("PASS: 6 shards were completed by"), std::string::npos) << r.out;
      coordinators += Coordinators(r.out, phase);
      removed += r.out.find(", left by a coordinator that was taken over") != std::string::npos;
    }
    EXPECT_EQ(coordinators, 1);
    EXPECT_EQ(removed, half_done && !goes_on ? 1 : 0);
    ExpectFinishedJob();
  }

  std::string reference_;
};

class DlcPrepareTakeoverCli : public DlcCoordinatorLossCli,
                              public ::testing::WithParamInterface<std::string> {};

TEST_P(DlcPrepareTakeoverCli, KillNineOfThePrepareCoordinatorIsTakenOver) {
  SetUpJob();
  KillFrozenCoordinatorAndFinish("prepare", GetParam(), /*half_done=*/true);
}
INSTANTIATE_TEST_SUITE_P(Points, DlcPrepareTakeoverCli,
                         ::testing::Values("prepare_normalized", "prepare_shard_cut@3",
                                           "prepare_staged"));

class DlcFinalizeTakeoverCli : public DlcCoordinatorLossCli,
                               public ::testing::WithParamInterface<std::string> {};

TEST_P(DlcFinalizeTakeoverCli, KillNineOfTheFinalizeCoordinatorIsTakenOver) {
  SetUpJob();
  // Every instance copies into the merged file under its run's temporary
  // name: the taker goes on with it, keeping the copy tasks already done.
  KillFrozenCoordinatorAndFinish("finalize", GetParam(),
                                 /*half_done=*/GetParam().starts_with("merge_shard_copied"),
                                 /*goes_on=*/true);
}
INSTANTIATE_TEST_SUITE_P(Points, DlcFinalizeTakeoverCli,
                         ::testing::Values("merge_shard_copied@2", "merge_committed",
                                           "finalize_merged"));

TEST_F(DlcCoordinatorLossCli, AFrozenFinalizerPastItsLeasePublishesNothingWhenContinued) {
  SetUpJob();
  const Spawned a = FrozenCoordinator("merge_shard_copied@3");
  const CliResult b = WaitFor(Node("node-b"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("took over as DLC finalize coordinator (node-b) from node-a pid " +
                       std::to_string(a.pid)),
            std::string::npos)
      << b.out;
  const std::string coord = ".job.dlc-coordination/" + List(".job.dlc-coordination").front();
  const std::string result = Read(coord + "/finalize-result.json");
  const std::string merge_record = Read("job/merge.json");
  struct stat merged {};
  ASSERT_EQ(::stat(Path("job/merged.jsonl").c_str(), &merged), 0);

  ::kill(a.pid, SIGCONT);
  const CliResult late = WaitFor(a);
  EXPECT_EQ(late.exit_code, 0) << late.err;
  EXPECT_NE(late.err.find("lost the DLC finalize coordinator lease on node-a"), std::string::npos)
      << late.err;
  EXPECT_NE(late.out.find("PASS: 6 shards"), std::string::npos) << late.out;
  struct stat after {};
  ASSERT_EQ(::stat(Path("job/merged.jsonl").c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, merged.st_ino);
  EXPECT_EQ(after.st_mtim.tv_nsec, merged.st_mtim.tv_nsec);
  EXPECT_EQ(Read(coord + "/finalize-result.json"), result);
  EXPECT_EQ(Read("job/merge.json"), merge_record);
  ExpectFinishedJob();
}

TEST_F(DlcCoordinatorLossCli, AWaiterThatCannotTakeAStaleCoordinatorOverGivesUpAfterTheTimeout) {
  SetUpJob();
  const Spawned a = FrozenCoordinator("prepare_normalized");
  // Another process holds the flock of the dead coordinator's lock, as a
  // taker frozen inside its takeover would: no one can take it over.
  const std::string coord = ".job.dlc-coordination/" + List(".job.dlc-coordination").front();
  const int lock = ::open(Path(coord + "/prepare.lock").c_str(), O_RDWR);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);
  ::kill(a.pid, SIGKILL);
  WaitFor(a);
  const auto start = std::chrono::steady_clock::now();
  const CliResult b =
      WaitFor(Instance("node-b", {"--num-shards", "6", "--lease-secs", "3", "--heartbeat-secs", "1",
                                  "--wait-timeout-secs", "4"}));
  ::close(lock);
  EXPECT_EQ(b.exit_code, 2) << b.err;
  EXPECT_NE(b.err.find("no live DLC prepare coordinator and no takeover for 4.0 s: the stale "
                       "lock of node-a pid " +
                       std::to_string(a.pid) + " could not be taken over"),
            std::string::npos)
      << b.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(40));
  // Once the lock can be taken, the same run id finishes the job.
  const CliResult again = WaitFor(Node("node-c"));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  ExpectFinishedJob();
}

// The lines of `text`, each parsed as one JSON object (a failure names the line).
std::vector<json> JsonLines(const std::string& text) {
  std::vector<json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      lines.push_back(json::parse(line));
    } catch (const json::exception& e) {
      ADD_FAILURE() << "not a JSON line: " << line;
    }
  }
  return lines;
}

std::vector<std::string> Events(const std::vector<json>& lines) {
  std::vector<std::string> events;
  for (const json& l : lines) events.push_back(l.value("event", ""));
  return events;
}

TEST_F(WorkerCli, LogLevelsFilterTheWorkersLines) {
  WriteCorpus(12);
  WriteRecipe();
  Prepare(3);
  // --quiet: a job that goes well says nothing; so do warn and error.
  const CliResult quiet = WaitFor(Worker({"--quiet", "--max-shards", "1"}));
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  std::vector<std::string> env = kTestOps;
  env.push_back("DJSHARD_LOG_LEVEL=error");
  const CliResult from_env = WaitFor(Worker({"--max-shards", "1"}, env));
  EXPECT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_EQ(from_env.err, "");
  // info, the default, prints the lines a user has always seen; the option
  // wins over the environment.
  const CliResult info = WaitFor(Worker({"--log-level", "info"}, env));
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.err.find(": took part-00002-of-00003 (attempt 1)\n"), std::string::npos)
      << info.err;
  EXPECT_NE(info.err.find(": every shard is done\n"), std::string::npos) << info.err;
  EXPECT_EQ(info.err.find("working on job"), std::string::npos) << info.err;
  EXPECT_EQ(info.err.find("looked at the job"), std::string::npos) << info.err;
  // debug adds the worker's policy; trace each look at the job.
  const CliResult debug = WaitFor(Worker({"--log-level", "debug"}));
  EXPECT_NE(debug.err.find(": working on job job (3 shards): lease 2.0 s, heartbeat 1.0 s"),
            std::string::npos)
      << debug.err;
  EXPECT_EQ(debug.err.find("looked at the job"), std::string::npos) << debug.err;
  const CliResult trace = WaitFor(Worker({"--log-level", "trace"}));
  EXPECT_NE(trace.err.find(": looked at the job: 3 done, 0 failed, 0 locked\n"), std::string::npos)
      << trace.err;
  // A bad level is refused before anything runs.
  const CliResult bad = WaitFor(Worker({"--log-level", "loud"}));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("ERROR: --log-level: 'loud' is not a log level (give trace, debug, info, "
                         "warn or error)"),
            std::string::npos)
      << bad.err;
  env = kTestOps;
  env.push_back("DJSHARD_LOG_FORMAT=xml");
  const CliResult bad_env = WaitFor(Worker({}, env));
  EXPECT_EQ(bad_env.exit_code, 2);
  EXPECT_NE(bad_env.err.find("ERROR: DJSHARD_LOG_FORMAT: 'xml' is not a log format"),
            std::string::npos)
      << bad_env.err;
}

TEST_F(WorkerCli, JsonLinesCarryTheFieldsALogCollectorNeeds) {
  WriteCorpus(12);
  WriteRecipe();
  Prepare(3);
  const std::string job_id = json::parse(Read("job/manifest.json"))["job_id"];
  const Spawned worker = Worker({"--log-format", "json"});
  const CliResult r = WaitFor(worker);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> lines = JsonLines(r.err);
  ASSERT_FALSE(lines.empty());
  std::set<std::string> claimed, done;
  for (const json& l : lines) {
    for (const char* key : {"ts", "level", "host", "pid", "job_id", "event", "msg"}) {
      EXPECT_TRUE(l.contains(key)) << key << " missing from " << l.dump();
    }
    const std::string ts = l.value("ts", "");
    EXPECT_EQ(ts.size(), 24u) << ts;  // 2026-12-02T03:04:05.678Z: UTC, milliseconds
    EXPECT_EQ(ts.back(), 'Z') << ts;
    EXPECT_EQ(l["level"], "info");
    EXPECT_EQ(l["pid"], worker.pid) << l.dump();
    EXPECT_EQ(l["job_id"], job_id);
    if (l["event"] == "claim") claimed.insert(l.value("shard_id", ""));
    if (l["event"] == "done") done.insert(l.value("shard_id", ""));
  }
  const std::set<std::string> shards = {"part-00000-of-00003", "part-00001-of-00003",
                                        "part-00002-of-00003"};
  EXPECT_EQ(claimed, shards);
  EXPECT_EQ(done, shards);
  EXPECT_EQ(lines.back()["event"], "job_done");
  // Each attempt's process.log holds the same records, as JSON lines too.
  const std::vector<json> log =
      JsonLines(Read(OnlyAttempt("part-00001-of-00003") + "/process.log"));
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(Events(log).front(), "claim");
  EXPECT_EQ(Events(log).back(), "done");
  for (const json& l : log) EXPECT_EQ(l["shard_id"], "part-00001-of-00003") << l.dump();
  // An error is a JSON line too, with level error.
  const CliResult missing =
      WaitFor(Spawn({"worker", "--job-dir", "nowhere", "--log-format", "json"}));
  EXPECT_EQ(missing.exit_code, 2);
  const std::vector<json> errors = JsonLines(missing.err);
  ASSERT_EQ(errors.size(), 1u) << missing.err;
  EXPECT_EQ(errors[0]["level"], "error");
  EXPECT_NE(errors[0].value("msg", "").find("nowhere"), std::string::npos) << missing.err;
}

TEST_F(WorkerCli, AKilledWorkersProcessLogEndsWithItsLastStep) {
  WriteCorpus(8);
  WriteRecipe(30);
  Prepare(2);
  const Spawned a = Worker({"--quiet", "--log-format", "json"});
  ASSERT_TRUE(WaitUntil([&] {
    const std::string attempt = OnlyAttempt("part-00000-of-00002");
    return !attempt.empty() && Contains(attempt + "/process.log", "\"event\":\"run\"");
  }));
  kill(a.pid, SIGKILL);
  EXPECT_EQ(WaitFor(a).exit_code, 128 + SIGKILL);
  // --quiet silences the console, not the attempt's log.
  const std::vector<json> log =
      JsonLines(Read(OnlyAttempt("part-00000-of-00002") + "/process.log"));
  ASSERT_EQ(Events(log), (std::vector<std::string>{"claim", "run"}));
  EXPECT_NE(log.back().value("msg", "").find("running 3 operator(s)"), std::string::npos)
      << log.back().dump();
}

}  // namespace
}  // namespace djshard::testing
