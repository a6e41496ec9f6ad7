// Deduplicators in `djshard run`: each one keeps Data-Juicer's rows (the
// committed vectors, made by running Data-Juicer's operator code), the
// operators before and after it run on the right rows, errors name the input
// row, and the output does not depend on the thread count.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "djshard/io/input.h"
#include "djshard/ops/dedup.h"
#include "tests/cli/cli_harness.h"
#include "tests/unit/dedup_vectors.h"

namespace djshard::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kData = DJSHARD_SOURCE_DIR "/tests/data";

using Vectors = djshard::testing::DedupVectors;
const Vectors& AllVectors() { return djshard::testing::AllDedupVectors(); }

// A recipe entry "  - op:" with `args` (JSON, @DATA@ substituted) as YAML flow.
std::string Entry(const std::string& op, const json& args = json::object()) {
  std::string flow = args.empty() ? "" : " " + args.dump();
  for (size_t at; (at = flow.find("@DATA@")) != std::string::npos;) flow.replace(at, 6, kData);
  return "  - " + op + ":" + flow + "\n";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class DedupCli : public CliTest {
 protected:
  // Runs `ops` over data.jsonl into out/<name>.jsonl with `threads` threads.
  CliResult RunOps(const std::string& ops, int threads, const std::string& name,
                   const std::string& data = "data.jsonl", const std::string& top = "") const {
    Write("recipe.yaml", top + "dataset_path: " + data + "\nprocess:\n" + ops);
    return Run({"run", "--config", "recipe.yaml", "--threads", std::to_string(threads),
                "--export-path", "out/" + name + ".jsonl"});
  }
  // The texts of the rows of a JSONL file, as the core signs them.
  static ops::dedup::KeptResult Kept(const std::string& op, const json& args,
                                     const std::vector<json>& rows) {
    const ops::dedup::DedupConfig config = ops::dedup::ParseDedupConfig(
        op, recipe::OperatorArgs(YAML::Load(args.dump()), "test", op, 1));
    std::vector<std::string> texts(rows.size());
    std::vector<ops::dedup::TextValue> values;
    for (size_t i = 0; i < rows.size(); ++i) {
      texts[i] = rows[i]["text"].get<std::string>();
      values.push_back(ops::dedup::TextValue::String(texts[i]));
    }
    return ops::dedup::KeptRows(config, values);
  }
};

// Every dataset vector: the rows Data-Juicer kept, in input order, and the
// rows its compute_hash failed on in the errors file; 1 and 2 threads alike.
TEST_F(DedupCli, EachOperatorKeepsDataJuicersRows) {
  const Vectors& v = AllVectors();
  std::map<std::string, int> runs;
  for (const json& vec : v.datasets) {
    const std::string op = vec["op"], dataset = vec["dataset"];
    const json& rows = v.rows.at(dataset);
    std::vector<std::string> lines;
    std::string data;
    for (const json& row : rows) {
      lines.push_back(row.dump());
      data += lines.back() + "\n";
    }
    Write("data.jsonl", data);
    std::string expected;
    for (const json& k : vec["kept"]) expected += lines[k.get<size_t>()] + "\n";
    const std::string what = op + " " + vec["args"].dump() + " on " + dataset;
    const CliResult one = RunOps(Entry(op, vec["args"]), 1, "one");
    ASSERT_EQ(one.exit_code, 0) << what << "\n" << one.err;
    EXPECT_EQ(Read("out/one.jsonl"), expected) << what;
    const CliResult two = RunOps(Entry(op, vec["args"]), 2, "two");
    ASSERT_EQ(two.exit_code, 0) << what << "\n" << two.err;
    EXPECT_EQ(Read("out/two.jsonl"), Read("out/one.jsonl")) << what;
    EXPECT_EQ(Read("out/two.jsonl.errors.jsonl"), Read("out/one.jsonl.errors.jsonl")) << what;
    // The errors file names each dropped row by its input line.
    std::vector<uint64_t> want, got;
    for (const auto& [row, message] : vec["errors"].items()) want.push_back(std::stoull(row) + 1);
    std::sort(want.begin(), want.end());
    for (const std::string& line : Lines(Read("out/one.jsonl.errors.jsonl"))) {
      const json e = json::parse(line);
      EXPECT_EQ(e["op"], op);
      EXPECT_EQ(e["file"], Path("data.jsonl"));
      got.push_back(e["line"].get<uint64_t>());
    }
    EXPECT_EQ(got, want) << what;
    const json stats = json::parse(Read("out/one.jsonl.stats.json"));
    ASSERT_EQ(stats["operators"].size(), 1u);
    EXPECT_EQ(stats["operators"][0]["name"], op);
    EXPECT_EQ(stats["operators"][0]["rows_in"], rows.size());
    EXPECT_EQ(stats["operators"][0]["rows_out"], vec["kept"].size());
    EXPECT_EQ(stats["operators"][0]["errors"], want.size());
    EXPECT_EQ(stats["errors"], want.size());
    ++runs[op];
  }
  EXPECT_EQ(runs.size(), 5u);
  EXPECT_EQ(List("out").size(), 6u) << "spill files left behind";
}

// Arguments Data-Juicer fails on (at load, or on every record) are refused
// when the recipe loads, at the argument's line.
TEST_F(DedupCli, BadArgumentsAreRefusedAtTheirLine) {
  Write("data.jsonl", "{\"text\":\"a b c d e f g h\"}\n");
  const Vectors& v = AllVectors();
  ASSERT_FALSE(v.load_errors.empty());
  for (const json& vec : v.load_errors) {
    std::string ops =
        Entry("whitespace_normalization_mapper") + "  - " + vec["op"].get<std::string>() + ":\n";
    for (const auto& [key, value] : vec["args"].items()) {
      std::string text = value.dump();
      for (size_t at; (at = text.find("@DATA@")) != std::string::npos;) text.replace(at, 6, kData);
      ops += "      " + key + ": " + text + "\n";
    }
    const CliResult r = RunOps(ops, 1, "bad");
    EXPECT_EQ(r.exit_code, 2) << vec.dump() << "\n" << r.err;
    EXPECT_NE(r.err.find("recipe.yaml:"), std::string::npos) << r.err;
    EXPECT_FALSE(Exists("out/bad.jsonl"));
  }
  const CliResult unknown =
      RunOps(Entry("text_length_filter") + "  - document_simhash_deduplicator:\n      blocks: 3\n",
             1, "bad");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("recipe.yaml:5"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("num_blocks"), std::string::npos) << unknown.err;
  const CliResult distance = RunOps(
      "  - document_deduplicator:\n  - document_simhash_deduplicator:\n"
      "      num_blocks: 4\n      hamming_distance: 4\n",
      1, "bad");
  EXPECT_EQ(distance.exit_code, 2);
  EXPECT_NE(distance.err.find("recipe.yaml:6"), std::string::npos) << distance.err;
}

// Mappers and filters before a deduplicator run first, the deduplicator sees
// their output, and those after it run on the kept rows only: the same bytes
// as running the three parts one after the other.
TEST_F(DedupCli, OperatorsBeforeAndAfterRunOnTheKeptRows) {
  const Vectors& v = AllVectors();
  std::string data;
  for (const json& row : v.rows.at("corpus")) {
    json r = row;
    r["text"] = "  " + r["text"].get<std::string>() + " \u3000";  // for the mapper
    data += r.dump() + "\n";
  }
  Write("data.jsonl", data);
  const std::string before =
      Entry("whitespace_normalization_mapper") + Entry("text_length_filter", {{"min_len", 40}});
  const std::string after = Entry("words_num_filter", {{"min_num", 30}});
  const json args = {{"window_size", 3}};
  ASSERT_EQ(RunOps(before, 2, "before").exit_code, 0);
  std::vector<json> mid;
  for (const std::string& line : Lines(Read("out/before.jsonl"))) mid.push_back(json::parse(line));
  const ops::dedup::KeptResult kept = Kept("document_simhash_deduplicator", args, mid);
  ASSERT_LT(kept.kept.size(), mid.size()) << "the corpus holds no near duplicates";
  std::string kept_lines;
  const std::vector<std::string> mid_lines = Lines(Read("out/before.jsonl"));
  for (uint64_t r : kept.kept) kept_lines += mid_lines[r] + "\n";
  Write("kept.jsonl", kept_lines);
  ASSERT_EQ(RunOps(after, 1, "expected", "kept.jsonl").exit_code, 0);
  const std::string ops = before + Entry("document_simhash_deduplicator", args) + after;
  for (int threads : {1, 2, 3}) {
    const CliResult r = RunOps(ops, threads, "all");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Read("out/all.jsonl"), Read("out/expected.jsonl")) << threads << " threads";
    EXPECT_NE(r.out.find("document_simhash_deduplicator"), std::string::npos) << r.out;
  }
  const json stats = json::parse(Read("out/all.jsonl.stats.json"));
  ASSERT_EQ(stats["operators"].size(), 4u);
  EXPECT_EQ(stats["operators"][2]["rows_in"], mid.size());
  EXPECT_EQ(stats["operators"][2]["rows_out"], kept.kept.size());
  EXPECT_EQ(stats["operators"][3]["rows_in"], kept.kept.size());
  EXPECT_EQ(stats["rows_in"], v.rows.at("corpus").size());
}

