// Normalizers of tokenizer.json, each moving offsets as Hugging Face's do.
#include <utf8proc.h>

#include <algorithm>

#include "src/model/tokenizer/components.h"

namespace djshard::model::tokenizer {

namespace {

using nlohmann::json;

bool IsAscii(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// Maps every char to exactly one char (Hugging Face's `map`): alignments stay.
template <typename F>
void MapChars(NormalizedString* s, F f) {
  const std::string& text = s->get();
  std::string out;
  out.reserve(text.size());
  std::vector<Alignment> align;
  align.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t b = i;
    const char32_t c = f(DecodeUtf8(text, &i));
    const size_t before = out.size();
    AppendUtf8(&out, c);
    align.insert(align.end(), out.size() - before, s->alignments()[b]);
  }
  s->Assign(std::move(out), std::move(align));
}

// Keeps the chars for which keep() holds (Hugging Face's `filter`).
template <typename F>
void FilterChars(NormalizedString* s, F keep) {
  const std::string& text = s->get();
  std::vector<char32_t> chars;
  chars.reserve(text.size());
  size_t i = 0;
  bool any_removed = false;
  while (i < text.size()) {
    chars.push_back(DecodeUtf8(text, &i));
    any_removed = any_removed || !keep(chars.back());
  }
  if (!any_removed) return;
  std::vector<CharChange> dest;
  dest.reserve(chars.size());
  int32_t removed = 0;
  for (size_t k = chars.size(); k-- > 0;) {
    if (keep(chars[k])) {
      dest.push_back({chars[k], -removed});
      removed = 0;
    } else {
      ++removed;
    }
  }
  std::reverse(dest.begin(), dest.end());
  s->Transform(dest, static_cast<size_t>(removed));
}

uint8_t CombiningClass(char32_t c) {
  if (c < 0x300 || !InNormalizationUnicode(c)) return 0;
  return static_cast<uint8_t>(
      utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class);
}

// Canonical (or compatibility) decomposition with Hugging Face's changes:
// the first char of each decomposition replaces it, the others are inserted;
// marks are put in canonical order carrying their changes.
void Decompose(std::string_view text, bool compat, std::vector<CharChange>* out,
               std::vector<uint8_t>* classes) {
  const auto options =
      static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0));
  size_t run_start = 0;  // first char of the pending run of non-starters
  auto sort_run = [&] {
    if (out->size() - run_start < 2) return;
    std::vector<size_t> idx(out->size() - run_start);
    for (size_t k = 0; k < idx.size(); ++k) idx[k] = run_start + k;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](size_t a, size_t b) { return (*classes)[a] < (*classes)[b]; });
    std::vector<CharChange> c2;
    std::vector<uint8_t> k2;
    for (size_t k : idx) {
      c2.push_back((*out)[k]);
      k2.push_back((*classes)[k]);
    }
    std::copy(c2.begin(), c2.end(), out->begin() + static_cast<ptrdiff_t>(run_start));
    std::copy(k2.begin(), k2.end(), classes->begin() + static_cast<ptrdiff_t>(run_start));
  };
  size_t i = 0;
  utf8proc_int32_t buf[32];
  while (i < text.size()) {
    const char32_t c = DecodeUtf8(text, &i);
    utf8proc_ssize_t n = 1;
    buf[0] = static_cast<utf8proc_int32_t>(c);
    if (c >= 0xA0 && InNormalizationUnicode(c)) {
      int last_boundclass = 0;
      n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 32, options,
                                  &last_boundclass);
      if (n <= 0 || n > 32) {
        n = 1;
        buf[0] = static_cast<utf8proc_int32_t>(c);
      }
    }
    for (utf8proc_ssize_t k = 0; k < n; ++k) {
      const auto d = static_cast<char32_t>(buf[k]);
      const uint8_t cls = CombiningClass(d);
      if (cls == 0) {
        sort_run();
        out->push_back({d, k == 0 ? 0 : 1});
        classes->push_back(0);
        run_start = out->size();
      } else {
        out->push_back({d, k == 0 ? 0 : 1});
        classes->push_back(cls);
      }
    }
  }
  sort_run();
}

