// Every reference vector (tests/data/ops.jsonl.zst and
// the other ops-*.jsonl files, produced by Data-Juicer's own operator code or
// computed independently from its semantics)
// through the real operator: mapper text identical, stats within 1e-9
// relative, keep identical, errors where Data-Juicer raises.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

const std::string kData = DJSHARD_SOURCE_DIR "/tests/data";

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
  std::string yaml = args.dump();
  // Paths inside the vectors: @DATA@ is tests/data, @ASSETS@ its word lists.
  for (const auto& [mark, path] :
       {std::pair<std::string, std::string>{"@DATA@", kData}, {"@ASSETS@", kData + "/assets"}}) {
    for (size_t at; (at = yaml.find(mark)) != std::string::npos;)
      yaml.replace(at, mark.size(), path);
  }
  spec.args = recipe::OperatorArgs(YAML::Load(yaml), "vectors", op_name, 1);
  try {
    b.op = info->factory(spec, "text");
  } catch (const std::exception& e) {
    b.error = e.what();
  }
  return b;
}

// Python's truthiness of a JSON value.
bool Truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  return !v.empty();
}

// Whether the stats hold a Python object JSON cannot (written {"$py": type}).
bool HoldsPythonObject(const json& stats) {
  if (!stats.is_object()) return false;
  for (const auto& [k, value] : stats.items()) {
    if (value.is_object() && value.contains("$py")) return true;
  }
  return false;
}

