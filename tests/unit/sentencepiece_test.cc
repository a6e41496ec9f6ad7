// djshard's SentencePiece encoder against the sentencepiece library (0.1.97,
// the one Data-Juicer's vectors were made with): the same pieces for the
// bundled en.sp.model and for models trained here with every normalizer and
// whitespace setting, on random texts built to reach every rule.
#include "djshard/model/sentencepiece.h"

#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "djshard/common/error.h"

namespace djshard::model {
namespace {

const std::string kEnModel = DJSHARD_SOURCE_DIR "/tests/data/sentencepiece/en.sp.model";

// Pieces of text chosen to reach the normalizer's rules and the Viterbi's
// ties and unknown characters.
const std::vector<std::string> kFragments = {
    "the",
    "www",
    "ww",
    "w",
    "Hello",
    "HELLO",
    "naïve",
    "café",
    "e\xcc\x81",
    "ﬁ",
    "Ⅻ",
    "①",
    "ｆｕｌｌ",
    "１２３",
    "  ",
    " ",
    "\t",
    "\n",
    "\r\n",
    "\xe3\x80\x80",
    "\xc2\xa0",
    "\xe2\x80\x8b",
    "\xef\xbb\xbf",
    "\x01",
    "\x7f",
    "\xc2\x85",
    "\xe2\x80\xa8",
    "中文",
    "日本語",
    "한국어",
    "😀",
    "👍🏽",
    "\xef\xbf\xbd",
    "▁",
    "http://example.com/a?b=c",
    "3.14159",
    "don't",
    "--",
    "...",
    "«»",
    "İ",
    "ß",
    "ǅ",
    "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",
    "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87",
    "x",
    "q",
    "z",
    "zzzzzz",
    "aaaa",
    "ing",
    "tion",
    "qu",
    std::string("\0", 1),
    std::string("a\0b", 3)};

std::string RandomText(std::mt19937* rng) {
  std::uniform_int_distribution<size_t> count(0, 24), pick(0, kFragments.size() - 1);
  std::uniform_int_distribution<int> space(0, 3);
  std::string text;
  for (size_t n = count(*rng); n > 0; --n) {
    text += kFragments[pick(*rng)];
    if (space(*rng) == 0) text += ' ';
  }
  return text;
}

// Bytes that are not UTF-8: sentencepiece reads each bad byte as U+FFFD.
std::string RandomBytes(std::mt19937* rng) {
  std::uniform_int_distribution<int> byte(1, 255), length(0, 16);
  std::string text;
  for (int n = length(*rng); n > 0; --n) text += static_cast<char>(byte(*rng));
  return text;
}

void ExpectSamePieces(const SentencePiece& model, const std::string& text) {
  SentencePieceScratch scratch;
  const auto& pieces = model.Encode(text, &scratch);
  const std::vector<std::string> ours(pieces.begin(), pieces.end());
  const std::vector<std::string> library = model.LibraryPieces(text);
  if (ours == library) return;
  size_t i = 0;
  while (i < ours.size() && i < library.size() && ours[i] == library[i]) ++i;
  ADD_FAILURE() << "text: " << testing::PrintToString(text) << "\npieces differ from #" << i
                << ": ours "
                << testing::PrintToString(std::vector<std::string>(
                       ours.begin() + i, ours.begin() + std::min(ours.size(), i + 4)))
                << ", the library's "
                << testing::PrintToString(std::vector<std::string>(
                       library.begin() + i, library.begin() + std::min(library.size(), i + 4)));
}

void ExpectSamePiecesOnRandomTexts(const SentencePiece& model, int texts, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int i = 0; i < texts && !testing::Test::HasFailure(); ++i) {
    ExpectSamePieces(model, RandomText(&rng));
    if (i % 8 == 0) ExpectSamePieces(model, RandomBytes(&rng));
  }
}

class SentencePieceTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("djshard-sentencepiece-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A unigram model trained by the sentencepiece library on a small corpus
  // with `options` (trainer flags), written to a file; `extra` is appended
  // to its bytes (a NormalizerSpec field, which protobuf merges).
  std::string Train(const std::string& name, const std::string& options,
                    const std::string& extra = "") {
    const std::string corpus = (dir_ / (name + ".txt")).string();
    {
      std::ofstream out(corpus);
      std::mt19937 rng(7);
      for (int i = 0; i < 3000; ++i) out << RandomText(&rng) << " the quick brown fox\n";
    }
    const std::string prefix = (dir_ / name).string();
    const auto status = ::sentencepiece::SentencePieceTrainer::Train(
        "--input=" + corpus + " --model_prefix=" + prefix +
        " --vocab_size=400 --minloglevel=2 --num_threads=1 " + options);
    EXPECT_TRUE(status.ok()) << status.ToString();
    const std::string path = prefix + ".model";
    if (!extra.empty()) std::ofstream(path, std::ios::app | std::ios::binary) << extra;
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(SentencePieceTest, DataJuicersEnglishModelEncodesAsTheLibraryDoes) {
  const auto model = SentencePiece::Load(kEnModel, "");
  ASSERT_TRUE(model->native()) << model->why_library();
  ExpectSamePiecesOnRandomTexts(*model, 30000, 1);
  for (const char* text : {"", " ", "   \t\n ", "\xef\xbf\xbd", "a\xff", "\xe2\x96\x81\xe2\x96\x81",
                           "www", " www ", "www.example.com", "\xf0\x9f", "\xed\xa0\x80"}) {
    ExpectSamePieces(*model, text);
  }
}

TEST_F(SentencePieceTest, EveryNormalizationAndWhitespaceSettingEncodesAsTheLibraryDoes) {
  const std::vector<std::pair<std::string, std::string>> settings = {
      {"nmt_nfkc", "--normalization_rule_name=nmt_nfkc"},
      {"nfkc", "--normalization_rule_name=nfkc"},
      {"nmt_nfkc_cf", "--normalization_rule_name=nmt_nfkc_cf"},
      {"identity", "--normalization_rule_name=identity"},
      {"no_dummy_prefix", "--add_dummy_prefix=false"},
      {"extra_whitespaces", "--remove_extra_whitespaces=false"},
      {"suffix", "--treat_whitespace_as_suffix=true"},
      {"suffix_no_dummy", "--treat_whitespace_as_suffix=true --add_dummy_prefix=false"},
      {"digits", "--split_digits=true --max_sentencepiece_length=4"},
  };
  for (const auto& [name, options] : settings) {
    SCOPED_TRACE(name);
    const auto model = SentencePiece::Load(Train(name, options), "");
    ASSERT_TRUE(model->native()) << model->why_library();
    ExpectSamePiecesOnRandomTexts(*model, 600, 2);
  }
  // escape_whitespaces has no trainer flag: a NormalizerSpec (field 3) that
  // sets it to false, merged into the model's by protobuf.
  const std::string no_escape = std::string("\x1a\x02\x28\x00", 4);
  int n = 0;
  for (const std::string& flags :
       {std::string(), std::string("--remove_extra_whitespaces=false")}) {
    const auto model =
        SentencePiece::Load(Train("no_escape" + std::to_string(n++), flags, no_escape), "");
    ASSERT_TRUE(model->native()) << model->why_library();
    ExpectSamePiecesOnRandomTexts(*model, 600, 3);
  }
}

TEST_F(SentencePieceTest, ModelsItDoesNotReproduceAreEncodedByTheLibrary) {
  const struct {
    const char* name;
    const char* options;
    const char* why;
  } cases[] = {
      {"bpe", "--model_type=bpe", "it is not a unigram model"},
      {"bytes", "--byte_fallback=true", "it falls back to bytes"},
      {"user", "--user_defined_symbols=foo,<sep>", "it has user-defined symbols"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto model = SentencePiece::Load(Train(c.name, c.options), "");
    EXPECT_FALSE(model->native());
    EXPECT_EQ(model->why_library(), c.why);
    ExpectSamePiecesOnRandomTexts(*model, 200, 4);
  }
}

// A protobuf varint.
std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>(0x80 | (v & 0x7f));
  out += static_cast<char>(v);
  return out;
}

// A ModelProto `pieces` field (a NORMAL piece), which appended to a model's
// bytes adds the piece at the end of its list.
std::string PieceField(const std::string& piece, float score) {
  std::string inner;
  inner.push_back('\x0a');  // piece
  inner.append(Varint(piece.size())).append(piece);
  inner.push_back('\x15');  // score
  inner.append(reinterpret_cast<const char*>(&score), 4);
  inner.append({'\x18', '\x01'});  // type: NORMAL
  std::string field;
  field.push_back('\x0a');  // pieces
  field.append(Varint(inner.size())).append(inner);
  return field;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_F(SentencePieceTest, OddPiecesAreEncodedAsTheLibraryDoes) {
  // A piece with a NUL byte: the library's trie ends it there, so the
  // library encodes.
  const std::string nul_path = (dir_ / "nul.model").string();
  std::ofstream(nul_path, std::ios::binary)
      << ReadBytes(kEnModel) + PieceField(std::string("\xe2\x96\x81QQQ\0z", 8), -1.0f);
  const auto nul = SentencePiece::Load(nul_path, "");
  EXPECT_FALSE(nul->native());
  EXPECT_EQ(nul->why_library(), "a piece holds a NUL byte");
  ExpectSamePieces(*nul, "QQQ QQQz");
  // A piece of 50,000 bytes: the trie is built without a frame per byte.
  const std::string long_piece = "\xe2\x96\x81" + std::string(50000, 'q');
  const std::string long_path = (dir_ / "long.model").string();
  std::ofstream(long_path, std::ios::binary) << ReadBytes(kEnModel) + PieceField(long_piece, -1.0f);
  const auto long_model = SentencePiece::Load(long_path, "");
  ASSERT_TRUE(long_model->native()) << long_model->why_library();
  ExpectSamePieces(*long_model, long_piece.substr(3) + " q qq");
  ExpectSamePiecesOnRandomTexts(*long_model, 200, 5);
}

TEST_F(SentencePieceTest, AModelTheLibraryCannotIndexIsAnErrorNamingIt) {
  const std::string path = (dir_ / "nul-first.model").string();
  std::ofstream(path, std::ios::binary)
      << ReadBytes(kEnModel) + PieceField(std::string("\0ab", 3), -1.0f);
  try {
    SentencePiece::Load(path, "copy it again");
    FAIL() << "a model with a piece that starts with NUL loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(e.message().find("not a SentencePiece model"), std::string::npos) << e.message();
  }
}

TEST_F(SentencePieceTest, ADamagedModelIsAnErrorNamingIt) {
  std::ifstream in(kEnModel, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = (dir_ / "cut.model").string();
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  try {
    SentencePiece::Load(path, "copy it again");
    FAIL() << "a truncated model loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(e.message().find("not a SentencePiece model"), std::string::npos) << e.message();
    EXPECT_EQ(e.hint(), "copy it again");
  }
}

}  // namespace
}  // namespace djshard::model
