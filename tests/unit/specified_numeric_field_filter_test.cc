// specified_numeric_field_filter on fields that are missing, null, not numbers
// or nested through something other than an object, as Data-Juicer decides.
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

class SpecifiedNumericFieldFilter : public ::testing::Test {
 protected:
  void Configure(const std::string& args_yaml) {
    recipe::OperatorSpec spec;
    spec.name = "specified_numeric_field_filter";
    spec.line = 1;
    spec.args = recipe::OperatorArgs(YAML::Load(args_yaml), "recipe.yaml", spec.name, 1);
    op_ = Registry::Global().Find(spec.name)->factory(spec, "text");
  }
  // "kept" or "dropped", with the stat the filter left in the record, or
  // "error: <message>" when the record is an operator error.
  std::string Decide(const std::string& line) {
    io::Record record;
    record.Assign(line);
    Sample sample(&record);
    try {
      const bool kept = static_cast<const Filter&>(*op_).Process(sample);
      const std::optional<std::string_view> stat = sample.Stat(stat_key_);
      return std::string(kept ? "kept" : "dropped") + " " +
             (stat ? std::string(*stat) : std::string("(no stat)"));
    } catch (const OpError& e) {
      return std::string("error: ") + e.what();
    }
  }
  std::unique_ptr<Operator> op_;
  std::string stat_key_ = "meta.star";  // the stat Decide shows: the field_key
};

TEST_F(SpecifiedNumericFieldFilter, AMissingLastPartIsNullAndDropsTheRecordWithoutAnError) {
  Configure("{field_key: meta.star, min_value: 1, max_value: 5}");
  EXPECT_EQ(Decide(R"({"text":"a","meta":{"src":"Arxiv"}})"), "dropped null");
  EXPECT_EQ(Decide(R"({"text":"a","meta":{}})"), "dropped null");
  // reversed_range does not keep what is not a number.
  Configure("{field_key: meta.star, min_value: 1, max_value: 5, reversed_range: true}");
  EXPECT_EQ(Decide(R"({"text":"a","meta":{"src":"Arxiv"}})"), "dropped null");
}

TEST_F(SpecifiedNumericFieldFilter, AMissingTopLevelFieldIsNullToo) {
  Configure("{field_key: star, min_value: 1}");
  stat_key_ = "star";
  EXPECT_EQ(Decide(R"({"text":"a"})"), "dropped null");
  EXPECT_EQ(Decide(R"({"text":"a","star":3})"), "kept 3");
}

TEST_F(SpecifiedNumericFieldFilter, NullZeroEmptyAndNonNumericValuesDropTheRecord) {
  Configure("{field_key: meta.star, min_value: -10, max_value: 10}");
  EXPECT_EQ(Decide(R"({"meta":{"star":null}})"), "dropped null");
  EXPECT_EQ(Decide(R"({"meta":{"star":0}})"), "dropped 0");  // falsy in Python
  EXPECT_EQ(Decide(R"({"meta":{"star":""}})"), "dropped \"\"");
  EXPECT_EQ(Decide(R"({"meta":{"star":"many"}})"), "dropped \"many\"");
  EXPECT_EQ(Decide(R"({"meta":{"star":[]}})"), "dropped []");
  EXPECT_EQ(Decide(R"({"meta":{"star":false}})"), "dropped false");
  EXPECT_EQ(Decide(R"({"meta":{"star":" 4 "}})"), "kept \" 4 \"");
  EXPECT_EQ(Decide(R"({"meta":{"star":true}})"), "kept true");
  EXPECT_EQ(Decide(R"({"meta":{"star":4.5}})"), "kept 4.5");
  EXPECT_EQ(Decide(R"({"meta":{"star":11}})"), "dropped 11");
}

TEST_F(SpecifiedNumericFieldFilter, AnExistingStatDecidesEvenWhenTheFieldIsMissing) {
  Configure("{field_key: meta.star, min_value: 1, max_value: 5}");
  EXPECT_EQ(Decide(R"({"meta":{},"__dj__stats__":{"meta.star":3}})"), "kept 3");
}

TEST_F(SpecifiedNumericFieldFilter, AParentThatIsMissingNullOrNotAnObjectIsAnOperatorError) {
  // Data-Juicer's lookup calls .keys() on the parent (None, str, list) and raises.
  Configure("{field_key: meta.star}");
  const std::string error =
      "error: field 'meta.star' not found: a parent is missing, null or not an object";
  EXPECT_EQ(Decide(R"({"text":"a"})"), error);
  EXPECT_EQ(Decide(R"({"meta":null})"), error);
  EXPECT_EQ(Decide(R"({"meta":"Arxiv"})"), error);
  EXPECT_EQ(Decide(R"({"meta":[{"star":1}]})"), error);
  Configure("{field_key: meta.a.star}");
  stat_key_ = "meta.a.star";
  EXPECT_EQ(Decide(R"({"meta":{"b":{}}})"),
            "error: field 'meta.a.star' not found: a parent is "
            "missing, null or not an object");
  EXPECT_EQ(Decide(R"({"meta":{"a":{}}})"), "dropped null");
}

TEST_F(SpecifiedNumericFieldFilter, ANonEmptyListOrObjectIsAnErrorAsPythonsFloatRaises) {
  Configure("{field_key: meta.star}");
  EXPECT_EQ(Decide(R"({"meta":{"star":[1]}})"),
            "error: field 'meta.star' is not a number: float() of a list");
  EXPECT_EQ(Decide(R"({"meta":{"star":{"n":1}}})"),
            "error: field 'meta.star' is not a number: float() of a dict");
}

}  // namespace
}  // namespace djshard::ops
