// The tokenizer against Hugging Face's own encodings (tests/data/tokenizers,
// copied from the shared test vectors), its load errors and its thread safety.
#include "djshard/model/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "djshard/common/error.h"
#include "djshard/io/input.h"

namespace djshard::model {
namespace {

using nlohmann::json;

std::string DataDir(const std::string& family) {
  return std::string(DJSHARD_SOURCE_DIR) + "/tests/data/tokenizers/" + family;
}

std::string ReadAll(const std::string& path) {
  auto in = io::OpenInput(path);
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = in->Read(buf, sizeof buf)) > 0) out.append(buf, n);
  return out;
}

std::vector<json> ReadVectors(const std::string& family,
                              const std::string& file = "vectors.jsonl.zst") {
  std::vector<json> out;
  std::istringstream lines(ReadAll(DataDir(family) + "/" + file));
  std::string line;
  while (std::getline(lines, line)) out.push_back(json::parse(line));
  return out;
}

json ToJson(const Encoding& e) {
  json offsets = json::array();
  for (const auto& [s, t] : e.offsets) offsets.push_back({s, t});
  json mask = json::array();
  for (const uint8_t m : e.special_tokens_mask) mask.push_back(m);
  return {{"ids", e.ids},
          {"tokens", e.tokens},
          {"type_ids", e.type_ids},
          {"offsets", offsets},
          {"special_tokens_mask", mask}};
}

Encoding EncodeVector(const Tokenizer& t, const json& v) {
  const std::string text = v["text"].get<std::string>();
  const bool special = v["add_special_tokens"].get<bool>();
  if (v["pair"].is_null()) return t.Encode(text, special);
  return t.EncodePair(text, v["pair"].get<std::string>(), special);
}

// Every line of one family's vectors file: all five fields identical.
void ExpectFileMatches(const Tokenizer& t, const std::string& family, const std::string& file,
                       size_t lines) {
  const auto vectors = ReadVectors(family, file);
  ASSERT_EQ(vectors.size(), lines) << family << "/" << file;
  static const char* kFields[] = {"ids", "tokens", "type_ids", "offsets", "special_tokens_mask"};
  std::map<std::string, int> mismatches;
  int lines_wrong = 0;
  std::string first_diffs;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const json got = ToJson(EncodeVector(t, vectors[i]));
    bool wrong = false;
    for (const char* f : kFields) {
      if (got[f] != vectors[i][f]) {
        ++mismatches[f];
        wrong = true;
      }
    }
    if (wrong && ++lines_wrong <= 3) {
      first_diffs +=
          "\n  line " + std::to_string(i + 1) + ": text " + vectors[i]["text"].dump() + " pair " +
          vectors[i]["pair"].dump() + "\n    want " +
          json{{"ids", vectors[i]["ids"]},
               {"tokens", vectors[i]["tokens"]},
               {"offsets", vectors[i]["offsets"]}}
              .dump() +
          "\n    got  " +
          json{{"ids", got["ids"]}, {"tokens", got["tokens"]}, {"offsets", got["offsets"]}}.dump();
    }
  }
  std::string counts;
  for (const auto& [f, n] : mismatches) counts += " " + f + "=" + std::to_string(n);
  EXPECT_EQ(lines_wrong, 0) << family << "/" << file << ": " << lines_wrong << " of "
                            << vectors.size() << " lines differ; per field:" << counts
                            << first_diffs;
}

// The shared vectors (4,000 lines) and the stress vectors (2,000 lines of
// random Unicode, see tests/data/tokenizers/README.md) of one family.
void ExpectFamilyMatches(const std::string& family) {
  const auto tok = Tokenizer::Load(DataDir(family));
  ExpectFileMatches(*tok, family, "vectors.jsonl.zst", 4000);
  ExpectFileMatches(*tok, family, "stress.jsonl.zst", 2000);
}

// The shared files with one component changed (tests/data/tokenizers/variants.json): every
// pre-tokenizer behaviour, Strip, StripAccents, NFD/NFKD, Prepend, BertProcessing, ByteLevel and
// Sequence post-processors, WordLevel, Metaspace schemes, added-token flags.
json Patched(const json& base, const json& patch) {
  json j = base;
  for (const auto& [k, v] : patch.items()) {
    if (v == "@wordlevel") {
      j["model"] = {
          {"type", "WordLevel"}, {"vocab", base["model"]["vocab"]}, {"unk_token", "[UNK]"}};
    } else if (v == "@added_flags") {
      j["added_tokens"].push_back({{"id", base["model"]["vocab"]["hello"]},
                                   {"content", "hello"},
                                   {"single_word", true},
                                   {"lstrip", true},
                                   {"rstrip", true},
                                   {"normalized", true},
                                   {"special", false}});
      j["added_tokens"].push_back({{"id", base["model"]["vocab"]["ing"]},
                                   {"content", "ing"},
                                   {"single_word", false},
                                   {"lstrip", false},
                                   {"rstrip", true},
                                   {"normalized", false},
                                   {"special", true}});
    } else {
      j[k] = v;
    }
  }
  return j;
}

