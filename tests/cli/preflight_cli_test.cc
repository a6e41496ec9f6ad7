// Model preflight (SPEC-checkpoints §10, §11 test 11), black-box on the CPU:
// a tiny RoBERTa snapshot made by tools/tiny_models.py, probed by
// `djshard run --device cpu` before the job's first partition.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Source(const std::string& rel) { return std::string(DJSHARD_SOURCE_DIR) + "/" + rel; }

class PreflightCli : public CliTest {
 protected:
  static void SetUpTestSuite() {
    skip_reason_.clear();
    const CliResult v = RunDjshard({"version"});
    if (v.out.find("libtorch: not built in") != std::string::npos) {
      skip_reason_ = "this djshard is built without libtorch (DJSHARD_WITH_TORCH=OFF)";
      return;
    }
    ASSERT_EQ(std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null"), 0)
        << "Debian's python3-torch is missing: run scripts/setup.sh";
    char tmpl[] = "/tmp/djshard-preflight-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    models_ = tmpl;
    ASSERT_EQ(std::system(("/usr/bin/python3 " + Source("tools/tiny_models.py") + " make " +
                           models_ + " >/dev/null")
                              .c_str()),
              0);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!models_.empty()) fs::remove_all(models_, ec);
  }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    CliTest::SetUp();
    std::string rows;
    for (int i = 0; i < 40; ++i) {
      rows += json({{"id", i}, {"text", "  profits fell  sharply in quarter " + std::to_string(i)}})
                  .dump() +
              "\n";
    }
    Write("in.jsonl", rows);
  }

  // A recipe of a CPU mapper and the sentiment model on `text`; `contracts`
  // gives both operators input_columns/output_columns.
  void WriteRecipe(const std::string& partition_extra, const std::string& op_extra = "",
                   bool contracts = false, int batch_size = 8) {
    std::string r = "partition:\n  mode: manual\n  num_of_partitions: 2\n" + partition_extra +
                    "process:\n  - whitespace_normalization_mapper:\n";
    if (contracts) r += "      input_columns: [text]\n      output_columns: [text]\n";
    r += "  - query_sentiment_detection_mapper:\n      hf_model: " + models_ +
         "/roberta-sentiment-st\n      zh_to_en_hf_model: null\n      query_key: text\n" +
         "      batch_size: " + std::to_string(batch_size) + "\n";
    if (contracts) {
      r += "      input_columns: [text]\n"
           "      output_columns: [__dj__meta__.query_sentiment_label*]\n";
    }
    r += op_extra;
    Write("recipe.yaml", r);
  }

  CliResult RunJob(const std::string& job) {
    return Run({"run", "--config", Path("recipe.yaml"), "--dataset-path", Path("in.jsonl"),
                "--export-path", Path("out/" + job + ".jsonl"), "--device", "cpu", "--work-dir",
                Path("work"), "--job_id", job});
  }

  std::string Events(const std::string& job) const {
    std::string all;
    for (const auto& e : fs::directory_iterator(Path("work/" + job))) {
      const std::string name = e.path().filename().string();
      if (name.rfind("events_", 0) == 0) all += Read("work/" + job + "/" + name);
    }
    return all;
  }
  int Count(const std::string& job, const std::string& event_type) const {
    const std::string text = Events(job);
    const std::string needle = "\"event_type\":\"" + event_type + "\"";
    int n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      ++n;
    }
    return n;
  }
  json Probe(const std::string& job) const {
    const json j = json::parse(Read("work/" + job + "/gpu_probe_results.json"));
    EXPECT_EQ(j["probes"].size(), 1u);
    return j["probes"][0];
  }
  // Runs `job` and says whether it probed (true) or reused a probe (false).
  bool Probed(const std::string& job) {
    const CliResult r = RunJob(job);
    EXPECT_EQ(r.exit_code, 0) << job << ": " << r.err;
    return Count(job, "probe_start") > 0;
  }
  // A job that preflight stopped: exit 2 naming the operator, before any partition.
  void ExpectStoppedBeforeAnyPartition(const std::string& job, const std::string& text) {
    const CliResult r = RunJob(job);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("query_sentiment_detection_mapper"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("recipe.yaml:"), std::string::npos) << r.err;
    EXPECT_EQ(Count(job, "probe_failed"), 1);
    EXPECT_EQ(Count(job, "partition_start"), 0);
    for (const auto& e : fs::directory_iterator(Path("work/" + job + "/checkpoints"))) {
      EXPECT_EQ(e.path().filename().string().rfind("checkpoint_op_", 0), std::string::npos)
          << e.path();
    }
    EXPECT_FALSE(Exists("out/" + job + ".jsonl"));
  }

  // Runs `job` with the host memory the planner sees set to `bytes` (0: the machine's).
  CliResult RunWithMemory(const std::string& job, uint64_t bytes,
                          const std::vector<std::string>& extra_env = {},
                          const std::vector<std::string>& extra_args = {}) {
    std::vector<std::string> env = {"DJSHARD_ENABLE_TEST_OPERATORS=1"};
    if (bytes > 0) env.push_back("DJSHARD_TEST_HOST_MEMORY_BYTES=" + std::to_string(bytes));
    for (const std::string& e : extra_env) env.push_back(e);
    std::vector<std::string> args = {"run",
                                     "--config",
                                     Path("recipe.yaml"),
                                     "--dataset-path",
                                     Path("in.jsonl"),
                                     "--export-path",
                                     Path("out/" + job + ".jsonl"),
                                     "--device",
                                     "cpu",
                                     "--work-dir",
                                     Path("work"),
                                     "--job_id",
                                     job};
    for (const std::string& a : extra_args) args.push_back(a);
    return WaitFor(Spawn(args, env));
  }

  static std::string models_;
  static std::string skip_reason_;
};
std::string PreflightCli::models_;
std::string PreflightCli::skip_reason_;

