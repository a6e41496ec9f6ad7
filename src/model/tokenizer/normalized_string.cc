// NormalizedString (offset tracking through normalization), the patterns that
// split it, and the Unicode properties the tokenizer components use.
#include <utf8proc.h>

#include <algorithm>
#include <cstdio>

#include "src/model/tokenizer/components.h"
#include "src/model/tokenizer/unicode_tables.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "djshard/common/error.h"

namespace djshard::model::tokenizer {

// ------------------------------------------------------------ Unicode

void AppendUtf8(std::string* out, char32_t c) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t c;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                    static_cast<utf8proc_ssize_t>(s.size() - i), &c);
    if (n <= 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

bool IsWhitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {
utf8proc_category_t Category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}
}  // namespace

namespace {
bool InRanges(const CodeRange* ranges, size_t n, char32_t c) {
  const CodeRange* end = ranges + n;
  const CodeRange* it =
      std::upper_bound(ranges, end, static_cast<uint32_t>(c),
                       [](uint32_t v, const CodeRange& r) { return v < r.first; });
  return it != ranges && c < (it - 1)->last;
}
}  // namespace

bool IsLetter(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  const auto k = Category(c);
  if (k == UTF8PROC_CATEGORY_CN) return InRanges(kLettersSince15, kLettersSince15Size, c);
  return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}

bool IsNumber(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto k = Category(c);
  if (k == UTF8PROC_CATEGORY_CN) return InRanges(kNumbersSince15, kNumbersSince15Size, c);
  return k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO;
}

bool IsMark(char32_t c) {
  if (c < 0x300) return false;
  const auto k = Category(c);
  if (k == UTF8PROC_CATEGORY_CN) return InRanges(kMarksSince15, kMarksSince15Size, c);
  return k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME;
}

bool IsDecimal(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto k = Category(c);
  if (k == UTF8PROC_CATEGORY_CN) return InRanges(kDecimalsSince15, kDecimalsSince15Size, c);
  return k == UTF8PROC_CATEGORY_ND;
}

bool IsCombiningMark(char32_t c) {
  return c >= 0x300 && InRanges(kCombiningMark, kCombiningMarkSize, c);
}

char32_t LowercaseSimple(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (Category(c) == UTF8PROC_CATEGORY_CN) {
    const LowerPair* end = kLowercaseSince15 + kLowercaseSince15Size;
    const LowerPair* it =
        std::lower_bound(kLowercaseSince15, end, static_cast<uint32_t>(c),
                         [](const LowerPair& p, uint32_t v) { return p.upper < v; });
    return it != end && it->upper == c ? static_cast<char32_t>(it->lower) : c;
  }
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

bool IsPunctuation(char32_t c) { return InRanges(kPunctuation, kPunctuationSize, c); }

bool IsMarkNonspacing(char32_t c) {
  return c >= 0x300 && InRanges(kMarkNonspacing, kMarkNonspacingSize, c);
}

bool IsOther(char32_t c) { return InRanges(kOther, kOtherSize, c); }

bool InNormalizationUnicode(char32_t c) {
  return c < 0x300 || InRanges(kNormalizationAssigned, kNormalizationAssignedSize, c);
}

bool IsWordChar(char32_t c) {
  if (c < 0x80) return IsLetter(c) || IsNumber(c) || c == '_';
  if (c == 0x200C || c == 0x200D) return true;
  // Other_Alphabetic symbols: circled, parenthesized and squared Latin letters.
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
      (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189)) {
    return true;
  }
  const auto k = Category(c);
  if (k == UTF8PROC_CATEGORY_CN) return IsLetter(c) || IsMark(c) || IsDecimal(c);
  return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ND) || k == UTF8PROC_CATEGORY_NL ||
         k == UTF8PROC_CATEGORY_PC;
}

void AppendLowercase(char32_t c, std::vector<char32_t>* out) {
  if (c < 0x80) {
    out->push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
  } else if (c == 0x130) {
    out->push_back('i');
    out->push_back(0x307);
  } else {
    out->push_back(LowercaseSimple(c));
  }
}

// ---------------------------------------------------- NormalizedString

NormalizedString::NormalizedString(std::string_view original)
    : text_(original), original_start_(0), original_end_(static_cast<uint32_t>(original.size())) {
  align_.resize(original.size());
  size_t i = 0;
  while (i < original.size()) {
    const size_t n = Utf8LeadLength(static_cast<unsigned char>(original[i]));
    const Alignment a{static_cast<uint32_t>(i), static_cast<uint32_t>(i + n)};
    for (size_t k = 0; k < n; ++k) align_[i + k] = a;
    i += n;
  }
}

