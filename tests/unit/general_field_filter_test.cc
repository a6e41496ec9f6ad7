// general_field_filter sees the record as it stands in a fused stage: texts
// changed by earlier mappers, stats of earlier filters and meta not yet
// written into the record.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>

#include "djshard/io/record.h"
#include "djshard/ops/operator.h"
#include "djshard/ops/registry.h"
#include "djshard/ops/sample.h"
#include "djshard/recipe/recipe.h"

namespace djshard::ops {
namespace {

class GeneralFieldFilter : public ::testing::Test {
 protected:
  void Configure(const std::string& condition) {
    recipe::OperatorSpec spec;
    spec.name = "general_field_filter";
    spec.line = 1;
    YAML::Node args;
    args["filter_condition"] = condition;
    spec.args = recipe::OperatorArgs(args, "recipe.yaml", spec.name, 1);
    op_ = Registry::Global().Find(spec.name)->factory(spec, "text");
  }
  bool Keeps(Sample& sample) { return static_cast<const Filter&>(*op_).Process(sample); }
  std::unique_ptr<Operator> op_;
};

TEST_F(GeneralFieldFilter, ReadsFieldsOfEveryJsonTypeFromTheRecord) {
  Configure("meta.lang == 'en' and score >= 0.5 and ok == True");
  io::Record record;
  record.Assign(R"({"text":"x","meta":{"lang":"en"},"score":0.7,"n":{"k":[1]},"ok":true})");
  Sample kept(&record);
  EXPECT_TRUE(Keeps(kept));
  record.Assign(R"({"text":"x","meta":{"lang":"en"},"score":0.4,"n":{"k":[1]},"ok":true})");
  Sample low(&record);
  EXPECT_FALSE(Keeps(low));
  record.Assign(R"({"text":"x","meta":{"lang":"en"},"n":{"k":[1]},"ok":true})");
  Sample missing(&record);
  EXPECT_FALSE(Keeps(missing));  // None compares false
}

TEST_F(GeneralFieldFilter, SeesATextChangedByAnEarlierMapper) {
  Configure("text == 'after'");
  io::Record record;
  record.Assign(R"({"text":"before"})");
  Sample sample(&record);
  sample.SetText("text", "after");
  EXPECT_TRUE(Keeps(sample));

  Configure("title == 'new'");
  record.Assign(R"({"text":"t"})");
  Sample added(&record);
  added.SetText("title", "new");  // not in the record yet
  EXPECT_TRUE(Keeps(added));
}

TEST_F(GeneralFieldFilter, SeesStatsAndMetaNotYetWrittenIntoTheRecord) {
  Configure("__dj__stats__.text_len > 3 and __dj__meta__.src == 'web'");
  io::Record record;
  record.Assign(R"({"text":"hello"})");
  Sample sample(&record);
  sample.SetStat("text_len", "5");
  sample.SetMeta("src", "\"web\"");
  EXPECT_TRUE(Keeps(sample));
  record.Assign(R"({"text":"hello"})");
  Sample without(&record);
  EXPECT_FALSE(Keeps(without));
}

}  // namespace
}  // namespace djshard::ops
