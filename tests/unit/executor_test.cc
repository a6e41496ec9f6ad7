// The in-process executor on real operators and real files: order, bytes
// independent of threads and batches, counters, the errors file, cancel.
#include "djshard/exec/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <optional>

#include "djshard/common/error.h"
#include "djshard/io/sha256.h"
#include "djshard/recipe/recipe.h"
#include "tests/unit/temp_dir.h"

namespace djshard::exec {
namespace {

using nlohmann::json;

// whitespace_normalization_mapper strips the text; text_length_filter keeps
// texts of at least 5 characters.
constexpr const char* kProcess =
    "process:\n"
    "  - whitespace_normalization_mapper:\n"
    "  - text_length_filter:\n"
    "      min_len: 5\n";

// Row i: every fifth one is too short to be kept; the others carry spaces for
// the mapper to strip and an untouched "meta" with unusual spacing.
std::string Corpus(int first, int rows) {
  std::string out;
  for (int i = first; i < first + rows; ++i) {
    const std::string text = i % 5 == 0 ? "x" : "  row " + std::to_string(i) + "  ";
    out += "{\"id\":" + std::to_string(i) + ",\"text\":\"" + text +
           "\",\"meta\":{ \"k\" : [1, 2.50] }}\n";
  }
  return out;
}

struct Outcome {
  ExecSummary summary;
  std::string output;
  std::string errors;
};

class ExecutorTest : public ::testing::Test {
 protected:
  Plan PlanOf(const std::string& recipe_text) {
    const std::string path =
        tmp_.Write("recipe-" + std::to_string(++files_) + ".yaml", recipe_text);
    return CompilePlan(recipe::LoadRecipe(path), ops::Registry::Global());
  }
  io::InputCandidate Input(const std::string& rel, const std::string& content) {
    return {tmp_.Write(rel, content), "data/" + rel, rel};
  }
  // Runs to committed files and reads them back.
  Outcome Run(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
              ExecOptions options = {}) {
    const std::string n = std::to_string(++files_);
    Outcome o;
    {
      io::OutputStream output(tmp_.Path("out-" + n + ".jsonl"), false);
      io::OutputStream errors(tmp_.Path("errors-" + n + ".jsonl"), false);
      o.summary = Execute(plan, inputs, output, &errors, options);
      output.Commit(false);
      errors.Commit(false);
    }
    o.output = tmp_.Read("out-" + n + ".jsonl");
    o.errors = tmp_.Read("errors-" + n + ".jsonl");
    return o;
  }
  // The error Execute throws (nullopt when it returns).
  std::optional<Error> Failure(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
                               ExecOptions options = {}) {
    try {
      Run(plan, inputs, options);
    } catch (const Error& e) {
      return e;
    }
    return std::nullopt;
  }

