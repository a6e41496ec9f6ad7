// Model operators (SPEC-models §9, tests 2-8), black-box: tiny Hugging Face
// snapshots with the real vocabularies and seeded random weights, made by
// tools/tiny_models.py, and expected outputs from that script's independent
// plain-PyTorch implementation of the same math. Token ids for the reference
// come from `djshard tokenize`, which is checked against Hugging Face's own
// tokenizers by the tokenizer tests.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "djshard/io/sha256.h"
#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kPython = "/usr/bin/python3";

// The device the model tests run on: cpu in CI; `ctest -L gpu` runs them again
// with DJSHARD_TEST_DEVICE=cuda on a GPU machine.
std::string TestDevice() {
  const char* d = std::getenv("DJSHARD_TEST_DEVICE");
  return d != nullptr && *d != '\0' ? d : "cpu";
}

std::string Source(const std::string& rel) { return std::string(DJSHARD_SOURCE_DIR) + "/" + rel; }

// Runs a shell command; returns its stdout, or fails the test.
std::string Shell(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << command;
  return out;
}

std::vector<json> JsonLines(const std::string& text) {
  std::vector<json> rows;
  std::istringstream s(text);
  std::string line;
  while (std::getline(s, line)) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  return rows;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The tiny snapshots, made once for the whole suite.
class ModelCli : public CliTest {
 protected:
  static void SetUpTestSuite() {
    skip_reason_.clear();
    const CliResult v = RunDjshard({"version"});
    if (v.out.find("libtorch: not built in") != std::string::npos) {
      skip_reason_ = "this djshard is built without libtorch (DJSHARD_WITH_TORCH=OFF)";
      return;
    }
    // scripts/setup.sh installs python3-torch: its absence fails the suite
    // rather than skipping the model tests unseen.
    ASSERT_EQ(std::system((std::string(kPython) + " -c 'import torch' 2>/dev/null").c_str()), 0)
        << "Debian's python3-torch is missing: run scripts/setup.sh";
    char tmpl[] = "/tmp/djshard-models-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    models_ = tmpl;
    Shell(std::string(kPython) + " " + Source("tools/tiny_models.py") + " make " + models_ +
          " >/dev/null");
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!models_.empty()) fs::remove_all(models_, ec);
  }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    CliTest::SetUp();
  }

  static std::string Model(const std::string& name) { return models_ + "/" + name; }

  // Token ids of each text, with special tokens, as `djshard tokenize` gives them.
  std::vector<json> Ids(const std::string& model, const std::vector<std::string>& texts) {
    std::string in;
    for (const auto& t : texts) in += json({{"text", t}}).dump() + "\n";
    Write("tok-in.jsonl", in);
    const CliResult r = Run({"tokenize", "--tokenizer", model, Path("tok-in.jsonl")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<json> ids;
    for (const json& row : JsonLines(r.out)) ids.push_back(row["ids"]);
    return ids;
  }

  // The independent reference's output for each line of {"ids", ["ids2"]}.
  std::vector<json> Reference(const std::string& model, const std::vector<json>& rows) {
    std::string in;
    for (const auto& row : rows) in += row.dump() + "\n";
    Write("ref-in.jsonl", in);
    return JsonLines(Shell(std::string(kPython) + " " + Source("tools/tiny_models.py") +
                           " reference --model " + model + " --ids " + Path("ref-in.jsonl")));
  }

  std::string ClassifierRecipe(const std::string& op, const std::string& model,
                               const std::string& extra = "") {
    return Write("recipe.yaml", "process:\n  - " + op + ":\n      hf_model: " + model +
                                    "\n      zh_to_en_hf_model: null\n" + extra);
  }

  CliResult RunRecipe(const std::vector<std::string>& extra = {"--device", TestDevice()},
                      const std::vector<std::string>& env = {}) {
    std::vector<std::string> args = {
        "run",           "--config",       Path("recipe.yaml"), "--dataset-path", Path("in.jsonl"),
        "--export-path", Path("out.jsonl")};
    args.insert(args.end(), extra.begin(), extra.end());
    return WaitFor(Spawn(args, env));
  }

  static std::string models_;
  static std::string skip_reason_;
};
std::string ModelCli::models_;
std::string ModelCli::skip_reason_;

const std::vector<std::string> kQueries = {
    "What is the outlook for the stock market this quarter?",
    "profits fell sharply",
    "Great results, the company beat every estimate!",
    "Caf\u00e9 owners in M\u00fcnchen \U0001F600 report record sales",
    "",
    "a <pad> inside the text",
    "Why did the central bank raise rates again?",
    "neutral statement about the weather",
};

// Test 2: label and score as Data-Juicer's pipeline gives them, from both
// weight formats and a sharded snapshot, equal to the independent reference.
TEST_F(ModelCli, SentimentLabelsAndScoresMatchTheReferenceForEveryWeightFormat) {
  const auto ids = Ids(Model("roberta-sentiment-st"), kQueries);
  std::vector<json> rows;
  for (const auto& i : ids) rows.push_back({{"ids", i}});
  const auto want = Reference(Model("roberta-sentiment-st"), rows);
  ASSERT_EQ(want.size(), kQueries.size());
  std::string in;
  for (size_t i = 0; i < kQueries.size(); ++i) {
    in += json({{"id", i}, {"query", kQueries[i]}}).dump() + "\n";
  }
  Write("in.jsonl", in);
  std::set<std::string> labels;
  for (const std::string dir :
       {"roberta-sentiment-st", "roberta-sentiment-bin", "roberta-sentiment-sharded"}) {
    ClassifierRecipe("query_sentiment_detection_mapper", Model(dir));
    const CliResult r = RunRecipe();
    ASSERT_EQ(r.exit_code, 0) << dir << ": " << r.err;
    const auto out = JsonLines(Read("out.jsonl"));
    ASSERT_EQ(out.size(), kQueries.size()) << dir;
    for (size_t i = 0; i < out.size(); ++i) {
      const json& meta = out[i]["__dj__meta__"];
      EXPECT_EQ(meta["query_sentiment_label"], want[i]["label"]) << dir << " row " << i;
      EXPECT_NEAR(meta["query_sentiment_label_score"].get<double>(), want[i]["score"].get<double>(),
                  1e-5)
          << dir << " row " << i;
      labels.insert(meta["query_sentiment_label"].get<std::string>());
    }
  }
  EXPECT_GE(labels.size(), 2u) << "the tiny model should not give one label to every query";
}

TEST_F(ModelCli, TopicLabelsMatchTheReference) {
  const auto ids = Ids(Model("roberta-topic-st"), kQueries);
  std::vector<json> rows;
  for (const auto& i : ids) rows.push_back({{"ids", i}});
  const auto want = Reference(Model("roberta-topic-st"), rows);
  std::string in;
  for (size_t i = 0; i < kQueries.size(); ++i) in += json({{"text", kQueries[i]}}).dump() + "\n";
  Write("in.jsonl", in);
  ClassifierRecipe("query_topic_detection_mapper", Model("roberta-topic-st"),
                   "      query_key: text\n");
  const CliResult r = RunRecipe();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = JsonLines(Read("out.jsonl"));
  ASSERT_EQ(out.size(), kQueries.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i]["__dj__meta__"]["query_topic_label"], want[i]["label"]) << i;
    EXPECT_NEAR(out[i]["__dj__meta__"]["query_topic_label_score"].get<double>(),
                want[i]["score"].get<double>(), 1e-5);
  }
}