// A deduplicator that removes nothing leaves the recipe's output as it was,
// byte for byte (stats and meta included).
TEST_F(DedupCli, ADeduplicatorWithoutDuplicatesChangesNothing) {
  std::string data;
  for (int i = 0; i < 300; ++i) {
    data += json({{"text", "row " + std::to_string(i) + " says " + std::string(i % 50, 'x')},
                  {"id", i}})
                .dump() +
            "\n";
  }
  Write("data.jsonl", data);
  const std::string a =
      Entry("whitespace_normalization_mapper") + Entry("text_length_filter", {{"min_len", 12}});
  const std::string b = Entry("alphanumeric_filter", {{"min_ratio", 0.1}});
  ASSERT_EQ(RunOps(a + b, 2, "plain").exit_code, 0);
  ASSERT_EQ(RunOps(a + Entry("document_deduplicator") + b, 2, "dedup").exit_code, 0);
  EXPECT_EQ(Read("out/dedup.jsonl"), Read("out/plain.jsonl"));
  const std::string top = "keep_stats_in_res_ds: false\n";
  ASSERT_EQ(RunOps(a + b, 2, "plain", "data.jsonl", top).exit_code, 0);
  ASSERT_EQ(RunOps(Entry("ray_document_deduplicator") + a + Entry("document_deduplicator") + b, 2,
                   "dedup", "data.jsonl", top)
                .exit_code,
            0);
  EXPECT_EQ(Read("out/dedup.jsonl"), Read("out/plain.jsonl"));
}

