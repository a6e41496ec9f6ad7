// Pre-tokenizers of tokenizer.json: they cut the normalized text into words.
#include <array>

#include "src/model/tokenizer/components.h"

namespace djshard::model::tokenizer {

namespace {

using nlohmann::json;

// Applies `split` to every split without tokens, dropping empty pieces.
template <typename F>
void SplitEach(std::vector<Split>* splits, F split) {
  std::vector<Split> out;
  out.reserve(splits->size() * 2);
  std::vector<NormalizedString> pieces;
  for (auto& s : *splits) {
    if (s.has_tokens) {
      out.push_back(std::move(s));
      continue;
    }
    pieces.clear();
    split(std::move(s.normalized), &pieces);
    for (auto& p : pieces) {
      if (p.empty()) continue;
      Split n;
      n.normalized = std::move(p);
      out.push_back(std::move(n));
    }
  }
  *splits = std::move(out);
}

SplitBehavior ParseBehavior(const json& j, const std::string& component, const LoadContext& ctx) {
  if (!j.contains("behavior") || !j["behavior"].is_string()) {
    ctx.Fail(component, "\"behavior\" is missing");
  }
  const std::string b = j["behavior"].get<std::string>();
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  ctx.Fail(component, "behavior \"" + b + "\" is not implemented");
}

bool GetBool(const json& j, const char* key, bool fallback, const std::string& component,
             const LoadContext& ctx) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) ctx.Fail(component, std::string("\"") + key + "\" is not a boolean");
  return j[key].get<bool>();
}

bool IsBertPunctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
  }
  return IsPunctuation(c);
}

// ---------------------------------------------------------------- ByteLevel

// GPT-2's byte-to-unicode table: printable bytes map to themselves, the
// others to U+0100 upwards; stored as UTF-8.
struct ByteTable {
  std::array<std::array<char, 2>, 256> utf8;  // every such char is 1 or 2 bytes
  std::array<uint8_t, 256> size;
  ByteTable() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      std::string u;
      AppendUtf8(&u, c);
      size[b] = static_cast<uint8_t>(u.size());
      utf8[b] = {u[0], u.size() > 1 ? u[1] : '\0'};
    }
  }
};
const ByteTable& Bytes() {
  static const ByteTable table;
  return table;
}

// GPT-2's pre-tokenization pattern, matched by hand (it needs a look-ahead):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::vector<PatternMatch> Gpt2Matches(std::string_view t) {
  std::vector<PatternMatch> out;
  if (t.empty()) {
    out.push_back({0, 0, false});
    return out;
  }
  enum Kind { kLetter, kNumber, kSpace, kOtherChar };
  auto kind_at = [&](size_t i, size_t* next) -> Kind {
    size_t k = i;
    const char32_t c = DecodeUtf8(t, &k);
    *next = k;
    if (IsLetter(c)) return kLetter;
    if (IsNumber(c)) return kNumber;
    if (IsWhitespace(c)) return kSpace;
    return kOtherChar;
  };
  auto run = [&](size_t i, Kind kind) {
    size_t next;
    while (i < t.size() && kind_at(i, &next) == kind) i = next;
    return i;
  };
  size_t i = 0;
  while (i < t.size()) {
    size_t end = 0;
    const char c = t[i];
    if (c == '\'' && i + 1 < t.size()) {
      const char a = t[i + 1];
      const char b = i + 2 < t.size() ? t[i + 2] : '\0';
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        end = i + 2;
      } else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        end = i + 3;
      }
    }
    if (end == 0) {
      size_t next;
      const Kind k = kind_at(i, &next);
      if (k == kSpace) {
        size_t after;
        const Kind k2 = (c == ' ' && next < t.size()) ? kind_at(next, &after) : kSpace;
        if (c == ' ' && k2 != kSpace) {
          end = run(next, k2);  // " ?\p{L}+", " ?\p{N}+" or " ?[^\s\p{L}\p{N}]+"
        } else {
          const size_t j = run(i, kSpace);
          if (j == t.size()) {
            end = j;
          } else {
            // \s+(?!\S): all but the last space, if that leaves one; else \s+.
            size_t last = j - 1;
            while ((static_cast<unsigned char>(t[last]) & 0xC0) == 0x80) --last;
            end = last > i ? last : j;
          }
        }
      } else {
        end = run(i, k);
      }
    }
    out.push_back({i, end, true});
    i = end;
  }
  return out;
}

