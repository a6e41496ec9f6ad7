// clean_email_mapper, clean_links_mapper and remove_specific_chars_mapper:
// regular-expression substitutions.
#include "src/ops/builtin.h"
#include "src/ops/regex.h"

namespace djshard::ops {

namespace {

// Local part: ASCII letters, digits and . - + _; domain: lower-case letters,
// digits and . - + _; then a dot and a lower-case top-level domain.
constexpr const char* kEmailPattern = R"([A-Za-z0-9.\-+_]+@[a-z0-9.\-+_]+\.[a-z]+)";

// The "liberal URL" pattern, case-insensitive, anchored at a word boundary: a
// scheme ("xx:" then 1-3 slashes or a letter, digit or '%'), or "www" with up
// to 3 digits and a dot, or a domain-looking "a.bc/"; then runs of non-space,
// non-()<> characters or balanced (...) groups nested at most twice; ending on
// a balanced group or a character that is not space or closing punctuation.
std::string LinksPattern() {
  const std::string start =
      R"((?:[a-z][\w-]+:(?:/{1,3}|[a-z0-9%])|www\d{0,3}[.]|[a-z0-9.\-]+[.][a-z]{2,4}/))";
  const std::string paren = R"(\(([^\s()<>]+|(\([^\s()<>]+\)))*\))";
  const std::string body = R"((?:[^\s()<>]+|)" + paren + R"()+)";
  const std::string last =
      R"((?:)" + paren +
      R"(|[^\s`!()\[\]{};:'".,<>?\x{ab}\x{bb}\x{201c}\x{201d}\x{2018}\x{2019}]))";
  return R"((?i)\b()" + start + body + last + ")";
}

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Whether a whitespace-free token can hold a match of a default pattern.
using TokenTrigger = bool (*)(std::string_view token);

bool HasAt(std::string_view token) { return token.find('@') != std::string_view::npos; }

bool MayHoldLink(std::string_view token) {
  if (token.find_first_of(":/") != std::string_view::npos) return true;
  for (size_t i = 0; i + 3 <= token.size(); ++i) {
    if ((token[i] | 0x20) == 'w' && (token[i + 1] | 0x20) == 'w' && (token[i + 2] | 0x20) == 'w') {
      return true;
    }
  }
  return false;
}

class RegexSubMapper : public Mapper {
 public:
  // `default_pattern` applies when the recipe gives no pattern. No match of a
  // default pattern contains whitespace, and `trigger` tells which
  // whitespace-free tokens can hold one, so only those are searched.
  RegexSubMapper(const recipe::OperatorSpec& spec, const std::string& key,
                 const std::string& default_pattern, TokenTrigger trigger,
                 const char* trigger_bytes)
      : Mapper(spec, key) {
    for (const char* b = trigger_bytes; *b != '\0'; ++b) {
      trigger_bytes_[static_cast<unsigned char>(*b)] = true;
    }
    const std::string pattern = args().GetString("pattern", "");
    const bool custom = args().Has("pattern") && !args().Raw("pattern").IsNull();
    regex_ = std::make_unique<Regex>(custom ? UnquotePattern(pattern) : default_pattern, true,
                                     spec.name + ": pattern");
    if (!custom) trigger_ = trigger;
    repl_ = args().GetString("repl", "");
  }

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    std::string out;
    if (trigger_ == nullptr) {
      if (regex_->Replace(text, repl_, &out)) sample.SetText(text_key(), std::move(out));
      return;
    }
    // A match never spans whitespace, so matching token by token is the same
    // as matching the whole text (a token starts after whitespace or at the
    // start, where \b sees a non-word character either way).
    // Only tokens around a byte that every match contains are looked at.
    size_t copied = 0, i = 0;
    bool changed = false;
    std::string replaced;
    while (i < text.size()) {
      while (i < text.size() && !trigger_bytes_[static_cast<unsigned char>(text[i])]) ++i;
      if (i == text.size()) break;
      size_t begin = i;
      while (begin > copied && !IsAsciiSpace(text[begin - 1])) --begin;
      while (i < text.size() && !IsAsciiSpace(text[i])) ++i;
      const std::string_view token(text.data() + begin, i - begin);
      if (!trigger_(token) || !regex_->Replace(token, repl_, &replaced)) continue;
      if (!changed) out.reserve(text.size());
      changed = true;
      out.append(text, copied, begin - copied);
      out.append(replaced);
      copied = i;
    }
    if (!changed) return;
    out.append(text, copied, std::string::npos);
    sample.SetText(text_key(), std::move(out));
  }

 private:
  std::unique_ptr<Regex> regex_;
  std::string repl_;
  TokenTrigger trigger_ = nullptr;
  bool trigger_bytes_[256] = {};  // a token holding a match holds one of these
};

// Data-Juicer joins the characters with '|' inside one character class, so
// with two or more of them '|' is removed too, and class syntax keeps its
// meaning. The same class is built here.
class RemoveSpecificCharsMapper : public Mapper {
 public:
  RemoveSpecificCharsMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {
    const std::string chars = args().GetString(
        "chars_to_remove",
        "\u25c6\u25cf\u25a0\u25ba\u25bc\u25b2\u25b4\u2206\u25bb\u25b7\u2756\u2661\u25a1");
    if (chars.empty()) return;
    std::string cls = "[";
    size_t i = 0;
    bool first = true;
    while (i < chars.size()) {
      const size_t len = (static_cast<unsigned char>(chars[i]) < 0x80)   ? 1
                         : (static_cast<unsigned char>(chars[i]) < 0xE0) ? 2
                         : (static_cast<unsigned char>(chars[i]) < 0xF0) ? 3
                                                                         : 4;
      if (!first) cls.push_back('|');
      first = false;
      cls.append(chars, i, len);
      i += len;
    }
    cls.push_back(']');
    regex_ = std::make_unique<Regex>(cls, true, spec.name + ": chars_to_remove");
  }

  void Map(Sample& sample) const override {
    if (!regex_) return;
    const std::string& text = sample.Text(text_key());
    std::string out;
    if (regex_->Replace(text, "", &out)) sample.SetText(text_key(), std::move(out));
  }

 private:
  std::unique_ptr<Regex> regex_;
};

}  // namespace

std::unique_ptr<Operator> MakeCleanEmailMapper(const recipe::OperatorSpec& spec,
                                               const std::string& text_key) {
  return std::make_unique<RegexSubMapper>(spec, text_key, kEmailPattern, HasAt, "@");
}

std::unique_ptr<Operator> MakeCleanLinksMapper(const recipe::OperatorSpec& spec,
                                               const std::string& text_key) {
  return std::make_unique<RegexSubMapper>(spec, text_key, LinksPattern(), MayHoldLink, ":/wW");
}

std::unique_ptr<Operator> MakeRemoveSpecificCharsMapper(const recipe::OperatorSpec& spec,
                                                        const std::string& text_key) {
  return std::make_unique<RemoveSpecificCharsMapper>(spec, text_key);
}

}  // namespace djshard::ops