// Two deduplicators make two stages; a second document_deduplicator groups
// by the first one's __dj__hash (Data-Juicer keeps the field), so it keeps
// every row, even after a mapper made two texts equal.
TEST_F(DedupCli, TwoDeduplicatorsMakeTwoStages) {
  const Vectors& v = AllVectors();
  std::string data;
  std::vector<json> rows;
  for (const json& row : v.rows.at("corpus")) {
    rows.push_back(row);
    data += row.dump() + "\n";
  }
  Write("data.jsonl", data);
  const json minhash = {{"window_size", 3}, {"num_permutations", 64}};
  const std::string ops = Entry("document_deduplicator", {{"lowercase", true}}) +
                          Entry("whitespace_normalization_mapper") +
                          Entry("document_minhash_deduplicator", minhash);
  // The expected rows: each stage composed by hand through the core.
  const ops::dedup::KeptResult first = Kept("document_deduplicator", {{"lowercase", true}}, rows);
  std::string kept1;
  for (uint64_t r : first.kept) kept1 += rows[r].dump() + "\n";
  Write("kept1.jsonl", kept1);
  ASSERT_EQ(RunOps(Entry("whitespace_normalization_mapper"), 1, "mapped", "kept1.jsonl").exit_code,
            0);
  const std::vector<std::string> mapped = Lines(Read("out/mapped.jsonl"));
  std::vector<json> mapped_rows;
  for (const std::string& line : mapped) mapped_rows.push_back(json::parse(line));
  const ops::dedup::KeptResult second = Kept("document_minhash_deduplicator", minhash, mapped_rows);
  std::string expected;
  for (uint64_t r : second.kept) expected += mapped[r] + "\n";
  ASSERT_LT(second.kept.size(), first.kept.size());
  for (int threads : {1, 2}) {
    const CliResult r = RunOps(ops, threads, "two");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Read("out/two.jsonl"), expected);
  }

  Write("same.jsonl", "{\"text\":\"A\\u3000b\"}\n{\"text\":\"A b\"}\n{\"text\":\"a b\"}\n");
  const std::string twice = Entry("document_deduplicator") +
                            Entry("whitespace_normalization_mapper") +
                            Entry("document_deduplicator");
  ASSERT_EQ(RunOps(twice, 2, "twice", "same.jsonl").exit_code, 0);
  EXPECT_EQ(Read("out/twice.jsonl"),
            "{\"text\":\"A b\"}\n{\"text\":\"A b\"}\n{\"text\":\"a b\"}\n");
  const json stats = json::parse(Read("out/twice.jsonl.stats.json"));
  EXPECT_EQ(stats["operators"][2]["rows_in"], 3);
  EXPECT_EQ(stats["operators"][2]["rows_out"], 3);
  // Grouping the first one's simhashes with other parameters is refused.
  const CliResult refused =
      RunOps(Entry("document_simhash_deduplicator") + Entry("whitespace_normalization_mapper") +
                 "  - document_simhash_deduplicator:\n      hamming_distance: 2\n",
             1, "refused", "same.jsonl");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("recipe.yaml:5"), std::string::npos) << refused.err;
}

