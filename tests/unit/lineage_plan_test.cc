// Pairing expand/gather entries into regions (SPEC-lineage §2): nesting, each
// operator's innermost region, reader batches, and refusals at line:col.
#include <gtest/gtest.h>

#include <optional>

#include "djshard/common/error.h"
#include "djshard/exec/plan.h"
#include "tests/unit/temp_dir.h"

namespace djshard::exec {
namespace {

class LineagePlan : public ::testing::Test {
 protected:
  recipe::Recipe Load(const std::string& yaml) {
    return recipe::LoadRecipe(tmp_.Write("recipe.yaml", yaml));
  }
  Plan Compile(const std::string& yaml) { return CompilePlan(Load(yaml), ops::Registry::Global()); }
  std::string Refusal(const std::string& yaml) {
    try {
      Compile(yaml);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  testing::TempDir tmp_;
};

TEST_F(LineagePlan, NestedPairsBecomeRegionsWithParentsAndDepth) {
  const Plan plan = Compile(
      "process:\n"
      "  - whitespace_normalization_mapper:\n"
      "  - expand: {name: paras, by: paragraph}\n"
      "  - text_length_filter:\n"
      "  - expand: {name: sents, by: sentence}\n"
      "  - words_num_filter:\n"
      "  - gather: {name: sents}\n"
      "  - gather: {name: paras}\n"
      "  - text_length_filter:\n");
  ASSERT_EQ(plan.regions.size(), 2u);
  EXPECT_EQ(plan.regions[0].name, "paras");
  EXPECT_EQ(plan.regions[0].expand_idx, 1u);
  EXPECT_EQ(plan.regions[0].gather_idx, 6u);
  EXPECT_EQ(plan.regions[0].parent, -1);
  EXPECT_EQ(plan.regions[1].name, "sents");
  EXPECT_EQ(plan.regions[1].parent, 0);
  EXPECT_EQ(plan.regions[1].depth, 2);
  const std::vector<int> regions = {-1, -1, 0, 0, 1, 0, -1, -1};
  for (size_t i = 0; i < regions.size(); ++i) EXPECT_EQ(plan.operators[i].region, regions[i]) << i;
}

TEST_F(LineagePlan, DefaultsOfExpandAndGather) {
  const Plan plan = Compile(
      "text_key: content\nprocess:\n"
      "  - expand: {name: p, by: \"chars:7\"}\n"
      "  - gather: {name: p}\n");
  const ops::ExpandConfig& e = *plan.regions[0].expand;
  EXPECT_EQ(e.text_key, "content");
  EXPECT_EQ(e.by.chars, 7u);
  EXPECT_EQ(e.max_children, 100000);
  EXPECT_TRUE(e.keep_fields.empty());
  const ops::GatherConfig& g = *plan.regions[0].gather;
  EXPECT_TRUE(g.into.empty());  // text for text modes
  EXPECT_FALSE(g.separator.has_value());
  EXPECT_EQ(g.min_present, 1);
  EXPECT_EQ(g.min_present_ratio, 0.0);
  EXPECT_EQ(g.on_empty, ops::OnEmpty::kDrop);
  EXPECT_EQ(g.on_child_error, ops::OnChildError::kFailParent);
  EXPECT_TRUE(g.suppress_siblings);
}

TEST_F(LineagePlan, BatchingPolicyIsReadInsideARegionAndRefusedOutside) {
  const Plan plan = Compile(
      "process:\n"
      "  - expand: {name: p, by: paragraph}\n"
      "  - text_length_filter: {batching_policy: single_parent}\n"
      "  - gather: {name: p}\n");
  EXPECT_TRUE(plan.operators[1].single_parent);
  EXPECT_NE(Refusal("process:\n  - text_length_filter: {batching_policy: any_parent}\n")
                .find("recipe.yaml:2:5: operator 'text_length_filter': batching_policy"),
            std::string::npos);
  EXPECT_NE(Refusal("process:\n  - expand: {name: p, by: paragraph}\n"
                    "  - text_length_filter: {batching_policy: sometimes}\n"
                    "  - gather: {name: p}\n")
                .find("'sometimes' is unknown"),
            std::string::npos);
}

TEST_F(LineagePlan, StatsFromANestedGatherCountAsProducedInTheRegion) {
  EXPECT_EQ(Refusal("process:\n"
                    "  - expand: {name: p, by: paragraph}\n"
                    "  - expand: {name: s, by: sentence}\n"
                    "  - text_length_filter:\n"
                    "  - gather: {name: s, into: [text, stats], stats: [{from: text_len, op: "
                    "sum, to: para_len}]}\n"
                    "  - gather: {name: p, into: [text, stats], stats: [{from: para_len, op: max, "
                    "to: longest}]}\n"),
            "");
}

TEST_F(LineagePlan, GatherKeysAreChecked) {
  const std::string head = "process:\n  - expand: {name: p, by: paragraph}\n  - gather: {name: p, ";
  EXPECT_NE(Refusal(head + "into: [text, bogus]}\n").find("value 'bogus' is unknown"),
            std::string::npos);
  EXPECT_NE(Refusal(head + "into: stats}\n").find("stats needs a 'stats' list"), std::string::npos);
  EXPECT_NE(Refusal(head + "on_empty: maybe}\n").find("'maybe' is unknown"), std::string::npos);
  EXPECT_NE(Refusal(head + "min_present: -1}\n").find("must be 0 or more"), std::string::npos);
  EXPECT_NE(Refusal(head + "into: list, list: [{from: a, to: b, extra: 1}]}\n")
                .find("entry key 'extra' is unknown"),
            std::string::npos);
  EXPECT_NE(Refusal("process:\n  - expand: {name: p, by: \"field:images\"}\n"
                    "  - gather: {name: p, into: text}\n")
                .find("into: text needs a text mode"),
            std::string::npos);
}

// Rule 5 looks at the innermost region: its children carry that expand's
// kept fields, not the outer one's; a nested gather's list and stats outputs
// are fields of the outer children.
TEST_F(LineagePlan, InputColumnsAreCheckedAgainstTheInnermostRegionsChildren) {
  const std::string outer = "process:\n  - expand: {name: p, by: paragraph, keep_fields: [src]}\n";
  const std::string inner_ops =
      "  - text_length_filter: {input_columns: [text, src]}\n"
      "  - gather: {name: s}\n  - gather: {name: p}\n";
  const std::string refusal = Refusal(outer + "  - expand: {name: s, by: sentence}\n" + inner_ops);
  EXPECT_NE(refusal.find("inside region 's'"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("do not carry 'src'"), std::string::npos) << refusal;
  EXPECT_EQ(
      Refusal(outer + "  - expand: {name: s, by: sentence, keep_fields: [src]}\n" + inner_ops), "");
  EXPECT_EQ(
      Refusal(outer + "  - expand: {name: s, by: sentence}\n  - text_length_filter:\n"
                      "  - gather: {name: s, into: [text, list], list: [{from: text, to: sents}]}\n"
                      "  - text_length_filter: {input_columns: [sents, src]}\n"
                      "  - gather: {name: p}\n"),
      "");
}

TEST_F(LineagePlan, TapsInsideARegionAreSkippedButTheGatherIsParentLevel) {
  const recipe::Recipe r = Load(
      "process:\n"
      "  - whitespace_normalization_mapper:\n"
      "  - expand: {name: p, by: paragraph}\n"
      "  - text_length_filter:\n"
      "  - gather: {name: p}\n");
  EXPECT_FALSE(InsideLineageRegion(r, 0));
  EXPECT_TRUE(InsideLineageRegion(r, 1));
  EXPECT_TRUE(InsideLineageRegion(r, 2));
  EXPECT_FALSE(InsideLineageRegion(r, 3));
}

}  // namespace
}  // namespace djshard::exec
