// Black-box tests of `djshard run` as a job: partitions, checkpoint taps and
// commits, --resume, events and the job summary (SPEC-checkpoints §11).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "djshard/common/text.h"
#include "djshard/io/checksum.h"
#include "djshard/io/sha256.h"
#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::vector<std::string> kTestOps = {"DJSHARD_ENABLE_TEST_OPERATORS=1"};

std::string Xxh3(const std::string& bytes) {
  io::Xxh3 h;
  h.Update(bytes);
  return h.HexDigest();
}

std::string Sha256(const std::string& bytes) {
  io::Sha256 h;
  h.Update(bytes);
  return h.HexDigest();
}

std::vector<json> Events(const std::string& job_dir) {
  std::vector<json> out;
  for (const auto& e : fs::directory_iterator(job_dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("events_", 0) != 0) continue;
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) out.push_back(json::parse(line));
  }
  return out;
}

class CheckpointCli : public CliTest {
 protected:
  // `n` rows {"id": i, "text": "..."} with varied text.
  std::string Rows(int n, const std::string& extra = "") const {
    std::string rows;
    for (int i = 0; i < n; ++i) {
      std::string text = "  row " + std::to_string(i) + "  visit https://ex.com/" +
                         std::to_string(i) + "   words here";
      if (i % 4 == 0) text = "x";
      if (i % 37 == 5) {  // no text: an operator error that drops the row
        rows += "{\"id\":" + std::to_string(i) + "}\n";
        continue;
      }
      rows += "{\"id\":" + std::to_string(i) + ",\"text\":\"" + text + "\"" + extra + "}\n";
    }
    return rows;
  }
  // A recipe over data.jsonl with `sections` before the process list.
  void Recipe(const std::string& sections, const std::string& ops = kFiveOps) const {
    Write("recipe.yaml", "dataset_path: data.jsonl\nexport_path: out/result.jsonl\n" + sections +
                             "process:\n" + ops);
  }
  // The recipe run as job "ref" into ref.jsonl, the bytes the others are
  // compared with; `extra` adds options.
  CliResult RunReference(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"run", "--config",      "recipe.yaml", "--job_id",
                                     "ref", "--export-path", "ref.jsonl"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Run(args);
  }
  std::vector<std::string> Commits(const std::string& job) const {
    std::vector<std::string> out;
    for (const std::string& n : List("out/" + job + "/checkpoints")) {
      // A commit record's temporary file (a run killed while publishing it) is not one.
      if (n.size() > 12 && n.compare(n.size() - 12, 12, ".commit.json") == 0) out.push_back(n);
    }
    return out;
  }
  static constexpr const char* kFiveOps =
      "  - whitespace_normalization_mapper:\n"
      "  - clean_links_mapper:\n"
      "  - text_length_filter:\n      min_len: 3\n"
      "  - punctuation_normalization_mapper:\n"
      "  - words_num_filter:\n      min_num: 1\n";
};

