// Data-Juicer users' command lines and recipes, run as they are written
// (issue: "Data-Juicer users' recipes and commands work as written").
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CompatCli : public CliTest {
 protected:
  void WriteCorpus(int rows) {
    std::string text;
    for (int i = 0; i < rows; ++i) {
      text += "{\"id\":" + std::to_string(i) + ",\"text\":\"  row " + std::to_string(i) + " \"}\n";
    }
    Write("data.jsonl", text);
  }
};

// The launch line of Data-Juicer's elastic sharding demo, with a trailing
// slash on the job dir as shell completion writes it, and fractional seconds.
TEST_F(CompatCli, DataJuicersDlcCommandLineRunsAsWritten) {
  WriteCorpus(40);
  DemoRecipe();
  const CliResult r = Run({"dlc", "--job-dir", "jobs/x/", "--config", "recipe.yaml", "--nodes", "1",
                           "--num-shards", "4", "--ray-address", "local", "--run-id", "r1",
                           "--poll-interval-secs", "0.2", "--wait-timeout-secs", "30.5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("PASS: 4 shards were completed by 1 node(s); merged 40 rows into " +
                       Path("jobs/x/merged.jsonl")),
            std::string::npos)
      << r.out;
  // The coordination directory sits beside the job, not inside it.
  EXPECT_TRUE(Exists("jobs/.x.dlc-coordination"));
  EXPECT_FALSE(Exists("jobs/x/..dlc-coordination"));
  EXPECT_FALSE(Exists("jobs/x/.x.dlc-coordination"));
  // The same command again returns the stored result.
  const CliResult again = Run({"dlc", "--job-dir", "jobs/x", "--config", "recipe.yaml",
                               "--num-shards", "4", "--run-id", "r1"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("PASS: 4 shards"), std::string::npos) << again.out;
}

TEST_F(CompatCli, EveryCommandTakesRayAddressAndFractionalSeconds) {
  WriteCorpus(10);
  DemoRecipe();
  CliResult r = Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "2",
                     "--ray-address", "auto", "--lease-secs", "2.5", "--heartbeat-secs", "0.5",
                     "--poll-interval-secs", "0.2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json policy = json::parse(Read("job/manifest.json"))["policy"];
  EXPECT_EQ(policy["lease_secs"], 2.5);
  EXPECT_EQ(policy["heartbeat_secs"], 0.5);
  EXPECT_EQ(policy["poll_interval_secs"], 0.2);
  r = Run({"worker", "--job-dir", "job", "--ray-address", "auto", "--lease-secs", "3.5",
           "--heartbeat-secs", "0.25", "--poll-interval-secs", "0.1", "--threads", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Run({"status", "--job-dir", "job", "--watch", "--interval", "0.1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CompatCli, ZeroNegativeAndNonNumericSecondsAreRefusedNamingTheOption) {
  WriteCorpus(4);
  DemoRecipe();
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--lease-secs", "0"},
                                              {"--heartbeat-secs", "-1"},
                                              {"--poll-interval-secs", "soon"}}) {
    std::vector<std::string> args = {"prepare",      "--config", "recipe.yaml", "--job-dir", "job",
                                     "--num-shards", "1"};
    args.insert(args.end(), bad.begin(), bad.end());
    const CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << bad[0];
    EXPECT_NE(r.err.find(bad[0]), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("seconds"), std::string::npos) << r.err;
    EXPECT_FALSE(Exists("job"));
  }
  const CliResult w = Run({"worker", "--job-dir", "job", "--poll-interval-secs", "0"});
  EXPECT_EQ(w.exit_code, 2);
  EXPECT_NE(w.err.find("--poll-interval-secs"), std::string::npos) << w.err;
}

// prepare builds the plan a worker builds: an argument no operator takes
// refuses the job before any job directory exists.
TEST_F(CompatCli, PrepareRefusesARecipeNoWorkerCouldRun) {
  WriteCorpus(4);
  DemoRecipe("data.jsonl", "  - text_length_filter:\n      min_lenght: 3\n");
  const CliResult r =
      Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("recipe.yaml:8: text_length_filter: argument 'min_lenght'"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(Exists("job"));
  EXPECT_EQ(List(), (std::vector<std::string>{"data.jsonl", "recipe.yaml"}));
}

// A recipe the worker cannot run (a job prepared by an older build) ends the
// worker with exit 2 before it claims anything: no shard is charged.
TEST_F(CompatCli, AWorkerThatCannotRunTheRecipeTouchesNoShard) {
  WriteCorpus(4);
  DemoRecipe();
  ASSERT_EQ(Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "2"})
                .exit_code,
            0);
  Write("job/recipe.yaml", "process:\n  - text_length_filter:\n      min_lenght: 3\n");
  const CliResult r = Run({"worker", "--job-dir", "job", "--allow-version-mismatch"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("min_lenght"), std::string::npos) << r.err;
  EXPECT_TRUE(List("job/attempts").empty());
  EXPECT_TRUE(List("job/state/locks").empty());
  EXPECT_TRUE(List("job/state/failed").empty());
  const CliResult status = Run({"status", "--job-dir", "job"});
  EXPECT_NE(status.out.find("pending=2"), std::string::npos) << status.out;
}

// run, worker and dlc choose their threads by one rule: --threads, else the
// recipe's np, else the largest num_proc.
TEST_F(CompatCli, WorkerAndDlcTakeTheirThreadsFromTheRecipeAsRunDoes) {
  WriteCorpus(8);
  Write("recipe.yaml",
        "dataset_path: data.jsonl\nnp: 3\nprocess:\n  - whitespace_normalization_mapper:\n");
  ASSERT_EQ(Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "1"})
                .exit_code,
            0);
  ASSERT_EQ(Run({"worker", "--job-dir", "job"}).exit_code, 0);
  const std::string attempts = "job/attempts/part-00000-of-00001";
  const std::string log = attempts + "/" + List(attempts).front() + "/process.log";
  EXPECT_TRUE(Contains(log, "with 3 thread(s)")) << Read(log);

  const CliResult run = Run({"run", "--config", "recipe.yaml", "--export-path", "out.jsonl"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("with 3 thread(s)"), std::string::npos) << run.out;
  const CliResult two =
      Run({"run", "--config", "recipe.yaml", "--export-path", "out.jsonl", "--threads", "2"});
  EXPECT_NE(two.out.find("with 2 thread(s)"), std::string::npos) << two.out;
  const CliResult zero =
      Run({"run", "--config", "recipe.yaml", "--export-path", "out.jsonl", "--threads", "0"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--threads"), std::string::npos) << zero.err;
}

}  // namespace
}  // namespace djshard::testing
