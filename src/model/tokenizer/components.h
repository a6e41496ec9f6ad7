#pragma once
// The parts of a Hugging Face tokenizer pipeline and the string that carries
// offsets through them. Internal to src/model/tokenizer.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "djshard/model/tokenizer.h"

namespace djshard::model::tokenizer {

// ---------------------------------------------------------------- Unicode

// Decodes the code point starting at s[*i] (valid UTF-8) and advances *i.
inline char32_t DecodeUtf8(std::string_view s, size_t* i) {
  const auto b0 = static_cast<unsigned char>(s[*i]);
  if (b0 < 0x80) {
    *i += 1;
    return b0;
  }
  if (b0 < 0xE0) {
    const char32_t c = ((b0 & 0x1F) << 6) | (static_cast<unsigned char>(s[*i + 1]) & 0x3F);
    *i += 2;
    return c;
  }
  if (b0 < 0xF0) {
    const char32_t c = ((b0 & 0x0F) << 12) | ((static_cast<unsigned char>(s[*i + 1]) & 0x3F) << 6) |
                       (static_cast<unsigned char>(s[*i + 2]) & 0x3F);
    *i += 3;
    return c;
  }
  const char32_t c = ((b0 & 0x07) << 18) | ((static_cast<unsigned char>(s[*i + 1]) & 0x3F) << 12) |
                     ((static_cast<unsigned char>(s[*i + 2]) & 0x3F) << 6) |
                     (static_cast<unsigned char>(s[*i + 3]) & 0x3F);
  *i += 4;
  return c;
}
inline size_t Utf8Length(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }
inline size_t Utf8LeadLength(unsigned char b) {
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}
void AppendUtf8(std::string* out, char32_t c);
// Whether `s` is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

// Rust's char::is_whitespace (the White_Space property).
bool IsWhitespace(char32_t c);
// Unicode general categories as Rust's std and Oniguruma (Unicode 17.0) see
// them: libutf8proc's (15.0) and the code points assigned since.
bool IsLetter(char32_t c);   // L*
bool IsNumber(char32_t c);   // N*
bool IsMark(char32_t c);     // M*
bool IsDecimal(char32_t c);  // Nd
// StripAccents' is_combining_mark: M* of Unicode 9.0.
bool IsCombiningMark(char32_t c);
// Simple lower-case mapping (Rust's char::to_lowercase but for U+0130).
char32_t LowercaseSimple(char32_t c);
// Categories as the `unicode_categories` crate (Unicode 9.0) sees them, which
// Hugging Face uses for BERT's punctuation, control chars and accents.
bool IsPunctuation(char32_t c);     // P*
bool IsMarkNonspacing(char32_t c);  // Mn
// Cc, Cf or Co: the `is_other` of the unicode_categories crate Hugging Face uses.
bool IsOther(char32_t c);
// Whether `c` was assigned in Unicode 9.0, the version of the tables of Hugging Face's
// normalizer (later code points have no decomposition and combining class 0 there).
bool InNormalizationUnicode(char32_t c);
// Regular-expression \w as Rust's regex crate has it (Alphabetic, marks,
// decimal digits, connector punctuation, join controls).
bool IsWordChar(char32_t c);
// Rust's char::to_lowercase (full mapping: U+0130 gives two code points).
void AppendLowercase(char32_t c, std::vector<char32_t>* out);

// ------------------------------------------------------ NormalizedString

// Byte range of the sequence's original text that one normalized byte came from.
struct Alignment {
  uint32_t start = 0;
  uint32_t end = 0;
};

// One code point of a transformation, as Hugging Face's NormalizedString
// takes them: change 0 replaces the next original char, +1 inserts a new char
// (aligned with the previous byte), -N replaces the next char and removes the
// N after it.
struct CharChange {
  char32_t c;
  int32_t change;
};

// A normalized text with, for each of its bytes, the original bytes it came
// from (Hugging Face's NormalizedString, with alignments kept absolute in the
// sequence's original text).
class NormalizedString {
 public:
  NormalizedString() = default;
  explicit NormalizedString(std::string_view original);

  const std::string& get() const { return text_; }
  bool empty() const { return text_.empty(); }
  // [start, end) of the original text this string covers.
  uint32_t original_start() const { return original_start_; }
  uint32_t original_end() const { return original_end_; }
  const std::vector<Alignment>& alignments() const { return align_; }