TEST(Tokenizer, ComponentVariantsMatchHuggingFace) {
  const json variants = json::parse(ReadAll(DataDir("variants.json")));
  std::map<std::string, std::shared_ptr<const Tokenizer>> tokenizers;
  for (const json& v : variants) {
    const json base = json::parse(ReadAll(DataDir(v["base"]) + "/tokenizer.json.zst"));
    tokenizers[v["variant"]] = Tokenizer::FromJson(Patched(base, v["patch"]).dump(), v["variant"]);
  }
  std::istringstream lines(ReadAll(DataDir("variants.jsonl.zst")));
  std::string line;
  std::map<std::string, int> checked, wrong;
  int reported = 0;
  while (std::getline(lines, line)) {
    const json want = json::parse(line);
    const std::string name = want["variant"];
    ASSERT_TRUE(tokenizers.count(name)) << name;
    const json got = ToJson(EncodeVector(*tokenizers[name], want));
    ++checked[name];
    for (const char* f : {"ids", "tokens", "type_ids", "offsets", "special_tokens_mask"}) {
      if (got[f] != want[f]) {
        ++wrong[name];
        if (reported++ < 5) {
          ADD_FAILURE() << name << ": " << f << " differ for " << want["text"].dump() << "\n want "
                        << want[f].dump() << "\n got  " << got[f].dump();
        }
        break;
      }
    }
  }
  EXPECT_EQ(checked.size(), variants.size());
  for (const auto& [name, n] : checked) EXPECT_EQ(wrong[name], 0) << name << " of " << n;
}

TEST(Tokenizer, RobertaMatchesHuggingFace) { ExpectFamilyMatches("roberta-base"); }
TEST(Tokenizer, ClipMatchesHuggingFace) { ExpectFamilyMatches("clip-vit-base-patch32"); }
TEST(Tokenizer, BertUncasedMatchesHuggingFace) { ExpectFamilyMatches("bert-base-uncased"); }
TEST(Tokenizer, Qwen3MatchesHuggingFace) { ExpectFamilyMatches("qwen3"); }
TEST(Tokenizer, MistralByteFallbackMatchesHuggingFace) { ExpectFamilyMatches("mistral-bpe"); }
TEST(Tokenizer, MistralMetaspaceMatchesHuggingFace) {
  ExpectFamilyMatches("mistral-bpe-metaspace");
}
TEST(Tokenizer, UnigramMetaspaceMatchesHuggingFace) { ExpectFamilyMatches("unigram-metaspace"); }

// ------------------------------------------------------------ load errors

json RobertaJson() { return json::parse(ReadAll(DataDir("roberta-base") + "/tokenizer.json.zst")); }

std::string LoadError(const std::string& text, const std::string& source) {
  try {
    Tokenizer::FromJson(text, source);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded without an error)";
}

TEST(Tokenizer, BpeDropoutIsALoadErrorNamingItAndTheFile) {
  json j = RobertaJson();
  j["model"]["dropout"] = 0.1;
  const std::string err = LoadError(j.dump(), "models/x/tokenizer.json");
  EXPECT_NE(err.find("models/x/tokenizer.json: model BPE: dropout 0.1 is not implemented"),
            std::string::npos)
      << err;
}

TEST(Tokenizer, UnknownNormalizerIsALoadErrorNamingItAndTheFile) {
  json j = RobertaJson();
  j["normalizer"] = {{"type", "FancyNormalizer"}};
  const std::string err = LoadError(j.dump(), "models/x/tokenizer.json");
  EXPECT_NE(err.find("models/x/tokenizer.json: normalizer FancyNormalizer: is not implemented"),
            std::string::npos)
      << err;
}

TEST(Tokenizer, UnknownOptionIsALoadError) {
  json j = RobertaJson();
  j["pre_tokenizer"]["split_on_moon_phase"] = true;
  const std::string err = LoadError(j.dump(), "t.json");
  EXPECT_NE(err.find("t.json: pre_tokenizer ByteLevel: option \"split_on_moon_phase\" is not "
                     "implemented"),
            std::string::npos)
      << err;
}

TEST(Tokenizer, TruncatedFileIsALoadErrorNamingTheFile) {
  const std::string text = RobertaJson().dump();
  const std::string dir = ::testing::TempDir() + "/tok_truncated_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  {
    std::ofstream out(dir + "/tokenizer.json", std::ios::binary);
    out << text.substr(0, text.size() / 2);
  }
  std::string err = "(loaded without an error)";
  try {
    Tokenizer::Load(dir);
  } catch (const Error& e) {
    err = e.what();
  }
  EXPECT_NE(err.find(dir + "/tokenizer.json: tokenizer: not valid JSON"), std::string::npos) << err;
  EXPECT_NE(err.find("damaged or truncated"), std::string::npos) << err;
  std::system(("rm -rf " + dir).c_str());
}