TEST_F(PreflightCli, CpuProbeRecordsTimingsAndACacheKeyThatARerunReuses) {
  WriteRecipe("");
  const CliResult r = RunJob("a");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("Replica plan"), std::string::npos) << r.err;
  const json p = Probe("a");
  EXPECT_EQ(p["op_idx"], 1);
  EXPECT_EQ(p["op_name"], "query_sentiment_detection_mapper");
  EXPECT_EQ(p["cache_key"].get<std::string>().size(), 64u);
  EXPECT_EQ(p["device"]["name"], "cpu");
  EXPECT_EQ(p["batch_size"], 8);
  EXPECT_EQ(p["sample"]["rows"], 8);
  EXPECT_EQ(p["sample"]["mode"], "offset");
  EXPECT_GT(p["timings"]["init_secs"].get<double>(), 0);
  EXPECT_GE(p["timings"]["warmup_secs"].get<double>(), 0);
  EXPECT_EQ(p["timings"]["steady_secs"].size(), 3u);
  EXPECT_GT(p["steady_rows_per_sec"].get<double>(), 0);
  EXPECT_EQ(p["output_ratio"], 1.0);
  // Host memory on the CPU: the model's weights, a replica's activations,
  // 10% more as a fraction of the machine; the GPU-only fields are null.
  const json& memory = p["memory"];
  EXPECT_GT(memory["weights_bytes"].get<uint64_t>(), 0u) << memory;
  EXPECT_LT(memory["weights_bytes"].get<uint64_t>(), 1ull << 30) << memory;
  EXPECT_TRUE(memory["activation_peak_bytes"].is_number_unsigned()) << memory;
  EXPECT_GT(memory["memory_fraction"].get<double>(), 0) << memory;
  EXPECT_LT(memory["memory_fraction"].get<double>(), 1) << memory;
  EXPECT_NEAR(
      memory["memory_fraction"].get<double>() *
          static_cast<double>(p["device"]["total_memory_bytes"]),
      1.1 * (memory["weights_bytes"].get<double>() + memory["activation_peak_bytes"].get<double>()),
      1e3)
      << memory;
  EXPECT_TRUE(memory["context_bytes"].is_null()) << memory;
  EXPECT_TRUE(memory["scheduled_share"].is_null()) << memory;
  EXPECT_NE(r.err.find(" per replica"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("weights "), std::string::npos) << r.err;
  EXPECT_TRUE(p["reusable"].get<bool>());
  EXPECT_EQ(Count("a", "probe_start"), 1);
  EXPECT_EQ(Count("a", "probe_complete"), 1);
  EXPECT_FALSE(Exists("work/a/probe"));
  // The plan: a model stage with its replicas, the probe's key, one group.
  const json plan = json::parse(Read("work/a/dag_execution_plan.json"));
  EXPECT_EQ(plan["probe"]["enabled"], true);
  EXPECT_EQ(plan["probe"]["cache_keys"][0], p["cache_key"]);
  EXPECT_EQ(plan["ops"][1]["kind"], "model");
  const json& stage = plan["stages"][plan["ops"][1]["stage_id"].get<size_t>()];
  EXPECT_EQ(stage["kind"], "model");
  EXPECT_GE(stage["replicas"].get<int>(), 1);
  EXPECT_EQ(stage["devices"].size(), stage["replicas"].get<size_t>());
  EXPECT_EQ(plan["execution_groups"][0]["partitions"].size(), 2u);
  // On the CPU every executor thread runs a replica: the threads are the plan's.
  EXPECT_EQ(json::parse(Read("out/a.jsonl.stats.json"))["threads"], stage["replicas"]);
  // The output is the model's.
  EXPECT_TRUE(Contains("out/a.jsonl", "query_sentiment_label"));
  // monitor shows the replica plan.
  const CliResult shown = Run({"monitor", "a", "--work-dir", Path("work")});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("replica plan:"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("stage 1 query_sentiment_detection_mapper: "), std::string::npos)
      << shown.out;
  const json monitored =
      json::parse(Run({"monitor", "a", "--work-dir", Path("work"), "--json"}).out);
  EXPECT_EQ(monitored["replica_plan"]["stages"][0]["replicas"], stage["replicas"]);
  EXPECT_EQ(monitored["replica_plan"]["probe"]["cache_keys"][0], p["cache_key"]);

  // The same recipe again (a new job in the same work dir): reused.
  EXPECT_FALSE(Probed("b"));
  EXPECT_EQ(Probe("b")["cache_key"], p["cache_key"]);
  EXPECT_EQ(Probe("b")["created_at"], p["created_at"]);
}

// A host memory that holds one replica of the model (weights once, then
// activations per replica) lowers the threads of `run` and of a worker to
// one, unless the thread count was given.
TEST_F(PreflightCli, MemoryForOneReplicaLowersTheThreadsOfRunAndOfAWorker) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two cores";
  WriteRecipe("");
  ASSERT_TRUE(Probed("roomy"));
  const json memory = Probe("roomy")["memory"];
  const auto weights = static_cast<uint64_t>(1.1 * memory["weights_bytes"].get<double>()) + 1;
  const auto replica =
      static_cast<uint64_t>(1.1 * memory["activation_peak_bytes"].get<double>()) + 1;
  const std::vector<std::string> env = {
      "DJSHARD_ENABLE_TEST_OPERATORS=1",
      "DJSHARD_TEST_HOST_MEMORY_BYTES=" + std::to_string(weights + replica + replica / 2)};
  const uint64_t one_replica = weights + replica + replica / 2;
  auto run = [&](const std::string& job, const std::vector<std::string>& extra) {
    return RunWithMemory(job, one_replica, {}, extra);
  };
  const CliResult lean = run("lean", {});
  ASSERT_EQ(lean.exit_code, 0) << lean.err;
  EXPECT_NE(lean.err.find("executor threads: 1 (every core would be"), std::string::npos)
      << lean.err;
  EXPECT_EQ(json::parse(Read("out/lean.jsonl.stats.json"))["threads"], 1);
  const json plan = json::parse(Read("work/lean/dag_execution_plan.json"));
  const json& stage = plan["stages"][plan["ops"][1]["stage_id"].get<size_t>()];
  EXPECT_EQ(stage["replicas"], 1) << stage;
  EXPECT_EQ(stage["bound"], "memory") << stage;
  EXPECT_EQ(Read("out/lean.jsonl"), Read("out/roomy.jsonl"));
  // An explicit thread count is kept, with a warning.
  const CliResult given = run("given", {"--threads", "2"});
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_NE(given.err.find("WARNING: the CPU memory holds 1 model replicas"), std::string::npos)
      << given.err;
  EXPECT_EQ(json::parse(Read("out/given.jsonl.stats.json"))["threads"], 2);
  EXPECT_EQ(Read("out/given.jsonl"), Read("out/roomy.jsonl"));

  // A worker of an elastic job plans the same and runs its shards on one thread.
  ASSERT_EQ(Run({"prepare", "--config", Path("recipe.yaml"), "--dataset-path", Path("in.jsonl"),
                 "--job-dir", Path("work/elastic"), "--num-shards", "2"})
                .exit_code,
            0);
  const CliResult worker =
      WaitFor(Spawn({"worker", "--job-dir", Path("work/elastic"), "--device", "cpu"}, env));
  ASSERT_EQ(worker.exit_code, 0) << worker.err;
  EXPECT_NE(worker.err.find("executor threads: 1 (every core would be"), std::string::npos)
      << worker.err;
  size_t attempts = 0;
  for (const auto& shard : fs::directory_iterator(Path("work/elastic/attempts"))) {
    for (const auto& a : fs::directory_iterator(shard.path())) {
      std::ifstream f(a.path() / "attempt.json");
      std::stringstream text;
      text << f.rdbuf();
      const json attempt = json::parse(text.str());
      EXPECT_EQ(attempt["plan"]["threads"], 1) << attempt;
      ++attempts;
    }
  }
  EXPECT_EQ(attempts, 2u);
  const CliResult merged =
      Run({"merge", "--job-dir", Path("work/elastic"), "--output", Path("out/elastic.jsonl")});
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_EQ(Read("out/elastic.jsonl"), Read("out/roomy.jsonl"));
}