// --log-level debug: every event of the run job is a log record too, with the
// job and partition ids; the default level shows none of them.
TEST_F(CheckpointCli, DebugLogsCarryEachPartitionsEvents) {
  Write("data.jsonl", Rows(10));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 4\n");
  CliResult r = Run({"run", "--config", "recipe.yaml", "--job_id", "quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("partition_complete"), std::string::npos) << r.err;
  r = Run({"run", "--config", "recipe.yaml", "--job_id", "loud", "--log-level", "debug",
           "--log-format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> completed;
  std::istringstream in(r.err);
  for (std::string line; std::getline(in, line);) {
    const json record = json::parse(line);  // every line is one JSON object
    if (record.value("event", "") != "partition_complete") continue;
    EXPECT_EQ(record["level"], "debug");
    EXPECT_EQ(record["job_id"], "loud");
    completed.insert(record.value("partition_id", ""));
  }
  EXPECT_EQ(completed, (std::set<std::string>{"0", "1", "2", "3"})) << r.err;
}

TEST_F(CheckpointCli, ManualPartitionsHaveExactBoundsAndHashes) {
  const std::string rows = Rows(10);
  Write("data.jsonl", rows);
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 4\n");
  const CliResult r = Run({"run", "--config", "recipe.yaml", "--job_id", "j"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json info = json::parse(Read("out/j/checkpoints/partitioning_info.json"));
  EXPECT_EQ(info["schema_version"], 1);
  EXPECT_EQ(info["num_partitions"], 4);
  EXPECT_EQ(info["total_rows"], 10);
  EXPECT_EQ(info["hash_algorithm"], "sha256-lines-v1");
  EXPECT_TRUE(info["shard_id"].is_null());
  const std::vector<std::pair<int, int>> bounds = {{0, 3}, {3, 6}, {6, 8}, {8, 10}};
  std::vector<std::string> lines;
  std::istringstream in(rows);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (size_t i = 0; i < 4; ++i) {
    const json& p = info["partitions"][i];
    EXPECT_EQ(p["partition_id"], i);
    EXPECT_EQ(p["start_row"], bounds[i].first);
    EXPECT_EQ(p["end_row"], bounds[i].second);
    EXPECT_EQ(p["rows"], bounds[i].second - bounds[i].first);
    std::string bytes;
    for (int k = bounds[i].first; k < bounds[i].second; ++k) bytes += lines[k] + "\n";
    EXPECT_EQ(p["xxh3_128"], Xxh3(bytes)) << i;
    EXPECT_EQ(p["size_bytes"], bytes.size());
  }
  EXPECT_EQ(info["input_sha256"], Sha256(rows));
}

TEST_F(CheckpointCli, MorePartitionsThanRowsIsRefusedBeforeAnythingIsWritten) {
  Write("data.jsonl", Rows(10));
  Recipe("partition:\n  mode: manual\n");
  const CliResult r = Run(
      {"run", "--config", "recipe.yaml", "--job_id", "j", "--partition.num_of_partitions", "11"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("num_of_partitions (11) exceeds the rows of"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(10)"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("out/j"));
  EXPECT_FALSE(Exists("out/result.jsonl"));
}

TEST_F(CheckpointCli, UnknownSectionKeysAndBadValuesAreRefusedWithTheirLine) {
  Write("data.jsonl", Rows(10));
  Recipe("partition:\n  mode: manual\n  num_partitions: 4\n");
  CliResult r = Run({"run", "--config", "recipe.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("recipe.yaml:5: unknown key 'partition.num_partitions'"), std::string::npos)
      << r.err;
  Recipe("partition:\n  target_size_mb: 100\n");
  r = Run({"run", "--config", "recipe.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("128, 256, 512 or 1024"), std::string::npos) << r.err;
  EXPECT_EQ(List("out").size(), 0u);
}

TEST_F(CheckpointCli, AutoModeSizesPartitionsByRowBytesAndModality) {
  // 2,000 rows of 2,000 bytes under a 1 MiB cap: 524 rows a partition, so 4 of 500.
  std::string rows;
  for (int i = 0; i < 2000; ++i) {
    std::string row = "{\"id\":" + std::to_string(i) + ",\"text\":\"";
    row += std::string(2000 - row.size() - 3, 'a') + "\"}";
    rows += row + "\n";
  }
  Write("data.jsonl", rows);
  Recipe("partition:\n  max_size_mb: 1\n");
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--job_id", "a"}).exit_code, 0);
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--job_id", "b"}).exit_code, 0);
  const json a = json::parse(Read("out/a/checkpoints/partitioning_info.json"));
  const json b = json::parse(Read("out/b/checkpoints/partitioning_info.json"));
  EXPECT_EQ(a["mode"], "auto");
  ASSERT_EQ(a["num_partitions"], 4);
  for (const json& p : a["partitions"]) EXPECT_EQ(p["rows"], 500);
  // The same input twice: the same partitions.
  EXPECT_EQ(a["partitions"], b["partitions"]);
  EXPECT_EQ(a["input_sha256"], b["input_sha256"]);
  // One image a row: image sizing (x5), 104 rows a partition.
  std::string images;
  for (int i = 0; i < 2000; ++i) {
    std::string row = "{\"id\":" + std::to_string(i) + ",\"images\":[\"a.jpg\"],\"text\":\"";
    row += std::string(2000 - row.size() - 3, 'a') + "\"}";
    images += row + "\n";
  }
  Write("data.jsonl", images);
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--job_id", "c"}).exit_code, 0);
  const json c = json::parse(Read("out/c/checkpoints/partitioning_info.json"));
  EXPECT_EQ(c["num_partitions"], 20);
}

TEST_F(CheckpointCli, TapsSitWhereTheStrategyPutsThem) {
  Write("data.jsonl", Rows(40));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 3\ncheckpoint:\n  keep: all\n");
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--job_id", "n2", "--checkpoint.strategy",
                 "every_n_ops", "--checkpoint.n_ops", "2"})
                .exit_code,
            0);
  std::vector<std::string> want;
  for (const char* op : {"0001", "0003", "0004"}) {
    for (const char* p : {"00000", "00001", "00002"}) {
      want.push_back(std::string("checkpoint_op_") + op + "_partition_" + p + ".commit.json");
    }
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(Commits("n2"), want);
  const json commit =
      json::parse(Read("out/n2/checkpoints/checkpoint_op_0003_partition_00001.commit.json"));
  EXPECT_EQ(commit["op_name"], "punctuation_normalization_mapper");
  EXPECT_EQ(commit["compression"], "zstd");
  EXPECT_TRUE(Exists("out/n2/checkpoints/" + commit["data_path"].get<std::string>()));

  // manual: an operator used twice is tapped after both.
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 2\ncheckpoint:\n  keep: all\n",
         "  - whitespace_normalization_mapper:\n  - clean_links_mapper:\n"
         "  - whitespace_normalization_mapper:\n  - text_length_filter:\n      min_len: 3\n");
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--job_id", "m", "--checkpoint.strategy",
                 "manual", "--checkpoint.op_names", "whitespace_normalization_mapper"})
                .exit_code,
            0);
  std::set<std::string> ops;
  for (const std::string& c : Commits("m")) ops.insert(c.substr(14, 4));
  EXPECT_EQ(ops, (std::set<std::string>{"0000", "0002", "0003"}));
  const CliResult bad = Run({"run", "--config", "recipe.yaml", "--job_id", "u",
                             "--checkpoint.strategy", "manual", "--checkpoint.op_names", "nope"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("'nope'"), std::string::npos) << bad.err;
  EXPECT_FALSE(Exists("out/u"));
}

TEST_F(CheckpointCli, OutputBytesDoNotDependOnStrategyOrThreads) {
  Write("data.jsonl", Rows(3000, ",\"meta\":{\"a\":1}"));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 7\n",
         std::string(kFiveOps) + "      batch_size: 50\n");
  Write("plain.yaml",
        "dataset_path: data.jsonl\nprocess:\n" + std::string(kFiveOps) + "      batch_size: 50\n");
  ASSERT_EQ(Run({"run", "--config", "plain.yaml", "--export-path", "plain.jsonl"}).exit_code, 0);
  const std::string plain = Read("plain.jsonl");
  int n = 0;
  for (const char* strategy : {"every_op", "disabled"}) {
    for (const char* threads : {"1", "4"}) {
      const std::string out = std::string("o").append(std::to_string(n)).append(".jsonl");
      const CliResult r =
          Run({"run", "--config", "recipe.yaml", "--job_id",
               std::string("s").append(std::to_string(n++)), "--checkpoint.strategy", strategy,
               "--threads", threads, "--export-path", out});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(Read(out), plain) << strategy << " " << threads;
    }
  }
}

TEST_F(CheckpointCli, NewJobPrintsItsTokenAndTheSummaryFollowsTheRun) {
  Write("data.jsonl", Rows(12));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 4\n",
         "  - whitespace_normalization_mapper:\n  - djshard_test_sleep_mapper:\n"
         "      seconds: 0.05\n  - text_length_filter:\n      min_len: 3\n");
  const Spawned run = Spawn({"run", "--config", "recipe.yaml", "--threads", "1"}, kTestOps);
  std::string job;
  ASSERT_TRUE(WaitUntil([&] {
    const std::string err = ErrSoFar(run);
    const size_t at = err.find("Resume token: ");
    if (at == std::string::npos) return false;
    job = err.substr(at + 14, err.find('.', at) - at - 14);
    return true;
  }));
  EXPECT_NE(ErrSoFar(run).find("Rerun the original command with --resume " + job +
                               " to resume this job."),
            std::string::npos);
  EXPECT_EQ(job.size(), 22u) << job;  // YYYYmmdd_HHMMSS_<6 hex>
  ASSERT_TRUE(WaitUntil([&] { return Exists("out/" + job + "/job_summary.json"); }));
  EXPECT_EQ(json::parse(Read("out/" + job + "/job_summary.json"))["status"], "running");
  const CliResult r = WaitFor(run);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json summary = json::parse(Read("out/" + job + "/job_summary.json"));
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["partitions"]["total"], 4);
  EXPECT_EQ(summary["partitions"]["completed"], 4);
  EXPECT_EQ(summary["resume_token"], job);
  EXPECT_TRUE(Exists("out/" + job + "/heartbeat"));
  EXPECT_TRUE(Exists("out/" + job + "/metadata/config_snapshot.yaml"));
  EXPECT_EQ(Read("out/" + job + "/metadata/config_snapshot.yaml"), Read("recipe.yaml"));
  const json plan = json::parse(Read("out/" + job + "/dag_execution_plan.json"));
  EXPECT_EQ(plan["ops"].size(), 3u);
  EXPECT_EQ(plan["ops"][2]["checkpoint_after"], true);

  std::map<int, std::set<std::string>> per_partition;
  std::vector<uint64_t> op_rows_in(3), op_rows_out(3);
  for (const json& e : Events(Path("out/" + job))) {
    EXPECT_EQ(e["job_id"], job);
    if (e.contains("partition_id")) per_partition[e["partition_id"]].insert(e["event_type"]);
    if (e["event_type"] == "op_complete") {
      op_rows_in[e["op_idx"]] += e["input_rows"].get<uint64_t>();
      op_rows_out[e["op_idx"]] += e["output_rows"].get<uint64_t>();
    }
  }
  ASSERT_EQ(per_partition.size(), 4u);
  for (const auto& [p, types] : per_partition) {
    EXPECT_TRUE(types.count("partition_start") && types.count("partition_complete")) << p;
  }
  const json stats = json::parse(Read("out/result.jsonl.stats.json"));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(stats["operators"][i]["rows_in"], op_rows_in[i]);
    EXPECT_EQ(stats["operators"][i]["rows_out"], op_rows_out[i]);
  }

  // Op events per (partition, op): the first batch enters an operator only
  // after it left the one before, so the operator after the sleeping one
  // starts 2 or 3 rows x 0.05 s after it; each operator starts, then ends.
  auto seconds_of_day = [](const std::string& t) {
    return std::stod(t.substr(11, 2)) * 3600 + std::stod(t.substr(14, 2)) * 60 +
           std::stod(t.substr(17, 9));
  };
  std::map<int, std::vector<std::string>> op_events;
  std::map<std::pair<int, int>, double> started;
  for (const json& e : Events(Path("out/" + job))) {
    const std::string type = e["event_type"];
    if (type != "op_start" && type != "op_complete") continue;
    const int p = e["partition_id"], i = e["op_idx"];
    op_events[p].push_back(type.substr(3) + std::to_string(i));
    if (type == "op_start") started[{p, i}] = seconds_of_day(e["timestamp"]);
    if (type == "op_complete" && i == 1) {
      EXPECT_GE(e["duration_secs"].get<double>(), 0.09) << e.dump();
      EXPECT_GE(e["metadata"]["busy_secs"].get<double>(), 0.09) << e.dump();
    }
  }
  ASSERT_EQ(op_events.size(), 4u);
  for (const auto& [p, seq] : op_events) {
    std::vector<std::string> sorted = seq;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<std::string>{"complete0", "complete1", "complete2", "start0",
                                                "start1", "start2"}))
        << p;
    for (int i = 0; i < 3; ++i) {
      const auto at = [&](const std::string& name) {
        return std::find(seq.begin(), seq.end(), name + std::to_string(i)) - seq.begin();
      };
      EXPECT_LT(at("start"), at("complete")) << p << " op " << i;
    }
    EXPECT_GE(started[std::make_pair(p, 2)] - started[std::make_pair(p, 1)], 0.09) << p;
  }
}

TEST_F(CheckpointCli, KilledRunResumesFromItsCommittedFinalTaps) {
  Write("data.jsonl", Rows(24));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 6\n",
         "  - whitespace_normalization_mapper:\n  - djshard_test_sleep_mapper:\n"
         "      seconds: 0.04\n  - text_length_filter:\n      min_len: 3\n");
  const Spawned ref =
      Spawn({"run", "--config", "recipe.yaml", "--job_id", "ref", "--export-path", "ref.jsonl"},
            kTestOps);
  ASSERT_EQ(WaitFor(ref).exit_code, 0);

  const Spawned run = Spawn({"run", "--config", "recipe.yaml", "--job_id", "k"}, kTestOps);
  auto finals = [&] {
    int n = 0;
    if (!Exists("out/k/checkpoints")) return 0;
    for (const std::string& c : Commits("k")) n += c.rfind("checkpoint_op_0002", 0) == 0;
    return n;
  };
  ASSERT_TRUE(WaitUntil([&] { return finals() >= 2; }));
  ::kill(run.pid, SIGKILL);
  EXPECT_EQ(WaitFor(run).exit_code, 128 + SIGKILL);
  const int done = finals();
  ASSERT_LT(done, 6);
  const Spawned resume = Spawn({"run", "--config", "recipe.yaml", "--resume", "k"}, kTestOps);
  const CliResult r = WaitFor(resume);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Sha256(Read("out/result.jsonl")), Sha256(Read("ref.jsonl")));
  // Operator errors of the partitions taken from their final taps come back too.
  EXPECT_NE(Read("ref.jsonl.errors.jsonl"), "");
  EXPECT_EQ(Read("out/result.jsonl.errors.jsonl"), Read("ref.jsonl.errors.jsonl"));
  // The resumed run's events: loads for the finished partitions, no op_start for them.
  std::set<int> loaded, started;
  for (const json& e : Events(Path("out/k"))) {
    if (e["pid"] != resume.pid) continue;
    if (e["event_type"] == "checkpoint_load") loaded.insert(e["partition_id"].get<int>());
    if (e["event_type"] == "op_start") started.insert(e["partition_id"].get<int>());
  }
  EXPECT_EQ(static_cast<int>(loaded.size()), done);
  for (const int p : loaded) EXPECT_EQ(started.count(p), 0u) << p;
  const json summary = json::parse(Read("out/k/job_summary.json"));
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["partitions"]["resumed"], loaded.size());
}