TEST_F(ModelCli, BertClassifierMatchesTheReference) {
  const auto ids = Ids(Model("bert-st"), kQueries);
  std::vector<json> rows;
  for (const auto& i : ids) rows.push_back({{"ids", i}});
  const auto want = Reference(Model("bert-st"), rows);
  std::string in;
  for (size_t i = 0; i < kQueries.size(); ++i) in += json({{"query", kQueries[i]}}).dump() + "\n";
  Write("in.jsonl", in);
  ClassifierRecipe("query_sentiment_detection_mapper", Model("bert-st"));
  const CliResult r = RunRecipe();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = JsonLines(Read("out.jsonl"));
  ASSERT_EQ(out.size(), kQueries.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i]["__dj__meta__"]["query_sentiment_label"], want[i]["label"]) << i;
    EXPECT_NEAR(out[i]["__dj__meta__"]["query_sentiment_label_score"].get<double>(),
                want[i]["score"].get<double>(), 1e-5);
  }
}

// Test 2, edge cases: tagged records untouched, missing and null queries are
// record errors, an over-long query fails as too_long unless truncation.
TEST_F(ModelCli, TaggedRecordsAreLeftAloneAndBadQueriesAreRecordErrors) {
  const std::string tagged =
      R"({"query":"x","__dj__meta__":{"query_sentiment_label":"mine","query_sentiment_label_score":0.5}})";
  std::string long_query;
  for (int i = 0; i < 200; ++i) long_query += "word ";
  Write("in.jsonl", tagged + "\n" + R"({"text":"no query here"})" + "\n" + R"({"query":null})" +
                        "\n" + json({{"query", long_query}}).dump() + "\n" + R"({"query":"fine"})" +
                        "\n");
  ClassifierRecipe("query_sentiment_detection_mapper", Model("roberta-sentiment-st"));
  CliResult r = RunRecipe();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto out = JsonLines(Read("out.jsonl"));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dump(), json::parse(tagged).dump());
  EXPECT_EQ(out[1]["query"], "fine");
  EXPECT_TRUE(out[1]["__dj__meta__"].contains("query_sentiment_label"));
  std::string errors;
  for (const auto& name : List()) {
    if (name.find("error") != std::string::npos) errors += Read(name);
  }
  const auto error_rows = JsonLines(errors);
  ASSERT_EQ(error_rows.size(), 3u) << errors;
  EXPECT_EQ(error_rows[0]["line"], 2);
  EXPECT_EQ(error_rows[1]["line"], 3);
  EXPECT_EQ(error_rows[2]["line"], 4);
  EXPECT_EQ(error_rows[2]["error_type"], "too_long");

  // truncation: true classifies the long query (first 126 tokens and the ends).
  ClassifierRecipe("query_sentiment_detection_mapper", Model("roberta-sentiment-st"),
                   "      truncation: true\n");
  r = RunRecipe();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  out = JsonLines(Read("out.jsonl"));
  ASSERT_EQ(out.size(), 3u);
  auto ids = Ids(Model("roberta-sentiment-st"), {long_query})[0];
  std::vector<int64_t> cut(ids.begin(), ids.begin() + 127);
  cut.push_back(ids.back().get<int64_t>());
  const auto want = Reference(Model("roberta-sentiment-st"), {json{{"ids", cut}}});
  EXPECT_EQ(out[1]["__dj__meta__"]["query_sentiment_label"], want[0]["label"]);
  EXPECT_NEAR(out[1]["__dj__meta__"]["query_sentiment_label_score"].get<double>(),
              want[0]["score"].get<double>(), 1e-5);
}