TEST_F(PreflightCli, BatchSizeOffsetAndSeedChangesReprobeAndShuffleWithoutSeedNeverReuses) {
  WriteRecipe("");
  ASSERT_TRUE(Probed("base"));
  const std::string base = Probe("base")["cache_key"];
  WriteRecipe("", "", false, 4);
  EXPECT_TRUE(Probed("batch4"));
  EXPECT_EQ(Probe("batch4")["batch_size"], 4);
  EXPECT_NE(Probe("batch4")["cache_key"], base);

  WriteRecipe("  gpu_probe_sample_offset: 5\n");
  EXPECT_TRUE(Probed("offset5"));
  EXPECT_EQ(Probe("offset5")["sample"]["offset"], 5);
  EXPECT_NE(Probe("offset5")["cache_key"], base);

  WriteRecipe("  gpu_probe_sample_shuffle: true\n  gpu_probe_sample_seed: 7\n");
  EXPECT_TRUE(Probed("seed7"));
  EXPECT_EQ(Probe("seed7")["sample"]["mode"], "shuffle");
  EXPECT_FALSE(Probed("seed7again"));
  WriteRecipe("  gpu_probe_sample_shuffle: true\n  gpu_probe_sample_seed: 8\n");
  EXPECT_TRUE(Probed("seed8"));

  WriteRecipe("  gpu_probe_sample_shuffle: true\n  gpu_probe_sample_seed: null\n");
  EXPECT_TRUE(Probed("noseed1"));
  EXPECT_FALSE(Probe("noseed1")["reusable"].get<bool>());
  EXPECT_TRUE(Probed("noseed2"));
}

TEST_F(PreflightCli, ContractsReadingOnlyTextProbeParallelWithoutContractsOrdered) {
  WriteRecipe("", "", /*contracts=*/true);
  ASSERT_TRUE(Probed("contracts"));
  EXPECT_EQ(Probe("contracts")["probe_mode"], "parallel");
  EXPECT_EQ(Probe("contracts")["replayed_ops"], json::array({0}));
  const json plan = json::parse(Read("work/contracts/dag_execution_plan.json"));
  EXPECT_EQ(plan["ops"][1]["input_columns"], json::array({"text"}));

  WriteRecipe("");
  ASSERT_TRUE(Probed("plain"));
  EXPECT_EQ(Probe("plain")["probe_mode"], "ordered");
  EXPECT_EQ(Probe("plain")["replayed_ops"], json::array({0}));
}

TEST_F(PreflightCli, IndependentProbesRunTogetherUpToMaxConcurrentGpuProbes) {
  WriteRecipe("  max_concurrent_gpu_probes: 2\n", "", /*contracts=*/true);
  // A second model operator that reads text only, as independent of the first.
  Write("recipe.yaml", Read("recipe.yaml") +
                           "  - query_topic_detection_mapper:\n      hf_model: " + models_ +
                           "/roberta-topic-st\n      zh_to_en_hf_model: null\n"
                           "      query_key: text\n      batch_size: 8\n"
                           "      input_columns: [text]\n"
                           "      output_columns: [__dj__meta__.query_topic_label*]\n");
  const CliResult r = RunJob("two");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json probes = json::parse(Read("work/two/gpu_probe_results.json"))["probes"];
  ASSERT_EQ(probes.size(), 2u);
  EXPECT_EQ(probes[1]["op_name"], "query_topic_detection_mapper");
  EXPECT_EQ(probes[1]["probe_mode"], "parallel");
  EXPECT_EQ(probes[1]["replayed_ops"], json::array({0}));
  // Both started before either completed.
  const std::string events = Events("two");
  const size_t second_start = events.rfind("\"event_type\":\"probe_start\"");
  const size_t first_complete = events.find("\"event_type\":\"probe_complete\"");
  ASSERT_NE(first_complete, std::string::npos);
  EXPECT_LT(second_start, first_complete);
  EXPECT_EQ(Count("two", "probe_start"), 2);
}

TEST_F(PreflightCli, AModelOperatorInsideAnExpandRegionIsProbedOnParentRows) {
  Write("recipe.yaml",
        "partition:\n  mode: manual\n  num_of_partitions: 2\nprocess:\n"
        "  - whitespace_normalization_mapper:\n"
        "  - expand: {name: paras, by: paragraph, keep_fields: [id]}\n"
        "  - query_sentiment_detection_mapper:\n      hf_model: " +
            models_ +
            "/roberta-sentiment-st\n      zh_to_en_hf_model: null\n      query_key: text\n"
            "      batch_size: 8\n"
            "  - gather: {name: paras, into: [text]}\n");
  ASSERT_TRUE(Probed("region"));
  const json p = Probe("region");
  EXPECT_EQ(p["op_idx"], 2);
  EXPECT_EQ(p["probe_mode"], "ordered");
  EXPECT_EQ(p["replayed_ops"], json::array({0}));  // the expand is not replayed
  EXPECT_NE(p["warnings"].dump().find("parent rows"), std::string::npos) << p["warnings"];
}

