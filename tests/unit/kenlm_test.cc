// djshard's KenLM reader against KenLM itself: the scores of
// tests/data/kenlm/scores.jsonl (kenlm.Model.score of every model there),
// ARPA text and binary files of one model agreeing, and damaged files
// refused with an Error naming them.
#include "djshard/model/kenlm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "djshard/common/error.h"
#include "djshard/io/input.h"
#include "tests/unit/temp_dir.h"

namespace djshard::model {
namespace {

const std::string kModels = DJSHARD_SOURCE_DIR "/tests/data/kenlm";

// The bytes of a file, decompressed when it ends in .zst.
std::string ReadAll(const std::string& path) {
  auto source = io::OpenInput(path);
  std::string out;
  char buf[1 << 16];
  while (size_t n = source->Read(buf, sizeof buf)) out.append(buf, n);
  return out;
}

// The test models, each decompressed once into a file.
class KenLmModels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new testing::TempDir(); }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Path(const std::string& name) {
    const std::string path = dir_->Path(name);
    if (!std::filesystem::exists(path)) dir_->Write(name, ReadAll(kModels + "/" + name + ".zst"));
    return path;
  }
  static std::string Bytes(const std::string& name) {
    return ReadAll(kModels + "/" + name + ".zst");
  }

 private:
  static testing::TempDir* dir_;
};
testing::TempDir* KenLmModels::dir_ = nullptr;

TEST_F(KenLmModels, ScoresEqualKenlmsOwnForEveryDataStructure) {
  std::map<std::string, std::unique_ptr<const KenLanguageModel>> models;
  io::LineReader reader(io::OpenInput(kModels + "/scores.jsonl.zst"), "scores.jsonl.zst");
  std::string_view line;
  int checked = 0, exact = 0;
  while (reader.Next(&line)) {
    const auto v = nlohmann::json::parse(line);
    const std::string sentence = v["sentence"];
    for (const auto& [name, want] : v["scores"].items()) {
      auto& m = models[name];
      if (!m) m = KenLanguageModel::Load(Path(name));
      const float got = m->ScoreSentence(sentence);
      EXPECT_NEAR(got, want.get<double>(), 1e-4) << name << ": " << sentence;
      exact += static_cast<double>(got) == want.get<double>();
      ++checked;
    }
  }
  EXPECT_GT(checked, 1500);
  // Same float operations in the same order: bit for bit.
  EXPECT_EQ(exact, checked);
}

TEST_F(KenLmModels, ArpaAndBinaryFilesOfOneModelAgree) {
  const auto arpa = KenLanguageModel::Load(Path("o4-pruned.arpa"));
  const auto probing = KenLanguageModel::Load(Path("o4-pruned.probing"));
  const auto trie = KenLanguageModel::Load(Path("o4-pruned.trie"));
  EXPECT_STREQ(arpa->data_structure(), "ARPA");
  EXPECT_STREQ(probing->data_structure(), "probing");
  EXPECT_STREQ(trie->data_structure(), "trie");
  EXPECT_EQ(arpa->order(), 4);
  EXPECT_EQ(trie->order(), 4);
  for (const char* s : {"", "▁the ▁of", "▁a ▁b ▁c ▁d ▁e", "unknown ▁words ▁here", "<s> </s>"}) {
    EXPECT_EQ(arpa->ScoreSentence(s), probing->ScoreSentence(s)) << s;
    EXPECT_EQ(arpa->ScoreSentence(s), trie->ScoreSentence(s)) << s;
  }
}

// The Error a load of `bytes` throws, or "" when it loads.
std::string LoadError(const std::string& bytes) {
  try {
    KenLanguageModel::FromBytes(bytes, "model.bin");
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "model.bin");
    return e.message();
  }
  return "";
}

TEST_F(KenLmModels, TruncatedBinaryFilesAreRefusedNamingTheFile) {
  for (const char* name : {"o2.probing", "o5.probing", "o3.trie", "o5-pruned.trie"}) {
    const std::string bytes = Bytes(name);
    // Strings at the end are not read: cut into the tables.
    for (size_t cut : {size_t{0}, size_t{10}, size_t{100}, size_t{130}, bytes.size() / 2,
                       bytes.size() * 9 / 10}) {
      EXPECT_NE(LoadError(bytes.substr(0, cut)), "") << name << " cut at " << cut;
    }
  }
}

TEST_F(KenLmModels, DamagedHeadersAreRefused) {
  std::string bytes = Bytes("o5.probing");
  std::string huge = bytes;
  const uint64_t count = uint64_t{1} << 62;
  std::memcpy(huge.data() + 108 + 8, &count, 8);  // the 2-gram count
  EXPECT_NE(LoadError(huge).find("impossibly large"), std::string::npos) << LoadError(huge);
  std::string order = bytes;
  order[88] = 9;
  EXPECT_NE(LoadError(order).find("order is 9"), std::string::npos);
  std::string type = bytes;
  type[96] = 7;
  EXPECT_NE(LoadError(type).find("unknown data structure"), std::string::npos);
  std::string sanity = bytes;
  sanity[60] = 1;
  EXPECT_NE(LoadError(sanity).find("test values"), std::string::npos);
}

TEST_F(KenLmModels, QuantizedTriesAreRefusedByName) {
  EXPECT_NE(LoadError(Bytes("quant.trie")).find("trie with quantization"), std::string::npos);
}

TEST_F(KenLmModels, DamagedArpaTextIsRefusedWithItsLine) {
  const std::string arpa = Bytes("o2.arpa");
  EXPECT_NE(LoadError("hello\n").find("not an ARPA file"), std::string::npos);
  EXPECT_NE(LoadError(arpa.substr(0, arpa.size() / 2)).find("ARPA line"), std::string::npos);
  std::string no_bos = arpa;
  no_bos.replace(no_bos.find("\t<s>\t"), 5, "\t<x>\t");
  EXPECT_NE(LoadError(no_bos).find("lack <s>"), std::string::npos) << LoadError(no_bos);
  EXPECT_NE(LoadError("\\data\\\nngram 1=99999999999\n\n").find("exceeds the file"),
            std::string::npos);
}

TEST(KenLm, MissingFileIsAnError) {
  EXPECT_THROW(KenLanguageModel::Load("/nonexistent/en.arpa.bin"), Error);
}

}  // namespace
}  // namespace djshard::model