// Maps each byte of s's [begin, end) to its GPT-2 char; every char keeps the
// alignment of the char it came from.
void ByteChars(const NormalizedString& s, size_t begin, size_t end, std::string* out,
               std::vector<Alignment>* align) {
  const ByteTable& table = Bytes();
  const std::string& text = s.get();
  out->resize((end - begin) * 2);
  align->resize((end - begin) * 2);
  char* o = out->data();
  Alignment* al = align->data();
  const Alignment* src = s.alignments().data();
  for (size_t i = begin; i < end; ++i) {
    // Every byte of a char has the char's alignment.
    const auto b = static_cast<unsigned char>(text[i]);
    const Alignment a = src[i];
    o[0] = table.utf8[b][0];
    *al++ = a;
    if (table.size[b] == 2) {
      o[1] = table.utf8[b][1];
      *al++ = a;
    }
    o += table.size[b];
  }
  out->resize(static_cast<size_t>(o - out->data()));
  align->resize(static_cast<size_t>(al - align->data()));
}

void ToByteChars(NormalizedString* s) {
  std::string out;
  std::vector<Alignment> align;
  ByteChars(*s, 0, s->get().size(), &out, &align);
  s->Assign(std::move(out), std::move(align));
}

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
  void PreTokenize(std::vector<Split>* splits) const override {
    // Every piece is cut and mapped to byte chars in one step.
    SplitEach(splits, [&](NormalizedString n, std::vector<NormalizedString>* out) {
      if (add_prefix_space_ && (n.get().empty() || n.get()[0] != ' ')) n.Prepend(" ");
      if (!use_regex_) {
        ToByteChars(&n);
        out->push_back(std::move(n));
        return;
      }
      for (const PatternMatch& m : Gpt2Matches(n.get())) {
        if (m.begin == m.end) continue;
        std::string text;
        std::vector<Alignment> align;
        ByteChars(n, m.begin, m.end, &text, &align);
        out->push_back(n.SliceAs(m.begin, m.end, std::move(text), std::move(align)));
      }
    });
  }

 private:
  bool add_prefix_space_, use_regex_;
};

// ---------------------------------------------------------------- others

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::string literal, std::unique_ptr<PatternRegex> regex,
                    SplitBehavior behavior, bool invert)
      : literal_(std::move(literal)),
        regex_(std::move(regex)),
        behavior_(behavior),
        invert_(invert) {}
  void PreTokenize(std::vector<Split>* splits) const override {
    SplitEach(splits, [&](NormalizedString n, std::vector<NormalizedString>* out) {
      auto matches = regex_ ? regex_->FindMatches(n.get()) : FindStringMatches(n.get(), literal_);
      if (invert_) {
        for (auto& m : matches) m.is_match = !m.is_match;
      }
      SplitNormalized(n, std::move(matches), behavior_, out);
    });
  }

 private:
  std::string literal_;
  std::unique_ptr<PatternRegex> regex_;
  SplitBehavior behavior_;
  bool invert_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    AppendUtf8(&replacement_utf8_, replacement);
  }
  void PreTokenize(std::vector<Split>* splits) const override {
    SplitEach(splits, [&](NormalizedString n, std::vector<NormalizedString>* out) {
      if (n.get().find(' ') != std::string::npos) {
        std::vector<std::pair<size_t, size_t>> ranges;
        for (const auto& m : FindStringMatches(n.get(), " ")) {
          if (m.is_match) ranges.emplace_back(m.begin, m.end);
        }
        n.Replace(ranges, replacement_utf8_);
      }
      const bool starts = n.get().compare(0, replacement_utf8_.size(), replacement_utf8_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways ||
                      (scheme_ == PrependScheme::kFirst && n.original_start() == 0))) {
        n.Prepend(replacement_utf8_);
      }
      if (split_) {
        const char32_t r = replacement_;
        SplitNormalized(n, FindCharMatches(n.get(), [r](char32_t c) { return c == r; }),
                        SplitBehavior::kMergedWithNext, out);
      } else {
        out->push_back(std::move(n));
      }
    });
  }

 private:
  char32_t replacement_;
  std::string replacement_utf8_;
  PrependScheme scheme_;
  bool split_;
};

