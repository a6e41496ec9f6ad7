// Black-box tests of `djshard run` and `djshard ops`: the real binary.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<json> ParseLines(const std::string& text) {
  std::vector<json> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) rows.push_back(json::parse(line));
  return rows;
}

class RunCli : public CliTest {
 protected:
  // A corpus of `n` varied records (long enough to cross many batches when n is large).
  void WriteCorpus(const std::string& rel, int n) {
    std::string rows;
    for (int i = 0; i < n; ++i) {
      std::string text = "  Row " + std::to_string(i) + "\\u3000has\\ttext\\u00a0";
      for (int k = 0; k < i % 7; ++k)
        text += " word" + std::to_string(k) + " visit https://ex.com/" + std::to_string(i);
      if (i % 5 == 0) text = "short";
      rows += "{\"id\": " + std::to_string(i) + ", \"text\": \"" + text +
              "\", \"meta\": {\"score\": " + std::to_string((i % 10) / 10.0) + "}}\n";
    }
    Write(rel, rows);
  }
  std::string Recipe(const std::string& ops, const std::string& extra = "") {
    return Write("recipe.yaml", "dataset_path: data.jsonl\nexport_path: out/result.jsonl\n" +
                                    extra + "process:\n" + ops);
  }
};

TEST_F(RunCli, AppliesTheRecipeInOrderAndWritesStats) {
  WriteCorpus("data.jsonl", 50);
  Recipe(
      "  - whitespace_normalization_mapper:\n  - clean_links_mapper:\n"
      "  - text_length_filter:\n      min_len: 10\n");
  const CliResult r = Run({"run", "--config", "recipe.yaml", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Kept 40 of 50 rows"), std::string::npos) << r.out;
  const std::vector<json> rows = ParseLines(Read("out/result.jsonl"));
  ASSERT_EQ(rows.size(), 40u);
  EXPECT_EQ(rows[0]["id"], 1);
  // Whitespace first (strip, odd spaces to ' '), then links leave their spaces.
  EXPECT_EQ(rows[0]["text"], "Row 1 has text  word0 visit ");
  EXPECT_EQ(rows[1]["text"], "Row 2 has text  word0 visit  word1 visit ");
  EXPECT_EQ(rows[0]["__dj__stats__"]["text_len"], 28);
  EXPECT_EQ(rows[0]["meta"]["score"], 0.1);
  const json stats = json::parse(Read("out/result.jsonl.stats.json"));
  EXPECT_EQ(stats["rows_in"], 50);
  EXPECT_EQ(stats["rows_out"], 40);
  ASSERT_EQ(stats["operators"].size(), 3u);
  EXPECT_EQ(stats["operators"][2]["name"], "text_length_filter");
  EXPECT_EQ(stats["operators"][2]["rows_in"], 50);
  EXPECT_EQ(stats["operators"][2]["rows_out"], 40);
  EXPECT_EQ(Read("out/result.jsonl.errors.jsonl"), "");
}

TEST_F(RunCli, OutputBytesDoNotDependOnThreadCount) {
  WriteCorpus("data.jsonl", 30000);
  Recipe(
      "  - whitespace_normalization_mapper:\n  - punctuation_normalization_mapper:\n"
      "  - clean_links_mapper:\n  - words_num_filter:\n      min_num: 3\n"
      "  - character_repetition_filter:\n      rep_len: 5\n      max_ratio: 0.9\n");
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--threads", "1", "--export-path", "one.jsonl"})
                .exit_code,
            0);
  ASSERT_EQ(
      Run({"run", "--config", "recipe.yaml", "--threads", "8", "--export-path", "eight.jsonl"})
          .exit_code,
      0);
  const std::string one = Read("one.jsonl");
  EXPECT_GT(one.size(), 1000000u);
  EXPECT_EQ(one, Read("eight.jsonl"));
  // Batches of 7 rows: thousands of batches read, run and written out of
  // order by 3 threads.
  Recipe(
      "  - whitespace_normalization_mapper:\n      batch_size: 7\n"
      "  - punctuation_normalization_mapper:\n"
      "  - clean_links_mapper:\n  - words_num_filter:\n      min_num: 3\n"
      "  - character_repetition_filter:\n      rep_len: 5\n      max_ratio: 0.9\n");
  ASSERT_EQ(
      Run({"run", "--config", "recipe.yaml", "--threads", "3", "--export-path", "small.jsonl"})
          .exit_code,
      0);
  EXPECT_EQ(one, Read("small.jsonl"));
}

TEST_F(RunCli, UntouchedRecordsPassThroughByteForByte) {
  const std::string rows =
      "{\"text\": \"long enough text here\",  \"x\" : [1.0, 1e5, \"\\u00e9\"], \"y\":{\"z\" "
      ":null}}\n"
      "{\"y\":2,\"text\":\"another long text\",\"__dj__stats__\":{\"old\":1}}\n";
  Write("data.jsonl", rows);
  Recipe("  - text_length_filter:\n      min_len: 5\n", "keep_stats_in_res_ds: false\n");
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml"}).exit_code, 0);
  const std::string out = Read("out/result.jsonl");
  const std::string first = rows.substr(0, rows.find('\n') + 1);
  EXPECT_EQ(out.substr(0, first.size()), first);
  // keep_stats_in_res_ds: false drops stats that came with the input too.
  EXPECT_EQ(out.substr(first.size()), "{\"y\":2,\"text\":\"another long text\"}\n");
}

TEST_F(RunCli, ChangedTextIsReplacedInPlaceAndStatsAreReusedOrAppended) {
  Write("data.jsonl",
        "{\"a\":1,\"text\":\" padded \",\"b\":[1.50]}\n"
        "{\"text\":\"xx\",\"__dj__stats__\":{\"text_len\":99}}\n");
  Recipe("  - whitespace_normalization_mapper:\n  - text_length_filter:\n      min_len: 5\n");
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml"}).exit_code, 0);
  // Row 1 has 6 code points after stripping and is kept; row 2's stat (99) is reused.
  EXPECT_EQ(Read("out/result.jsonl"),
            "{\"a\":1,\"text\":\"padded\",\"b\":[1.50],\"__dj__stats__\":{\"text_len\":6}}\n"
            "{\"text\":\"xx\",\"__dj__stats__\":{\"text_len\":99}}\n");
}

TEST_F(RunCli, OperatorErrorsDropTheRecordAndAreReported) {
  Write("data.jsonl",
        "{\"text\":\"aaaa\",\"meta\":{\"score\":0.5}}\n{\"text\":\"bbbb\"}\n"
        "{\"text\":\"cccc\",\"meta\":{\"score\":0.7}}\n");
  Recipe(
      "  - specified_numeric_field_filter:\n      field_key: meta.score\n      min_value: 0.1\n"
      "      max_value: 1.0\n");
  CliResult r = Run({"run", "--config", "recipe.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseLines(Read("out/result.jsonl")).size(), 2u);
  const std::vector<json> errors = ParseLines(Read("out/result.jsonl.errors.jsonl"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]["op"], "specified_numeric_field_filter");
  EXPECT_EQ(errors[0]["line"], 2);
  EXPECT_NE(errors[0]["error"].get<std::string>().find("meta.score"), std::string::npos);
  EXPECT_NE(r.out.find("1 record(s) dropped by operator errors"), std::string::npos);

  Recipe(
      "  - specified_numeric_field_filter:\n      field_key: meta.score\n"
      "      skip_op_error: false\n");
  fs::remove(Path("out/result.jsonl"));
  r = Run({"run", "--config", "recipe.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("data.jsonl:2: operator 'specified_numeric_field_filter' failed"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(Exists("out/result.jsonl"));
  for (const std::string& name : List("out")) EXPECT_EQ(name.find(".tmp."), std::string::npos);
}

TEST_F(RunCli, BatchSizeCutsBatchesWithoutChangingOutputOrLineNumbers) {
  WriteCorpus("data.jsonl", 50);
  std::string rows = Read("data.jsonl");
  rows.insert(rows.find('\n', rows.find("\"id\": 22,")) + 1, "{\"text\":\"no meta here\"}\n");
  Write("data.jsonl", rows);
  const std::string ops =
      "  - whitespace_normalization_mapper:\n  - specified_numeric_field_filter:\n"
      "      field_key: meta.score\n      max_value: 1.0\n";
  Recipe(ops);
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--export-path", "default.jsonl"}).exit_code, 0);
  Recipe(ops + "      batch_size: 7\n");
  ASSERT_EQ(
      Run({"run", "--config", "recipe.yaml", "--export-path", "small.jsonl", "--threads", "3"})
          .exit_code,
      0);
  EXPECT_EQ(Read("small.jsonl"), Read("default.jsonl"));
  const std::vector<json> errors = ParseLines(Read("small.jsonl.errors.jsonl"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]["line"], 24);
}

TEST_F(RunCli, APathologicalUserPatternBecomesARecordErrorNotAHang) {
  Write("data.jsonl", "{\"text\":\"" + std::string(5000, 'a') + "b\"}\n{\"text\":\"fine\"}\n");
  Recipe("  - clean_email_mapper:\n      pattern: '(a+)+$'\n");
  const CliResult r = Run({"run", "--config", "recipe.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out/result.jsonl"), "{\"text\":\"fine\"}\n");
  EXPECT_NE(Read("out/result.jsonl.errors.jsonl").find("limit"), std::string::npos);
}

TEST_F(RunCli, BadInputLineIsAnErrorWithFileAndLine) {
  Write("data.jsonl", "{\"text\":\"ok\"}\n[1]\n");
  Recipe("  - text_length_filter:\n");
  const CliResult r = Run({"run", "--config", "recipe.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("data.jsonl:2: record is not a JSON object"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("out/result.jsonl"));
}

TEST_F(RunCli, ABadLineDeepInALargeInputStopsEveryThreadAndLeavesNoFile) {
  WriteCorpus("data.jsonl", 40000);
  std::string rows = Read("data.jsonl");
  size_t pos = 0;
  for (int line = 1; line < 30001; ++line) pos = rows.find('\n', pos) + 1;
  rows.insert(pos, "{\"text\": \"cut off\n");
  Write("data.jsonl", rows);
  Recipe("  - whitespace_normalization_mapper:\n      batch_size: 100\n  - text_length_filter:\n");
  const CliResult r = Run({"run", "--config", "recipe.yaml", "--threads", "4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("data.jsonl:30001: "), std::string::npos) << r.err;
  EXPECT_TRUE(!Exists("out") || List("out").empty());
}

TEST_F(RunCli, MemoryStaysBoundedByBatchesNotByInput) {
  // 96 MB of input, 2 threads: batches of about 512 KB, a few in flight. The
  // input is written in pieces so that this test process stays small: a
  // child's peak RSS counts what it shared with its parent before exec.
  {
    std::ofstream data(Path("data.jsonl"), std::ios::binary);
    const std::string filler(1000, 'w');
    for (int i = 0; i < 96 * 1000; ++i) {
      data << "{\"id\":" << i << ",\"text\":\"" << filler << " \\u3000x\"}\n";
    }
  }
  Recipe("  - whitespace_normalization_mapper:\n  - text_length_filter:\n");
  const CliResult r = Run({"run", "--config", "recipe.yaml", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Kept 96000 of 96000 rows"), std::string::npos) << r.out;
  EXPECT_LT(r.peak_rss_kb, 64 * 1024) << "peak RSS " << r.peak_rss_kb << " KB";
}

TEST_F(RunCli, ShowsProgressOnATerminalAndASummaryAtTheEnd) {
  WriteCorpus("data.jsonl", 12);
  Recipe("  - djshard_test_sleep_mapper:\n      seconds: 0.1\n  - text_length_filter:\n");
  // `script` gives the run a terminal; its transcript is the run's output.
  const CliResult r = WaitFor(Spawn({"run", "--config", "recipe.yaml", "--threads", "1"},
                                    {"DJSHARD_ENABLE_TEST_OPERATORS=1"},
                                    {"sh", "-c", "exec script -qec \"$*\" /dev/null", "sh"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" rows in, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" MB/s, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Processed 12 rows"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("djshard_test_sleep_mapper"), std::string::npos) << r.out;
  // Without a terminal: the summary only, no progress line.
  const CliResult plain = WaitFor(Spawn({"run", "--config", "recipe.yaml", "--threads", "1"},
                                        {"DJSHARD_ENABLE_TEST_OPERATORS=1"}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find(" rows in, "), std::string::npos) << plain.err;
  EXPECT_NE(plain.out.find("Kept "), std::string::npos) << plain.out;
}

TEST_F(RunCli, RefusesUnknownArgumentsTokenizationAndUnimplementedOperators) {
  Write("data.jsonl", "{\"text\":\"ok\"}\n");
  Recipe("  - text_length_filter:\n      min_length: 3\n");
  CliResult r = Run({"run", "--config", "recipe.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("recipe.yaml:5: text_length_filter: argument 'min_length' is not an "
                       "argument of text_length_filter"),
            std::string::npos)
      << r.err;
  // tokenization: true needs a model that is on the machine; none is for lang xx-none.
  Recipe("  - words_num_filter:\n      lang: xx-none\n      tokenization: true\n");
  r = Run({"run", "--config", "recipe.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs Data-Juicer's SentencePiece model xx-none.sp.model"),
            std::string::npos)
      << r.err;
  Recipe("  - python_lambda_mapper:\n");
  r = Run({"run", "--config", "recipe.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("operator 'python_lambda_mapper' is not implemented"), std::string::npos);
}

TEST_F(RunCli, DataJuicersGpuDemoRecipeRunsWithItsRaySettings) {
  // tests/data/gpu_demo_cpu_ops.yaml: Data-Juicer's recipe with num_cpus, num_proc,
  // executor_type: ray and ray_address, its model operators removed.
  const std::string recipe = DJSHARD_SOURCE_DIR "/tests/data/gpu_demo_cpu_ops.yaml";
  CliResult r =
      Run({"run", "--config", recipe, "--dataset-path",
           DJSHARD_SOURCE_DIR "/data/gpu-demo-dataset.jsonl", "--export-path", "out.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Kept 4 of 4 rows"), std::string::npos) << r.out;
  std::vector<json> rows = ParseLines(Read("out.jsonl"));
  ASSERT_EQ(rows.size(), 4u);
  const int lengths[] = {30, 32, 37, 41};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(rows[i]["sample_id"], i);
    EXPECT_EQ(rows[i]["__dj__stats__"]["text_len"], lengths[i]);
  }
  EXPECT_EQ(rows[0]["text"], "A   lovely cat sits on a sofa.");  // only odd whitespace changes
  EXPECT_EQ(Read("out.jsonl.errors.jsonl"), "");

  // Both operators act: odd whitespace becomes spaces, an empty text is filtered out.
  Write("odd.jsonl",
        "{\"sample_id\":0,\"text\":\"\\u3000a\\u00a0cat \"}\n"
        "{\"sample_id\":1,\"text\":\" \"}\n");
  r = Run({"run", "--config", recipe, "--dataset-path", "odd.jsonl", "--export-path", "odd.out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("odd.out"),
            "{\"sample_id\":0,\"text\":\"a cat\",\"__dj__stats__\":{\"text_len\":5}}\n");

  // A typo in the same recipe is still an error naming the operator and the argument.
  std::ifstream in(recipe);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("num_cpus"), 8, "num_cpu");
  Write("typo.yaml", text);
  r = Run({"run", "--config", "typo.yaml", "--dataset-path", "odd.jsonl"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("typo.yaml:16: whitespace_normalization_mapper: argument 'num_cpu' is not "
                       "an argument of whitespace_normalization_mapper"),
            std::string::npos)
      << r.err;
}

TEST_F(RunCli, ReadsAndWritesCompressedJsonl) {
  WriteCorpus("plain/data.jsonl", 200);
  ASSERT_EQ(
      std::system(("gzip -c " + Path("plain/data.jsonl") + " > " + Path("in.jsonl.gz")).c_str()),
      0);
  Recipe("  - whitespace_normalization_mapper:\n");
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--dataset-path", "plain/data.jsonl",
                 "--export-path", "ref.jsonl"})
                .exit_code,
            0);
  for (const char* out : {"o.jsonl.zst", "o.jsonl.gz"}) {
    const CliResult r = Run(
        {"run", "--config", "recipe.yaml", "--dataset-path", "in.jsonl.gz", "--export-path", out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string tool =
        std::string(out).find(".zst") != std::string::npos ? "zstd -dc " : "gzip -dc ";
    ASSERT_EQ(std::system((tool + Path(out) + " > " + Path("decoded.jsonl")).c_str()), 0);
    EXPECT_EQ(Read("decoded.jsonl"), Read("ref.jsonl")) << out;
  }
}

TEST_F(RunCli, LanguageIdFilterUsesAFastTextModel) {
  // Train a tiny model with Debian's fasttext on generated text.
  std::string train;
  const char* en[] = {"the", "data", "is", "good", "and", "we", "have", "more", "of", "it"};
  const char* fr[] = {"le", "la", "est", "bon", "et", "nous", "avons", "plus", "de", "donc"};
  for (int i = 0; i < 400; ++i) {
    std::string e = "__label__en", f = "__label__fr";
    for (int k = 0; k < 8; ++k) {
      e += std::string(" ") + en[(i * 7 + k * 3) % 10];
      f += std::string(" ") + fr[(i * 7 + k * 3) % 10];
    }
    train += e + "\n" + f + "\n";
  }
  Write("train.txt", train);
  ASSERT_EQ(
      std::system(("fasttext supervised -input " + Path("train.txt") + " -output " + Path("lid") +
                   " -epoch 20 -lr 1.0 -dim 10 -thread 1 -verbose 0 > /dev/null")
                      .c_str()),
      0);
  Write("data.jsonl",
        "{\"text\":\"The data is good and we have more\"}\n"
        "{\"text\":\"Le data est bon et nous avons plus\"}\n");
  Recipe("  - language_id_score_filter:\n      lang: en\n      min_score: 0.5\n      model_path: " +
         Path("lid.bin") + "\n");
  const CliResult r = Run({"run", "--config", "recipe.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> rows = ParseLines(Read("out/result.jsonl"));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["__dj__stats__"]["lang"], "en");
  EXPECT_GE(rows[0]["__dj__stats__"]["lang_score"].get<double>(), 0.5);

  Recipe("  - language_id_score_filter:\n      lang: en\n");
  const CliResult missing = Run({"run", "--config", "recipe.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("model_path"), std::string::npos);
}

TEST_F(RunCli, OpsListsTheCatalogueAndShowsOneOperator) {
  CliResult r = Run({"ops"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("document_deduplicator"), std::string::npos);
  EXPECT_NE(r.out.find("164 operators, 46 implemented by djshard"), std::string::npos) << r.out;
  r = Run({"ops", "document_simhash_deduplicator"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("implemented by djshard: yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hamming_distance"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("djshard run runs it"), std::string::npos) << r.out;
  r = Run({"ops", "character_repetition_filter"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("rep_len"), std::string::npos);
  EXPECT_EQ(Run({"ops", "nope"}).exit_code, 2);
}

TEST_F(RunCli, OpsSaysWhichCommonArgumentsDjshardHonoursAndWhichItIgnores) {
  const CliResult r = Run({"ops", "whitespace_normalization_mapper"});
  ASSERT_EQ(r.exit_code, 0);
  const size_t honoured = r.out.find("common arguments djshard honours:");
  const size_t refused = r.out.find("common arguments djshard refuses:");
  const size_t ignored = r.out.find("common arguments accepted and ignored:");
  ASSERT_NE(honoured, std::string::npos) << r.out;
  ASSERT_NE(refused, std::string::npos) << r.out;
  ASSERT_NE(ignored, std::string::npos) << r.out;
  EXPECT_LT(honoured, refused);
  EXPECT_LT(refused, ignored);
  const std::string honoured_part = r.out.substr(honoured, refused - honoured);
  for (const char* name : {"text_key", "skip_op_error", "batch_size", "num_proc", "index_key"}) {
    EXPECT_NE(honoured_part.find(std::string("    ") + name + " "), std::string::npos) << name;
  }
  EXPECT_NE(r.out.find("threads of `djshard run`"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stats_export_path"), std::string::npos);
  const std::string ignored_part = r.out.substr(ignored);
  EXPECT_NE(ignored_part.find("num_cpus, memory, runtime_env, ray_execution_mode, "
                              "cpu_required, auto_op_parallelism, "
                              "adaptive_batching:\n      Ray scheduling:"),
            std::string::npos)
      << r.out;
  EXPECT_NE(ignored_part.find("work_dir"), std::string::npos);
  EXPECT_NE(ignored_part.find("turbo"), std::string::npos);
}

}  // namespace
}  // namespace djshard::testing
