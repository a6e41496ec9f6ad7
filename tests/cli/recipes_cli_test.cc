// Data-Juicer's published text recipes (tests/data/published-recipes, copied
// from Data-Juicer's configs/ with their operator lists and arguments as
// published), run through djshard as a Data-Juicer user would: the models and
// word lists where Data-Juicer keeps them, the recipe unchanged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Source(const std::string& rel) { return std::string(DJSHARD_SOURCE_DIR) + "/" + rel; }

const std::vector<std::string>& PublishedRecipes() {
  static const std::vector<std::string> names = {
      "alpaca-cot-en-refine",
      "alpaca-cot-zh-refine",
      "bloom-oscar",
      "pile-europarl-refine",
      "pile-freelaw-refine",
      "pile-hackernews-refine",
      "pile-nih-refine",
      "pile-philpaper-refine",
      "pile-pubmed-abstract-refine",
      "pile-pubmed-central-refine",
      "pile-uspto-refine",
      "redpajama-arxiv",
      "redpajama-arxiv-refine",
      "redpajama-book-refine",
      "redpajama-books",
      "redpajama-c4-refine",
      "redpajama-cc-2019-30-refine",
      "redpajama-cc-2020-05-refine",
      "redpajama-cc-2021-04-refine",
      "redpajama-cc-2022-05-refine",
      "redpajama-cc-2023-06-refine",
      "redpajama-code",
      "redpajama-code-refine",
      "redpajama-pile-stackexchange-refine",
      "redpajama-stack-code-deduplicate",
      "redpajama-stackexchange",
      "redpajama-wiki-refine",
      "stack-code-refine",
  };
  return names;
}

// The operator names of a recipe's process list, in order.
std::vector<std::string> OperatorsOf(const std::string& recipe) {
  std::vector<std::string> ops;
  std::istringstream in(recipe);
  static const std::regex entry("^  - ([a-z_]+):");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, entry)) ops.push_back(m[1]);
  }
  return ops;
}

bool IsDeduplicator(const std::string& op) {
  return op.size() > 12 && op.compare(op.size() - 12, 12, "deduplicator") == 0;
}

// The recipe without its deduplicator entries (each entry: its "  - name:"
// line and the more deeply indented lines under it).
std::string WithoutDeduplicators(const std::string& recipe) {
  std::istringstream in(recipe);
  std::string out;
  bool skipping = false;
  for (std::string line; std::getline(in, line);) {
    const bool entry = line.rfind("  - ", 0) == 0;
    const bool nested =
        line.rfind("    ", 0) == 0 || line.find_first_not_of(' ') == std::string::npos;
    if (entry) {
      const std::string name = line.substr(4, line.find(':') - 4);
      skipping = IsDeduplicator(name);
    } else if (!nested) {
      skipping = false;
    }
    if (!skipping) out += line + "\n";
  }
  return out;
}

size_t CountLines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