  testing::TempDir tmp_;
  int files_ = 0;
};

std::vector<json> Lines(const std::string& jsonl) {
  std::vector<json> out;
  size_t pos = 0;
  while (pos < jsonl.size()) {
    const size_t nl = jsonl.find('\n', pos);
    out.push_back(json::parse(jsonl.substr(pos, nl - pos)));
    pos = nl + 1;
  }
  return out;
}

TEST_F(ExecutorTest, OutputOrderIsInputOrderForAnyThreadCount) {
  const Plan plan = PlanOf(kProcess);
  const std::vector<io::InputCandidate> inputs = {Input("a.jsonl", Corpus(0, 1500)),
                                                  Input("b.jsonl", Corpus(1500, 1500))};
  for (int threads = 1; threads <= 4; ++threads) {
    SCOPED_TRACE(threads);
    ExecOptions options;
    options.threads = threads;
    options.batch_bytes = 700;  // about 12 rows: hundreds of batches
    const std::vector<json> rows = Lines(Run(plan, inputs, options).output);
    ASSERT_EQ(rows.size(), 2400u);  // every fifth row is filtered out
    int expected = 0;
    for (const json& row : rows) {
      if (expected % 5 == 0) ++expected;
      ASSERT_EQ(row["id"], expected);
      ++expected;
    }
  }
}

TEST_F(ExecutorTest, SameBytesForOneToFourThreadsAndAnyBatchSize) {
  const std::vector<io::InputCandidate> inputs = {Input("a.jsonl", Corpus(0, 1000)),
                                                  Input("b.jsonl", Corpus(1000, 777))};
  const Plan plan = PlanOf(kProcess);
  ExecOptions one;
  one.threads = 1;
  const std::string reference = Run(plan, inputs, one).output;
  ASSERT_FALSE(reference.empty());
  const Plan small_batches = PlanOf(std::string(kProcess) + "      batch_size: 3\n");
  ASSERT_EQ(small_batches.batch_rows, 3u);
  for (int threads = 1; threads <= 4; ++threads) {
    for (size_t batch_bytes : {size_t{1}, size_t{100}, size_t{4096}, size_t{1} << 20}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, batch_bytes " +
                   std::to_string(batch_bytes));
      ExecOptions options;
      options.threads = threads;
      options.batch_bytes = batch_bytes;
      EXPECT_EQ(Run(plan, inputs, options).output, reference);
      EXPECT_EQ(Run(small_batches, inputs, options).output, reference);
    }
  }
}

TEST_F(ExecutorTest, UntouchedFieldsKeepTheirBytesAndStatsAreAppended) {
  const Plan plan = PlanOf(kProcess);
  const Outcome o = Run(plan, {Input("a.jsonl", Corpus(1, 1))});
  EXPECT_EQ(o.output,
            "{\"id\":1,\"text\":\"row 1\",\"meta\":{ \"k\" : [1, 2.50] },"
            "\"__dj__stats__\":{\"text_len\":5}}\n");
}

TEST_F(ExecutorTest, KeepStatsFalseLeavesNoStatsInTheOutput) {
  const Plan plan = PlanOf(std::string("keep_stats_in_res_ds: false\n") + kProcess);
  const Outcome o = Run(plan, {Input("a.jsonl", Corpus(1, 1))});
  EXPECT_EQ(o.output, "{\"id\":1,\"text\":\"row 1\",\"meta\":{ \"k\" : [1, 2.50] }}\n");
}

TEST_F(ExecutorTest, OperatorsWorkOnTheRecipesTextKeyOnly) {
  const Plan plan = PlanOf(std::string("text_key: body\n") + kProcess);
  const Outcome o =
      Run(plan, {Input("a.jsonl", "{\"body\":\"  kept body  \",\"text\":\"  x  \"}\n")});
  EXPECT_EQ(o.output,
            "{\"body\":\"kept body\",\"text\":\"  x  \",\"__dj__stats__\":{\"text_len\":9}}\n");
}

TEST_F(ExecutorTest, EmptyInputFilesAddNothing) {
  const std::string row = "{\"id\":1,\"text\":\"row 1\"}\n";
  ExecOptions options;
  options.threads = 3;
  const Outcome o =
      Run(PlanOf("keep_stats_in_res_ds: false\n" + std::string(kProcess)),
          {Input("a.jsonl", ""), Input("b.jsonl", row), Input("c.jsonl", "")}, options);
  EXPECT_EQ(o.output, row);
  EXPECT_EQ(o.summary.rows_in, 1u);
  EXPECT_EQ(o.summary.bytes_in, row.size());
}

TEST_F(ExecutorTest, ALastLineWithoutNewlineAndLinesLongerThanABatchAreKept) {
  const std::string long_text(5000, 'y');
  const Plan plan = PlanOf(kProcess);
  ExecOptions options;
  options.batch_bytes = 64;
  const Outcome o =
      Run(plan, {Input("a.jsonl", "{\"text\":\"" + long_text + "\"}\n{\"text\":\"last one\"}")},
          options);
  const std::vector<json> rows = Lines(o.output);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["text"], long_text);
  EXPECT_EQ(rows[1]["text"], "last one");
  EXPECT_EQ(o.output.back(), '\n');
}