std::optional<std::pair<uint32_t, uint32_t>> NormalizedString::ToOriginal(size_t begin,
                                                                          size_t end) const {
  // Hugging Face returns an empty target as it is, in normalized units.
  if (begin == end) {
    const auto p = static_cast<uint32_t>(original_start_ + begin);
    return std::make_pair(p, p);
  }
  if (begin > end || end > align_.size()) return std::nullopt;
  return std::make_pair(align_[begin].start, align_[end - 1].end);
}

NormalizedString NormalizedString::Slice(size_t begin, size_t end) const {
  NormalizedString r;
  r.text_.assign(text_, begin, end - begin);
  r.align_.assign(align_.begin() + static_cast<ptrdiff_t>(begin),
                  align_.begin() + static_cast<ptrdiff_t>(end));
  const auto orig = ToOriginal(begin, end);
  r.original_start_ = orig->first;
  r.original_end_ = std::max(orig->first, orig->second);
  return r;
}

NormalizedString NormalizedString::SliceAs(size_t begin, size_t end, std::string text,
                                           std::vector<Alignment> align) const {
  NormalizedString r;
  r.text_ = std::move(text);
  r.align_ = std::move(align);
  const auto orig = ToOriginal(begin, end);
  r.original_start_ = orig->first;
  r.original_end_ = std::max(orig->first, orig->second);
  return r;
}