TEST_F(PreflightCli, AProbeThatRaisesStopsTheJobBeforeAnyPartition) {
  WriteRecipe("", "      skip_op_error: false\n");
  std::string r = Read("recipe.yaml");
  r.replace(r.find("query_key: text"), 15, "query_key: nothere");
  Write("recipe.yaml", r);
  ExpectStoppedBeforeAnyPartition("raise", "nothere");
}

TEST_F(PreflightCli, AMapperThatReturnsNothingStopsTheJobBeforeAnyPartition) {
  WriteRecipe("");
  std::string r = Read("recipe.yaml");
  r.replace(r.find("query_key: text"), 15, "query_key: nothere");
  Write("recipe.yaml", r);
  ExpectStoppedBeforeAnyPartition("empty", "returned no rows");
}

TEST_F(PreflightCli, AProbePastItsTimeoutStopsTheJobBeforeAnyPartition) {
  WriteRecipe("  gpu_probe_timeout_seconds: 0.001\n");
  ExpectStoppedBeforeAnyPartition("slow", "gpu_probe_timeout_seconds");
}

TEST_F(PreflightCli, DisabledPreflightNeedsNumProcAndMemRequiredAndWritesNoProbe) {
  WriteRecipe("  gpu_preflight_enabled: false\n", "      num_proc: 2\n");
  const CliResult refused = RunJob("bare");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("mem_required"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("query_sentiment_detection_mapper"), std::string::npos);

  WriteRecipe("  gpu_preflight_enabled: false\n", "      num_proc: 2\n      mem_required: 100MB\n");
  const CliResult r = RunJob("fixed");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(Exists("work/fixed/gpu_probe_results.json"));
  EXPECT_FALSE(Exists("work/fixed/probe"));
  EXPECT_EQ(Count("fixed", "probe_start"), 0);
  const json plan = json::parse(Read("work/fixed/dag_execution_plan.json"));
  EXPECT_EQ(plan["probe"]["enabled"], false);
  EXPECT_EQ(plan["stages"][plan["ops"][1]["stage_id"].get<size_t>()]["replicas"], 2);
}