TEST_F(ModelCli, TranslationModelLeftAtItsDefaultIsRefused) {
  Write("in.jsonl", R"({"query":"x"})"
                    "\n");
  Write("recipe.yaml", "process:\n  - query_sentiment_detection_mapper:\n      hf_model: " +
                           Model("roberta-sentiment-st") + "\n");
  const CliResult r = RunRecipe();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("recipe.yaml:2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("set zh_to_en_hf_model: null"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("out.jsonl"));
}

// Test 3: CLIP text-pair similarity stats and keep decisions.
TEST_F(ModelCli, TextPairSimilarityMatchesTheReferenceForAnyAndAll) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"A lovely cat sits on a sofa.", "A lovely cat sits on a sofa."},
      {"A cup of coffee is on the table.", "Stock markets fell sharply today."},
      {"Ray schedules this operator on a GPU.", "djshard runs it in one process"},
      {"", "an empty first text"},
      {"same", "same"},
      {"Data-Juicer processes each claimed shard.", "every shard, once"},
  };
  for (const std::string dir : {"clip-st", "clip-bin", "clip-st-eos", "clip-st-defaults"}) {
    std::vector<std::string> firsts, seconds;
    for (const auto& [a, b] : pairs) {
      firsts.push_back(a);
      seconds.push_back(b);
    }
    const auto ids1 = Ids(Model(dir), firsts);
    const auto ids2 = Ids(Model(dir), seconds);
    std::vector<json> rows;
    for (size_t i = 0; i < pairs.size(); ++i) rows.push_back({{"ids", ids1[i]}, {"ids2", ids2[i]}});
    const auto want = Reference(Model(dir), rows);
    std::string in;
    for (size_t i = 0; i < pairs.size(); ++i) {
      in += json({{"id", i}, {"text", pairs[i].first}, {"target_text", pairs[i].second}}).dump() +
            "\n";
    }
    Write("in.jsonl", in);
    // The range sits inside the spread of the tiny model's similarities, so
    // that some records are kept and some are not.
    std::vector<double> cos;
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (!pairs[i].first.empty()) cos.push_back(want[i]["cos"].get<double>());
    }
    std::vector<double> sorted = cos;
    std::sort(sorted.begin(), sorted.end());
    const double lo = (sorted[0] + sorted[1]) / 2;
    Write("recipe.yaml",
          "process:\n  - text_pair_similarity_filter:\n      hf_clip: " + Model(dir) +
              "\n      text_key_second: target_text\n      min_score: " + std::to_string(lo) +
              "\n      max_score: 1.0\n");
    const CliResult r = RunRecipe();
    ASSERT_EQ(r.exit_code, 0) << dir << ": " << r.err;
    const auto out = JsonLines(Read("out.jsonl"));
    std::map<int, json> by_id;
    for (const auto& row : out) by_id[row["id"].get<int>()] = row;
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (pairs[i].first.empty()) {
        ASSERT_TRUE(by_id.count(static_cast<int>(i))) << dir << ": an empty text keeps the record";
        EXPECT_EQ(by_id[static_cast<int>(i)]["__dj__stats__"]["text_pair_similarity"],
                  json::array());
        continue;
      }
      const double c = want[i]["cos"].get<double>();
      // Within float rounding of a bound (identical texts give 1 +- 1 ulp)
      // either decision is right.
      if (std::fabs(c - lo) < 1e-5 || std::fabs(c - 1.0) < 1e-5) continue;
      const bool keep = c >= lo && c <= 1.0;
      ASSERT_EQ(by_id.count(static_cast<int>(i)) == 1, keep) << dir << " row " << i << " cos " << c;
      if (keep) {
        EXPECT_NEAR(
            by_id[static_cast<int>(i)]["__dj__stats__"]["text_pair_similarity"][0].get<double>(), c,
            1e-5)
            << dir << " row " << i;
      }
    }
  }
}