// The primary composite of a and b (composition exclusions respected), when
// all three are known to Hugging Face's normalizer.
std::optional<char32_t> ComposePair(char32_t a, char32_t b) {
  if (b < 0x300 || !InNormalizationUnicode(a) || !InNormalizationUnicode(b)) return std::nullopt;
  utf8proc_int32_t buf[2] = {static_cast<utf8proc_int32_t>(a), static_cast<utf8proc_int32_t>(b)};
  const auto n = utf8proc_normalize_utf32(
      buf, 2, static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_STABLE));
  if (n == 1 && InNormalizationUnicode(static_cast<char32_t>(buf[0]))) {
    return static_cast<char32_t>(buf[0]);
  }
  return std::nullopt;
}

// Canonical composition; a composed char's change is the sum of its parts'
// changes minus one (it replaces one char more).
std::vector<CharChange> Compose(const std::vector<CharChange>& d,
                                const std::vector<uint8_t>& classes) {
  std::vector<CharChange> out;
  out.reserve(d.size());
  std::optional<CharChange> composee;
  std::vector<CharChange> buffer;
  std::optional<uint8_t> last_class;
  for (size_t k = 0; k < d.size(); ++k) {
    const CharChange ch = d[k];
    const uint8_t cls = classes[k];
    if (!composee) {
      if (cls != 0) {
        out.push_back(ch);
        continue;
      }
      composee = ch;
      continue;
    }
    if (!last_class) {
      if (auto r = ComposePair(composee->c, ch.c)) {
        composee = CharChange{*r, composee->change + ch.change - 1};
        continue;
      }
      if (cls == 0) {
        out.push_back(*composee);
        composee = ch;
        continue;
      }
      buffer.push_back(ch);
      last_class = cls;
      continue;
    }
    if (*last_class >= cls) {
      if (cls == 0) {
        out.push_back(*composee);
        out.insert(out.end(), buffer.begin(), buffer.end());
        buffer.clear();
        composee = ch;
        last_class.reset();
        continue;
      }
      buffer.push_back(ch);
      last_class = cls;
      continue;
    }
    if (auto r = ComposePair(composee->c, ch.c)) {
      composee = CharChange{*r, composee->change + ch.change - 1};
      continue;
    }
    buffer.push_back(ch);
    last_class = cls;
  }
  if (composee) out.push_back(*composee);
  out.insert(out.end(), buffer.begin(), buffer.end());
  return out;
}

enum class Form { kNfc, kNfd, kNfkc, kNfkd };

void UnicodeNormalize(NormalizedString* s, Form form) {
  const std::string& text = s->get();
  if (IsAscii(text)) return;
  const bool compose = form == Form::kNfc || form == Form::kNfkc;
  if (form == Form::kNfc) {
    bool stable = true;
    size_t i = 0;
    while (i < text.size() && stable) stable = DecodeUtf8(text, &i) < 0x300;
    if (stable) return;
  }
  std::vector<CharChange> d;
  std::vector<uint8_t> classes;
  d.reserve(text.size());
  classes.reserve(text.size());
  Decompose(text, form == Form::kNfkc || form == Form::kNfkd, &d, &classes);
  if (compose) {
    s->Transform(Compose(d, classes), 0);
  } else {
    s->Transform(d, 0);
  }
}

void Lowercase(NormalizedString* s) {
  const std::string& text = s->get();
  if (text.find("\xC4\xB0") == std::string::npos) {  // no U+0130: one char per char
    MapChars(s, LowercaseSimple);
    return;
  }
  std::vector<CharChange> dest;
  std::vector<char32_t> l;
  size_t i = 0;
  while (i < text.size()) {
    l.clear();
    AppendLowercase(DecodeUtf8(text, &i), &l);
    for (size_t k = 0; k < l.size(); ++k) dest.push_back({l[k], k > 0 ? 1 : 0});
  }
  s->Transform(dest, 0);
}