void NormalizedString::TransformRange(size_t begin, size_t end, const std::vector<CharChange>& dest,
                                      size_t initial_offset) {
  auto next_char = [&](size_t* cursor) {
    if (*cursor < end) *cursor += Utf8LeadLength(static_cast<unsigned char>(text_[*cursor]));
  };
  size_t cursor = begin;
  for (size_t k = 0; k < initial_offset; ++k) next_char(&cursor);
  std::string out(dest.size() * 4, '\0');
  std::vector<Alignment> out_align(dest.size() * 4);
  size_t n = 0;
  for (const CharChange& cc : dest) {
    Alignment a;
    if (cc.change > 0) {
      a = cursor < 1 ? Alignment{original_start_, original_start_} : align_[cursor - 1];
    } else {
      a = align_[cursor];
      next_char(&cursor);
      for (int32_t k = 0; k < -cc.change; ++k) next_char(&cursor);
    }
    const char32_t c = cc.c;
    if (c < 0x80) {
      out[n] = static_cast<char>(c);
      out_align[n++] = a;
      continue;
    }
    const size_t len = Utf8Length(c);
    char buf[4];
    if (len == 2) {
      buf[0] = static_cast<char>(0xC0 | (c >> 6));
      buf[1] = static_cast<char>(0x80 | (c & 0x3F));
    } else if (len == 3) {
      buf[0] = static_cast<char>(0xE0 | (c >> 12));
      buf[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      buf[2] = static_cast<char>(0x80 | (c & 0x3F));
    } else {
      buf[0] = static_cast<char>(0xF0 | (c >> 18));
      buf[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      buf[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      buf[3] = static_cast<char>(0x80 | (c & 0x3F));
    }
    for (size_t k = 0; k < len; ++k) {
      out[n] = buf[k];
      out_align[n++] = a;
    }
  }
  out.resize(n);
  out_align.resize(n);
  text_.replace(begin, end - begin, out);
  align_.erase(align_.begin() + static_cast<ptrdiff_t>(begin),
               align_.begin() + static_cast<ptrdiff_t>(end));
  align_.insert(align_.begin() + static_cast<ptrdiff_t>(begin), out_align.begin(), out_align.end());
}

void NormalizedString::Replace(const std::vector<std::pair<size_t, size_t>>& ranges,
                               std::string_view content) {
  if (ranges.empty()) return;
  std::string out;
  std::vector<Alignment> out_align;
  out.reserve(text_.size() + content.size() * ranges.size());
  out_align.reserve(out.capacity());
  size_t prev = 0;
  for (const auto& [b, e] : ranges) {
    out.append(text_, prev, b - prev);
    out_align.insert(out_align.end(), align_.begin() + static_cast<ptrdiff_t>(prev),
                     align_.begin() + static_cast<ptrdiff_t>(b));
    // Every new char is an insertion aligned with the byte before it: the
    // last byte of the replaced range.
    const Alignment a = e > b               ? align_[e - 1]
                        : out_align.empty() ? Alignment{original_start_, original_start_}
                                            : out_align.back();
    out.append(content);
    out_align.insert(out_align.end(), content.size(), a);
    prev = e;
  }
  out.append(text_, prev, std::string::npos);
  out_align.insert(out_align.end(), align_.begin() + static_cast<ptrdiff_t>(prev), align_.end());
  text_ = std::move(out);
  align_ = std::move(out_align);
}

void NormalizedString::Prepend(std::string_view s) {
  if (text_.empty() || s.empty()) return;
  size_t i = 0;
  const char32_t first = DecodeUtf8(text_, &i);
  std::vector<CharChange> dest;
  size_t k = 0;
  bool head = true;
  while (k < s.size()) {
    dest.push_back({DecodeUtf8(s, &k), head ? 0 : 1});
    head = false;
  }
  dest.push_back({first, 1});
  TransformRange(0, i, dest, 0);
}

// ------------------------------------------------------------ patterns

std::vector<PatternMatch> FindStringMatches(std::string_view text, std::string_view needle) {
  std::vector<PatternMatch> out;
  if (text.empty()) {
    out.push_back({0, 0, false});
    return out;
  }
  size_t prev = 0, pos = 0;
  while (!needle.empty() && (pos = text.find(needle, pos)) != std::string_view::npos) {
    if (prev != pos) out.push_back({prev, pos, false});
    out.push_back({pos, pos + needle.size(), true});
    pos += needle.size();
    prev = pos;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
  return out;
}

void SplitNormalized(const NormalizedString& s, std::vector<PatternMatch> matches,
                     SplitBehavior behavior, std::vector<NormalizedString>* out) {
  // (begin, end, remove)
  std::vector<PatternMatch> pieces;
  pieces.reserve(matches.size());
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (auto& m : matches) pieces.push_back({m.begin, m.end, false});
      break;
    case SplitBehavior::kRemoved:
      pieces = std::move(matches);
      break;
    case SplitBehavior::kContiguous: {
      bool previous = false;
      for (auto& m : matches) {
        if (m.is_match == previous && !pieces.empty()) {
          pieces.back().end = m.end;
        } else {
          pieces.push_back({m.begin, m.end, false});
        }
        previous = m.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous = false;
      for (auto& m : matches) {
        if (m.is_match && !previous && !pieces.empty()) {
          pieces.back().end = m.end;
        } else {
          pieces.push_back({m.begin, m.end, false});
        }
        previous = m.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !previous && !pieces.empty()) {
          pieces.back().begin = it->begin;
        } else {
          pieces.push_back({it->begin, it->end, false});
        }
        previous = it->is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
  }
  for (const auto& p : pieces) {
    if (p.is_match || p.begin == p.end) continue;  // removed, or empty (dropped)
    out->push_back(s.Slice(p.begin, p.end));
  }
}

// ------------------------------------------------------------ regex

namespace {

constexpr uint32_t kMatchLimit = 10'000'000;

pcre2_jit_stack* ThreadJitStack(void*) {
  struct Holder {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    ~Holder() { pcre2_jit_stack_free(stack); }
  };
  thread_local Holder holder;
  return holder.stack;
}

// The members of a class as PCRE2 class text ("\x{41}-\x{5A}...").
template <typename Pred>
std::string ClassRanges(Pred pred) {
  std::string out;
  char buf[40];
  char32_t c = 0;
  while (c < 0x110000) {
    if (!pred(c)) {
      ++c;
      continue;
    }
    const char32_t first = c;
    while (c + 1 < 0x110000 && pred(c + 1)) ++c;
    std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", static_cast<unsigned>(first),
                  static_cast<unsigned>(c));
    out += buf;
    ++c;
  }
  return out;
}

// Oniguruma's \s: the White_Space property (U+0085 included, U+180E not).
constexpr const char* kOnigurumaSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

// Rewrites the classes whose meaning differs between Oniguruma (which Hugging
// Face compiles patterns with) and PCRE2: \s, \w (marks in) and \d, and
// \p{L} and \p{N}, which PCRE2 10.42 knows only as of Unicode 14.0.
std::string OnigurumaClasses(const std::string& pattern, bool* unsupported) {
  static const std::string letters =
      ClassRanges([](char32_t c) { return (c < 0xD800 || c > 0xDFFF) && IsLetter(c); });
  static const std::string numbers =
      ClassRanges([](char32_t c) { return (c < 0xD800 || c > 0xDFFF) && IsNumber(c); });
  // Oniguruma's \w: letters, marks, numbers and connector punctuation; \d: Nd.
  static const std::string word = ClassRanges([](char32_t c) {
    return (c < 0xD800 || c > 0xDFFF) &&
           (IsLetter(c) || IsMark(c) || IsNumber(c) ||
            utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_PC);
  });
  static const std::string decimal =
      ClassRanges([](char32_t c) { return (c < 0xD800 || c > 0xDFFF) && IsDecimal(c); });
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[i + 1];
      const std::string rest = pattern.substr(i, 5);
      if (rest == "\\p{L}" || rest == "\\p{N}" || rest == "\\P{L}" || rest == "\\P{N}") {
        const std::string& members = rest[3] == 'L' ? letters : numbers;
        const bool negated = rest[1] == 'P';
        if (in_class) {
          if (negated) *unsupported = true;
          out += members;
        } else {
          out += negated ? "[^" : "[";
          out += members;
          out += "]";
        }
        i += 4;
        continue;
      }
      if (n == 'w' || n == 'W' || n == 'd' || n == 'D') {
        const std::string& members = (n == 'w' || n == 'W') ? word : decimal;
        const bool negated = n == 'W' || n == 'D';
        if (in_class) {
          if (negated) *unsupported = true;
          out += members;
        } else {
          out += negated ? "[^" : "[";
          out += members;
          out += "]";
        }
        ++i;
        continue;
      }
      if (n == 's') {
        out += in_class ? std::string(kOnigurumaSpace) : "[" + std::string(kOnigurumaSpace) + "]";
      } else if (n == 'S') {
        if (in_class) *unsupported = true;
        out += "[^" + std::string(kOnigurumaSpace) + "]";
      } else if (n == 'p' || n == 'P') {
        *unsupported = true;  // other Unicode properties: versions may differ
        out += c;
        out += n;
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t close = pattern.find(":]", i + 2);
      if (close != std::string::npos) {
        out.append(pattern, i, close + 2 - i);
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == '[') *unsupported = true;  // nested classes (Oniguruma only)
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct PatternRegex::Code {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  ~Code() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

PatternRegex::PatternRegex(const std::string& pattern, const std::string& what)
    : code_(std::make_unique<Code>()) {
  bool unsupported = false;
  const std::string translated = OnigurumaClasses(pattern, &unsupported);
  if (unsupported) {
    throw Error(what + ": the pattern " + nlohmann::json(pattern).dump() +
                    " uses a form (\\S or \\P{..} inside [...], a nested class, or a Unicode "
                    "property other than L and N) that djshard cannot match as Oniguruma does",
                "rewrite the pattern without it");
  }
  int err = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(what + ": the pattern " + nlohmann::json(pattern).dump() +
                    " does not compile: " + reinterpret_cast<const char*>(msg),
                "fix the pattern in the tokenizer file");
  }
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
  code_->context = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(code_->context, kMatchLimit);
  pcre2_jit_stack_assign(code_->context, ThreadJitStack, nullptr);
}

PatternRegex::~PatternRegex() = default;

std::vector<PatternMatch> PatternRegex::FindMatches(std::string_view text) const {
  std::vector<PatternMatch> out;
  if (text.empty()) {
    out.push_back({0, 0, false});
    return out;
  }
  struct MatchData {
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    ~MatchData() { pcre2_match_data_free(md); }
  };
  thread_local MatchData data;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, prev = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, data.md,
                               code_->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(
          std::string("tokenizer regular expression failed: ") + reinterpret_cast<const char*>(msg),
          "the text is too hard for the pattern's match limit");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    const size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_end == e) {
      // Oniguruma's iterator: no empty match right after the previous match.
      if (pos >= text.size()) break;
      pos += Utf8LeadLength(static_cast<unsigned char>(text[pos]));
      continue;
    }
    pos = e;
    have_last = true;
    last_end = e;
    if (prev != s) out.push_back({prev, s, false});
    out.push_back({s, e, true});
    prev = e;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
  return out;
}

// ------------------------------------------------------------ loading

void LoadContext::Fail(const std::string& component, const std::string& what,
                       const std::string& hint) const {
  throw Error(source, 0, component + ": " + what,
              hint.empty() ? "djshard refuses what it cannot reproduce exactly" : hint);
}

void CheckKeys(const nlohmann::json& j, std::initializer_list<const char*> allowed,
               const std::string& component, const LoadContext& ctx) {
  if (!j.is_object()) ctx.Fail(component, "is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "type") continue;
    bool ok = false;
    for (const char* a : allowed) ok = ok || it.key() == a;
    if (!ok) ctx.Fail(component, "option \"" + it.key() + "\" is not implemented");
  }
}

}  // namespace djshard::model::tokenizer