// Data-Juicer's order: text missing, text empty, second text missing, second
// empty; the first that holds gives an empty similarity and keeps the record.
TEST_F(ModelCli, TextPairSimilarityOfAMissingOrEmptyTextIsEmptyAndKeepsTheRecord) {
  const std::vector<std::string> rows = {
      R"({"id":0,"text":""})",
      R"({"id":1,"target_text":"a second text"})",
      R"({"id":2,"text":"a first text"})",
      R"({"id":3,"text":"a first text","target_text":""})",
      R"({"id":4,"text":"","target_text":7})",
  };
  std::string in;
  for (const auto& row : rows) in += row + "\n";
  Write("in.jsonl", in);
  Write("recipe.yaml",
        "process:\n  - text_pair_similarity_filter:\n      hf_clip: " + Model("clip-st") +
            "\n      text_key_second: target_text\n      min_score: 0.5\n");
  const CliResult r = RunRecipe();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = JsonLines(Read("out.jsonl"));
  ASSERT_EQ(out.size(), rows.size()) << Read("out.jsonl");
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i]["id"], i);
    EXPECT_EQ(out[i]["__dj__stats__"]["text_pair_similarity"], json::array()) << out[i];
  }
  EXPECT_EQ(json::parse(Read("out.jsonl.stats.json"))["errors"], 0);
}

TEST_F(ModelCli, TextPairSimilarityWithoutASecondKeyIsRefused) {
  Write("in.jsonl", R"({"text":"x"})"
                    "\n");
  Write("recipe.yaml",
        "process:\n  - text_pair_similarity_filter:\n      hf_clip: " + Model("clip-st") + "\n");
  const CliResult r = RunRecipe();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("text_key_second"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("out.jsonl"));
}

