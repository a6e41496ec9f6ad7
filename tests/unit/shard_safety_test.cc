#include "djshard/exec/shard_safety.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "djshard/common/error.h"

namespace djshard::exec {
namespace {

recipe::Recipe Load(const std::string& yaml) {
  char tmpl[] = "/tmp/djshard-recipe-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  std::ofstream(tmpl) << yaml;
  recipe::Recipe r = recipe::LoadRecipe(tmpl);
  unlink(tmpl);
  return r;
}

std::string Refusal(const std::string& yaml) {
  try {
    CheckShardSafety(Load(yaml), ops::Registry::Global());
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

TEST(ShardSafety, AcceptsMappersAndFiltersAndCollectsIndexKeys) {
  const ShardSafetyReport r = CheckShardSafety(
      Load("process:\n  - clean_email_mapper:\n  - words_num_filter: {index_key: b}\n"
           "  - text_length_filter: {index_key: a}\n  - alphanumeric_filter: {index_key: b}\n"),
      ops::Registry::Global());
  EXPECT_EQ(r.index_keys, (std::vector<std::string>{"a", "b"}));
}

TEST(ShardSafety, RefusesEveryWholeDatasetKind) {
  EXPECT_NE(Refusal("process:\n  - document_deduplicator:\n").find("whole-dataset"),
            std::string::npos);
  EXPECT_NE(Refusal("process:\n  - my_global_thing_mapper:\n").find("whole-dataset"),
            std::string::npos);
  EXPECT_NE(Refusal("process:\n  - full_dataset_stats_filter:\n").find("whole-dataset"),
            std::string::npos);
  for (const ops::OperatorInfo& op : ops::Registry::Global().All()) {
    if (op.kind == ops::OpKind::kMapper || op.kind == ops::OpKind::kFilter) continue;
    EXPECT_NE(Refusal("process:\n  - " + op.name + ":\n").find("whole-dataset"), std::string::npos)
        << op.name;
  }
}

TEST(ShardSafety, RegistryKnowsTheWholeCatalogue) {
  const ops::Registry& reg = ops::Registry::Global();
  EXPECT_EQ(reg.All().size(), 164u + 2);  // and djshard's expand and gather
  ASSERT_NE(reg.Find("text_length_filter"), nullptr);
  EXPECT_EQ(reg.Find("text_length_filter")->kind, ops::OpKind::kFilter);
  ASSERT_NE(reg.Find("document_minhash_deduplicator"), nullptr);
  EXPECT_EQ(reg.Find("nope"), nullptr);
}

TEST(ShardSafety, RefusesUnknownOperatorsAndStatsExport) {
  EXPECT_EQ(Refusal("process:\n  - mystery_mapper:\n"),
            "Unknown operator 'mystery_mapper'; cannot prove it is shard-safe");
  EXPECT_NE(Refusal("process:\n  - words_num_filter: {stats_export_path: x}\n")
                .find("stats_export_path is not allowed"),
            std::string::npos);
}

TEST(ShardSafety, ExecutorTypes) {
  EXPECT_EQ(Refusal("executor_type: djshard\nprocess:\n  - clean_email_mapper:\n"), "");
  EXPECT_TRUE(CheckShardSafety(Load("executor_type: djshard\nprocess:\n  - clean_email_mapper:\n"),
                               ops::Registry::Global())
                  .warnings.empty());
  EXPECT_TRUE(CheckShardSafety(Load("process:\n  - clean_email_mapper:\n"), ops::Registry::Global())
                  .warnings.empty());
  const ShardSafetyReport r = CheckShardSafety(
      Load("executor_type: ray\nprocess:\n  - clean_email_mapper: {save_dir: /x}\n"),
      ops::Registry::Global());
  EXPECT_EQ(r.warnings,
            (std::vector<std::string>{
                "executor_type 'ray' is run in-process by djshard's executor",
                "operator 'clean_email_mapper': save_dir is shared by every worker; files written "
                "there are not part of the job's verified output"}));
  EXPECT_EQ(CheckShardSafety(Load("executor_type: default\nprocess:\n  - clean_email_mapper:\n"),
                             ops::Registry::Global())
                .warnings,
            (std::vector<std::string>{
                "executor_type 'default' is run in-process by djshard's executor"}));
  EXPECT_EQ(Refusal("executor_type: spark\nprocess:\n  - clean_email_mapper:\n"),
            "executor_type 'spark' is not supported");
}

TEST(ShardSafety, AnUnimplementedOperatorIsAcceptedWithAWarning) {
  std::string name;
  for (const ops::OperatorInfo& op : ops::Registry::Global().All()) {
    if ((op.kind == ops::OpKind::kMapper || op.kind == ops::OpKind::kFilter) && !op.implemented &&
        op.name.find("global_") == std::string::npos) {
      name = op.name;
      break;
    }
  }
  if (name.empty()) GTEST_SKIP() << "this build implements every Mapper and Filter";
  EXPECT_EQ(
      CheckShardSafety(Load("process:\n  - " + name + ":\n"), ops::Registry::Global()).warnings,
      (std::vector<std::string>{"operator '" + name +
                                "' is not implemented by this djshard build; workers will "
                                "refuse the job until it is"}));
}

}  // namespace
}  // namespace djshard::exec