// kill -9 at five points of a run; --resume then ends with the bytes of an
// uninterrupted run, however often it was interrupted.
TEST_F(CheckpointCli, KillAtAnyPointThenResumeGivesTheUninterruptedBytes) {
  Write("data.jsonl", Rows(200));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 5\ncheckpoint:\n  n_ops: 2\n",
         std::string(kFiveOps) + "      batch_size: 16\n");
  ASSERT_EQ(RunReference().exit_code, 0);
  const std::string want = Sha256(Read("ref.jsonl"));
  const std::vector<std::string> points = {"tap_append@7", "tap_data_published@4",
                                           "tap_committed@5", "final_concat@2",
                                           "before_export_commit"};
  // One job killed at each point in turn, resumed after each kill.
  const Spawned first = Spawn({"run", "--config", "recipe.yaml", "--job_id", "k", "--threads", "2"},
                              {"DJSHARD_TEST_KILL_AT=" + points[0]});
  ASSERT_EQ(WaitFor(first).exit_code, 128 + SIGKILL);
  for (size_t i = 1; i < points.size(); ++i) {
    const Spawned again =
        Spawn({"run", "--config", "recipe.yaml", "--resume", "k", "--threads", "3"},
              {"DJSHARD_TEST_KILL_AT=" + points[i]});
    const CliResult r = WaitFor(again);
    ASSERT_EQ(r.exit_code, 128 + SIGKILL) << points[i] << "\n" << r.err;
  }
  const CliResult r = Run({"run", "--config", "recipe.yaml", "--resume", "k"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Sha256(Read("out/result.jsonl")), want);
  // Operator errors, with the input's lines, as the uninterrupted run wrote
  // them: partitions resumed from an intermediate tap included.
  const std::string ref_errors = Read("ref.jsonl.errors.jsonl");
  EXPECT_NE(ref_errors, "");
  EXPECT_EQ(Read("out/result.jsonl.errors.jsonl"), ref_errors);
  const json stats = json::parse(Read("out/result.jsonl.stats.json"));
  const json ref_stats = json::parse(Read("ref.jsonl.stats.json"));
  EXPECT_EQ(stats["rows_in"], 200);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(stats["operators"][i]["rows_out"], ref_stats["operators"][i]["rows_out"]) << i;
  }
  // A completed job is not run again.
  const CliResult again = Run({"run", "--config", "recipe.yaml", "--resume", "k"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.out.find("Job k already completed"), std::string::npos) << again.out;
}