// Test 4: no silent CPU fallback when a GPU was asked for.
TEST_F(ModelCli, AGpuAskedForAndNotPresentIsAnErrorBeforeAnythingIsWritten) {
  if (TestDevice() != "cpu") GTEST_SKIP() << "hides the GPUs itself; runs in the CPU pass";
  Write("in.jsonl", R"({"query":"what a day"})"
                    "\n");
  ClassifierRecipe("query_sentiment_detection_mapper", Model("roberta-sentiment-st"),
                   "      num_gpus: 1\n");
  CliResult r = RunRecipe({}, {"CUDA_VISIBLE_DEVICES="});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("recipe.yaml:5: query_sentiment_detection_mapper needs a GPU (num_gpus: 1)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("CUDA_VISIBLE_DEVICES=\"\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--device cpu"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("out.jsonl"));

  // A job: prepare accepts it (workers may have GPUs); a worker without one
  // refuses before claiming anything.
  ASSERT_EQ(Run({"prepare", "--config", Path("recipe.yaml"), "--dataset-path", Path("in.jsonl"),
                 "--job-dir", Path("job"), "--num-shards", "1"})
                .exit_code,
            0);
  r = WaitFor(Spawn({"worker", "--job-dir", Path("job")}, {"CUDA_VISIBLE_DEVICES="}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("needs a GPU"), std::string::npos) << r.err;
  EXPECT_TRUE(List("job/state/locks").empty());
  EXPECT_TRUE(List("job/state/done").empty());
  EXPECT_TRUE(List("job/attempts").empty());

  // --device cpu runs it; so does a recipe that asks for nothing, with one warning.
  r = RunRecipe({"--device", "cpu"}, {"CUDA_VISIBLE_DEVICES="});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ClassifierRecipe("query_sentiment_detection_mapper", Model("roberta-sentiment-st"));
  r = RunRecipe({}, {"CUDA_VISIBLE_DEVICES="});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  size_t warnings = 0;
  for (size_t at = r.err.find("WARNING: query_sentiment_detection_mapper runs on the CPU");
       at != std::string::npos; at = r.err.find("WARNING: query_sentiment", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << r.err;
}

// Test 5: the output bytes do not depend on threads, batch size or which rows
// share a batch, whatever the BLAS kernel.
// The OpenBLAS kernels the determinism tests run under (OPENBLAS_CORETYPE in
// the child's environment); "" is the kernel OpenBLAS picks for this CPU.
// Haswell and Zen are the AVX2 kernels of most cluster nodes.
const std::vector<std::string> kBlasKernels = {"", "Haswell", "Zen", "SkylakeX", "Sandybridge"};

// Whether this CPU can run OpenBLAS kernel `kernel` ("": always).
bool CpuRunsKernel(const std::string& kernel) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags = line + " ";
      break;
    }
  }
  auto has = [&](const char* flag) {
    return flags.find(std::string(" ") + flag + " ") != std::string::npos;
  };
  if (kernel.empty()) return true;
  if (kernel == "Sandybridge") return has("avx");
  if (kernel == "Haswell" || kernel == "Zen") return has("avx2") && has("fma");
  if (kernel == "SkylakeX") {
    return has("avx512f") && has("avx512vl") && has("avx512bw") && has("avx512dq") &&
           has("avx512cd");
  }
  return false;
}

// A child's environment for `kernel`: OPENBLAS_CORETYPE set, or removed for "".
std::vector<std::string> KernelEnv(const std::string& kernel) {
  return {kernel.empty() ? "OPENBLAS_CORETYPE" : "OPENBLAS_CORETYPE=" + kernel};
}

class ModelKernelCli : public ModelCli, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    ModelCli::SetUp();
    if (IsSkipped()) return;
    if (!CpuRunsKernel(GetParam())) {
      GTEST_SKIP() << "this CPU cannot run OpenBLAS's " << GetParam();
    }
  }
};

