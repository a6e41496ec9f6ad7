// Loading a KenLM model (binary header or ARPA text) and scoring sentences
// with KenLM's state: the context words whose n-grams can still extend, and
// their backoffs, so that each word costs its longest n-gram's probability
// plus the backoffs of the longer contexts that were not matched.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "djshard/common/error.h"
#include "djshard/io/fd.h"
#include "djshard/io/mapped_file.h"
#include "djshard/model/kenlm.h"
#include "src/model/kenlm/format.h"

namespace djshard::model {

namespace kenlm {
namespace {

// The binary header: a fixed "sanity" block, the parameters, the counts.
constexpr char kMagic[] = "mmap lm http://kheafield.com/code format version 5\n\0";
constexpr char kMagicPrefix[] = "mmap lm http://kheafield.com/code";
constexpr char kMagicIncomplete[] = "mmap lm http://kheafield.com/code incomplete\n";
constexpr size_t kMagicBytes = (sizeof(kMagic) + 7) / 8 * 8;      // 56
constexpr size_t kSanityBytes = kMagicBytes + 3 * 4 + 3 * 4 + 8;  // 88
constexpr size_t kParametersBytes =
    20;  // order u8, multiplier f32, type i32, vocab bool, version u32

// What the sanity block holds when the file was written on this kind of machine.
std::string ReferenceSanity() {
  std::string s(kSanityBytes, '\0');
  std::memcpy(s.data(), kMagic, sizeof(kMagic));
  const float floats[3] = {0.0f, 1.0f, -0.5f};
  std::memcpy(s.data() + kMagicBytes, floats, sizeof floats);
  const uint32_t words[3] = {1, 0xFFFFFFFFu, 0};
  std::memcpy(s.data() + kMagicBytes + 12, words, sizeof words);
  const uint64_t one = 1;
  std::memcpy(s.data() + kMagicBytes + 24, &one, sizeof one);
  return s;
}

const char* const kModelTypes[] = {"probing hash tables",
                                   "probing hash tables with rest costs",
                                   "trie",
                                   "trie with quantization",
                                   "trie with array-compressed pointers",
                                   "trie with quantization and array-compressed pointers"};

// A KenLM State: the context, most recent word first, as far as it can extend.
struct State {
  WordIndex words[kMaxOrder - 1];
  float backoff[kMaxOrder - 1];
  int length;
};

// The cost of `word` after `in` (lm::ngram::GenericModel::FullScore), and the
// state after it.
template <class Search>
float FullScore(const Search& search, const State& in, WordIndex word, State* out) {
  typename Search::Node node;
  const Weights uni = search.Unigram(word, &node);
  float prob = uni.prob;
  bool independent_left = uni.independent_left;
  int ngram_length = 1;
  out->backoff[0] = uni.backoff;
  out->length = HasExtension(uni.backoff) ? 1 : 0;
  out->words[0] = word;
  const int order = search.order();
  for (int k = 0; k < in.length && !independent_left; ++k) {
    if (k == order - 2) {
      float longest;
      if (search.Longest(in.words[k], node, &longest)) {
        prob = longest;
        ngram_length = order;
      }
      break;
    }
    Weights mid;
    if (!search.Middle(k, in.words[k], &node, &mid)) break;
    out->backoff[k + 1] = mid.backoff;
    prob = mid.prob;
    independent_left = mid.independent_left;
    ngram_length = k + 2;
    if (HasExtension(mid.backoff)) out->length = ngram_length;
  }
  for (int i = 1; i < out->length; ++i) out->words[i] = in.words[i - 1];
  for (int i = ngram_length - 1; i < in.length; ++i) prob += in.backoff[i];
  return prob;
}

bool IsKenlmSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

template <class Search>
class Model final : public KenLanguageModel {
 public:
  Model(Search search, const char* structure, std::shared_ptr<const void> backing)
      : search_(std::move(search)), structure_(structure), backing_(std::move(backing)) {
    bos_ = search_.Index("<s>");
    eos_ = search_.Index("</s>");
    typename Search::Node ignored;
    begin_.words[0] = bos_;
    begin_.backoff[0] = search_.Unigram(bos_, &ignored).backoff;
    begin_.length = 1;
  }

  float ScoreSentence(std::string_view sentence) const override {
    sentence = sentence.substr(0, sentence.find('\0'));
    State states[2];
    states[0] = begin_;
    int cur = 0;
    float total = 0;
    size_t i = 0;
    while (true) {
      while (i < sentence.size() && IsKenlmSpace(sentence[i])) ++i;
      if (i == sentence.size()) break;
      const size_t start = i;
      while (i < sentence.size() && !IsKenlmSpace(sentence[i])) ++i;
      const WordIndex w = search_.Index(sentence.substr(start, i - start));
      total += FullScore(search_, states[cur], w, &states[1 - cur]);
      cur = 1 - cur;
    }
    total += FullScore(search_, states[cur], eos_, &states[1 - cur]);
    return total;
  }

  int order() const override { return search_.order(); }
  const char* data_structure() const override { return structure_; }