void StripWhitespace(NormalizedString* s, bool left, bool right) {
  const std::string& text = s->get();
  std::vector<char32_t> chars;
  size_t i = 0;
  while (i < text.size()) chars.push_back(DecodeUtf8(text, &i));
  size_t leading = 0, trailing = 0;
  if (left) {
    while (leading < chars.size() && IsWhitespace(chars[leading])) ++leading;
  }
  if (right) {
    while (trailing < chars.size() - leading && IsWhitespace(chars[chars.size() - 1 - trailing])) {
      ++trailing;
    }
  }
  if (leading == 0 && trailing == 0) return;
  std::vector<CharChange> dest;
  for (size_t k = leading; k + trailing < chars.size(); ++k) {
    const bool last = k + trailing + 1 == chars.size();
    dest.push_back({chars[k], last ? -static_cast<int32_t>(trailing) : 0});
  }
  s->Transform(dest, leading);
}

bool IsChineseChar(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool BertIsControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return IsOther(c);
}

bool BertIsWhitespace(char32_t c) { return c == '\t' || c == '\n' || c == '\r' || IsWhitespace(c); }

class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese, bool strip_accents, bool lowercase)
      : clean_text_(clean_text),
        chinese_(chinese),
        strip_accents_(strip_accents),
        lowercase_(lowercase) {}
  void Normalize(NormalizedString* s) const override {
    if (clean_text_) {
      FilterChars(s, [](char32_t c) { return !(c == 0 || c == 0xFFFD || BertIsControl(c)); });
      MapChars(s, [](char32_t c) { return BertIsWhitespace(c) ? U' ' : c; });
    }
    if (chinese_) {
      const std::string& text = s->get();
      bool any = false;
      size_t i = 0;
      while (i < text.size() && !any) any = IsChineseChar(DecodeUtf8(text, &i));
      if (any) {
        std::vector<CharChange> dest;
        dest.reserve(text.size() + 16);
        i = 0;
        while (i < text.size()) {
          const char32_t c = DecodeUtf8(text, &i);
          if (IsChineseChar(c)) {
            dest.push_back({U' ', 0});
            dest.push_back({c, 1});
            dest.push_back({U' ', 1});
          } else {
            dest.push_back({c, 0});
          }
        }
        s->Transform(dest, 0);
      }
    }
    if (strip_accents_) {
      UnicodeNormalize(s, Form::kNfd);
      FilterChars(s, [](char32_t c) { return !IsMarkNonspacing(c); });
    }
    if (lowercase_) Lowercase(s);
  }

 private:
  bool clean_text_, chinese_, strip_accents_, lowercase_;
};

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(Form form) : form_(form) {}
  void Normalize(NormalizedString* s) const override { UnicodeNormalize(s, form_); }

 private:
  Form form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  void Normalize(NormalizedString* s) const override { Lowercase(s); }
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(NormalizedString* s) const override { StripWhitespace(s, left_, right_); }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer : public Normalizer {
 public:
  void Normalize(NormalizedString* s) const override {
    FilterChars(s, [](char32_t c) { return !IsCombiningMark(c); });
  }
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::unique_ptr<PatternRegex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  void Normalize(NormalizedString* s) const override {
    if (regex_ == nullptr && s->get().find(literal_) == std::string::npos) return;
    const auto matches =
        regex_ ? regex_->FindMatches(s->get()) : FindStringMatches(s->get(), literal_);
    std::vector<std::pair<size_t, size_t>> ranges;
    for (const auto& m : matches) {
      if (m.is_match) ranges.emplace_back(m.begin, m.end);
    }
    s->Replace(ranges, content_);
  }

 private:
  std::string literal_;
  std::unique_ptr<PatternRegex> regex_;
  std::string content_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}
  void Normalize(NormalizedString* s) const override { s->Prepend(prepend_); }

 private:
  std::string prepend_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void Normalize(NormalizedString* s) const override {
    for (const auto& p : parts_) p->Normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

bool GetBool(const json& j, const char* key, bool fallback, const std::string& component,
             const LoadContext& ctx) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) ctx.Fail(component, std::string("\"") + key + "\" is not a boolean");
  return j[key].get<bool>();
}