TEST_F(ExecutorTest, ALastLineWithoutNewlineIsKeptWhereverTheBatchesAreCut) {
  const std::string rows = "{\"text\":\"first\"}\n{\"text\":\"second\"}\n{\"text\":\"third\"}";
  const std::string expected = rows + "\n";
  for (const char* batch_size : {"1", "2", "3", "1000"}) {
    const Plan plan = PlanOf(
        "keep_stats_in_res_ds: false\nprocess:\n  - whitespace_normalization_mapper:\n"
        "      batch_size: " +
        std::string(batch_size) + "\n");
    for (size_t batch_bytes : {size_t{1}, size_t{5}, size_t{20}, size_t{64}}) {
      for (int threads : {1, 3}) {
        SCOPED_TRACE(std::string(batch_size) + " rows, " + std::to_string(batch_bytes) +
                     " bytes, " + std::to_string(threads) + " threads");
        ExecOptions options;
        options.threads = threads;
        options.batch_bytes = batch_bytes;
        const Outcome o = Run(plan, {Input("a.jsonl", rows), Input("b.jsonl", rows)}, options);
        EXPECT_EQ(o.output, expected + expected);
        EXPECT_EQ(o.summary.rows_in, 6u);
      }
    }
  }
}

TEST_F(ExecutorTest, CountsRowsBytesAndEachOperatorsRowsAndErrors) {
  const Plan plan = PlanOf(kProcess);
  // 10 rows, two of them without a text (line 4 and line 9): the mapper fails on them.
  std::string data = Corpus(0, 10);
  std::vector<std::string> lines;
  for (size_t pos = 0; pos < data.size();) {
    const size_t nl = data.find('\n', pos);
    lines.push_back(data.substr(pos, nl - pos + 1));
    pos = nl + 1;
  }
  lines[3] = "{\"id\":3,\"body\":\"no text\"}\n";
  lines[8] = "{\"id\":8,\"text\":17}\n";
  data.clear();
  for (const std::string& l : lines) data += l;
  ExecOptions options;
  options.threads = 2;
  options.batch_bytes = 100;
  const Outcome o = Run(plan, {Input("a.jsonl", data)}, options);
  const ExecSummary& s = o.summary;
  EXPECT_EQ(s.rows_in, 10u);
  EXPECT_EQ(s.bytes_in, data.size());
  EXPECT_EQ(s.bytes_out, o.output.size());
  EXPECT_EQ(s.errors, 2u);
  // Ids 0 and 5 are too short; 3 and 8 failed.
  EXPECT_EQ(s.rows_out, 6u);
  ASSERT_EQ(s.operators.size(), 2u);
  EXPECT_EQ(s.operators[0].name, "whitespace_normalization_mapper");
  EXPECT_EQ(s.operators[0].rows_in, 10u);
  EXPECT_EQ(s.operators[0].rows_out, 8u);
  EXPECT_EQ(s.operators[0].errors, 2u);
  EXPECT_EQ(s.operators[1].name, "text_length_filter");
  EXPECT_EQ(s.operators[1].rows_in, 8u);
  EXPECT_EQ(s.operators[1].rows_out, 6u);
  EXPECT_EQ(s.operators[1].errors, 0u);

  const json stats = json::parse(SummaryJson(s, 2));
  EXPECT_EQ(stats["rows_in"], 10);
  EXPECT_EQ(stats["rows_out"], 6);
  EXPECT_EQ(stats["errors"], 2);
  EXPECT_EQ(stats["threads"], 2);
  EXPECT_EQ(stats["bytes_in"], data.size());
  ASSERT_EQ(stats["operators"].size(), 2u);
  EXPECT_EQ(stats["operators"][0]["name"], "whitespace_normalization_mapper");
  EXPECT_EQ(stats["operators"][0]["errors"], 2);
  EXPECT_EQ(stats["operators"][1]["name"], "text_length_filter");
  EXPECT_EQ(stats["operators"][1]["rows_in"], 8);
  EXPECT_EQ(stats["operators"][1]["rows_out"], 6);
}

