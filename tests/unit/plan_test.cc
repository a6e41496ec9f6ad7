// Compiling a recipe into a plan: operators in recipe order in one fused
// stage, the recipe options each operator runs with, and refusals with the
// recipe's file and line.
#include "djshard/exec/plan.h"

#include <gtest/gtest.h>

#include <optional>

#include "djshard/common/error.h"
#include "tests/unit/temp_dir.h"

namespace djshard::exec {
namespace {

class PlanTest : public ::testing::Test {
 protected:
  recipe::Recipe Load(const std::string& yaml) {
    return recipe::LoadRecipe(tmp_.Write("recipe.yaml", yaml));
  }
  Plan Compile(const std::string& yaml) { return CompilePlan(Load(yaml), ops::Registry::Global()); }
  std::optional<Error> Refusal(const std::string& yaml) {
    try {
      Compile(yaml);
    } catch (const Error& e) {
      return e;
    }
    return std::nullopt;
  }
  testing::TempDir tmp_;
};

TEST_F(PlanTest, MappersAndFiltersFuseIntoOneStageInRecipeOrder) {
  const Plan plan = Compile(
      "process:\n"
      "  - text_length_filter:\n"
      "  - whitespace_normalization_mapper:\n"
      "  - clean_email_mapper:\n"
      "  - words_num_filter:\n");
  ASSERT_EQ(plan.operators.size(), 4u);
  EXPECT_EQ(plan.operators[0].op->name(), "text_length_filter");
  EXPECT_EQ(plan.operators[0].op->kind(), ops::OpKind::kFilter);
  EXPECT_EQ(plan.operators[1].op->name(), "whitespace_normalization_mapper");
  EXPECT_EQ(plan.operators[1].op->kind(), ops::OpKind::kMapper);
  EXPECT_EQ(plan.operators[2].op->name(), "clean_email_mapper");
  EXPECT_EQ(plan.operators[3].op->name(), "words_num_filter");
  EXPECT_TRUE(plan.writes_stats);
}

TEST_F(PlanTest, DefaultsWithoutOptions) {
  const Plan plan = Compile("process:\n  - whitespace_normalization_mapper:\n");
  EXPECT_FALSE(plan.writes_stats);
  EXPECT_TRUE(plan.keep_stats);
  EXPECT_EQ(plan.batch_rows, 1000u);
  EXPECT_EQ(plan.num_proc, 0);
  EXPECT_EQ(plan.text_key, "text");
  EXPECT_TRUE(plan.operators[0].skip_op_error);
}

TEST_F(PlanTest, BatchRowsAndNumProcAreTheLargestOfTheOperators) {
  const Plan plan = Compile(
      "process:\n"
      "  - whitespace_normalization_mapper:\n      batch_size: 7\n      num_proc: 3\n"
      "  - text_length_filter:\n      batch_size: 50\n"
      "  - clean_email_mapper:\n      num_proc: 5\n"
      "  - words_num_filter:\n      batch_size: 2\n      num_proc: 1\n");
  EXPECT_EQ(plan.batch_rows, 50u);
  EXPECT_EQ(plan.num_proc, 5);
}

TEST_F(PlanTest, RecipeOptionsReachThePlanAndEachOperatorMayOverrideSkipOpError) {
  const Plan plan = Compile(
      "text_key: body\n"
      "skip_op_error: false\n"
      "keep_stats_in_res_ds: false\n"
      "process:\n"
      "  - whitespace_normalization_mapper:\n"
      "  - text_length_filter:\n      skip_op_error: true\n");
  EXPECT_EQ(plan.text_key, "body");
  EXPECT_FALSE(plan.keep_stats);
  EXPECT_FALSE(plan.operators[0].skip_op_error);
  EXPECT_TRUE(plan.operators[1].skip_op_error);
  EXPECT_EQ(plan.operators[0].op->text_key(), "body");
}

TEST_F(PlanTest, AnUnknownOperatorIsRefusedWithItsLine) {
  const std::optional<Error> e =
      Refusal("process:\n  - whitespace_normalization_mapper:\n  - mystery_mapper:\n");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), tmp_.Path("recipe.yaml"));
  EXPECT_EQ(e->line(), 3u);
  EXPECT_EQ(e->message(), "Unknown operator 'mystery_mapper'; cannot prove it is shard-safe");
}