  // The part of the string at normalized bytes [begin, end) (char boundaries).
  NormalizedString Slice(size_t begin, size_t end) const;
  // The same part, its normalized text and alignments replaced by `text` and
  // `align` (one per byte of `text`), built by the caller from this string.
  NormalizedString SliceAs(size_t begin, size_t end, std::string text,
                           std::vector<Alignment> align) const;
  // Hugging Face's transform_range over normalized bytes [begin, end).
  void TransformRange(size_t begin, size_t end, const std::vector<CharChange>& dest,
                      size_t initial_offset);
  void Transform(const std::vector<CharChange>& dest, size_t initial_offset) {
    TransformRange(0, text_.size(), dest, initial_offset);
  }
  // Replaces each [begin, end) range (sorted, disjoint) with `content`.
  void Replace(const std::vector<std::pair<size_t, size_t>>& ranges, std::string_view content);
  // Prepends `s` (nothing when empty), as Hugging Face's prepend.
  void Prepend(std::string_view s);
  // Original byte range of normalized bytes [begin, end) (convert_offsets).
  std::optional<std::pair<uint32_t, uint32_t>> ToOriginal(size_t begin, size_t end) const;

  // Builds directly: text and per-byte alignments.
  void Assign(std::string text, std::vector<Alignment> align) {
    text_ = std::move(text);
    align_ = std::move(align);
  }

 private:
  std::string text_;
  std::vector<Alignment> align_;
  uint32_t original_start_ = 0;
  uint32_t original_end_ = 0;
};

// A match or gap of a pattern over a string: [begin, end) bytes.
struct PatternMatch {
  size_t begin;
  size_t end;
  bool is_match;
};
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Matches and gaps covering `text`, one match per char for which pred holds.
template <typename Pred>
std::vector<PatternMatch> FindCharMatches(std::string_view text, Pred pred) {
  std::vector<PatternMatch> out;
  if (text.empty()) {
    out.push_back({0, 0, false});
    return out;
  }
  size_t last = 0, i = 0;
  while (i < text.size()) {
    const size_t b = i;
    const char32_t c = DecodeUtf8(text, &i);
    if (pred(c)) {
      if (last < b) out.push_back({last, b, false});
      out.push_back({b, i, true});
      last = i;
    }
  }
  if (last < text.size()) out.push_back({last, text.size(), false});
  return out;
}
// Matches of the literal `needle` (leftmost, non-overlapping).
std::vector<PatternMatch> FindStringMatches(std::string_view text, std::string_view needle);

// Splits `s` at `matches` with `behavior` (Hugging Face's NormalizedString::split).
// Empty pieces are dropped, as PreTokenizedString::split does.
void SplitNormalized(const NormalizedString& s, std::vector<PatternMatch> matches,
                     SplitBehavior behavior, std::vector<NormalizedString>* out);

// A PCRE2 pattern with Oniguruma's reading of \s (U+0085 included), as
// Hugging Face compiles Split and Replace patterns. Thread-safe.
class PatternRegex {
 public:
  // Throws djshard::Error (`what` names file and component) when it does not compile.
  PatternRegex(const std::string& pattern, const std::string& what);
  ~PatternRegex();
  PatternRegex(const PatternRegex&) = delete;
  PatternRegex& operator=(const PatternRegex&) = delete;
  std::vector<PatternMatch> FindMatches(std::string_view text) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
};

// ------------------------------------------------------------ pipeline

// A token from the model or an added token: offsets in bytes of its split's
// normalized text.
struct Token {
  uint32_t id;
  std::string value;
  uint32_t start;
  uint32_t end;
};

struct Split {
  NormalizedString normalized;
  bool has_tokens = false;
  std::vector<Token> tokens;
};

// Where a component is being loaded from, for load errors.
struct LoadContext {
  std::string source;  // the file
  // Throws djshard::Error "<source>: <component>: <what> (<hint>)".
  [[noreturn]] void Fail(const std::string& component, const std::string& what,
                         const std::string& hint = "") const;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(NormalizedString* s) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits further every split that has no tokens yet.
  virtual void PreTokenize(std::vector<Split>* splits) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the tokens of one non-empty pre-tokenized word.
  virtual void Tokenize(std::string_view word, std::vector<Token>* out) const = 0;
  virtual std::optional<uint32_t> TokenToId(std::string_view token) const = 0;
  virtual size_t VocabSize() const = 0;
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // One encoding per sequence in, the encodings to concatenate out.
  virtual void Process(std::vector<Encoding>* encodings, bool add_special_tokens) const = 0;
};

// Factories: each refuses (ctx.Fail) any type or option it does not implement.
std::unique_ptr<Normalizer> MakeNormalizer(const nlohmann::json& j, const LoadContext& ctx);
std::unique_ptr<PreTokenizer> MakePreTokenizer(const nlohmann::json& j, const LoadContext& ctx);
std::unique_ptr<Model> MakeModel(const nlohmann::json& j, const LoadContext& ctx);
std::unique_ptr<PostProcessor> MakePostProcessor(const nlohmann::json& j, const LoadContext& ctx);

// Hugging Face's ByteLevel offset trimming (process_offsets) on one encoding.
void TrimByteLevelOffsets(Encoding* encoding, bool add_prefix_space);

// Checks that `j` has only keys from `allowed` (plus "type"); fails naming the first other.
void CheckKeys(const nlohmann::json& j, std::initializer_list<const char*> allowed,
               const std::string& component, const LoadContext& ctx);

}  // namespace djshard::model::tokenizer