// Elastic jobs (SPEC-checkpoints §10.5): the workers of a job share one
// probe per cache key through <job_dir>/probe/<key>.json.
class PreflightElasticCli : public PreflightCli {
 protected:
  // Three shards; a lease long enough that a slow start on a loaded machine
  // still finds a failure record fresh.
  void Prepare(const std::string& job) {
    const CliResult r =
        Run({"prepare", "--config", Path("recipe.yaml"), "--dataset-path", Path("in.jsonl"),
             "--job-dir", Path("work/" + job), "--num-shards", "3", "--lease-secs", "10",
             "--heartbeat-secs", "0.5", "--poll-interval-secs", "0.2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // A worker on its own hostname (UTS namespace); `extra` ends with its flags.
  Spawned WorkerOn(const std::string& host, const std::string& job,
                   const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"worker", "--job-dir", Path("work/" + job), "--device", "cpu"};
    args.insert(args.end(), extra.begin(), extra.end());
    if (std::find(args.begin(), args.end(), "--threads") == args.end()) {
      args.insert(args.end(), {"--threads", "1"});
    }
    return Spawn(args, {}, OnHost(host));
  }
  // Three workers started at once, waited for.
  std::vector<CliResult> ThreeWorkers(const std::string& job) {
    std::vector<Spawned> spawned;
    for (const char* host : {"node-a", "node-b", "node-c"}) spawned.push_back(WorkerOn(host, job));
    std::vector<CliResult> results;
    for (const Spawned& s : spawned) results.push_back(WaitFor(s));
    return results;
  }
  // Every attempt.json of the job.
  std::vector<json> Attempts(const std::string& job) const {
    std::vector<json> out;
    if (!Exists("work/" + job + "/attempts")) return out;
    for (const auto& shard : fs::directory_iterator(Path("work/" + job + "/attempts"))) {
      for (const auto& a : fs::directory_iterator(shard.path())) {
        std::ifstream f(a.path() / "attempt.json");
        std::stringstream text;
        text << f.rdbuf();
        out.push_back(json::parse(text.str()));
      }
    }
    return out;
  }
  // Names in work/<job>/<rel>.
  std::vector<std::string> Names(const std::string& job, const std::string& rel) const {
    std::vector<std::string> out;
    if (!Exists("work/" + job + "/" + rel)) return out;
    for (const auto& e : fs::directory_iterator(Path("work/" + job + "/" + rel))) {
      out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // The three workers of a job whose probe fails: each exits 2 naming the
  // operator and `text`, one probe ran, and no shard was claimed.
  void ExpectElasticJobStoppedBeforeAnyClaim(const std::string& job, const std::string& text) {
    Prepare(job);
    int readers = 0;
    for (const CliResult& r : ThreeWorkers(job)) {
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_NE(r.err.find("query_sentiment_detection_mapper"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("recipe.yaml:"), std::string::npos) << r.err;
      if (r.err.find(".failed.json") != std::string::npos) ++readers;
    }
    EXPECT_EQ(readers, 2);  // the other two read the prober's failure
    EXPECT_EQ(Count(job, "probe_start"), 1);
    EXPECT_EQ(Count(job, "probe_failed"), 1);
    EXPECT_EQ(Count(job, "partition_start"), 0);
    EXPECT_TRUE(Attempts(job).empty());
    EXPECT_TRUE(Names(job, "attempts").empty());
    EXPECT_TRUE(Names(job, "state/locks").empty());
    EXPECT_TRUE(Names(job, "state/done").empty());
    // The failure record, and at most the prober's work directory with the
    // probe's log (the record names it).
    std::vector<std::string> failures, work;
    for (const std::string& name : Names(job, "probe")) {
      (name.rfind("work.", 0) == 0 ? work : failures).push_back(name);
    }
    ASSERT_EQ(failures.size(), 1u) << ::testing::PrintToString(failures);
    EXPECT_EQ(failures[0].size(), 64u + std::string(".failed.json").size()) << failures[0];
    EXPECT_LE(work.size(), 1u) << ::testing::PrintToString(work);
    const json failure = json::parse(Read("work/" + job + "/probe/" + failures[0]));
    EXPECT_EQ(failure["op_name"], "query_sentiment_detection_mapper");
    EXPECT_EQ(failure["error_message"].get<std::string>().empty(), false);
    for (const std::string& w : work) {
      for (const std::string& name : Names(job, "probe/" + w)) {
        EXPECT_EQ(name.rfind("probe_op_", 0), 0u) << name;
      }
    }
  }
};

TEST_F(PreflightElasticCli, ThreeWorkersStartedAtOnceProbeEachKeyOnceAndTheOthersReadTheRecord) {
  WriteRecipe("");
  Prepare("job");
  int probers = 0;
  for (const CliResult& r : ThreeWorkers("job")) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.err.find("(probed ordered)") != std::string::npos) ++probers;
    // A worker that planned without probing read the prober's record.
    if (r.err.find("Replica plan") != std::string::npos &&
        r.err.find("(probed ") == std::string::npos) {
      EXPECT_NE(r.err.find("(probe record of node-"), std::string::npos) << r.err;
    }
  }
  EXPECT_EQ(probers, 1);
  // prepare's plan says the workers probe; the keys are per node.
  const json dag = json::parse(Read("work/job/dag_execution_plan.json"));
  EXPECT_EQ(dag["probe"]["enabled"], true);
  EXPECT_EQ(dag["ops"][1]["kind"], "model");
  EXPECT_EQ(Count("job", "probe_start"), 1);
  EXPECT_EQ(Count("job", "probe_complete"), 1);
  EXPECT_EQ(Count("job", "probe_failed"), 0);
  // One record per key, no lock or work directory left.
  const json index = json::parse(Read("work/job/gpu_probe_results.json"));
  ASSERT_EQ(index["probes"].size(), 1u);
  const std::string key = index["probes"][0]["cache_key"];
  EXPECT_EQ(Names("job", "probe"), std::vector<std::string>{key + ".json"});
  const json record = json::parse(Read("work/job/probe/" + key + ".json"));
  EXPECT_EQ(record["op_name"], "query_sentiment_detection_mapper");
  EXPECT_GT(record["steady_rows_per_sec"].get<double>(), 0);
  EXPECT_EQ(record["hostname"].get<std::string>().rfind("node-", 0), 0u);
  // Every attempt carries its node's replica plan.
  const std::vector<json> attempts = Attempts("job");
  ASSERT_EQ(attempts.size(), 3u);
  for (const json& a : attempts) {
    ASSERT_TRUE(a.contains("plan")) << a.dump(2);
    const json& plan = a["plan"];
    EXPECT_EQ(plan["hostname"], a["hostname"]);
    EXPECT_EQ(plan["probe"]["cache_keys"], json::array({key}));
    EXPECT_EQ(plan["probe"]["records"], json::array({"probe/" + key + ".json"}));
    EXPECT_EQ(plan["stages"][1]["kind"], "model");
    EXPECT_GE(plan["stages"][1]["replicas"].get<int>(), 1);
    EXPECT_EQ(plan["execution_groups"][0]["stage_ids"], json::array({1}));
  }
  // monitor shows each node's replica plan.
  const CliResult shown = Run({"monitor", Path("work/job")});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("replica plan of node-"), std::string::npos) << shown.out;
  const json monitored = json::parse(Run({"monitor", Path("work/job"), "--json"}).out);
  ASSERT_GE(monitored["replica_plans"].size(), 1u) << monitored.dump(2);
  for (const json& node : monitored["replica_plans"]) {
    EXPECT_EQ(node["hostname"].get<std::string>().rfind("node-", 0), 0u);
    EXPECT_EQ(node["stages"][0]["op_name"], "query_sentiment_detection_mapper");
    EXPECT_EQ(node["probe"]["cache_keys"], json::array({key}));
  }
  const CliResult merged =
      Run({"merge", "--job-dir", Path("work/job"), "--output", Path("m.jsonl")});
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_TRUE(Contains("m.jsonl", "query_sentiment_label"));
}

TEST_F(PreflightElasticCli, ASecondRunOfTheJobAndALaterJobReuseTheRecord) {
  WriteRecipe("");
  Prepare("job");
  const CliResult first = WaitFor(WorkerOn("node-a", "job", {"--max-shards", "1"}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(Count("job", "probe_start"), 1);
  // The same job again, on another node: the record is read, not re-probed.
  const CliResult second = WaitFor(WorkerOn("node-b", "job"));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("(probe record of node-a)"), std::string::npos) << second.err;
  EXPECT_EQ(Count("job", "probe_start"), 1);
  for (const json& a : Attempts("job")) {
    if (a["hostname"] == "node-b") {
      EXPECT_EQ(a["plan"]["probe"]["probed"], json::array());
    }
  }
  // A later job of the same recipe and data in the same work dir reuses it too.
  Prepare("again");
  const CliResult later = WaitFor(WorkerOn("node-c", "again"));
  ASSERT_EQ(later.exit_code, 0) << later.err;
  EXPECT_EQ(Count("again", "probe_start"), 0);
  EXPECT_NE(later.err.find("probe reused"), std::string::npos) << later.err;
}

TEST_F(PreflightElasticCli, AProbeLockOfAKilledProberIsTakenOverAfterTheLease) {
  // Enough steady batches that the probe runs for a while.
  WriteRecipe("  gpu_probe_steady_batches: 3000\n");
  Prepare("job");
  const Spawned a = WorkerOn("node-a", "job");
  std::string lock;
  ASSERT_TRUE(WaitUntil([&] {
    for (const std::string& name : Names("job", "probe")) {
      if (name.size() > 5 && name.ends_with(".lock")) lock = name;
    }
    // Its probe started (the lock comes just before the event).
    return !lock.empty() && Count("job", "probe_start") == 1;
  }));
  ASSERT_EQ(::kill(a.pid, SIGKILL), 0);
  EXPECT_EQ(WaitFor(a).exit_code, 128 + SIGKILL);
  EXPECT_TRUE(Exists("work/job/probe/" + lock));
  // As if node-a had just rewritten its lock (a heartbeat), so that node-b
  // finds it live however long node-a took to die on a loaded machine.
  fs::last_write_time(Path("work/job/probe/" + lock), fs::file_time_type::clock::now());
  // node-b waits for node-a's probe until its lock is older than the lease,
  // then removes the lock and probes itself.
  const CliResult b = WaitFor(WorkerOn("node-b", "job", {"--lease-secs", "5"}));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.err.find("waiting for node-a:"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("(probed ordered)"), std::string::npos) << b.err;
  EXPECT_FALSE(Exists("work/job/probe/" + lock));
  const std::string key = lock.substr(0, lock.size() - 5);
  EXPECT_EQ(json::parse(Read("work/job/probe/" + key + ".json"))["hostname"], "node-b");
  EXPECT_EQ(Count("job", "probe_start"), 2);  // node-a's, then node-b's
  EXPECT_EQ(Count("job", "probe_complete"), 1);
}

TEST_F(PreflightElasticCli, DjshardStopEndsTheProberAndTheWaitersWithNothingLeft) {
  WriteRecipe("  gpu_probe_steady_batches: 3000\n");
  Prepare("job");
  const Spawned a = WorkerOn("node-a", "job");
  ASSERT_TRUE(WaitUntil([&] {
    for (const std::string& name : Names("job", "probe")) {
      if (name.ends_with(".lock")) return Count("job", "probe_start") == 1;
    }
    return false;
  }));
  const Spawned b = WorkerOn("node-b", "job");
  ASSERT_TRUE(
      WaitUntil([&] { return ErrSoFar(b).find("waiting for node-a:") != std::string::npos; }));
  const CliResult stop = Run({"stop", Path("work/job")});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  for (const Spawned& w : {a, b}) {
    const CliResult r = WaitFor(w);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("preflight interrupted; claimed nothing"), std::string::npos) << r.err;
  }
  // The probe was killed: no record, no failure, no lock, no work directory.
  EXPECT_TRUE(Names("job", "probe").empty()) << ::testing::PrintToString(Names("job", "probe"));
  EXPECT_TRUE(Names("job", "attempts").empty());
  // node-b may have taken the lock node-a released before it saw the stop.
  EXPECT_GE(Count("job", "probe_start"), 1);
  EXPECT_EQ(Count("job", "probe_complete"), 0);
  EXPECT_EQ(Count("job", "probe_failed"), 0);
}

TEST_F(PreflightElasticCli, AProbeThatRaisesStopsEveryWorkerBeforeAnyClaim) {
  WriteRecipe("", "      skip_op_error: false\n");
  std::string r = Read("recipe.yaml");
  r.replace(r.find("query_key: text"), 15, "query_key: nothere");
  Write("recipe.yaml", r);
  ExpectElasticJobStoppedBeforeAnyClaim("raise", "nothere");
}

TEST_F(PreflightElasticCli, AMapperThatReturnsNothingStopsEveryWorkerBeforeAnyClaim) {
  WriteRecipe("");
  std::string r = Read("recipe.yaml");
  r.replace(r.find("query_key: text"), 15, "query_key: nothere");
  Write("recipe.yaml", r);
  ExpectElasticJobStoppedBeforeAnyClaim("empty", "returned no rows");
}

TEST_F(PreflightElasticCli, AProbePastItsTimeoutStopsEveryWorkerBeforeAnyClaim) {
  WriteRecipe("  gpu_probe_timeout_seconds: 0.001\n");
  ExpectElasticJobStoppedBeforeAnyClaim("slow", "gpu_probe_timeout_seconds");
}

TEST_F(PreflightElasticCli, DisabledPreflightProbesNothingAndPlansFromNumProc) {
  WriteRecipe("  gpu_preflight_enabled: false\n", "      num_proc: 2\n      mem_required: 100MB\n");
  Prepare("fixed");
  const CliResult r = WaitFor(WorkerOn("node-a", "fixed", {"--threads", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(Exists("work/fixed/probe"));
  EXPECT_FALSE(Exists("work/fixed/gpu_probe_results.json"));
  EXPECT_EQ(Count("fixed", "probe_start"), 0);
  const std::vector<json> attempts = Attempts("fixed");
  ASSERT_EQ(attempts.size(), 3u);
  for (const json& a : attempts) {
    EXPECT_EQ(a["plan"]["probe"]["enabled"], false);
    EXPECT_EQ(a["plan"]["stages"][1]["replicas"], 2);
  }
}

// Two model operators that each fit in the host memory alone but not together
// (SPEC-checkpoints §10.7): the run alternates execution groups.
class ExecutionGroupsCli : public PreflightCli {
 protected:
  void SetUp() override {
    PreflightCli::SetUp();
    if (IsSkipped()) return;
    // Rows without text fail in the first phase, rows without q2 in the second.
    std::string rows;
    for (int i = 0; i < 40; ++i) {
      json row = {{"id", i}, {"text", "  profits fell  sharply in quarter " + std::to_string(i)}};
      if (i % 7 != 5) row["q2"] = "topic " + std::to_string(i);
      if (i == 9 || i == 18) row.erase("text");
      rows += row.dump() + "\n";
    }
    Write("in.jsonl", rows);
    std::string r =
        "partition:\n  mode: manual\n  num_of_partitions: 4\n"
        "  execution_group_size: 2\n"
        "process:\n  - whitespace_normalization_mapper:\n";
    r += "  - query_sentiment_detection_mapper:\n      hf_model: " + models_ +
         "/roberta-sentiment-st\n      zh_to_en_hf_model: null\n      query_key: text\n" +
         "      batch_size: 4\n";
    r += "  - query_topic_detection_mapper:\n      hf_model: " + models_ +
         "/roberta-topic-st\n      zh_to_en_hf_model: null\n      query_key: q2\n" +
         "      batch_size: 4\n";
    Write("recipe.yaml", r);
  }

  // What the planner charges the first replica of each model stage: its
  // probe's weights and activations, 10% more.
  std::vector<uint64_t> StageCosts(const std::string& job) const {
    std::vector<uint64_t> costs;
    const json j = json::parse(Read("work/" + job + "/gpu_probe_results.json"));
    for (const json& p : j["probes"]) {
      const json& m = p["memory"];
      costs.push_back(
          static_cast<uint64_t>(std::ceil(1.1 * m["weights_bytes"].get<double>())) +
          static_cast<uint64_t>(std::ceil(1.1 * m["activation_peak_bytes"].get<double>())));
    }
    return costs;
  }
  // Memory where each stage fits alone but not both: the larger cost and half the smaller.
  static uint64_t BindingMemory(const std::vector<uint64_t>& costs) {
    return std::max(costs[0], costs[1]) + std::min(costs[0], costs[1]) / 2;
  }
  static bool Binds(const std::vector<uint64_t>& costs, uint64_t memory) {
    return costs.size() == 2 && std::max(costs[0], costs[1]) <= memory &&
           costs[0] + costs[1] > memory;
  }

  // The events of the job's first run, in order.
  std::vector<json> EventList(const std::string& job) const {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(Path("work/" + job))) {
      const std::string name = e.path().filename().string();
      if (name.rfind("events_", 0) == 0) files.push_back(name);
    }
    std::sort(files.begin(), files.end());
    std::vector<json> out;
    if (files.empty()) return out;
    std::istringstream in(Read("work/" + job + "/" + files.front()));
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }
  static std::vector<std::string> SortedLines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::sort(lines.begin(), lines.end());
    return lines;
  }
  // The stats file without timings and threads.
  json Stats(const std::string& job) const {
    json s = json::parse(Read("out/" + job + ".jsonl.stats.json"));
    s.erase("seconds");
    s.erase("threads");
    for (json& op : s["operators"]) op.erase("seconds");
    return s;
  }

  // Runs the alternating job `job` (retrying with new memory if its own
  // probes measured differently enough that the memory does not bind).
  uint64_t RunAlternating(const std::string& job, uint64_t memory) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      const std::string name = attempt == 0 ? job : job + std::to_string(attempt);
      const CliResult r = RunWithMemory(name, memory);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      const std::vector<uint64_t> costs = StageCosts(name);
      if (Binds(costs, memory)) {
        if (name != job) {
          fs::rename(Path("work/" + name), Path("work/" + job));
          for (const char* ext : {".jsonl", ".jsonl.errors.jsonl", ".jsonl.stats.json"}) {
            fs::rename(Path("out/" + name + ext), Path("out/" + job + ext));
          }
        }
        last_err_ = r.err;
        return memory;
      }
      memory = BindingMemory(costs);
    }
    ADD_FAILURE() << "no host memory binds the two model stages";
    return memory;
  }
  std::string last_err_;
};

// On the CPU each executor thread runs every model stage: one thread and
// two model operators fit together (one phase), where memory allows.
TEST_F(ExecutionGroupsCli, OneThreadRunsBothModelStagesWithoutAlternating) {
  const CliResult one = RunWithMemory("one", 0, {}, {"--threads", "1"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const json plan = json::parse(Read("work/one/dag_execution_plan.json"));
  ASSERT_EQ(plan["execution_groups"].size(), 1u) << plan["execution_groups"];
  EXPECT_EQ(plan["execution_groups"][0]["phases"].size(), 1u) << plan["execution_groups"];
  EXPECT_EQ(one.err.find("alternat"), std::string::npos) << one.err;
  EXPECT_EQ(json::parse(Read("out/one.jsonl.stats.json"))["threads"], 1);
  const CliResult two = RunWithMemory("two", 0, {}, {"--threads", "2"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(Read("out/one.jsonl"), Read("out/two.jsonl"));
}

TEST_F(ExecutionGroupsCli, ModelStagesThatFitOnlyApartAlternateOverGroupsWithTheSameOutput) {
  const CliResult plain = RunWithMemory("plain", 0);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find("alternate"), std::string::npos) << plain.err;
  const std::vector<uint64_t> costs = StageCosts("plain");
  ASSERT_EQ(costs.size(), 2u);
  RunAlternating("alt", BindingMemory(costs));
  const std::string& err = last_err_;
  EXPECT_NE(err.find("execution group(s) of 2 partition(s)"), std::string::npos) << err;
  EXPECT_NE(err.find("alternate 2 phases"), std::string::npos) << err;
  EXPECT_NE(err.find("phase 0: loads stage 1 query_sentiment_detection_mapper"), std::string::npos)
      << err;

  // The plan: two groups of two partitions, each alternating the two phases.
  const json plan = json::parse(Read("work/alt/dag_execution_plan.json"));
  const json& groups = plan["execution_groups"];
  ASSERT_EQ(groups.size(), 2u) << plan.dump(2);
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_EQ(groups[g]["group_id"], g);
    EXPECT_EQ(groups[g]["size"], 2);
    EXPECT_EQ(groups[g]["partitions"], json::array({2 * g, 2 * g + 1}));
    const json& phases = groups[g]["phases"];
    ASSERT_EQ(phases.size(), 2u);
    EXPECT_EQ(phases[0]["stage_ids"], json::array({1}));
    EXPECT_EQ(phases[0]["op_range"], json::array({0, 1}));
    EXPECT_EQ(phases[0]["forced_tap_op"], 1);
    EXPECT_EQ(phases[1]["stage_ids"], json::array({2}));
    EXPECT_EQ(phases[1]["op_range"], json::array({2, 2}));
    EXPECT_TRUE(phases[1]["forced_tap_op"].is_null());
  }

  // Phase 0 runs over the group's partitions before phase 1's model starts,
  // and the next group starts after this one ends.
  std::map<std::pair<int, int>, size_t> started, completed, saved;
  const std::vector<json> events = EventList("alt");
  for (size_t at = 0; at < events.size(); ++at) {
    const json& e = events[at];
    const std::string type = e["event_type"];
    if (!e.contains("op_idx") || !e.contains("partition_id")) continue;
    const std::pair<int, int> key{e["partition_id"].get<int>(), e["op_idx"].get<int>()};
    if (type == "op_start") started[key] = at;
    if (type == "op_complete") completed[key] = at;
    if (type == "checkpoint_save") saved[key] = at;
  }
  for (int g = 0; g < 2; ++g) {
    for (int p : {2 * g, 2 * g + 1}) {
      ASSERT_TRUE(saved.count({p, 1})) << "no forced tap after op 1 of partition " << p;
      for (int q : {2 * g, 2 * g + 1}) {
        EXPECT_LT(completed.at({p, 1}), started.at({q, 2})) << p << " " << q;
        EXPECT_LT(saved.at({p, 1}), started.at({q, 2})) << p << " " << q;
      }
      if (g == 0) {
        EXPECT_LT(completed.at({p, 2}), started.at({2, 1}));
        EXPECT_LT(completed.at({p, 2}), started.at({3, 1}));
      }
      ASSERT_TRUE(saved.count({p, 2}));
    }
  }
  EXPECT_EQ(Count("alt", "partition_start"), 4);
  EXPECT_EQ(Count("alt", "partition_complete"), 4);
  EXPECT_EQ(Count("alt", "partition_resume"), 0);
  EXPECT_EQ(Count("alt", "op_start"), 12);
  EXPECT_EQ(Count("alt", "op_complete"), 12);

  // The same bytes, errors and counters as the run that loads both at once.
  EXPECT_EQ(Read("out/alt.jsonl"), Read("out/plain.jsonl"));
  const std::string errors = Read("out/plain.jsonl.errors.jsonl");
  EXPECT_NE(errors.find("query_topic_detection_mapper"), std::string::npos) << errors;
  EXPECT_NE(errors.find("whitespace_normalization_mapper"), std::string::npos) << errors;
  EXPECT_EQ(SortedLines(Read("out/alt.jsonl.errors.jsonl")), SortedLines(errors));
  EXPECT_EQ(Stats("alt"), Stats("plain"));
}

TEST_F(ExecutionGroupsCli, AKilledAlternatingRunResumesToTheSameBytes) {
  const CliResult plain = RunWithMemory("plain", 0);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const uint64_t memory = RunAlternating("alt", BindingMemory(StageCosts("plain")));
  // tap_committed hits: group 0 phase 0 (2), phase 1 (2), group 1 phase 0 (2)...
  // @2: every phase-0 tap of group 0; @3: group 0's first final tap, before
  // its forced tap is removed; @5: in the middle of group 1's phase 0.
  for (const std::string at : {"2", "3", "5"}) {
    const std::string job = "killed" + at;
    const CliResult killed =
        RunWithMemory(job, memory, {"DJSHARD_TEST_KILL_AT=tap_committed@" + at});
    ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
    EXPECT_NE(killed.err.find("alternate 2 phases"), std::string::npos) << killed.err;
    // A damaged row-origins file (a line lost) is refused like any damaged
    // checkpoint file, naming it; put back, the resume goes on.
    if (at == "2") {
      std::string origins;
      for (const auto& e : fs::directory_iterator(Path("work/" + job + "/checkpoints"))) {
        const std::string name = e.path().filename().string();
        if (name.size() > 14 && name.substr(name.size() - 14) == ".origins.jsonl") origins = name;
      }
      ASSERT_FALSE(origins.empty());
      const std::string rel = "work/" + job + "/checkpoints/" + origins;
      const std::string kept = Read(rel);
      Write(rel, kept.substr(0, kept.rfind('\n', kept.size() - 2) + 1));
      const CliResult refused = RunWithMemory(job, memory, {}, {"--resume", job});
      EXPECT_EQ(refused.exit_code, 2) << refused.err;
      EXPECT_NE(refused.err.find(origins + ": missing or changed"), std::string::npos)
          << refused.err;
      Write(rel, kept);
    }
    const CliResult resumed = RunWithMemory(job, memory, {}, {"--resume", job});
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_EQ(Read("out/" + job + ".jsonl"), Read("out/plain.jsonl")) << job;
    EXPECT_EQ(SortedLines(Read("out/" + job + ".jsonl.errors.jsonl")),
              SortedLines(Read("out/plain.jsonl.errors.jsonl")))
        << job;
    EXPECT_EQ(Stats(job), Stats("plain")) << job;
    // keep: latest: only the final taps are left (a write the kill cut
    // short may leave a temporary file, which `djshard gc` removes).
    for (const auto& e : fs::directory_iterator(Path("work/" + job + "/checkpoints"))) {
      const std::string name = e.path().filename().string();
      if (name.find(".tmp.") != std::string::npos) continue;
      EXPECT_NE(name.rfind("checkpoint_op_0001_", 0), 0u) << job << ": " << name;
    }
  }
}

TEST_F(ExecutionGroupsCli, AutoGroupSizeIsPrintedWithItsInitializationRatio) {
  std::string r = Read("recipe.yaml");
  r.replace(r.find("execution_group_size: 2"), 23, "execution_group_size: auto");
  Write("recipe.yaml", r);
  const CliResult plain = RunWithMemory("plain", 0);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  RunAlternating("alt", BindingMemory(StageCosts("plain")));
  // Tiny partitions: the initialization outweighs them, so the group is every partition.
  EXPECT_NE(last_err_.find("execution_group_size auto, init/compute "), std::string::npos)
      << last_err_;
  const json plan = json::parse(Read("work/alt/dag_execution_plan.json"));
  ASSERT_EQ(plan["execution_groups"].size(), 1u);
  EXPECT_EQ(plan["execution_groups"][0]["size"], 4);
  EXPECT_EQ(Read("out/alt.jsonl"), Read("out/plain.jsonl"));
}

TEST_F(ExecutionGroupsCli, AWorkerRefusesStagesThatFitOnlyApartBeforeAnyClaim) {
  const CliResult plain = RunWithMemory("plain", 0);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const uint64_t memory = BindingMemory(StageCosts("plain"));
  const CliResult prepared =
      Run({"prepare", "--config", Path("recipe.yaml"), "--dataset-path", Path("in.jsonl"),
           "--job-dir", Path("work/elastic"), "--num-shards", "2"});
  ASSERT_EQ(prepared.exit_code, 0) << prepared.err;
  const CliResult r = WaitFor(
      Spawn({"worker", "--job-dir", Path("work/elastic"), "--device", "cpu", "--threads", "1"},
            {"DJSHARD_ENABLE_TEST_OPERATORS=1",
             "DJSHARD_TEST_HOST_MEMORY_BYTES=" + std::to_string(memory)}));
  if (r.exit_code == 0) {
    // Only when the worker's own probes measured stages that fit together.
    EXPECT_FALSE(Binds(StageCosts("elastic"), memory)) << r.err;
    return;
  }
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("stage 1 query_sentiment_detection_mapper"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stage 2 query_topic_detection_mapper"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("djshard run"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("work/elastic/attempts") && !fs::is_empty(Path("work/elastic/attempts")));
  EXPECT_EQ(Count("elastic", "partition_start"), 0);
}

TEST_F(PreflightCli, ProbeOpIsHiddenFromHelp) {
  const CliResult r = Run({"--help"});
  EXPECT_EQ(r.out.find("probe-op"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace djshard::testing