class BertPreTokenizer : public PreTokenizer {
 public:
  void PreTokenize(std::vector<Split>* splits) const override {
    SplitEach(splits, [](NormalizedString n, std::vector<NormalizedString>* out) {
      SplitNormalized(n, FindCharMatches(n.get(), IsWhitespace), SplitBehavior::kRemoved, out);
    });
    SplitEach(splits, [](NormalizedString n, std::vector<NormalizedString>* out) {
      SplitNormalized(n, FindCharMatches(n.get(), IsBertPunctuation), SplitBehavior::kIsolated,
                      out);
    });
  }
};

// Rust regex `\w+|[^\w\s]+`, inverted and removed: words and punctuation runs.
class WhitespacePreTokenizer : public PreTokenizer {
 public:
  void PreTokenize(std::vector<Split>* splits) const override {
    SplitEach(splits, [](NormalizedString n, std::vector<NormalizedString>* out) {
      const std::string& t = n.get();
      std::vector<PatternMatch> m;
      size_t i = 0, prev = 0;
      while (i < t.size()) {
        size_t next = i;
        const char32_t c = DecodeUtf8(t, &next);
        if (IsWhitespace(c)) {
          i = next;
          continue;
        }
        const bool word = IsWordChar(c);
        size_t end = next;
        while (end < t.size()) {
          size_t k = end;
          const char32_t d = DecodeUtf8(t, &k);
          if (IsWhitespace(d) || IsWordChar(d) != word) break;
          end = k;
        }
        if (prev < i) m.push_back({prev, i, true});
        m.push_back({i, end, false});
        prev = i = end;
      }
      if (prev < t.size()) m.push_back({prev, t.size(), true});
      if (m.empty()) m.push_back({0, 0, true});
      SplitNormalized(n, std::move(m), SplitBehavior::kRemoved, out);
    });
  }
};

class CharSplitPreTokenizer : public PreTokenizer {
 public:
  CharSplitPreTokenizer(bool (*pred)(char32_t), SplitBehavior behavior)
      : pred_(pred), behavior_(behavior) {}
  void PreTokenize(std::vector<Split>* splits) const override {
    SplitEach(splits, [&](NormalizedString n, std::vector<NormalizedString>* out) {
      SplitNormalized(n, FindCharMatches(n.get(), pred_), behavior_, out);
    });
  }