TEST_F(ExecutorTest, OperatorErrorsGoToTheErrorsFileInInputOrderWithFileAndLine) {
  const Plan plan = PlanOf(kProcess);
  std::string second = Corpus(100, 30);
  second += "{\"id\":130}\n";
  second += Corpus(131, 30);
  second += "{\"id\":161,\"text\":[1]}\n";
  ExecOptions options;
  options.threads = 3;
  options.batch_bytes = 200;
  const Outcome o =
      Run(plan, {Input("a.jsonl", Corpus(0, 40)), Input("sub/b.jsonl", second)}, options);
  const std::vector<json> errors = Lines(o.errors);
  ASSERT_EQ(errors.size(), 2u) << o.errors;
  EXPECT_EQ(errors[0]["op"], "whitespace_normalization_mapper");
  EXPECT_EQ(errors[0]["error"], "field 'text' not found");
  EXPECT_EQ(errors[0]["file"], "data/sub/b.jsonl");
  EXPECT_EQ(errors[0]["line"], 31);
  EXPECT_EQ(errors[1]["error"], "field 'text' is not a string");
  EXPECT_EQ(errors[1]["file"], "data/sub/b.jsonl");
  EXPECT_EQ(errors[1]["line"], 62);
  // The failed records are dropped, the others kept.
  for (const json& row : Lines(o.output)) {
    EXPECT_NE(row["id"], 130);
    EXPECT_NE(row["id"], 161);
  }
  EXPECT_EQ(o.summary.rows_in, 102u);
}

TEST_F(ExecutorTest, NoErrorsFileContentWhenNothingFails) {
  const Outcome o = Run(PlanOf(kProcess), {Input("a.jsonl", Corpus(0, 20))});
  EXPECT_EQ(o.errors, "");
  EXPECT_EQ(o.summary.errors, 0u);
}

TEST_F(ExecutorTest, AnOperatorErrorStopsTheRunWhenSkipOpErrorIsFalse) {
  const Plan plan = PlanOf(std::string("skip_op_error: false\n") + kProcess);
  std::string data = Corpus(0, 50) + "{\"id\":50}\n" + Corpus(51, 5);
  ExecOptions options;
  options.threads = 2;
  options.batch_bytes = 300;
  const std::optional<Error> e = Failure(plan, {Input("a.jsonl", data)}, options);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), "data/a.jsonl");
  EXPECT_EQ(e->line(), 51u);
  EXPECT_EQ(e->message(),
            "operator 'whitespace_normalization_mapper' failed: field 'text' not found");
  EXPECT_NE(e->hint().find("skip_op_error: true"), std::string::npos);
}

TEST_F(ExecutorTest, ALineThatIsNotAnObjectIsAnErrorNamingFileAndLine) {
  const Plan plan = PlanOf(kProcess);
  ExecOptions options;
  options.threads = 4;
  options.batch_bytes = 128;
  const std::optional<Error> e =
      Failure(plan, {Input("a.jsonl", Corpus(0, 10)), Input("b.jsonl", Corpus(10, 20) + "[1,2]\n")},
              options);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), "data/b.jsonl");
  EXPECT_EQ(e->line(), 21u);
  EXPECT_NE(e->message().find("not a JSON object"), std::string::npos) << e->message();
}

TEST_F(ExecutorTest, ACancelledRunThrowsAndCommitsNothing) {
  const Plan plan = PlanOf(kProcess);
  std::atomic<bool> cancel{true};
  ExecOptions options;
  options.threads = 2;
  options.cancel = &cancel;
  const std::optional<Error> e = Failure(plan, {Input("a.jsonl", Corpus(0, 100))}, options);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message(), "the run was cancelled");
  // Only the inputs and the recipe remain: no output under any name.
  EXPECT_EQ(tmp_.List(), (std::vector<std::string>{"a.jsonl", "recipe-1.yaml"}));
}

TEST_F(ExecutorTest, AnUnsetCancelFlagChangesNothing) {
  const Plan plan = PlanOf(kProcess);
  std::atomic<bool> cancel{false};
  ExecOptions options;
  options.cancel = &cancel;
  EXPECT_EQ(Run(plan, {Input("a.jsonl", Corpus(0, 100))}, options).summary.rows_out, 80u);
}

}  // namespace
}  // namespace djshard::exec