TEST_F(PlanTest, AnUnimplementedOperatorIsRefusedWithItsLine) {
  // Any catalogued Mapper or Filter this build does not run.
  std::string name;
  for (const ops::OperatorInfo& op : ops::Registry::Global().All()) {
    if ((op.kind == ops::OpKind::kMapper || op.kind == ops::OpKind::kFilter) && !op.implemented &&
        op.name.find("global_") == std::string::npos) {
      name = op.name;
      break;
    }
  }
  if (name.empty()) GTEST_SKIP() << "this build implements every Mapper and Filter";
  const std::optional<Error> e =
      Refusal("np: 2\nprocess:\n  - clean_email_mapper:\n  - " + name + ":\n");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), tmp_.Path("recipe.yaml"));
  EXPECT_EQ(e->line(), 4u);
  EXPECT_EQ(
      e->message().rfind("operator '" + name + "' is not implemented by this djshard build", 0), 0u)
      << e->message();
  EXPECT_NE(e->hint().find("djshard ops"), std::string::npos);
}

TEST_F(PlanTest, AnOperatorLeftOutSaysWhy) {
  const std::optional<Error> e = Refusal("process:\n  - sentence_split_mapper:\n");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message(),
            "operator 'sentence_split_mapper' is not implemented by this djshard build (it needs "
            "NLTK's punkt data (Python at run time))");
}

TEST_F(PlanTest, AWholeDatasetOperatorIsRefusedWithItsLine) {
  const std::optional<Error> e = Refusal("process:\n  - document_deduplicator:\n");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->line(), 2u);
  EXPECT_EQ(e->message(),
            "operator 'document_deduplicator' requires whole-dataset semantics: it runs as a "
            "dedup stage, which this job does not record");
  EXPECT_NE(e->hint().find("prepare the job with this djshard"), std::string::npos) << e->hint();
}

TEST_F(PlanTest, DjshardRunPlansDeduplicatorsOutsideRegionsOnly) {
  const Plan plan = CompilePlan(Load("process:\n  - whitespace_normalization_mapper:\n"
                                     "  - document_simhash_deduplicator:\n"
                                     "      hamming_distance: 3\n"),
                                ops::Registry::Global(), false, true);
  ASSERT_EQ(plan.operators.size(), 2u);
  EXPECT_EQ(plan.operators[1].op->kind(), ops::OpKind::kDeduplicator);
  EXPECT_EQ(plan.operators[1].line, 3);
  try {
    CompilePlan(Load("process:\n  - expand: {name: r, by: paragraph}\n"
                     "  - whitespace_normalization_mapper:\n"
                     "  - document_deduplicator:\n  - gather: {name: r}\n"),
                ops::Registry::Global(), false, true);
    ADD_FAILURE() << "a deduplicator inside a region was planned";
  } catch (const Error& e) {
    // ThrowAtPosition: "<recipe>:<line>" as the file, the column as the line.
    EXPECT_EQ(e.file().substr(e.file().size() - 2), ":4") << e.file();
    EXPECT_NE(e.message().find("inside region 'r'"), std::string::npos) << e.message();
  }
}

TEST_F(PlanTest, BatchSizeAndNumProcBelowOneAreRefusedAtTheirLine) {
  const std::optional<Error> batch =
      Refusal("process:\n  - text_length_filter:\n      min_len: 1\n      batch_size: 0\n");
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->line(), 4u);
  EXPECT_NE(batch->message().find("batch_size"), std::string::npos) << batch->message();
  const std::optional<Error> procs =
      Refusal("process:\n  - text_length_filter:\n      num_proc: 0\n");
  ASSERT_TRUE(procs.has_value());
  EXPECT_EQ(procs->line(), 3u);
  EXPECT_NE(procs->message().find("num_proc"), std::string::npos) << procs->message();
}

// Data-Juicer's default num_proc, -1 (or null), lets the engine choose.
TEST_F(PlanTest, NumProcMinusOneOrNullIsAutomatic) {
  for (const char* value : {"-1", "null"}) {
    const Plan plan =
        Compile(std::string("process:\n  - text_length_filter:\n      num_proc: ") + value + "\n");
    EXPECT_EQ(plan.num_proc, 0) << value;
  }
}

}  // namespace
}  // namespace djshard::exec