class PublishedRecipeCli : public CliTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    Write("data.jsonl", ReadSource("tests/data/published-recipes/corpus.jsonl"));
    // Data-Juicer's models, where it keeps them: SentencePiece per language,
    // KenLM per language, its fastText language model, and the Hugging Face
    // tokenizer the code recipes name.
    const std::string sp = ReadSource("tests/data/sentencepiece/en.sp.model");
    Write("cache/models/en.sp.model", sp);
    Write("cache/models/zh.sp.model", sp);
    for (const char* lang : {"en", "zh"}) {
      const std::string lm = Path(std::string("cache/models/") + lang + ".arpa.bin");
      ASSERT_EQ(
          std::system(
              ("zstd -qdc " + Source("tests/data/kenlm/o5.probing.zst") + " > " + lm).c_str()),
          0);
    }
    Write("home/EleutherAI--pythia-6.9b-deduped/README", "a BPE tokenizer in its place\n");
    ASSERT_EQ(
        std::system(("zstd -qdc " + Source("tests/data/tokenizers/mistral-bpe/tokenizer.json.zst") +
                     " > " + Path("home/EleutherAI--pythia-6.9b-deduped/tokenizer.json"))
                        .c_str()),
        0);
    for (const char* list : {"flagged_words.json", "stopwords.json"}) {
      Write(std::string("cache/assets/") + list,
            ReadSource(std::string("tests/data/assets/") + list));
    }
    TrainLanguageModel();
  }

  std::string ReadSource(const std::string& rel) const {
    std::ifstream in(Source(rel), std::ios::binary);
    EXPECT_TRUE(in.good()) << rel;
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // A small fastText model, lid.176.bin by name, trained with Debian's
  // fasttext on the corpus's English and Chinese rows.
  void TrainLanguageModel() const {
    std::string train;
    std::istringstream in(Read("data.jsonl"));
    for (std::string line; std::getline(in, line);) {
      std::string text = json::parse(line)["text"].get<std::string>();
      for (char& c : text) {
        if (c == '\n' || c == '\r') c = ' ';
      }
      const bool ascii = std::all_of(text.begin(), text.end(),
                                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
      train += (ascii ? "__label__en " : "__label__zh ") + text + "\n";
    }
    Write("lid-train.txt", train);
    ASSERT_EQ(
        std::system(("fasttext supervised -input " + Path("lid-train.txt") + " -output " +
                     Path("lid") + " -epoch 25 -lr 0.5 -dim 8 -thread 1 -verbose 0 > /dev/null")
                        .c_str()),
        0);
    fs::rename(Path("lid.bin"), Path("cache/models/lid.176.bin"));
  }

  CliResult RunRecipe(const std::string& recipe, int threads, const std::string& out) const {
    Write("recipe.yaml", recipe);
    const std::vector<std::string> env = {
        "DJSHARD_MODEL_HOME=" + Path("home"), "DATA_JUICER_CACHE_HOME=" + Path("cache"),
        "HF_HUB_CACHE=" + Path("hub"),        "DATA_JUICER_MODELS_CACHE",
        "DATA_JUICER_ASSETS_CACHE",           "HOME=" + Path("user")};
    return WaitFor(Spawn({"run", "--config", "recipe.yaml", "--threads", std::to_string(threads),
                          "--export-path", out},
                         env));
  }
};

TEST(PublishedRecipes, EveryFixtureIsRun) {
  std::set<std::string> on_disk;
  for (const auto& e : fs::directory_iterator(Source("tests/data/published-recipes"))) {
    if (e.path().extension() == ".yaml") on_disk.insert(e.path().stem());
  }
  const std::set<std::string> listed(PublishedRecipes().begin(), PublishedRecipes().end());
  EXPECT_EQ(on_disk, listed);
}

// Every operator is known, every model and list is found where Data-Juicer
// keeps it, and the recipe runs as written, deduplicators included. The rows
// kept do not depend on the thread count, and the deduplicators only drop
// rows: the output is the output without them, less some rows.
TEST_P(PublishedRecipeCli, RunsAsWritten) {
  const std::string published = ReadSource("tests/data/published-recipes/" + GetParam() + ".yaml");
  const std::vector<std::string> ops = OperatorsOf(published);
  ASSERT_FALSE(ops.empty());
  const bool dedup = std::any_of(ops.begin(), ops.end(), IsDeduplicator);
  // A recipe whose text_keys names another field reads the text there.
  std::smatch key;
  static const std::regex text_keys("\ntext_keys: '?([A-Za-z_]+)'?");
  if (std::regex_search(published, key, text_keys) && key[1] != "text") {
    std::string data;
    std::istringstream in(Read("data.jsonl"));
    for (std::string line; std::getline(in, line);) {
      json row = json::parse(line);
      row[key[1].str()] = row["text"];
      row.erase("text");
      data += row.dump() + "\n";
    }
    Write("data.jsonl", data);
  }
  const CliResult one = RunRecipe(published, 1, "out/one.jsonl");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CliResult three = RunRecipe(published, 3, "out/three.jsonl");
  ASSERT_EQ(three.exit_code, 0) << three.err;
  const std::string kept = Read("out/one.jsonl");
  EXPECT_EQ(kept, Read("out/three.jsonl"));
  const std::string input = Read("data.jsonl");
  EXPECT_LE(CountLines(kept), CountLines(input));
  EXPECT_GT(CountLines(kept), 0u) << one.out << one.err;
  EXPECT_NE(kept, input) << "the recipe's operators changed or dropped nothing";
  EXPECT_EQ(one.out.find("dropped by operator errors"), std::string::npos) << one.out;
  // The run's summary names each operator, in the recipe's order.
  size_t at = 0;
  for (const std::string& op : ops) {
    const size_t found = one.out.find(op, at);
    ASSERT_NE(found, std::string::npos) << op << " missing from\n" << one.out;
    at = found + op.size();
  }
  if (!dedup) return;
  const std::string without = WithoutDeduplicators(published);
  if (OperatorsOf(without).empty()) return;  // only deduplicators
  const CliResult plain = RunRecipe(without, 2, "out/plain.jsonl");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  std::istringstream all(Read("out/plain.jsonl"));
  std::istringstream some(kept);
  std::string want;
  for (std::string line; std::getline(some, line);) {
    while (std::getline(all, want) && want != line) {
    }
    ASSERT_EQ(want, line)
        << "a row the recipe without deduplicators does not keep, or out of order";
  }
}

INSTANTIATE_TEST_SUITE_P(DataJuicer, PublishedRecipeCli, ::testing::ValuesIn(PublishedRecipes()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace djshard::testing