// What the operator did to the vector's input, compared with what the vector
// expects; "" when they agree. A vector with "error", or whose stats hold a
// Python object no output can hold, expects the operator to raise (a record
// error).
std::string Check(const Operator& op, const json& v) {
  io::Record record;
  record.Assign(v["input"].dump());
  Sample sample(&record);
  const bool want_error = v.contains("error") || HoldsPythonObject(v["stats"]);
  try {
    if (op.kind() == OpKind::kMapper) {
      static_cast<const Mapper&>(op).Map(sample);
      if (want_error) return "no error, want " + v["error"].dump();
      const std::string got = sample.Text("text");
      if (got != v["output_text"].get<std::string>()) {
        return "text " + json(got).dump() + " != " + v["output_text"].dump();
      }
      if (!v.contains("output_meta")) return "";
      sample.Commit(false);
      std::string out;
      record.Serialize(&out);
      const json meta = json::parse(out).value("__dj__meta__", json());
      return meta == v["output_meta"] ? ""
                                      : "meta " + meta.dump() + " != " + v["output_meta"].dump();
    }
    const bool keep = static_cast<const Filter&>(op).Process(sample);
    if (want_error) return "no error, want " + v["error"].dump();
    sample.Commit(true);
    std::string out;
    record.Serialize(&out);
    const json stats = json::parse(out)["__dj__stats__"];
    std::string problem;
    if (keep != Truthy(v["keep"])) problem = "keep " + std::to_string(keep);
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
// that djshard refuses at load must be one on which Data-Juicer raises: it has
// error vectors, and its mappers' other vectors leave the input as it was.
void CheckEveryVector(const std::string& file, size_t min_variants) {
  io::LineReader reader(io::OpenInput(kData + "/" + file), file);
  std::string_view line;
  std::map<std::string, int> checked, failed, errors;
  std::map<std::string, Built> built;
  int reported = 0;
  int known_differences = 0;
  while (reader.Next(&line)) {
    const json v = json::parse(line);
    // Where djshard's library builds another result than the reference's on
    // malformed input; the operator's summary says how (`djshard ops NAME`).
    if (v.contains("known_difference")) {
      ++known_differences;
      continue;
    }
    const std::string variant = v["op"].get<std::string>() + " " + v["args"].dump();
    auto it = built.find(variant);
    if (it == built.end()) it = built.emplace(variant, Build(v["op"], v["args"])).first;
    ++checked[variant];
    errors[variant] += v.contains("error") ? 1 : 0;
    std::string problem;
    if (v["input"].is_null()) {
      // Data-Juicer's constructor raised.
      if (it->second.op) problem = "built, want " + v["error"].dump();
    } else if (!it->second.op) {
      const bool mapper = !v["output_text"].is_null();
      if (mapper && v["output_text"] != v["input"]["text"]) {
        problem = "refused at load: " + it->second.error;
      }
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
    if (!built[variant].op) {
      EXPECT_GT(errors[variant], 0) << variant << " refused at load: " << built[variant].error;
    }
  }
  EXPECT_GE(checked.size(), min_variants);
  int total = 0;
  for (const auto& [variant, n] : checked) total += n;
  std::printf("checked %d vectors in %zu operator variants (%d known differences left out)\n",
              total, checked.size(), known_differences);
}

// A directory of models that DJSHARD_MODEL_HOME points at for the life of a
// fixture (the variable's value before is restored).
class ModelHomeFixture : public ::testing::Test {
 protected:
  // A fresh, empty directory named `name` and this process's id under the
  // test's temp dir (ctest runs tests of this binary in parallel processes).
  void UseModelHome(const std::string& name) {
    home_ = ::testing::TempDir() + "/" + name + "-" + std::to_string(::getpid());
    std::filesystem::remove_all(home_);
    std::filesystem::create_directories(home_);
    const char* before = std::getenv("DJSHARD_MODEL_HOME");
    had_ = before != nullptr;
    if (had_) saved_ = before;
    ::setenv("DJSHARD_MODEL_HOME", home_.c_str(), 1);
  }
  void TearDown() override {
    if (had_) {
      ::setenv("DJSHARD_MODEL_HOME", saved_.c_str(), 1);
    } else {
      ::unsetenv("DJSHARD_MODEL_HOME");
    }
    std::filesystem::remove_all(home_);
  }
  std::string home_;

 private:
  std::string saved_;
  bool had_ = false;
};

// The SentencePiece models of the vectors' generators, which serve
// tests/data/sentencepiece/en.sp.model for every language, for the life of
// the fixture (DJSHARD_MODEL_HOME).
class OperatorVectors : public ModelHomeFixture {
 protected:
  void SetUp() override {
    UseModelHome("operator-vectors-models");
    for (const char* lang : {"en", "zh", "vi", "fr", "xx"}) {
      std::filesystem::copy_file(kData + "/sentencepiece/en.sp.model",
                                 home_ + "/" + lang + ".sp.model");
    }
  }
};

TEST_F(OperatorVectors, EveryVectorMatchesTheReference) { CheckEveryVector("ops.jsonl.zst", 30); }

// Filters with tokenization: true (tests/data/make_ops_tokenization.py).
TEST_F(OperatorVectors, TokenizingFiltersMatchDataJuicer) {
  CheckEveryVector("ops-tokenization.jsonl", 5);
}

// The regular-expression and LaTeX mappers of Data-Juicer's published recipes
// (tests/data/make_ops_regex_mappers.py).
TEST_F(OperatorVectors, RegexAndLatexMappersMatchDataJuicer) {
  CheckEveryVector("ops-regex-mappers.jsonl.zst", 40);
}

// flagged_words_filter and stopwords_filter on word lists built from the npm
// packages naughty-words and stopwords-iso (tests/data/make_ops_word_lists.py).
TEST_F(OperatorVectors, WordListFiltersMatchDataJuicer) {
  CheckEveryVector("ops-word-lists.jsonl.zst", 14);
}

// general_field_filter's conditions on records of every JSON type
// (tests/data/make_ops_general_field.py).
TEST_F(OperatorVectors, GeneralFieldFilterMatchesDataJuicer) {
  CheckEveryVector("ops-general-field.jsonl", 30);
}

// chinese_convert_mapper through Debian's OpenCC, the vectors made by
// Data-Juicer's code on the same library (tests/data/make_ops_chinese_convert.py).
TEST_F(OperatorVectors, ChineseConvertMatchesDataJuicer) {
  CheckEveryVector("ops-chinese-convert.jsonl.zst", 15);
}

// perplexity_filter's models: for each language of the vectors, the
// SentencePiece model of the other vectors and a KenLM test model of
// tests/data/kenlm as <lang>.arpa.bin (make_ops_perplexity.py's LANG_MODELS);
// "qq" has none.
class PerplexityVectors : public ModelHomeFixture {
 protected:
  void SetUp() override {
    UseModelHome("perplexity-vector-models");
    const std::pair<const char*, const char*> models[] = {{"en", "o5.probing"},
                                                          {"zz", "o3.trie"},
                                                          {"yy", "o4-pruned.arpa"},
                                                          {"ww", "o5-pruned.trie"}};
    for (const auto& [lang, model] : models) {
      std::filesystem::copy_file(kData + "/sentencepiece/en.sp.model",
                                 home_ + "/" + lang + ".sp.model");
      auto source = io::OpenInput(kData + "/kenlm/" + model + ".zst");
      std::ofstream out(home_ + "/" + lang + ".arpa.bin", std::ios::binary);
      char buf[1 << 16];
      while (size_t n = source->Read(buf, sizeof buf)) out.write(buf, static_cast<long>(n));
    }
  }
};

// perplexity_filter through the real kenlm and sentencepiece modules, four
// KenLM data structures (tests/data/make_ops_perplexity.py).
TEST_F(PerplexityVectors, PerplexityFilterMatchesDataJuicer) {
  CheckEveryVector("ops-perplexity.jsonl.zst", 7);
}

// fix_unicode_mapper (djshard's port of ftfy 6.3.1) on mojibake, HTML
// entities, control characters, ... in every normalization form, the vectors
// made by Data-Juicer's code with the real ftfy (tests/data/make_ops_fix_unicode.py).
TEST_F(OperatorVectors, FixUnicodeMatchesDataJuicer) {
  CheckEveryVector("ops-fix-unicode.jsonl.zst", 11);
}

// clean_html_mapper through Gumbo against Data-Juicer's code on selectolax
// (tests/data/make_ops_html.py); the few vectors where the two HTML5 parsers
// differ are marked known_difference.
TEST_F(OperatorVectors, CleanHtmlMatchesDataJuicer) { CheckEveryVector("ops-html.jsonl.zst", 1); }

// extract_tables_from_html_mapper through djshard's port of Beautiful Soup's
// html.parser tree against Data-Juicer's code on bs4 4.14.2
// (tests/data/make_ops_html.py): cells' text, str(table) and the meta key.
TEST_F(OperatorVectors, ExtractTablesFromHtmlMatchesDataJuicer) {
  CheckEveryVector("ops-html-tables.jsonl.zst", 7);
}

}  // namespace
}  // namespace djshard::ops