TEST_F(CheckpointCli, ResumeRefusesWhatChangedAndDeletesNothing) {
  Write("data.jsonl", Rows(40));
  // One partition at a time, so that the kill below leaves partitions 0-2 committed.
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 4\n  max_concurrent_partitions: 1\n");
  // Killed after two partitions committed their final tap.
  const Spawned run = Spawn({"run", "--config", "recipe.yaml", "--job_id", "k"},
                            {"DJSHARD_TEST_KILL_AT=tap_committed@3"});
  ASSERT_EQ(WaitFor(run).exit_code, 128 + SIGKILL);
  const std::vector<std::string> before = List("out/k/checkpoints");
  const std::string recipe = Read("recipe.yaml");

  // A changed operator argument: the message names the key.
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 4\n",
         std::string(kFiveOps).replace(std::string(kFiveOps).find("min_len: 3"), 10, "min_len: 4"));
  CliResult r = Run({"run", "--config", "recipe.yaml", "--resume", "k"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ERROR: resume k: config: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("process[2].text_length_filter.min_len"), std::string::npos) << r.err;
  EXPECT_EQ(List("out/k/checkpoints"), before);

  // One changed input row: the message names its partition.
  Write("recipe.yaml", recipe);
  const std::string rows = Read("data.jsonl");
  std::string changed = rows;
  changed.replace(changed.find("row 25"), 6, "row 2X");
  Write("data.jsonl", changed);
  r = Run({"run", "--config", "recipe.yaml", "--resume", "k"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ERROR: resume k: input: partition 2 "), std::string::npos) << r.err;
  EXPECT_EQ(List("out/k/checkpoints"), before);

  // A truncated data file: the message names it.
  Write("data.jsonl", rows);
  const json commit =
      json::parse(Read("out/k/checkpoints/checkpoint_op_0004_partition_00001.commit.json"));
  const std::string data = "out/k/checkpoints/" + commit["data_path"].get<std::string>();
  const std::string bytes = Read(data);
  Write(data, bytes.substr(0, bytes.size() / 2));
  r = Run({"run", "--config", "recipe.yaml", "--resume", "k"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ERROR: resume k: checkpoints: " + commit["data_path"].get<std::string>()),
            std::string::npos)
      << r.err;
  EXPECT_EQ(List("out/k/checkpoints"), before);
  Write(data, bytes);

  // A comment-only edit is accepted, and the job completes.
  Write("recipe.yaml", "# a comment\n" + recipe);
  r = Run({"run", "--config", "recipe.yaml", "--resume", "k"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(RunReference().exit_code, 0);
  EXPECT_EQ(Read("out/result.jsonl"), Read("ref.jsonl"));
}

// --resume while the job's run lives (its heartbeat fresh, its process there)
// is refused and changes nothing; once that process is gone it resumes at
// once, its heartbeat still fresh.
TEST_F(CheckpointCli, AResumeOfARunThatLivesIsRefused) {
  Write("data.jsonl", Rows(40));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 4\n  max_concurrent_partitions: 1\n");
  ASSERT_EQ(RunReference().exit_code, 0);
  Spawned live = Spawn({"run", "--config", "recipe.yaml", "--job_id", "live"},
                       {"DJSHARD_TEST_STOP_AT=tap_committed"});
  for (int i = 0; i < 400 && !IsStopped(live.pid); ++i) usleep(10'000);
  ASSERT_TRUE(IsStopped(live.pid));
  const std::vector<std::string> taps = List("out/live/checkpoints");
  CliResult r = Run({"run", "--config", "recipe.yaml", "--resume", "live"});
  EXPECT_EQ(r.exit_code, 2);
  std::string refusal = "ERROR: resume live: locate: the job is running (pid ";
  refusal += std::to_string(live.pid);
  refusal += " on ";
  refusal += HostName();
  EXPECT_NE(r.err.find(refusal), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("djshard stop live"), std::string::npos) << r.err;
  EXPECT_EQ(List("out/live/checkpoints"), taps);
  ::kill(live.pid, SIGKILL);
  EXPECT_EQ(WaitFor(live).exit_code, 128 + SIGKILL);
  r = Run({"run", "--config", "recipe.yaml", "--resume", "live"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out/result.jsonl"), Read("ref.jsonl"));
}

// The export of a job of one partition is its final tap, linked rather than
// copied, after a run and after a resume; with several partitions it is
// their copy. The bytes are those of a job without checkpoints either way.
TEST_F(CheckpointCli, TheExportOfOnePartitionIsItsFinalTapLinked) {
  Write("data.jsonl", Rows(24));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 1\n");
  ASSERT_EQ(RunReference({"--checkpoint.enabled", "false"}).exit_code, 0);
  const auto inode = [&](const std::string& rel) {
    struct stat st {};
    EXPECT_EQ(::stat(Path(rel).c_str(), &st), 0) << rel;
    return std::make_pair(st.st_ino, st.st_nlink);
  };
  const auto final_tap = [&](const std::string& job) {
    const json commit = json::parse(
        Read("out/" + job + "/checkpoints/checkpoint_op_0004_partition_00000.commit.json"));
    return "out/" + job + "/checkpoints/" + commit["data_path"].get<std::string>();
  };
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--job_id", "one"}).exit_code, 0);
  EXPECT_EQ(Read("out/result.jsonl"), Read("ref.jsonl"));
  EXPECT_EQ(inode("out/result.jsonl"), inode(final_tap("one")));
  EXPECT_EQ(inode("out/result.jsonl").second, 2u);

  const auto temporary_files = [&] {
    std::vector<std::string> names;
    for (const std::string& n : List("out")) {
      if (n.find(".tmp.") != std::string::npos) names.push_back(n);
    }
    return names;
  };
  CliResult r = WaitFor(Spawn({"run", "--config", "recipe.yaml", "--job_id", "killed"},
                              {"DJSHARD_TEST_KILL_AT=before_export_commit"}));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  // The killed run left its export's and errors file's temporary files,
  // named after the job; the resume removes them and says so.
  const std::vector<std::string> left = temporary_files();
  ASSERT_EQ(left.size(), 2u);
  const std::string writer = "@" + HostName() + "@";
  EXPECT_EQ(left[0].rfind("result.jsonl.errors.jsonl.tmp.run-killed" + writer, 0), 0u) << left[0];
  EXPECT_EQ(left[1].rfind("result.jsonl.tmp.run-killed" + writer, 0), 0u) << left[1];
  r = Run({"run", "--config", "recipe.yaml", "--resume", "killed"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out/result.jsonl"), Read("ref.jsonl"));
  EXPECT_EQ(inode("out/result.jsonl"), inode(final_tap("killed")));
  EXPECT_EQ(temporary_files(), std::vector<std::string>{});
  EXPECT_NE(r.err.find("Removed " + Path("out/" + left[1]) + ", left by a run of job killed"),
            std::string::npos)
      << r.err;
  // Resumed again over its own export (the job not marked completed): the
  // export stays that link, and no new temporary name is left beside it.
  json summary = json::parse(Read("out/killed/job_summary.json"));
  summary["status"] = "failed";
  Write("out/killed/job_summary.json", summary.dump());
  const std::vector<std::string> before = List("out");
  r = Run({"run", "--config", "recipe.yaml", "--resume", "killed"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out/result.jsonl"), Read("ref.jsonl"));
  EXPECT_EQ(inode("out/result.jsonl"), inode(final_tap("killed")));
  EXPECT_EQ(List("out"), before);

  Recipe("partition:\n  mode: manual\n  num_of_partitions: 3\n");
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--job_id", "three"}).exit_code, 0);
  EXPECT_EQ(Read("out/result.jsonl"), Read("ref.jsonl"));
  EXPECT_EQ(inode("out/result.jsonl").second, 1u);
}

// checkpoint.dir (alias checkpoint_dir, CLI --checkpoint.dir) puts the data
// files, commit records and partitioning_info.json under <dir>/<job_id>;
// data_path stays relative to that directory, and --resume finds them there.
TEST_F(CheckpointCli, CheckpointDirHoldsTheCheckpointsAndResumeFindsThem) {
  Write("data.jsonl", Rows(24));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 4\ncheckpoint:\n  dir: big\n");
  ASSERT_EQ(RunReference({"--checkpoint.enabled", "false"}).exit_code, 0);
  // Killed once every final tap is committed: --resume concatenates them.
  CliResult r = WaitFor(Spawn({"run", "--config", "recipe.yaml", "--job_id", "c"},
                              {"DJSHARD_TEST_KILL_AT=before_export_commit"}));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_FALSE(Exists("out/c/checkpoints"));
  EXPECT_TRUE(Exists("big/c/partitioning_info.json"));
  const json commit = json::parse(Read("big/c/checkpoint_op_0004_partition_00002.commit.json"));
  EXPECT_TRUE(Exists("big/c/" + commit["data_path"].get<std::string>()));
  EXPECT_EQ(commit["data_path"].get<std::string>().find('/'), std::string::npos);
  EXPECT_EQ(json::parse(Read("out/c/job_summary.json"))["checkpointing"]["checkpoint_dir"],
            Path("big/c"));
  r = Run({"run", "--config", "recipe.yaml", "--resume", "c"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out/result.jsonl"), Read("ref.jsonl"));
  int loaded = 0;
  for (const json& e : Events(Path("out/c"))) loaded += e["event_type"] == "checkpoint_load";
  EXPECT_EQ(loaded, 4);

  // It is part of the job's configuration: another directory is refused.
  const std::vector<std::string> before = List("big/c");
  r = Run({"run", "--config", "recipe.yaml", "--resume", "c", "--checkpoint.dir", "other"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ERROR: resume c: locate: "), std::string::npos) << r.err;
  EXPECT_EQ(List("big/c"), before);

  // The top-level alias and the CLI override ({job_id} substituted) do the same.
  Write("recipe.yaml",
        "dataset_path: data.jsonl\nexport_path: out/a.jsonl\n"
        "checkpoint_dir: alias\nprocess:\n" +
            std::string(kFiveOps));
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--job_id", "a"}).exit_code, 0);
  EXPECT_TRUE(Exists("alias/a/partitioning_info.json"));
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--job_id", "o", "--checkpoint.dir",
                 Path("cli/{job_id}-ckpt")})
                .exit_code,
            0);
  EXPECT_TRUE(Exists("cli/o-ckpt/partitioning_info.json"));
  EXPECT_FALSE(Exists("alias/o"));
  EXPECT_EQ(Read("out/a.jsonl"), Read("ref.jsonl"));
}

TEST_F(CheckpointCli, DataFileWithoutCommitRecordIsNeverLoaded) {
  Write("data.jsonl", Rows(40));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 4\n");
  // Killed between the first final tap's data file and its commit record.
  const Spawned run = Spawn({"run", "--config", "recipe.yaml", "--job_id", "k"},
                            {"DJSHARD_TEST_KILL_AT=tap_data_published"});
  ASSERT_EQ(WaitFor(run).exit_code, 128 + SIGKILL);
  EXPECT_TRUE(Commits("k").empty());
  const CliResult r = Run({"run", "--config", "recipe.yaml", "--resume", "k"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const json& e : Events(Path("out/k"))) EXPECT_NE(e["event_type"], "checkpoint_load");
  EXPECT_NE(r.out.find("0 taken from checkpoints"), std::string::npos) << r.out;
}

// partition.max_concurrent_partitions runs partitions side by side; the
// output, errors and stats never depend on it, and it may change on --resume.
TEST_F(CheckpointCli, PartitionsInFlightNeverChangeTheOutput) {
  Write("data.jsonl", Rows(300));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 6\ncheckpoint:\n  n_ops: 2\n",
         std::string(kFiveOps) + "      batch_size: 16\n");
  ASSERT_EQ(
      RunReference({"--partition.max_concurrent_partitions", "1", "--threads", "1"}).exit_code, 0);
  const std::string want = Read("ref.jsonl");
  const std::string want_errors = Read("ref.jsonl.errors.jsonl");
  EXPECT_NE(want_errors, "");
  const json want_stats = json::parse(Read("ref.jsonl.stats.json"));
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"2", "1"}, {"3", "2"}, {"auto", "3"}, {"6", "4"}};
  for (const auto& [k, threads] : runs) {
    const std::string out = "k" + k + ".jsonl";
    const CliResult r =
        Run({"run", "--config", "recipe.yaml", "--job_id", "j" + k, "--export-path", out,
             "--partition.max_concurrent_partitions", k, "--threads", threads});
    ASSERT_EQ(r.exit_code, 0) << k << "\n" << r.err;
    EXPECT_EQ(Read(out), want) << k;
    EXPECT_EQ(Read(out + ".errors.jsonl"), want_errors) << k;
    const json stats = json::parse(Read(out + ".stats.json"));
    EXPECT_EQ(stats["rows_out"], want_stats["rows_out"]) << k;
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(stats["operators"][i]["rows_out"], want_stats["operators"][i]["rows_out"]) << k;
    }
  }
  // Killed with three in flight, resumed with one: the same bytes.
  ASSERT_EQ(WaitFor(Spawn({"run", "--config", "recipe.yaml", "--job_id", "x",
                           "--partition.max_concurrent_partitions", "3"},
                          {"DJSHARD_TEST_KILL_AT=tap_committed@7"}))
                .exit_code,
            128 + SIGKILL);
  CliResult r = Run({"run", "--config", "recipe.yaml", "--resume", "x",
                     "--partition.max_concurrent_partitions", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out/result.jsonl"), want);

  // A bad value is refused before anything is written.
  for (const std::string bad : {"0", "many", "65"}) {
    r = Run({"run", "--config", "recipe.yaml", "--job_id", "bad",
             "--partition.max_concurrent_partitions", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("'partition.max_concurrent_partitions' must be auto or a number"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(Exists("out/bad"));
  }
  // An operator error that stops the run stops every partition in flight.
  Write("strict.yaml",
        "dataset_path: data.jsonl\nexport_path: out/strict.jsonl\nskip_op_error: false\n"
        "partition:\n  mode: manual\n  num_of_partitions: 6\n"
        "  max_concurrent_partitions: 3\nprocess:\n" +
            std::string(kFiveOps));
  r = Run({"run", "--config", "strict.yaml", "--job_id", "strict"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("failed"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("out/strict.jsonl"));
  EXPECT_EQ(json::parse(Read("out/strict/job_summary.json"))["status"], "failed");
}

// `djshard gc` removes what a killed run left that no commit names, never
// while the run may be alive, and never a committed checkpoint.
TEST_F(CheckpointCli, GcRemovesUncommittedFilesOfAnEndedRunOnly) {
  Write("data.jsonl", Rows(40));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 4\n  max_concurrent_partitions: 1\n");
  ASSERT_EQ(RunReference().exit_code, 0);
  // Killed between the second final tap's data file and its commit record.
  ASSERT_EQ(WaitFor(Spawn({"run", "--config", "recipe.yaml", "--job_id", "k"},
                          {"DJSHARD_TEST_KILL_AT=tap_data_published@2"}))
                .exit_code,
            128 + SIGKILL);
  Write("out/k/checkpoints/checkpoint_op_0004_partition_00003.x.jsonl.tmp.0123", "torn");
  const std::vector<std::string> commits = Commits("k");
  ASSERT_EQ(commits.size(), 1u);
  const json commit = json::parse(Read("out/k/checkpoints/" + commits[0]));
  const std::string kept = commit["data_path"], kept_errors = commit["errors_path"];
  std::vector<std::string> garbage;
  for (const std::string& n : List("out/k/checkpoints")) {
    if (n.rfind("checkpoint_op_", 0) == 0 && n.find(".commit.json") == std::string::npos &&
        n != kept && n != kept_errors) {
      garbage.push_back(n);
    }
  }
  // The uncommitted tap, its errors file and the torn temp file.
  ASSERT_EQ(garbage.size(), 3u);
  // And beside the export, the temporary files of the export and its errors
  // file (named after the job and the killed process), but not another job's
  // or a live process's.
  std::vector<std::string> export_temps;
  for (const std::string& n : List("out")) {
    if (n.find(".tmp.run-k@") != std::string::npos) export_temps.push_back(n);
  }
  ASSERT_EQ(export_temps.size(), 2u);
  const std::string other_job =
      "result.jsonl.tmp.run-k.b@" + HostName() + "@999999999.0123456789abcdef";
  const std::string live_writer =
      "result.jsonl.tmp.run-k@" + HostName() + "@" + std::to_string(getpid()) + ".0123456789abcdef";
  Write("out/" + other_job, "another job's");
  Write("out/" + live_writer, "a live process's");

  // The heartbeat is fresh: the run may still be writing.
  CliResult r = Run({"gc", "k", "--work-dir", "out"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("job k is running"), std::string::npos) << r.err;
  EXPECT_TRUE(Exists("out/k/checkpoints/" + garbage[0]));

  fs::last_write_time(Path("out/k/heartbeat"),
                      fs::file_time_type::clock::now() - std::chrono::minutes(2));
  r = Run({"gc", Path("out/k"), "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("would remove"), std::string::npos) << r.out;
  for (const std::string& n : garbage) EXPECT_TRUE(Exists("out/k/checkpoints/" + n)) << n;

  r = Run({"gc", "k", "--work-dir", "out", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["removed"].size(), 5u) << r.out;
  EXPECT_EQ(j["commits_kept"], 1);
  for (const std::string& n : garbage) EXPECT_FALSE(Exists("out/k/checkpoints/" + n)) << n;
  for (const std::string& n : export_temps) EXPECT_FALSE(Exists("out/" + n)) << n;
  EXPECT_TRUE(Exists("out/" + other_job));
  EXPECT_TRUE(Exists("out/" + live_writer));
  EXPECT_TRUE(Exists("out/k/checkpoints/" + kept));
  EXPECT_TRUE(Exists("out/k/checkpoints/" + kept_errors));
  EXPECT_EQ(Commits("k"), commits);

  // The job resumes from what gc kept, to the uninterrupted bytes.
  r = Run({"run", "--config", "recipe.yaml", "--resume", "k"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out/result.jsonl"), Read("ref.jsonl"));
  EXPECT_NE(r.out.find("1 taken from checkpoints"), std::string::npos) << r.out;
  EXPECT_EQ(Run({"gc", "nosuch", "--work-dir", "out"}).exit_code, 2);
}

// `djshard gc` and gather journals (SPEC-lineage §6): segment data that no
// commit record names goes; so does the journal of a partition whose final
// tap is committed (records first); the segments of an unfinished partition
// and every tap stay, and both jobs resume to the uninterrupted bytes.
class GatherJournalGcCli : public CheckpointCli {
 protected:
  // 60 documents, 2 partitions, an expand/gather region journaled every 4
  // parents; the uninterrupted output in ref.jsonl.
  void SetUp() override {
    CheckpointCli::SetUp();
    std::string docs;
    for (int i = 0; i < 60; ++i) {
      const int len = i % 5 == 0 ? i % 6 : 15 + (i * 37) % 75;
      std::string t;
      for (int k = 0; k < len; ++k) {
        t += (k % 6 == 5 && k + 1 < len) ? ' ' : static_cast<char>('a' + (i + k) % 26);
      }
      docs += "{\"id\":" + std::to_string(i) + ",\"text\":\"" + t + "\"}\n";
    }
    Write("data.jsonl", docs);
    Recipe("partition: {mode: manual, num_of_partitions: 2, max_concurrent_partitions: 1}\n",
           "  - text_length_filter: {min_len: 10}\n"
           "  - expand: {name: p, by: \"chars:7\", max_inflight_parents: 4}\n"
           "  - djshard_test_delay_mapper: {seed: 5, max_ms: 1}\n"
           "  - text_length_filter: {min_len: 4}\n"
           "  - gather: {name: p, journal_flush_parents: 4}\n"
           "  - whitespace_normalization_mapper:\n");
    ASSERT_EQ(RunJob({"--job_id", "ref", "--export-path", "ref.jsonl"}).exit_code, 0);
  }
  CliResult RunJob(const std::vector<std::string>& more,
                   const std::vector<std::string>& env = {}) const {
    std::vector<std::string> args = {"run", "--config", "recipe.yaml", "--threads", "1"};
    args.insert(args.end(), more.begin(), more.end());
    std::vector<std::string> e = kTestOps;
    e.insert(e.end(), env.begin(), env.end());
    return WaitFor(Spawn(args, e));
  }
  // The job's gather journal: its segment data and commit records.
  std::vector<std::string> Journal(const std::string& job) const {
    std::vector<std::string> out;
    for (const std::string& n : List("out/" + job + "/checkpoints")) {
      if (n.rfind("lineage_p_partition_", 0) == 0) out.push_back(n);
    }
    return out;
  }
  // The job's heartbeat two minutes old: its run is dead to gc.
  void MakeStale(const std::string& job) const {
    fs::last_write_time(Path("out/" + job + "/heartbeat"),
                        fs::file_time_type::clock::now() - std::chrono::minutes(2));
  }
};

// Killed right after partition 0's final tap committed, before its journal
// was deleted; a dead attempt's segment of partition 1 was never committed.
TEST_F(GatherJournalGcCli, TheJournalOfAFinishedPartitionGoesRecordsFirst) {
  ASSERT_EQ(RunJob({"--job_id", "f"}, {"DJSHARD_TEST_KILL_AT=tap_committed@2"}).exit_code,
            128 + SIGKILL);
  ASSERT_TRUE(Exists("out/f/checkpoints/checkpoint_op_0005_partition_00000.commit.json"));
  Write("out/f/checkpoints/lineage_p_partition_00001.0badc0de.seg00000.jsonl.zst", "torn");
  const std::vector<std::string> f_journal = Journal("f");
  ASSERT_GE(f_journal.size(), 3u);
  const std::vector<std::string> f_commits = Commits("f");
  MakeStale("f");
  // The journal, and the temporary files of the export and its errors file.
  const size_t f_garbage = f_journal.size() + 2;
  CliResult r = Run({"gc", "f", "--work-dir", "out", "--dry-run", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["removed"].size(), f_garbage) << r.out;
  EXPECT_EQ(Journal("f"), f_journal);
  r = Run({"gc", "f", "--work-dir", "out", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json f_gc = json::parse(r.out);
  EXPECT_EQ(f_gc["removed"].size(), f_garbage) << r.out;
  // Records before data: a segment stops existing before its data goes.
  size_t first_data = f_gc["removed"].size(), last_record = 0;
  for (size_t i = 0; i < f_gc["removed"].size(); ++i) {
    const std::string path = f_gc["removed"][i];
    if (path.find(".commit.json") != std::string::npos) {
      last_record = i;
    } else {
      first_data = std::min(first_data, i);
    }
  }
  EXPECT_LT(last_record, first_data) << r.out;
  EXPECT_TRUE(Journal("f").empty());
  EXPECT_EQ(f_gc["commits_kept"], 2);
  for (const std::string& c : f_commits) {
    if (c.rfind("checkpoint_op_", 0) == 0) {
      EXPECT_TRUE(Exists("out/f/checkpoints/" + c)) << c;
    }
  }
  r = RunJob({"--resume", "f"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Read("out/result.jsonl") == Read("ref.jsonl"));
}

// Killed after partition 1's second segment: its committed segments stay
// (the resume takes their parents), the uncommitted one goes.
TEST_F(GatherJournalGcCli, TheCommittedSegmentsOfAnUnfinishedPartitionStay) {
  ASSERT_EQ(
      RunJob({"--job_id", "s"}, {"DJSHARD_TEST_KILL_AT=lineage_segment_committed@8"}).exit_code,
      128 + SIGKILL);
  const std::vector<std::string> s_journal = Journal("s");
  ASSERT_EQ(s_journal.size(), 4u);
  const std::string orphan = "lineage_p_partition_00001.0badc0de.seg00002.jsonl.zst";
  Write("out/s/checkpoints/" + orphan, "torn");
  MakeStale("s");
  CliResult r = Run({"gc", "s", "--work-dir", "out", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s_gc = json::parse(r.out);
  // The orphan, and the temp files of the taps partition 1 was writing.
  size_t orphans = 0;
  for (const json& path : s_gc["removed"]) {
    const std::string name = fs::path(path.get<std::string>()).filename().string();
    orphans += name == orphan;
    EXPECT_TRUE(name == orphan || name.find(".tmp.") != std::string::npos) << r.out;
  }
  EXPECT_EQ(orphans, 1u) << r.out;
  EXPECT_EQ(Journal("s"), s_journal);
  r = RunJob({"--resume", "s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Read("out/result.jsonl") == Read("ref.jsonl"));
  const json stats = json::parse(Read("out/result.jsonl.stats.json"));
  EXPECT_GE(stats["regions"]["p"]["parents_from_journal"].get<int>(), 8) << stats.dump();
}

TEST_F(CheckpointCli, JobIdRulesAndResumeOfAMissingJob) {
  Write("data.jsonl", Rows(10));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 2\n");
  CliResult r = Run({"run", "--config", "recipe.yaml", "--job-id", ".bad"});
  EXPECT_EQ(r.exit_code, 2);
  r = Run({"run", "--config", "recipe.yaml", "--resume", "none"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ERROR: resume none: locate: "), std::string::npos) << r.err;
  r = Run({"run", "--config", "recipe.yaml", "--job_id", "a", "--resume", "b"});
  EXPECT_EQ(r.exit_code, 2);
  r = Run({"run", "--config", "recipe.yaml", "--job_id", "w", "--work-dir", "jobs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Exists("jobs/w/job_summary.json"));
  r = Run({"run", "--config", "recipe.yaml", "--job_id", "w", "--work-dir", "jobs"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("add --resume w"), std::string::npos) << r.err;
}

TEST_F(CheckpointCli, MonitorAndJobsFollowARunFromStartToEnd) {
  Write("data.jsonl", Rows(12));
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 4\n",
         "  - djshard_test_sleep_mapper:\n      seconds: 0.08\n"
         "  - text_length_filter:\n      min_len: 3\n");
  const Spawned run =
      Spawn({"run", "--config", "recipe.yaml", "--job_id", "m", "--threads", "1"}, kTestOps);
  auto finals = [&] {
    int n = 0;
    if (!Exists("out/m/checkpoints")) return 0;
    for (const std::string& c : Commits("m")) n += c.rfind("checkpoint_op_0001", 0) == 0;
    return n;
  };
  ASSERT_TRUE(WaitUntil([&] { return finals() >= 1; }));
  const int before = finals();
  CliResult mon = Run({"monitor", "m", "--work-dir", "out", "--json", "--detailed"});
  const int after = finals();
  EXPECT_EQ(mon.exit_code, 1) << mon.out << mon.err;
  json view = json::parse(mon.out);
  EXPECT_EQ(view["status"], "running");
  EXPECT_GE(view["partitions"]["done"].get<int>(), before);
  EXPECT_LE(view["partitions"]["done"].get<int>(), after);
  EXPECT_EQ(view["partitions"]["total"], 4);
  ASSERT_EQ(WaitFor(run).exit_code, 0);
  // A torn last line (a writer that died mid-write) is skipped.
  const std::string events = [&] {
    for (const std::string& n : List("out/m")) {
      if (n.rfind("events_", 0) == 0) return "out/m/" + n;
    }
    return std::string();
  }();
  Write(events, Read(events) + "{\"event_type\": \"partition_st");
  mon = Run({"monitor", Path("out/m"), "--json", "--detailed"});
  EXPECT_EQ(mon.exit_code, 0) << mon.err;
  view = json::parse(mon.out);
  EXPECT_EQ(view["status"], "completed");
  EXPECT_EQ(view["partitions"]["done"], 4);
  for (const json& p : view["partition_details"]) {
    EXPECT_EQ(p["committed_taps"], json::array({1})) << p;
  }
  EXPECT_EQ(Run({"monitor", "nope", "--work-dir", "out"}).exit_code, 2);
  // --job-dir, as every other command takes it.
  const CliResult by_option = Run({"monitor", "--job-dir", Path("out/m"), "--json"});
  EXPECT_EQ(by_option.exit_code, 0) << by_option.err;
  EXPECT_EQ(json::parse(by_option.out)["status"], "completed");
  EXPECT_EQ(Run({"monitor", "--job-dir", Path("out/nope")}).exit_code, 2);
  const CliResult twice = Run({"monitor", "m", "--job-dir", Path("out/m")});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("monitor takes the job once"), std::string::npos) << twice.err;

  // A failed job: monitor says 2.
  Write("fail", "");
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 2\n",
         "  - djshard_test_sleep_mapper:\n      seconds: 0\n      fail_while_exists: " +
             Path("fail") + "\n      skip_op_error: false\n");
  const Spawned failing = Spawn({"run", "--config", "recipe.yaml", "--job_id", "f"}, kTestOps);
  EXPECT_EQ(WaitFor(failing).exit_code, 2);
  EXPECT_EQ(Run({"monitor", "f", "--work-dir", "out"}).exit_code, 2);

  // A kill -9ed run is interrupted (resumable) once its heartbeat is stale.
  Recipe("partition:\n  mode: manual\n  num_of_partitions: 6\n",
         "  - djshard_test_sleep_mapper:\n      seconds: 0.05\n");
  const Spawned killed =
      Spawn({"run", "--config", "recipe.yaml", "--job_id", "k", "--threads", "1"}, kTestOps);
  ASSERT_TRUE(WaitUntil([&] { return Exists("out/k/checkpoints") && !Commits("k").empty(); }));
  ::kill(killed.pid, SIGKILL);
  WaitFor(killed);
  CliResult jobs = Run({"jobs", "--work-dir", "out", "--json"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  auto status_of = [](const json& all, const std::string& id) {
    for (const json& j : all) {
      if (j["job_id"] == id) return j["status"].get<std::string>();
    }
    return std::string("missing");
  };
  EXPECT_EQ(status_of(json::parse(jobs.out), "k"), "running");
  fs::last_write_time(Path("out/k/heartbeat"),
                      fs::file_time_type::clock::now() - std::chrono::minutes(5));
  jobs = Run({"jobs", "--work-dir", "out", "--json"});
  const json all = json::parse(jobs.out);
  EXPECT_EQ(status_of(all, "k"), "interrupted (resumable)");
  EXPECT_EQ(status_of(all, "m"), "completed");
  EXPECT_EQ(status_of(all, "f"), "failed");
  EXPECT_EQ(Run({"jobs", "--work-dir", "out", "--running", "--json"}).out, "[]\n");
  EXPECT_EQ(Run({"monitor", "k", "--work-dir", "out"}).exit_code, 1);
}

}  // namespace
}  // namespace djshard::testing