 private:
  bool (*pred_)(char32_t);
  SplitBehavior behavior_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void PreTokenize(std::vector<Split>* splits) const override {
    for (const auto& p : parts_) p->PreTokenize(splits);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

std::unique_ptr<PreTokenizer> MakeSplit(const json& j, const std::string& component,
                                        const LoadContext& ctx) {
  CheckKeys(j, {"pattern", "behavior", "invert"}, component, ctx);
  const SplitBehavior behavior = ParseBehavior(j, component, ctx);
  const bool invert = GetBool(j, "invert", false, component, ctx);
  const json& p = j.contains("pattern") ? j["pattern"] : json();
  if (p.is_object() && p.size() == 1 && p.contains("String") && p["String"].is_string()) {
    const std::string literal = p["String"].get<std::string>();
    if (literal.empty()) ctx.Fail(component, "the pattern is an empty string");
    return std::make_unique<SplitPreTokenizer>(literal, nullptr, behavior, invert);
  }
  if (p.is_object() && p.size() == 1 && p.contains("Regex") && p["Regex"].is_string()) {
    auto re = std::make_unique<PatternRegex>(p["Regex"].get<std::string>(),
                                             ctx.source + ": " + component);
    return std::make_unique<SplitPreTokenizer>("", std::move(re), behavior, invert);
  }
  ctx.Fail(component, "\"pattern\" is neither {\"String\": ...} nor {\"Regex\": ...}");
}

// Metaspace's prepend_scheme; without one, add_prefix_space (default true)
// says always or never.
PrependScheme ParsePrependScheme(const json& j, const std::string& component,
                                 const LoadContext& ctx) {
  const PrependScheme fallback = GetBool(j, "add_prefix_space", true, component, ctx)
                                     ? PrependScheme::kAlways
                                     : PrependScheme::kNever;
  if (!j.contains("prepend_scheme") || j["prepend_scheme"].is_null()) return fallback;
  const std::string s =
      j["prepend_scheme"].is_string() ? j["prepend_scheme"].get<std::string>() : std::string("?");
  if (s == "always") return PrependScheme::kAlways;
  if (s == "first") return PrependScheme::kFirst;
  if (s == "never") return PrependScheme::kNever;
  ctx.Fail(component, "prepend_scheme \"" + s + "\" is not implemented");
}

std::unique_ptr<PreTokenizer> MakeMetaspace(const json& j, const std::string& component,
                                            const LoadContext& ctx) {
  CheckKeys(j, {"replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"}, component,
            ctx);
  if (!j.contains("replacement") || !j["replacement"].is_string()) {
    ctx.Fail(component, "\"replacement\" is missing");
  }
  const std::string r = j["replacement"].get<std::string>();
  size_t k = 0;
  if (r.empty() || !IsValidUtf8(r) || (DecodeUtf8(r, &k), k != r.size())) {
    ctx.Fail(component, "\"replacement\" is not one character");
  }
  k = 0;
  const char32_t replacement = DecodeUtf8(r, &k);
  const PrependScheme scheme = ParsePrependScheme(j, component, ctx);
  return std::make_unique<MetaspacePreTokenizer>(replacement, scheme,
                                                 GetBool(j, "split", true, component, ctx));
}

std::unique_ptr<PreTokenizer> MakeSequence(const json& j, const std::string& component,
                                           const LoadContext& ctx) {
  CheckKeys(j, {"pretokenizers"}, component, ctx);
  if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
    ctx.Fail(component, "\"pretokenizers\" is not a list");
  }
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  for (const auto& p : j["pretokenizers"]) parts.push_back(MakePreTokenizer(p, ctx));
  return std::make_unique<SequencePreTokenizer>(std::move(parts));
}

}  // namespace

std::unique_ptr<PreTokenizer> MakePreTokenizer(const json& j, const LoadContext& ctx) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    ctx.Fail("pre_tokenizer", "has no \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  const std::string component = "pre_tokenizer " + type;
  if (type == "ByteLevel") {
    CheckKeys(j, {"add_prefix_space", "trim_offsets", "use_regex"}, component, ctx);
    return std::make_unique<ByteLevelPreTokenizer>(
        GetBool(j, "add_prefix_space", true, component, ctx),
        GetBool(j, "use_regex", true, component, ctx));
  }
  if (type == "Split") return MakeSplit(j, component, ctx);
  if (type == "Metaspace") return MakeMetaspace(j, component, ctx);
  if (type == "BertPreTokenizer") {
    CheckKeys(j, {}, component, ctx);
    return std::make_unique<BertPreTokenizer>();
  }
  if (type == "Whitespace") {
    CheckKeys(j, {}, component, ctx);
    return std::make_unique<WhitespacePreTokenizer>();
  }
  if (type == "WhitespaceSplit") {
    CheckKeys(j, {}, component, ctx);
    return std::make_unique<CharSplitPreTokenizer>(IsWhitespace, SplitBehavior::kRemoved);
  }
  if (type == "Punctuation") {
    CheckKeys(j, {"behavior"}, component, ctx);
    const SplitBehavior b =
        j.contains("behavior") ? ParseBehavior(j, component, ctx) : SplitBehavior::kIsolated;
    return std::make_unique<CharSplitPreTokenizer>(IsBertPunctuation, b);
  }
  if (type == "Digits") {
    CheckKeys(j, {"individual_digits"}, component, ctx);
    return std::make_unique<CharSplitPreTokenizer>(
        IsNumber, GetBool(j, "individual_digits", false, component, ctx)
                      ? SplitBehavior::kIsolated
                      : SplitBehavior::kContiguous);
  }
  if (type == "Sequence") return MakeSequence(j, component, ctx);
  ctx.Fail(component, "is not implemented");
}

}  // namespace djshard::model::tokenizer