TEST(Tokenizer, AddedTokenIdOutOfRangeIsALoadError) {
  json j = RobertaJson();
  for (auto& t : j["added_tokens"]) {
    if (t["content"] == "<mask>") t["id"] = 99999999;
  }
  const std::string err = LoadError(j.dump(), "t.json");
  EXPECT_NE(err.find("t.json: added_tokens: token \"<mask>\" has id 99999999, out of range"),
            std::string::npos)
      << err;
}

TEST(Tokenizer, UncompilableSplitPatternIsALoadError) {
  json j = json::parse(ReadAll(DataDir("qwen3") + "/tokenizer.json.zst"));
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  const std::string err = LoadError(j.dump(), "q.json");
  EXPECT_NE(err.find("q.json: pre_tokenizer Split: the pattern \"(unclosed\" does not compile"),
            std::string::npos)
      << err;
}

// A BPE tokenizer as Mistral's is made: no pre-tokenizer, spaces made "▁",
// a "▁" put first; a vocabulary of "▁", "a", "b", "a▁" and "▁b" and their merges.
std::string MetaspaceBpeJson() {
  const json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array()},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor", nullptr},
      {"decoder", nullptr},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", {{"▁", 0}, {"a", 1}, {"b", 2}, {"a▁", 3}, {"▁b", 4}}},
        {"merges", {"a ▁", "▁ b"}}}}};
  return tokenizer.dump();
}

// A BPE without a pre-tokenizer merges a long text as one word. djshard
// merges it in pieces cut before each "▁" when no merge can join another
// character to a "▁" (Mistral's and Llama 2's vocabularies: the Hugging Face
// vectors above cover them); here one merge does ("a" + "▁"), so the text
// must stay one word, as Hugging Face merges it.
TEST(Tokenizer, ALongWordIsNotCutWhereAMergeJoinsACharacterToAMetaspace) {
  const auto tok = Tokenizer::FromJson(MetaspaceBpeJson(), "t.json");
  std::string text;
  for (int i = 0; i < 100; ++i) text += "a b ";
  text.pop_back();
  const Encoding e = tok->Encode(text, false);
  // "▁a▁b▁a▁b...": every "a▁" first (rank 0), after which no "▁b" is left.
  std::vector<std::string> expected;
  for (int i = 0; i < 100; ++i) expected.insert(expected.end(), {"▁", "a▁", "b"});
  EXPECT_EQ(e.tokens, expected);
}

// The same cut, where an unknown character becomes an unk token made of
// "▁": the merge "▁ ▁" joins it to the "▁" after it, so the word stays whole.
TEST(Tokenizer, ALongWordIsNotCutWhereTheUnkTokenIsAMetaspace) {
  json tokenizer = json::parse(MetaspaceBpeJson());
  tokenizer["model"]["vocab"] = {{"▁", 0}, {"a", 1}, {"b", 2}, {"▁▁", 3}};
  tokenizer["model"]["merges"] = {"▁ ▁"};
  tokenizer["model"]["unk_token"] = "▁";
  const auto tok = Tokenizer::FromJson(tokenizer.dump(), "t.json");
  const std::string text = std::string(300, 'a') + "﹏ b";  // "﹏" is not in the vocabulary
  const Encoding e = tok->Encode(text, false);
  std::vector<std::string> expected = {"▁"};
  expected.insert(expected.end(), 300, "a");
  expected.insert(expected.end(), {"▁▁", "b"});  // the unk "▁" and the space's "▁", merged
  EXPECT_EQ(e.tokens, expected);
}

// ------------------------------------------------------------ threads

TEST(Tokenizer, EightThreadsGiveTheSameEncodingsAsOne) {
  for (const std::string family : {"roberta-base", "bert-base-uncased", "unigram-metaspace"}) {
    const auto tok = Tokenizer::Load(DataDir(family));
    const auto vectors = ReadVectors(family);
    std::vector<json> single;
    for (const auto& v : vectors) single.push_back(ToJson(EncodeVector(*tok, v)));
    std::vector<int> differing(8, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        // Each thread walks the lines from a different start, twice.
        for (size_t k = 0; k < 2 * vectors.size(); ++k) {
          const size_t i = (k + static_cast<size_t>(t) * 499) % vectors.size();
          if (ToJson(EncodeVector(*tok, vectors[i])) != single[i]) ++differing[t];
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < 8; ++t) EXPECT_EQ(differing[t], 0) << family << " thread " << t;
  }
}

}  // namespace
}  // namespace djshard::model