 private:
  Search search_;
  const char* structure_;
  std::shared_ptr<const void> backing_;  // the mapped file or built tables
  WordIndex bos_ = 0, eos_ = 0;
  State begin_{};
};

[[noreturn]] void Damaged(const std::string& name, const std::string& what) {
  throw Error(name, 0, "not a KenLM model djshard can read: " + what,
              "copy the model again, or rebuild it with KenLM's build_binary");
}

std::unique_ptr<const KenLanguageModel> FromBinary(std::string_view bytes, const std::string& name,
                                                   std::shared_ptr<const void> backing) {
  if (bytes.size() < kSanityBytes + kParametersBytes) Damaged(name, "it ends inside its header");
  if (bytes.compare(0, kSanityBytes, ReferenceSanity()) != 0) {
    Damaged(name, bytes.compare(0, sizeof(kMagic) - 1, kMagic, sizeof(kMagic) - 1) == 0
                      ? "its header's test values do not match this machine's"
                      : "its binary header is not KenLM format version 5");
  }
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + kSanityBytes;
  const int order = p[0];
  const float multiplier = Load<float>(p + 4);
  const int32_t type = Load<int32_t>(p + 8);
  const uint32_t search_version = Load<uint32_t>(p + 16);
  if (order < 2 || order > kMaxOrder) {
    Damaged(name, "its order is " + std::to_string(order) + "; KenLM reads orders 2 to " +
                      std::to_string(kMaxOrder));
  }
  const size_t header = (kSanityBytes + kParametersBytes + 8 * order + 7) / 8 * 8;
  if (bytes.size() < header) Damaged(name, "it ends inside its header");
  std::vector<uint64_t> counts(order);
  std::memcpy(counts.data(), p + kParametersBytes, 8 * order);
  const std::string_view body = bytes.substr(header);
  const auto* base = reinterpret_cast<const uint8_t*>(body.data());
  std::string problem;
  if (type == 0) {
    if (search_version != 0) Damaged(name, "probing version " + std::to_string(search_version));
    if (!(multiplier >= 1.0f && multiplier <= 1024.0f)) {
      Damaged(name, "its probing multiplier is " + std::to_string(multiplier));
    }
    ProbingLayout layout = ComputeProbingLayout(counts, multiplier, &problem);
    if (problem.empty() && layout.total > body.size()) {
      problem = "the file has " + std::to_string(bytes.size()) + " bytes, its counts need " +
                std::to_string(header + layout.total);
    }
    if (!problem.empty()) Damaged(name, problem);
    ProbingSearch search(base, counts, std::move(layout));
    if (problem = search.Check(); !problem.empty()) Damaged(name, problem);
    return std::make_unique<Model<ProbingSearch>>(std::move(search), "probing", std::move(backing));
  }
  if (type == 2) {
    if (search_version != 1) Damaged(name, "trie version " + std::to_string(search_version));
    TrieSearch search(body, counts, name, &problem);
    if (!problem.empty()) Damaged(name, problem);
    return std::make_unique<Model<TrieSearch>>(std::move(search), "trie", std::move(backing));
  }
  if (type >= 0 && type < 6) {
    throw Error(
        name, 0,
        std::string("KenLM binary model with ") + kModelTypes[type] +
            ", which djshard does not read",
        "rebuild it with `build_binary ARPA OUT` (probing) or `build_binary trie ARPA OUT`");
  }
  Damaged(name, "unknown data structure " + std::to_string(type));
}

std::unique_ptr<const KenLanguageModel> FromArpa(std::string_view text, const std::string& name) {
  auto memory = std::make_shared<std::vector<uint8_t>>();
  std::vector<uint64_t> counts;
  ProbingLayout layout;
  const std::string problem = BuildProbingFromArpa(text, &counts, &layout, memory.get());
  if (!problem.empty()) {
    throw Error(name, 0, "not a KenLM model djshard can read: ARPA " + problem,
                "check the file: a KenLM binary (build_binary) or ARPA text (lmplz)");
  }
  ProbingSearch search(memory->data(), counts, std::move(layout));
  return std::make_unique<Model<ProbingSearch>>(std::move(search), "ARPA", std::move(memory));
}

std::unique_ptr<const KenLanguageModel> Read(std::string_view bytes, const std::string& name,
                                             std::shared_ptr<const void> backing) {
  if (bytes.substr(0, sizeof(kMagicIncomplete) - 1) == kMagicIncomplete) {
    Damaged(name, "build_binary did not finish writing it");
  }
  if (bytes.substr(0, sizeof(kMagicPrefix) - 1) == kMagicPrefix) {
    return FromBinary(bytes, name, std::move(backing));
  }
  return FromArpa(bytes, name);
}

}  // namespace
}  // namespace kenlm

std::unique_ptr<const KenLanguageModel> KenLanguageModel::Load(const std::string& path) {
  auto file = std::make_shared<io::MappedFile>(path);
  return kenlm::Read(file->bytes(), path, file);
}

std::unique_ptr<const KenLanguageModel> KenLanguageModel::FromBytes(std::string_view bytes,
                                                                    const std::string& name) {
  return kenlm::Read(bytes, name, nullptr);
}

}  // namespace djshard::model