// A record without the text, or with a non-string one, is dropped and
// reported as a filter's record error is, naming its input line even when
// operators before the deduplicator dropped rows.
TEST_F(DedupCli, RecordsWithoutTextAreDroppedAndReportedLikeOperatorErrors) {
  Write("data.jsonl",
        "{\"text\":\"x\",\"body\":\"one\"}\n"
        "{\"text\":\"long enough\"}\n"
        "{\"text\":\"long enough\",\"body\":\"one\"}\n"
        "{\"text\":\"long enough\",\"body\":5}\n"
        "{\"text\":\"long enough\",\"body\":\"one\"}\n"
        "{\"text\":\"long enough\",\"body\":\"two\"}\n");
  const std::string ops = Entry("text_length_filter", {{"min_len", 3}}) +
                          Entry("document_deduplicator", {{"text_key", "body"}}) +
                          Entry("text_length_filter");
  const CliResult r = RunOps(ops, 2, "out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out/out.jsonl"),
            "{\"text\":\"long enough\",\"body\":\"one\",\"__dj__stats__\":{\"text_len\":11}}\n"
            "{\"text\":\"long enough\",\"body\":\"two\",\"__dj__stats__\":{\"text_len\":11}}\n");
  const std::vector<std::string> errors = Lines(Read("out/out.jsonl.errors.jsonl"));
  ASSERT_EQ(errors.size(), 2u);
  // A filter's record error, for comparison: the same fields.
  Write("missing.jsonl", "{\"body\":\"x\"}\n");
  ASSERT_EQ(RunOps(Entry("text_length_filter"), 1, "filter", "missing.jsonl").exit_code, 0);
  const json filter_error = json::parse(Lines(Read("out/filter.jsonl.errors.jsonl")).at(0));
  for (size_t i = 0; i < errors.size(); ++i) {
    const json e = json::parse(errors[i]);
    EXPECT_EQ(e["op"], "document_deduplicator");
    EXPECT_EQ(e["file"], Path("data.jsonl"));
    EXPECT_EQ(e["line"], i == 0 ? 2 : 4);
    for (const auto& [key, value] : filter_error.items()) EXPECT_TRUE(e.contains(key)) << key;
    EXPECT_EQ(e.size(), filter_error.size());
  }
  EXPECT_NE(r.out.find("2 record(s) dropped by operator errors"), std::string::npos) << r.out;
  // skip_op_error: false stops the run at the first such row.
  const CliResult stop =
      RunOps(Entry("text_length_filter", {{"min_len", 3}}) +
                 Entry("document_deduplicator", {{"text_key", "body"}, {"skip_op_error", false}}),
             1, "stop");
  EXPECT_NE(stop.exit_code, 0);
  EXPECT_NE(stop.err.find("data.jsonl:2"), std::string::npos) << stop.err;
  EXPECT_FALSE(Exists("out/stop.jsonl"));
}