std::string GetString(const json& j, const char* key, const std::string& component,
                      const LoadContext& ctx) {
  if (!j.contains(key) || !j[key].is_string()) {
    ctx.Fail(component, std::string("\"") + key + "\" is missing or not a string");
  }
  return j[key].get<std::string>();
}

}  // namespace

std::unique_ptr<Normalizer> MakeNormalizer(const json& j, const LoadContext& ctx) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    ctx.Fail("normalizer", "has no \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  const std::string component = "normalizer " + type;
  if (type == "BertNormalizer") {
    CheckKeys(j, {"clean_text", "handle_chinese_chars", "strip_accents", "lowercase"}, component,
              ctx);
    const bool lowercase = GetBool(j, "lowercase", true, component, ctx);
    return std::make_unique<BertNormalizer>(
        GetBool(j, "clean_text", true, component, ctx),
        GetBool(j, "handle_chinese_chars", true, component, ctx),
        GetBool(j, "strip_accents", lowercase, component, ctx), lowercase);
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    CheckKeys(j, {}, component, ctx);
    const Form f = type == "NFC"    ? Form::kNfc
                   : type == "NFD"  ? Form::kNfd
                   : type == "NFKC" ? Form::kNfkc
                                    : Form::kNfkd;
    return std::make_unique<UnicodeNormalizer>(f);
  }
  if (type == "Lowercase") {
    CheckKeys(j, {}, component, ctx);
    return std::make_unique<LowercaseNormalizer>();
  }
  if (type == "Strip") {
    CheckKeys(j, {"strip_left", "strip_right"}, component, ctx);
    return std::make_unique<StripNormalizer>(GetBool(j, "strip_left", true, component, ctx),
                                             GetBool(j, "strip_right", true, component, ctx));
  }
  if (type == "StripAccents") {
    CheckKeys(j, {}, component, ctx);
    return std::make_unique<StripAccentsNormalizer>();
  }
  if (type == "Replace") {
    CheckKeys(j, {"pattern", "content"}, component, ctx);
    const std::string content = GetString(j, "content", component, ctx);
    const json& p = j.contains("pattern") ? j["pattern"] : json();
    if (p.is_object() && p.size() == 1 && p.contains("String") && p["String"].is_string()) {
      const std::string literal = p["String"].get<std::string>();
      if (literal.empty()) ctx.Fail(component, "the pattern is an empty string");
      return std::make_unique<ReplaceNormalizer>(literal, nullptr, content);
    }
    if (p.is_object() && p.size() == 1 && p.contains("Regex") && p["Regex"].is_string()) {
      auto re = std::make_unique<PatternRegex>(p["Regex"].get<std::string>(),
                                               ctx.source + ": " + component);
      return std::make_unique<ReplaceNormalizer>("", std::move(re), content);
    }
    ctx.Fail(component, "\"pattern\" is neither {\"String\": ...} nor {\"Regex\": ...}");
  }
  if (type == "Prepend") {
    CheckKeys(j, {"prepend"}, component, ctx);
    return std::make_unique<PrependNormalizer>(GetString(j, "prepend", component, ctx));
  }
  if (type == "Sequence") {
    CheckKeys(j, {"normalizers"}, component, ctx);
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      ctx.Fail(component, "\"normalizers\" is not a list");
    }
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const auto& n : j["normalizers"]) parts.push_back(MakeNormalizer(n, ctx));
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (type == "Precompiled") {
    ctx.Fail(component, "is not implemented",
             "SentencePiece models with a Precompiled normalizer are read from their .model file");
  }
  ctx.Fail(component, "is not implemented");
}

}  // namespace djshard::model::tokenizer
