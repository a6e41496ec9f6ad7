// Every reference vector (tests/data/ops.jsonl.zst, produced by Data-Juicer's
// own operator code) through the real operator: mapper text identical, stats
// within 1e-9 relative, keep identical.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "djshard/io/input.h"
#include "djshard/io/record.h"
#include "djshard/ops/operator.h"
#include "djshard/ops/registry.h"

namespace djshard::ops {
namespace {

using nlohmann::json;

bool SameValue(const json& want, const json& got) {
  if (want.is_number() && got.is_number()) {
    const double a = want.get<double>(), b = got.get<double>();
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
  }
  return want == got;
}

TEST(OperatorVectors, EveryVectorMatchesTheReference) {
  io::LineReader reader(io::OpenInput(DJSHARD_SOURCE_DIR "/tests/data/ops.jsonl.zst"), "ops.jsonl");
  std::string_view line;
  std::map<std::string, int> checked, failed;
  int reported = 0;
  while (reader.Next(&line)) {
    const json v = json::parse(line);
    const std::string op_name = v["op"];
    const OperatorInfo* info = Registry::Global().Find(op_name);
    ASSERT_NE(info, nullptr) << op_name;
    ASSERT_TRUE(info->implemented) << op_name;
    recipe::OperatorSpec spec;
    spec.name = op_name;
    spec.line = 1;
    spec.args = recipe::OperatorArgs(YAML::Load(v["args"].dump()), "vectors", op_name, 1);
    const std::unique_ptr<Operator> op = info->factory(spec, "text");

    io::Record record;
    record.Assign(v["input"].dump());
    Sample sample(&record);
    std::string problem;
    try {
      if (op->kind() == OpKind::kMapper) {
        static_cast<const Mapper&>(*op).Map(sample);
        const std::string got = sample.Text("text");
        if (got != v["output_text"].get<std::string>()) {
          problem = "text " + json(got).dump() + " != " + v["output_text"].dump();
        }
      } else {
        const bool keep = static_cast<const Filter&>(*op).Process(sample);
        sample.Commit(true);
        std::string out;
        record.Serialize(&out);
        const json stats = json::parse(out)["__dj__stats__"];
        if (keep != v["keep"].get<bool>()) problem = "keep " + std::to_string(keep);
        if (stats.size() != v["stats"].size()) problem += " stats " + stats.dump();
        for (const auto& [k, want] : v["stats"].items()) {
          if (!stats.contains(k) || !SameValue(want, stats[k])) {
            problem += " stat " + k + "=" + (stats.contains(k) ? stats[k].dump() : "missing") +
                       " want " + want.dump();
          }
        }
      }
    } catch (const std::exception& e) {
      problem = std::string("threw ") + e.what();
    }
    const std::string variant = op_name + " " + v["args"].dump();
    ++checked[variant];
    if (!problem.empty()) {
      ++failed[variant];
      if (reported++ < 40) {
        ADD_FAILURE() << variant << " id=" << v["input"]["id"] << ": " << problem
                      << "\n  input: " << v["input"].dump().substr(0, 300);
      }
    }
  }
  for (const auto& [variant, n] : checked) {
    EXPECT_EQ(failed[variant], 0) << variant << ": " << failed[variant] << " of " << n << " failed";
  }
  EXPECT_GE(checked.size(), 30u);
  int total = 0;
  for (const auto& [variant, n] : checked) total += n;
  std::printf("checked %d vectors in %zu operator variants\n", total, checked.size());
}

}  // namespace
}  // namespace djshard::ops