// Under every BLAS kernel: a row's output bytes do not depend on the thread
// count, the batch size, its batch mates or the rows of a call, the scores
// stay within the reference's tolerance, and the run names the kernel.
TEST_P(ModelKernelCli, OutputBytesDoNotDependOnThreadsBatchSizeOrBatchMates) {
  const std::string kernel = GetParam();
  std::string in;
  std::vector<std::string> lines, queries;
  for (int i = 0; i < 300; ++i) {
    std::string q = "query " + std::to_string(i);
    for (int w = 0; w < (i * 7) % 40; ++w) q += " word" + std::to_string((i * w) % 13);
    queries.push_back(q);
    lines.push_back(
        json({{"id", i}, {"query", q}, {"text", q}, {"target_text", "word " + q}}).dump());
  }
  for (const auto& l : lines) in += l + "\n";
  Write("in.jsonl", in);
  auto recipe = [&](int batch) {
    Write("recipe.yaml",
          "process:\n  - query_sentiment_detection_mapper:\n      hf_model: " +
              Model("roberta-sentiment-st") +
              "\n      zh_to_en_hf_model: null\n      batch_size: " + std::to_string(batch) +
              "\n  - text_pair_similarity_filter:\n      hf_clip: " + Model("clip-st") +
              "\n      text_key_second: target_text\n      min_score: -1\n      batch_size: " +
              std::to_string(batch) + "\n");
  };
  const std::vector<std::string> env = KernelEnv(kernel);
  std::string first;
  for (const auto& [threads, batch] :
       std::vector<std::pair<int, int>>{{1, 64}, {2, 8}, {2, 1}, {3, 5}}) {
    recipe(batch);
    const CliResult r =
        RunRecipe({"--device", TestDevice(), "--threads", std::to_string(threads)}, env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string out = Read("out.jsonl");
    if (first.empty()) {
      first = out;
      const json devices = json::parse(Read("out.jsonl.stats.json"))["model_devices"];
      ASSERT_EQ(devices.size(), 1u) << devices;
      const std::string device = devices[0].get<std::string>();
      EXPECT_EQ(device.rfind("cpu/float32 (ATen ", 0), 0u) << device;
      if (!kernel.empty()) {
        EXPECT_NE(device.find(kernel), std::string::npos) << device;
      }
    } else {
      EXPECT_TRUE(out == first) << kernel << ": threads " << threads << " batch_size " << batch;
    }
  }
  // Rows shuffled into other batches: each row's output line is unchanged.
  std::vector<std::string> shuffled = lines;
  std::reverse(shuffled.begin(), shuffled.end());
  std::rotate(shuffled.begin(), shuffled.begin() + 77, shuffled.end());
  in.clear();
  for (const auto& l : shuffled) in += l + "\n";
  Write("in.jsonl", in);
  recipe(8);
  const CliResult r = RunRecipe({"--device", TestDevice(), "--threads", "2"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int, std::string> by_id_first, by_id_shuffled;
  const std::vector<json> rows = JsonLines(first);
  for (const auto& row : rows) by_id_first[row["id"].get<int>()] = row.dump();
  for (const auto& row : JsonLines(Read("out.jsonl"))) {
    by_id_shuffled[row["id"].get<int>()] = row.dump();
  }
  EXPECT_TRUE(by_id_first == by_id_shuffled) << kernel;
  // Within the independent reference's tolerance.
  std::vector<json> ref_rows;
  for (const auto& ids : Ids(Model("roberta-sentiment-st"), queries)) {
    ref_rows.push_back({{"ids", ids}});
  }
  const auto want = Reference(Model("roberta-sentiment-st"), ref_rows);
  ASSERT_EQ(want.size(), queries.size());
  EXPECT_GE(rows.size(), queries.size() / 2);  // the similarity filter keeps most rows
  for (const json& row : rows) {
    const json& meta = row["__dj__meta__"];
    const json& ref = want[row["id"].get<size_t>()];
    EXPECT_EQ(meta["query_sentiment_label"], ref["label"]) << kernel << " " << row["id"];
    EXPECT_NEAR(meta["query_sentiment_label_score"].get<double>(), ref["score"].get<double>(), 1e-5)
        << kernel << " " << row["id"];
  }
}

INSTANTIATE_TEST_SUITE_P(EveryBlasKernel, ModelKernelCli, ::testing::ValuesIn(kBlasKernels),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.empty() ? std::string("Default") : info.param;
                         });

// A done record names what computed its model outputs; shards computed by
// two kernels are a warning in verify, merge and monitor, not an error.
TEST_F(ModelCli, ShardsComputedOnTwoKernelsAreAWarningInVerifyAndMonitor) {
  std::vector<std::string> kernels;
  for (const std::string& k : kBlasKernels) {
    if (!k.empty() && CpuRunsKernel(k) && k != "Zen") kernels.push_back(k);
  }
  if (kernels.size() < 2) {
    GTEST_SKIP() << "this CPU runs fewer than two OpenBLAS kernels";
  }
  std::string in;
  for (int i = 0; i < 40; ++i)
    in += json({{"query", "query number " + std::to_string(i)}}).dump() + "\n";
  Write("in.jsonl", in);
  ClassifierRecipe("query_sentiment_detection_mapper", Model("roberta-sentiment-st"));
  auto prepare = [&](const std::string& job) {
    ASSERT_EQ(Run({"prepare", "--config", Path("recipe.yaml"), "--dataset-path", Path("in.jsonl"),
                   "--job-dir", Path(job), "--num-shards", "2"})
                  .exit_code,
              0);
  };
  auto worker = [&](const std::string& job, const std::string& kernel,
                    std::vector<std::string> extra) {
    std::vector<std::string> args = {"worker", "--job-dir", Path(job), "--device", "cpu"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = WaitFor(Spawn(args, KernelEnv(kernel)));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  auto done_devices = [&](const std::string& job) {
    std::set<std::string> devices;
    size_t records = 0;
    for (const auto& e : fs::directory_iterator(Path(job + "/state/done"))) {
      ++records;
      const json done = json::parse(ReadAll(e.path().string()));
      for (const auto& d : done["model_devices"]) devices.insert(d.get<std::string>());
    }
    EXPECT_EQ(records, 2u);
    return devices;
  };
  // One kernel: no warning.
  prepare("one");
  worker("one", kernels[0], {});
  EXPECT_EQ(done_devices("one").size(), 1u);
  ASSERT_EQ(Run({"merge", "--job-dir", Path("one")}).exit_code, 0);
  EXPECT_EQ(Run({"verify", "--job-dir", Path("one")}).err.find("WARNING"), std::string::npos);
  // Two kernels: each shard names its own, and every view warns.
  prepare("two");
  worker("two", kernels[0], {"--max-shards", "1"});
  worker("two", kernels[1], {});
  const std::set<std::string> devices = done_devices("two");
  ASSERT_EQ(devices.size(), 2u);
  for (const std::string& k : {kernels[0], kernels[1]}) {
    EXPECT_TRUE(std::any_of(devices.begin(), devices.end(), [&](const std::string& d) {
      return d.find("OpenBLAS") != std::string::npos && d.find(k) != std::string::npos;
    })) << k;
  }
  const std::string warning =
      "WARNING: the shards' model outputs were computed on 2 kinds of device";
  const CliResult merged = Run({"merge", "--job-dir", Path("two")});
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_NE(merged.err.find(warning), std::string::npos) << merged.err;
  const CliResult verified = Run({"verify", "--job-dir", Path("two")});
  EXPECT_EQ(verified.exit_code, 0) << verified.err;
  EXPECT_NE(verified.err.find(warning), std::string::npos) << verified.err;
  const CliResult monitor = Run({"monitor", "--job-dir", Path("two")});
  EXPECT_EQ(monitor.exit_code, 0) << monitor.err;
  EXPECT_NE(monitor.out.find(warning), std::string::npos) << monitor.out;
  const json view = json::parse(Run({"monitor", "--job-dir", Path("two"), "--json"}).out);
  ASSERT_EQ(view["warnings"].size(), 1u) << view;
  EXPECT_EQ(view["model_devices"].size(), 2u) << view;
}

// Test 6: model resolution and damaged weights.
TEST_F(ModelCli, UnknownModelsListWhereDjshardLookedAndTheHubCacheIsUsed) {
  Write("in.jsonl", R"({"query":"hello"})"
                    "\n");
  ClassifierRecipe("query_sentiment_detection_mapper", "nobody/no-such-model");
  CliResult r = RunRecipe({"--device", TestDevice()},
                          {"DJSHARD_MODEL_HOME=" + Path("home"), "HF_HUB_CACHE=" + Path("hub")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("recipe.yaml:3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(Path("home") + "/nobody--no-such-model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(Path("hub") + "/models--nobody--no-such-model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("huggingface-cli download nobody/no-such-model"), std::string::npos);
  EXPECT_FALSE(Exists("out.jsonl"));

  // The hub's layout: refs/main names the snapshot.
  const std::string snap = Path("hub/models--acme--sentiment/snapshots/0123abcd");
  fs::create_directories(fs::path(snap).parent_path());
  fs::copy(Model("roberta-sentiment-st"), snap, fs::copy_options::recursive);
  Write("hub/models--acme--sentiment/refs/main", "0123abcd");
  ClassifierRecipe("query_sentiment_detection_mapper", "acme/sentiment");
  r = RunRecipe({"--device", TestDevice()}, {"HF_HUB_CACHE=" + Path("hub")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains("out.jsonl", "query_sentiment_label"));
}

TEST_F(ModelCli, AWeightsFileWithAChangedHeaderByteIsRefusedNamingIt) {
  fs::copy(Model("roberta-sentiment-st"), Path("m"), fs::copy_options::recursive);
  const std::string weights = Path("m/model.safetensors");
  std::string bytes = ReadAll(weights);
  const size_t at = bytes.find("\"shape\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = '{';  // the JSON header no longer parses
  std::ofstream(weights, std::ios::binary | std::ios::trunc) << bytes;
  Write("in.jsonl", R"({"query":"hello"})"
                    "\n");
  ClassifierRecipe("query_sentiment_detection_mapper", Path("m"));
  const CliResult r = RunRecipe();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(weights), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("out.jsonl"));
}

// Test 7: djshard model check.
TEST_F(ModelCli, ModelCheckLoadsSnapshotsAndPackagesAndCatchesAnEditedReference) {
  for (const std::string dir :
       {"roberta-sentiment-st", "roberta-sentiment-bin", "bert-st", "clip-st"}) {
    const CliResult r = Run({"model", "check", Model(dir), "--device", TestDevice()});
    EXPECT_EQ(r.exit_code, 0) << dir << ": " << r.err;
    EXPECT_NE(r.out.find("architecture: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("parameters"), std::string::npos) << r.out;
  }
  Shell(std::string(kPython) + " " + Source("tools/tiny_models.py") + " package --model " +
        Model("roberta-sentiment-st") + " --out " + Path("pkg") + " --djshard " + DJSHARD_BIN +
        " >/dev/null");
  CliResult r = Run({"model", "check", Path("pkg")});
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("TorchScript"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reference: "), std::string::npos) << r.out;

  // The package runs in a recipe and gives the snapshot's labels.
  Write("in.jsonl", R"({"query":"profits fell sharply"})"
                    "\n"
                    R"({"query":"good news"})"
                    "\n");
  ClassifierRecipe("query_sentiment_detection_mapper", Path("pkg"));
  r = RunRecipe();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto from_package = JsonLines(Read("out.jsonl"));
  ClassifierRecipe("query_sentiment_detection_mapper", Model("roberta-sentiment-st"));
  r = RunRecipe();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto from_snapshot = JsonLines(Read("out.jsonl"));
  ASSERT_EQ(from_package.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(from_package[i]["__dj__meta__"]["query_sentiment_label"],
              from_snapshot[i]["__dj__meta__"]["query_sentiment_label"]);
    EXPECT_NEAR(from_package[i]["__dj__meta__"]["query_sentiment_label_score"].get<double>(),
                from_snapshot[i]["__dj__meta__"]["query_sentiment_label_score"].get<double>(),
                1e-5);
  }

  // Editing the reference output (djshard_model.json itself is not among the
  // files whose sha256 the package records) makes the check fail.
  json pkg = json::parse(Read("pkg/djshard_model.json"));
  pkg["reference"]["outputs"][0][0] = pkg["reference"]["outputs"][0][0].get<double>() + 0.5;
  Write("pkg/djshard_model.json", pkg.dump(2));
  r = Run({"model", "check", Path("pkg")});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("reference"), std::string::npos) << r.err;
}

TEST_F(ModelCli, AModuleThatDoesNotLoadIsAnErrorAtTheOperatorsLine) {
  Write("in.jsonl", R"({"query":"hello"})"
                    "\n");
  ClassifierRecipe("query_sentiment_detection_mapper", Model("roberta-sentiment-st"));
  const CliResult r = RunRecipe({"--device", "cpu"}, {"DJSHARD_TORCH_MODULE=" + Path("none.so")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("recipe.yaml:3: query_sentiment_detection_mapper cannot run: the libtorch "
                       "module is not available"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("WARNING"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("out.jsonl"));
}

// Test 8: Data-Juicer's GPU demo recipes end to end through dlc on the CPU.
TEST_F(ModelCli, GpuDemoRecipesRunThroughDlcOnTheCpu) {
  // Local stand-ins under the ids the recipes name.
  const std::map<std::string, std::string> ids = {
      {"mrm8488--distilroberta-finetuned-financial-news-sentiment-analysis",
       "roberta-sentiment-st"},
      {"dstefa--roberta-base_topic_classification_nyt_news", "roberta-topic-st"},
      {"openai--clip-vit-base-patch32", "clip-st"}};
  fs::create_directories(Path("home"));
  for (const auto& [id, dir] : ids) fs::create_directory_symlink(Model(dir), Path("home/" + id));
  for (const std::string recipe : {"gpu_demo.yaml", "gpu_demo_4gpu.yaml"}) {
    const std::string job = Path("job-" + recipe);
    const CliResult r =
        WaitFor(Spawn({"dlc", "--run-id", "model-test", "--job-dir", job, "--config",
                       Source("configs/" + recipe), "--nodes", "1", "--num-shards", "1", "--device",
                       TestDevice(), "--output", Path("merged.jsonl")},
                      {"DJSHARD_MODEL_HOME=" + Path("home")}));
    ASSERT_EQ(r.exit_code, 0) << recipe << ": " << r.err;
    const auto out = JsonLines(Read("merged.jsonl"));
    EXPECT_EQ(out.size(), 4u) << recipe;
    for (const auto& row : out) {
      EXPECT_TRUE(row["__dj__meta__"].contains("query_sentiment_label")) << row.dump();
      EXPECT_TRUE(row["__dj__meta__"].contains("query_topic_label")) << row.dump();
      EXPECT_EQ(row["__dj__stats__"]["text_pair_similarity"].size(), 1u) << row.dump();
    }
  }
}

}  // namespace
}  // namespace djshard::testing
