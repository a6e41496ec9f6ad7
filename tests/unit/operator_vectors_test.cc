// Every reference vector (tests/data/ops.jsonl.zst and
// ops-regex-mappers.jsonl.zst, produced by Data-Juicer's own operator code)
// through the real operator: mapper text identical, stats within 1e-9
// relative, keep identical, errors where Data-Juicer raises.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
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

// One operator built from a vector's args, or the error its construction
// raised (djshard refuses at load what Data-Juicer fails on every record).
struct Built {
  std::unique_ptr<Operator> op;
  std::string error;
};

Built Build(const std::string& op_name, const json& args) {
  Built b;
  const OperatorInfo* info = Registry::Global().Find(op_name);
  if (info == nullptr || !info->implemented) {
    b.error = "not implemented";
    return b;
  }
  recipe::OperatorSpec spec;
  spec.name = op_name;
  spec.line = 1;
  spec.args = recipe::OperatorArgs(YAML::Load(args.dump()), "vectors", op_name, 1);
  try {
    b.op = info->factory(spec, "text");
  } catch (const std::exception& e) {
    b.error = e.what();
  }
  return b;
}

// What the operator did to the vector's input, compared with what the vector
// expects; "" when they agree. A vector with "error" expects the operator to
// raise (a record error).
std::string Check(const Operator& op, const json& v) {
  io::Record record;
  record.Assign(v["input"].dump());
  Sample sample(&record);
  const bool want_error = v.contains("error");
  try {
    if (op.kind() == OpKind::kMapper) {
      static_cast<const Mapper&>(op).Map(sample);
      if (want_error) return "no error, want " + v["error"].dump();
      const std::string got = sample.Text("text");
      if (got != v["output_text"].get<std::string>()) {
        return "text " + json(got).dump() + " != " + v["output_text"].dump();
      }
      return "";
    }
    const bool keep = static_cast<const Filter&>(op).Process(sample);
    if (want_error) return "no error, want " + v["error"].dump();
    sample.Commit(true);
    std::string out;
    record.Serialize(&out);
    const json stats = json::parse(out)["__dj__stats__"];
    std::string problem;
    if (keep != v["keep"].get<bool>()) problem = "keep " + std::to_string(keep);
    if (stats.size() != v["stats"].size()) problem += " stats " + stats.dump();
    for (const auto& [k, want] : v["stats"].items()) {
      if (!stats.contains(k) || !SameValue(want, stats[k])) {
        problem += " stat " + k + "=" + (stats.contains(k) ? stats[k].dump() : "missing") +
                   " want " + want.dump();
      }
    }
    return problem;
  } catch (const std::exception& e) {
    return want_error ? "" : std::string("threw ") + e.what();
  }
}

// Every vector of `file` (tests/data) through the real operator. A variant
// that djshard refuses at load must be one on which Data-Juicer raises: each
// of its vectors then expects an error or leaves its input as it was.
void CheckEveryVector(const std::string& file, size_t min_variants) {
  io::LineReader reader(io::OpenInput(DJSHARD_SOURCE_DIR "/tests/data/" + file), file);
  std::string_view line;
  std::map<std::string, int> checked, failed;
  std::map<std::string, Built> built;
  int reported = 0;
  while (reader.Next(&line)) {
    const json v = json::parse(line);
    const std::string variant = v["op"].get<std::string>() + " " + v["args"].dump();
    auto it = built.find(variant);
    if (it == built.end()) it = built.emplace(variant, Build(v["op"], v["args"])).first;
    ++checked[variant];
    std::string problem;
    if (v["input"].is_null()) {
      // Data-Juicer's constructor raised.
      if (it->second.op) problem = "built, want " + v["error"].dump();
    } else if (!it->second.op) {
      const bool unchanged = !v.contains("error") && v["output_text"] == v["input"]["text"];
      if (!v.contains("error") && !unchanged) problem = "refused at load: " + it->second.error;
    } else {
      problem = Check(*it->second.op, v);
    }
    if (problem.empty()) continue;
    ++failed[variant];
    if (reported++ < 40) {
      ADD_FAILURE() << variant << " id=" << (v["input"].is_null() ? json() : v["input"]["id"])
                    << ": " << problem << "\n  input: "
                    << (v["input"].is_null() ? "null" : v["input"].dump().substr(0, 300));
    }
  }
  for (const auto& [variant, n] : checked) {
    EXPECT_EQ(failed[variant], 0) << variant << ": " << failed[variant] << " of " << n << " failed";
  }
  EXPECT_GE(checked.size(), min_variants);
  int total = 0;
  for (const auto& [variant, n] : checked) total += n;
  std::printf("checked %d vectors in %zu operator variants\n", total, checked.size());
}

TEST(OperatorVectors, EveryVectorMatchesTheReference) { CheckEveryVector("ops.jsonl.zst", 30); }

// The regular-expression and LaTeX mappers of Data-Juicer's published recipes
// (tests/data/make_ops_regex_mappers.py). Its SentencePiece stand-in serves
// tests/data/sentencepiece/en.sp.model for every language.
TEST(OperatorVectors, RegexAndLatexMappersMatchDataJuicer) {
  const std::string home = ::testing::TempDir() + "/regex-vectors-models";
  std::filesystem::create_directories(home);
  for (const char* lang : {"en", "zh"}) {
    std::filesystem::copy_file(DJSHARD_SOURCE_DIR "/tests/data/sentencepiece/en.sp.model",
                               home + "/" + lang + ".sp.model",
                               std::filesystem::copy_options::overwrite_existing);
  }
  const char* before = std::getenv("DJSHARD_MODEL_HOME");
  const std::string saved = before ? before : "";
  ::setenv("DJSHARD_MODEL_HOME", home.c_str(), 1);
  CheckEveryVector("ops-regex-mappers.jsonl.zst", 40);
  if (before) {
    ::setenv("DJSHARD_MODEL_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("DJSHARD_MODEL_HOME");
  }
}

}  // namespace
}  // namespace djshard::ops