// Job mode runs partitions on their own: a deduplicator there is refused at
// its line; so is keep_hashes_in_res_ds: true.
TEST_F(DedupCli, JobModeAndKeptHashesAreRefused) {
  Write("data.jsonl", "{\"text\":\"a\"}\n");
  Write("recipe.yaml", "dataset_path: data.jsonl\nprocess:\n  - text_length_filter:\n" +
                           Entry("document_simhash_deduplicator"));
  const CliResult job =
      Run({"run", "--config", "recipe.yaml", "--export-path", "out/r.jsonl", "--work-dir", "work"});
  EXPECT_EQ(job.exit_code, 2);
  EXPECT_NE(job.err.find("recipe.yaml:4"), std::string::npos) << job.err;
  EXPECT_NE(job.err.find("partitions or checkpoints"), std::string::npos) << job.err;
  EXPECT_FALSE(Exists("out/r.jsonl"));
  const CliResult hashes =
      RunOps(Entry("document_deduplicator"), 1, "h", "data.jsonl", "keep_hashes_in_res_ds: true\n");
  EXPECT_EQ(hashes.exit_code, 2);
  EXPECT_NE(hashes.err.find("recipe.yaml:1"), std::string::npos) << hashes.err;
}

// A run killed with its rows spilled leaves its spill directory; the next run
// beside the same export removes it (no process holds its lock) and gives the
// output a run that was never killed gives. A spill directory whose lock a
// live process holds is left alone.
TEST_F(DedupCli, ASpillDirectoryLeftByAKilledRunIsRemovedByTheNext) {
  std::string data;
  for (int i = 0; i < 200; ++i) data += "{\"text\":\"row " + std::to_string(i % 50) + " text\"}\n";
  Write("data.jsonl", data);
  const std::string ops = "  - text_length_filter:\n" + Entry("document_deduplicator");
  ASSERT_EQ(RunOps(ops, 2, "clean").exit_code, 0);
  const std::string clean = Read("out/clean.jsonl");
  EXPECT_EQ(Lines(clean).size(), 50u);

  const auto spill_dirs = [&] {
    std::vector<std::string> found;
    for (const std::string& name : List("out")) {
      if (name.rfind(".r.jsonl.dedup-", 0) == 0) found.push_back(name);
    }
    return found;
  };
  Write("recipe.yaml", "dataset_path: data.jsonl\nprocess:\n" + ops);
  const CliResult killed = WaitFor(
      Spawn({"run", "--config", "recipe.yaml", "--threads", "2", "--export-path", "out/r.jsonl"},
            {"DJSHARD_TEST_KILL_AT=dedup_spilled"}));
  EXPECT_EQ(killed.exit_code, 128 + 9) << killed.err;
  ASSERT_EQ(spill_dirs().size(), 1u);

  // A spill directory of a run still alive: its lock is held.
  Write("out/.r.jsonl.dedup-1/lock", "");
  Write("out/.r.jsonl.dedup-1/rows-0.jsonl", "{}\n");
  const int held = ::open(Path("out/.r.jsonl.dedup-1/lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);

  ASSERT_EQ(RunOps(ops, 2, "r").exit_code, 0);
  EXPECT_EQ(Read("out/r.jsonl"), clean);
  EXPECT_EQ(spill_dirs(), std::vector<std::string>{".r.jsonl.dedup-1"});
  ::close(held);
}

}  // namespace
}  // namespace djshard::testing
