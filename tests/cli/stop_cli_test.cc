// Black-box tests of `djshard stop` across nodes (SPEC-checkpoints §9, test
// 9), the elastic side of events, job_summary.json, monitor and jobs (§8),
// and SIGTERM on a run job. Nodes are UTS namespaces (unshare --uts) with
// hostnames of their own, as in the worker tests.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "djshard/io/sha256.h"
#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kTestOps = {"DJSHARD_ENABLE_TEST_OPERATORS=1"};

class StopCli : public CliTest {
 protected:
  void WriteCorpus(int rows) {
    std::string text;
    for (int i = 0; i < rows; ++i) {
      text += "{\"id\":" + std::to_string(i) + ",\"text\":\"  row " + std::to_string(i) +
              " has  some text \"}\n";
    }
    Write("data.jsonl", text);
  }
  // A slow step of `secs` per row, then whitespace normalization.
  void WriteRecipe(double secs, const std::string& extra = "") {
    Write("recipe.yaml", "dataset_path: data.jsonl\n" + extra +
                             "process:\n  - djshard_test_sleep_mapper:\n      seconds: " +
                             std::to_string(secs) + "\n  - whitespace_normalization_mapper:\n");
  }
  void Prepare(int shards) {
    const CliResult r = WaitFor(Spawn({"prepare", "--config", "recipe.yaml", "--job-dir", "job",
                                       "--num-shards", std::to_string(shards), "--lease-secs", "30",
                                       "--heartbeat-secs", "1", "--poll-interval-secs", "1"},
                                      kTestOps));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  Spawned Worker(const std::string& host) {
    return Spawn({"worker", "--job-dir", "job", "--threads", "1"}, kTestOps, OnHost(host));
  }
  // sha256 of a single-process run of the same recipe (4 threads: the bytes
  // do not depend on them, the slow step takes a quarter of the time).
  std::string ReferenceSha() {
    const CliResult r = WaitFor(Spawn(
        {"run", "--config", "recipe.yaml", "--export-path", "reference.jsonl", "--threads", "4"},
        kTestOps));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return io::Sha256OfFile(Path("reference.jsonl"));
  }
  std::string MergedSha() {
    const CliResult r =
        Run({"merge", "--job-dir", "job", "--output", "merged.jsonl", "--overwrite"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return io::Sha256OfFile(Path("merged.jsonl"));
  }
  // Every attempt.json of the job, with its status.
  std::vector<json> Attempts() const {
    std::vector<json> out;
    if (!Exists("job/attempts")) return out;
    for (const std::string& shard : List("job/attempts")) {
      for (const std::string& a : List("job/attempts/" + shard)) {
        const std::string rel = "job/attempts/" + shard + "/" + a + "/attempt.json";
        if (Exists(rel)) out.push_back(json::parse(Read(rel)));
      }
    }
    return out;
  }
  // Hosts with a running attempt.
  std::set<std::string> RunningHosts() const {
    std::set<std::string> hosts;
    for (const json& a : Attempts()) {
      if (a.value("status", "") == "running") hosts.insert(a.value("hostname", ""));
    }
    return hosts;
  }
  // Final-tap commit records in a shard's checkpoint directory: its finished partitions.
  size_t FinalCommits(const std::string& shard_dir, const std::string& final_op) const {
    if (!Exists(shard_dir)) return 0;
    size_t n = 0;
    for (const std::string& f : List(shard_dir)) {
      n += f.rfind("checkpoint_op_" + final_op + "_partition_", 0) == 0 &&
           f.find(".commit.json") != std::string::npos;
    }
    return n;
  }
  size_t Locks() const { return Exists("job/state/locks") ? List("job/state/locks").size() : 0; }
  // The events of every events_*.jsonl in `dir`, by file name.
  std::map<std::string, std::vector<json>> Events(const std::string& dir) const {
    std::map<std::string, std::vector<json>> out;
    for (const std::string& f : List(dir)) {
      if (f.rfind("events_", 0) != 0) continue;
      std::istringstream in(Read(dir + "/" + f));
      for (std::string line; std::getline(in, line);) out[f].push_back(json::parse(line));
    }
    return out;
  }
  static std::set<std::string> Types(const std::vector<json>& events) {
    std::set<std::string> types;
    for (const json& e : events) types.insert(e["event_type"].get<std::string>());
    return types;
  }
};

// SPEC-checkpoints §11 test 9, elastic part: shards of well under a second.
TEST_F(StopCli, StopFromAThirdNodeEndsBothWorkersAndClearLetsTheJobFinish) {
  WriteCorpus(24);
  WriteRecipe(0.15);
  const std::string reference = ReferenceSha();
  Prepare(12);
  EXPECT_EQ(json::parse(Read("job/job_summary.json"))["status"], "prepared");
  const Spawned a = Worker("node-a");
  const Spawned b = Worker("node-b");
  ASSERT_TRUE(WaitUntil([&] { return RunningHosts().size() == 2; }));
  const auto asked = Clock::now();
  const CliResult stop =
      WaitFor(Spawn({"stop", "job", "--reason", "maintenance"}, {}, OnHost("node-c")));
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_TRUE(Exists("job/stop_request.json"));
  const CliResult ra = WaitFor(a);
  const CliResult rb = WaitFor(b);
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(5));
  EXPECT_EQ(ra.exit_code, 3) << ra.err;
  EXPECT_EQ(rb.exit_code, 3) << rb.err;
  EXPECT_NE(ra.err.find("stop requested by node-c"), std::string::npos) << ra.err;
  EXPECT_EQ(Locks(), 0u);
  EXPECT_FALSE(Exists("job/state/failed") && !List("job/state/failed").empty());
  size_t done = 0;
  for (const json& at : Attempts()) {
    const std::string s = at["status"];
    EXPECT_TRUE(s == "done" || s == "interrupted") << at.dump();  // no failure counted
    done += s == "done";
  }
  EXPECT_LT(done, 12u);  // nothing more was claimed
  const json summary = json::parse(Read("job/job_summary.json"));
  EXPECT_EQ(summary["status"], "stopped");
  EXPECT_EQ(summary["stop"]["reason"], "maintenance");
  CliResult mon = Run({"monitor", "job"});
  EXPECT_EQ(mon.exit_code, 3) << mon.out;

  // Each worker process wrote its own events file.
  const auto events = Events("job");
  ASSERT_EQ(events.size(), 2u);
  std::set<std::string> hosts;
  for (const auto& [name, list] : events) {
    ASSERT_FALSE(list.empty());
    const std::string host = list.front()["hostname"].get<std::string>();
    hosts.insert(host);
    std::string suffix = "_";
    suffix.append(host).append("_").append(std::to_string(list.front()["pid"].get<int>()));
    suffix.append(".jsonl");
    EXPECT_NE(name.find(suffix), std::string::npos) << name;
    for (const char* type :
         {"job_start", "partition_start", "op_start", "stop_requested", "job_stopped"}) {
      EXPECT_TRUE(Types(list).count(type)) << name << " lacks " << type;
    }
    for (const json& e : list) {
      EXPECT_EQ(e["job_id"], "job");
      EXPECT_TRUE(e.contains("event_id") && e.contains("timestamp") && e.contains("thread_id"));
      if (e["event_type"] == "partition_start") {
        EXPECT_TRUE(e.contains("attempt_token"));
      }
    }
  }
  EXPECT_EQ(hosts, (std::set<std::string>{"node-a", "node-b"}));

  // A new worker refuses to claim until the request is cleared.
  const CliResult refused = WaitFor(Worker("node-d"));
  EXPECT_EQ(refused.exit_code, 3);
  EXPECT_NE(refused.err.find("job is stopped; djshard stop --clear"), std::string::npos)
      << refused.err;
  const CliResult clear = Run({"stop", "job", "--clear"});
  EXPECT_EQ(clear.exit_code, 0) << clear.err;
  EXPECT_FALSE(Exists("job/stop_request.json"));
  bool kept = false;
  for (const std::string& f : List("job/state/history")) kept |= f.rfind("stop_request.", 0) == 0;
  EXPECT_TRUE(kept);
  const CliResult finish = WaitFor(Worker("node-d"));
  EXPECT_EQ(finish.exit_code, 0) << finish.err;
  EXPECT_EQ(MergedSha(), reference);
  EXPECT_EQ(json::parse(Read("job/job_summary.json"))["status"], "completed");
  mon = Run({"monitor", "job", "--json"});
  EXPECT_EQ(mon.exit_code, 0);
  EXPECT_EQ(json::parse(mon.out)["shards"]["done"], 12);
  // A completed job has nothing to stop.
  const CliResult late = Run({"stop", "job"});
  EXPECT_EQ(late.exit_code, 0);
  EXPECT_NE(late.out.find("already completed"), std::string::npos) << late.out;
  EXPECT_FALSE(Exists("job/stop_request.json"));
}

// With checkpointing, each shard is a partition set of its own: the summary
// that prepare, stop, stop --clear and merge write counts shards and their
// partitions apart, and `monitor` says the same.
TEST_F(StopCli, SummaryAndMonitorCountTheShardsAndTheirPartitions) {
  WriteCorpus(24);
  WriteRecipe(0.1,
              "partition:\n  mode: manual\n  num_of_partitions: 3\n"
              "checkpoint:\n  strategy: every_op\n");
  const std::string reference = ReferenceSha();
  Prepare(2);
  json summary = json::parse(Read("job/job_summary.json"));
  EXPECT_EQ(summary["status"], "prepared");
  EXPECT_EQ(summary["shards"]["total"], 2);
  EXPECT_EQ(summary["shards"]["completed"], 0);
  EXPECT_EQ(summary["partitions"], json({{"total", 6},
                                         {"completed", 0},
                                         {"failed", 0},
                                         {"resumed", 0},
                                         {"per_shard", true},
                                         {"unsized_shards", 0}}));

  // A graceful stop once the first partition is finished.
  const std::vector<std::string> shards = {"part-00000-of-00002", "part-00001-of-00002"};
  const Spawned a = Worker("node-a");
  ASSERT_TRUE(WaitUntil([&] { return FinalCommits("job/checkpoints/" + shards[0], "0001"); }));
  ASSERT_EQ(Run({"stop", "job"}).exit_code, 0);
  EXPECT_EQ(WaitFor(a).exit_code, 3);
  EXPECT_EQ(json::parse(Read("job/job_summary.json"))["partitions"]["total"], 6);
  ASSERT_EQ(Run({"stop", "job", "--clear"}).exit_code, 0);
  // What the job holds: done shards' partitions, and the others' final taps.
  size_t done = 0, finished = 0, resumable = 0;
  for (const std::string& shard : shards) {
    if (Exists("job/state/done/" + shard + ".json")) {
      ++done;
      const json record = json::parse(Read("job/state/done/" + shard + ".json"));
      EXPECT_EQ(record["partitions"], json({{"total", 3}, {"resumed", 0}, {"computed", 3}}));
      finished += 3;
    } else {
      resumable += FinalCommits("job/checkpoints/" + shard, "0001");
    }
  }
  finished += resumable;
  ASSERT_LT(done, 2u);
  ASSERT_GE(finished, 1u);
  summary = json::parse(Read("job/job_summary.json"));
  EXPECT_EQ(summary["shards"]["completed"], done);
  EXPECT_EQ(summary["partitions"]["total"], 6);
  EXPECT_EQ(summary["partitions"]["completed"], finished);
  CliResult mon = Run({"monitor", "job", "--json"});
  json view = json::parse(mon.out);
  EXPECT_EQ(view["shards"]["done"], done);
  EXPECT_EQ(view["partitions"]["done"], finished);
  EXPECT_EQ(view["partitions"]["total"], 6);
  mon = Run({"monitor", "job"});
  EXPECT_NE(mon.out.find("partitions: " + std::to_string(finished) + " of 6 done"),
            std::string::npos)
      << mon.out;

  // Another worker finishes the job, resuming the finished partitions.
  const CliResult b = WaitFor(Worker("node-b"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(MergedSha(), reference);
  summary = json::parse(Read("job/job_summary.json"));
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["shards"]["completed"], 2);
  EXPECT_EQ(summary["partitions"], json({{"total", 6},
                                         {"completed", 6},
                                         {"failed", 0},
                                         {"resumed", resumable},
                                         {"per_shard", true},
                                         {"unsized_shards", 0}}));
  mon = Run({"monitor", "job", "--json"});
  EXPECT_EQ(mon.exit_code, 0);
  view = json::parse(mon.out);
  EXPECT_EQ(view["partitions"]["done"], 6);
  EXPECT_EQ(view["partitions"]["resumed"], resumable);
  const CliResult jobs = Run({"jobs", "--json"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_EQ(json::parse(jobs.out)[0]["partitions"], view["partitions"]);
}

// Auto-sized shards get their partition count from the first worker that
// starts them: until then the summary counts them apart, not as partitions.
TEST_F(StopCli, SummaryCountsAutoSizedShardsOnceAWorkerHasSizedThem) {
  WriteCorpus(8);
  WriteRecipe(0, "partition:\n  mode: auto\ncheckpoint:\n  strategy: every_op\n");
  Prepare(2);
  json summary = json::parse(Read("job/job_summary.json"));
  EXPECT_EQ(summary["partitions"]["total"], 0);
  EXPECT_EQ(summary["partitions"]["unsized_shards"], 2);
  const CliResult mon = Run({"monitor", "job"});
  EXPECT_NE(mon.out.find("partitions: 0 of 0 done, 0 failed, 0 resumed; 2 shard(s) not started"),
            std::string::npos)
      << mon.out;
  ASSERT_EQ(WaitFor(Worker("node-a")).exit_code, 0);
  MergedSha();
  summary = json::parse(Read("job/job_summary.json"));
  EXPECT_EQ(summary["partitions"]["total"], 2);
  EXPECT_EQ(summary["partitions"]["completed"], 2);
  EXPECT_EQ(summary["partitions"]["unsized_shards"], 0);
}

// dlc instances stop like workers: exit 3, no abort published; the same run
// id finishes the job once the request is cleared.
TEST_F(StopCli, StopEndsEveryDlcInstanceAndTheSameRunGoesOnAfterClear) {
  WriteCorpus(24);
  WriteRecipe(0.15);
  auto instance = [&](const std::string& host) {
    return Spawn({"dlc", "--job-dir", "job", "--config", "recipe.yaml", "--num-shards", "12",
                  "--run-id", "run-1", "--poll-interval-secs", "1", "--threads", "1"},
                 kTestOps, OnHost(host));
  };
  const Spawned a = instance("node-a");
  const Spawned b = instance("node-b");
  ASSERT_TRUE(WaitUntil([&] { return RunningHosts().size() == 2; }));
  const auto asked = Clock::now();
  ASSERT_EQ(Run({"stop", "job"}).exit_code, 0);
  for (const Spawned& n : {a, b}) {
    const CliResult r = WaitFor(n);
    EXPECT_EQ(r.exit_code, 3) << r.err;
  }
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(5));
  EXPECT_EQ(Locks(), 0u);
  for (const std::string& f : List("")) {
    if (f.find("dlc-coordination") == std::string::npos) continue;
    for (const std::string& run : List(f)) EXPECT_FALSE(Exists(f + "/" + run + "/abort.json"));
  }
  ASSERT_EQ(Run({"stop", "job", "--clear"}).exit_code, 0);
  const CliResult again = WaitFor(instance("node-a"));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("PASS: 12 shards"), std::string::npos) << again.out;
  EXPECT_EQ(json::parse(Read("job/job_summary.json"))["status"], "completed");
}

// A shard that outlasts the grace is handed back "interrupted"; --force
// aborts at once; neither counts a failure.
TEST_F(StopCli, LongShardsAreHandedBackInterruptedAfterTheGraceOrAtOnceWithForce) {
  WriteCorpus(8);
  WriteRecipe(1.0);
  Prepare(2);
  Spawned a = Worker("node-a");
  Spawned b = Worker("node-b");
  ASSERT_TRUE(WaitUntil([&] { return RunningHosts().size() == 2; }));
  auto asked = Clock::now();
  ASSERT_EQ(Run({"stop", "job", "--grace-secs", "1"}).exit_code, 0);
  for (const Spawned& w : {a, b}) {
    const CliResult r = WaitFor(w);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("stop grace period passed"), std::string::npos) << r.err;
  }
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(5));  // seen within 1 s, 1 s of grace
  EXPECT_EQ(Locks(), 0u);
  for (const json& at : Attempts()) EXPECT_EQ(at["status"], "interrupted") << at.dump();

  ASSERT_EQ(Run({"stop", "job", "--clear"}).exit_code, 0);
  a = Worker("node-a");
  b = Worker("node-b");
  ASSERT_TRUE(WaitUntil([&] { return RunningHosts().size() == 2; }));
  asked = Clock::now();
  const CliResult force = WaitFor(Spawn({"stop", "job", "--force"}, {}, OnHost("node-c")));
  EXPECT_EQ(force.exit_code, 0) << force.err;
  for (const Spawned& w : {a, b}) EXPECT_EQ(WaitFor(w).exit_code, 3);
  EXPECT_LT(Clock::now() - asked, std::chrono::milliseconds(2500));
  EXPECT_TRUE(Exists("job/stop_request.force.json"));
  EXPECT_EQ(Locks(), 0u);
  for (const json& at : Attempts()) EXPECT_EQ(at["status"], "interrupted") << at.dump();
  // --wait returns at once: nothing is live.
  EXPECT_EQ(Run({"stop", "job", "--wait", "--timeout", "5"}).exit_code, 0);
}

// --wait waits for the claims to go; a timeout says what is still live.
TEST_F(StopCli, WaitEndsWhenTheLastClaimGoesAndTimesOutWhileOneIsLive) {
  WriteCorpus(4);
  WriteRecipe(2.0);
  Prepare(1);
  const Spawned w = Worker("node-a");
  ASSERT_TRUE(WaitUntil([&] { return RunningHosts().size() == 1; }));
  // The list of running jobs has it, as an elastic job with its host.
  const CliResult list = Run({"stop", "--list", "--work-dir", "."});
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_NE(list.out.find("elastic"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("node-a"), std::string::npos) << list.out;
  const CliResult mon = Run({"monitor", "job", "--json"});
  EXPECT_EQ(mon.exit_code, 1);
  const json view = json::parse(mon.out);
  EXPECT_EQ(view["status"], "running");
  ASSERT_EQ(view["running_attempts"].size(), 1u);
  EXPECT_EQ(view["running_attempts"][0]["hostname"], "node-a");
  EXPECT_EQ(view["shards"]["total"], 1);

  const CliResult timed_out =
      Run({"stop", "job", "--grace-secs", "30", "--wait", "--timeout", "0.3"});
  EXPECT_EQ(timed_out.exit_code, 1) << timed_out.out;
  EXPECT_NE(timed_out.out.find("held by node-a"), std::string::npos) << timed_out.out;
  EXPECT_EQ(Run({"monitor", "job"}).exit_code, 1);  // stopping
  // A second graceful request changes nothing; --force then aborts the shard.
  const CliResult again = Run({"stop", "job"});
  EXPECT_NE(again.out.find("already has a graceful stop request"), std::string::npos) << again.out;
  const CliResult forced = Run({"stop", "job", "--force", "--wait", "--timeout", "10"});
  EXPECT_EQ(forced.exit_code, 0) << forced.out;
  EXPECT_EQ(WaitFor(w).exit_code, 3);
  EXPECT_EQ(Run({"monitor", "job"}).exit_code, 3);
  const CliResult jobs = Run({"jobs", "--json"});
  const json all = json::parse(jobs.out);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["kind"], "elastic");
  EXPECT_EQ(all[0]["status"], "stopped");
}

class RunStopCli : public StopCli {
 protected:
  Spawned RunJob(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"run",           "--config",  "recipe.yaml",
                                     "--export-path", "out.jsonl", "--work-dir",
                                     "jobs",          "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Spawn(args, kTestOps);
  }
  size_t Commits() const {
    size_t n = 0;
    if (!Exists("jobs/r/checkpoints")) return 0;
    for (const std::string& f : List("jobs/r/checkpoints")) {
      n += f.find(".commit.json") != std::string::npos;
    }
    return n;
  }
  json Summary() const { return json::parse(Read("jobs/r/job_summary.json")); }
};

// SPEC-checkpoints §11 test 9, run part.
TEST_F(RunStopCli, ForceStopEndsARunWithinTwoSecondsAndResumeCompletesIt) {
  WriteCorpus(40);
  WriteRecipe(0.1, "partition:\n  mode: manual\n  num_of_partitions: 8\n");
  const std::string reference = ReferenceSha();
  const Spawned run = RunJob({"--job_id", "r"});
  ASSERT_TRUE(WaitUntil([&] { return Commits() >= 2; }));
  const auto asked = Clock::now();
  const CliResult stop = Run({"stop", "r", "--work-dir", "jobs", "--force"});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  const CliResult r = WaitFor(run);
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(2));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(Summary()["status"], "stopped");
  EXPECT_EQ(Summary()["stop"]["mode"], "force");
  EXPECT_EQ(Run({"monitor", "r", "--work-dir", "jobs"}).exit_code, 3);
  const auto events = Events("jobs/r");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(Types(events.begin()->second).count("job_stopped"));
  EXPECT_FALSE(Types(events.begin()->second).count("job_failed"));

  const CliResult resumed = WaitFor(RunJob({"--resume", "r"}));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_FALSE(Exists("jobs/r/stop_request.json"));
  EXPECT_FALSE(Exists("jobs/r/stop_request.force.json"));
  EXPECT_EQ(io::Sha256OfFile(Path("out.jsonl")), reference);
  EXPECT_EQ(Summary()["status"], "completed");
}

// A graceful stop finishes and commits the partition in flight, starts no
// other, and the job resumes from there.
TEST_F(RunStopCli, GracefulStopCommitsThePartitionInFlightAndStartsNoOther) {
  WriteCorpus(40);
  WriteRecipe(0.1, "partition:\n  mode: manual\n  num_of_partitions: 8\n");
  const Spawned run = RunJob({"--job_id", "r"});
  ASSERT_TRUE(WaitUntil([&] { return Commits() >= 1; }));
  ASSERT_EQ(Run({"stop", Path("jobs/r"), "--reason", "end of slot"}).exit_code, 0);
  const CliResult r = WaitFor(run);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(Summary()["stop"]["mode"], "graceful");
  EXPECT_EQ(Summary()["stop"]["reason"], "end of slot");
  // Every partition that started was completed.
  std::set<uint64_t> started, completed;
  const auto events = Events("jobs/r");
  ASSERT_EQ(events.size(), 1u);
  for (const json& e : events.begin()->second) {
    if (e["event_type"] == "partition_start") started.insert(e["partition_id"].get<uint64_t>());
    if (e["event_type"] == "partition_complete") {
      completed.insert(e["partition_id"].get<uint64_t>());
    }
  }
  EXPECT_EQ(started, completed);
  EXPECT_LT(completed.size(), 8u);
  EXPECT_TRUE(Types(events.begin()->second).count("stop_requested"));
  EXPECT_EQ(WaitFor(RunJob({"--resume", "r"})).exit_code, 0);
}

TEST_F(RunStopCli, SigtermEndsARunStoppedAndResumable) {
  WriteCorpus(40);
  WriteRecipe(0.1, "partition:\n  mode: manual\n  num_of_partitions: 8\n");
  const Spawned run = RunJob({"--job_id", "r"});
  ASSERT_TRUE(WaitUntil([&] { return Commits() >= 1; }));
  ::kill(run.pid, SIGTERM);
  EXPECT_EQ(WaitFor(run).exit_code, 143);
  EXPECT_EQ(Summary()["status"], "stopped");
  EXPECT_EQ(Summary()["stop"]["mode"], "signal");
  EXPECT_EQ(Summary()["partitions"]["failed"], 0);
  EXPECT_TRUE(Summary()["checkpointing"]["resumable"].get<bool>());
  const CliResult resumed = WaitFor(RunJob({"--resume", "r"}));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(Summary()["status"], "completed");
}

}  // namespace
}  // namespace djshard::testing
