// Regular-expression substitutions: clean_email_mapper, clean_links_mapper,
// clean_ip_mapper, remove_specific_chars_mapper, replace_content_mapper,
// remove_table_text_mapper and remove_non_chinese_character_mapper.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>

#include "djshard/ops/text.h"
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

// IPv4 (each part 0-255 without leading zeros; the alternatives in
// Data-Juicer's order) or eight groups of IPv6 hex digits.
constexpr const char* kIpPattern =
    R"((?:(?:1[0-9][0-9]\.)|(?:2[0-4][0-9]\.)|(?:25[0-5]\.)|(?:[1-9][0-9]\.)|(?:[0-9]\.)))"
    R"({3}(?:(?:1[0-9][0-9])|(?:2[0-4][0-9])|(?:25[0-5])|(?:[1-9][0-9])|(?:[0-9]))|)"
    R"(([\da-fA-F]{1,4}:){7}[\da-fA-F]{1,4})";

// Refuses at load a replacement that would fail on every match (Data-Juicer
// raises on each record it applies to).
void CheckReplacement(const recipe::OperatorArgs& args, const Regex& regex,
                      const std::string& repl) {
  const std::string error = regex.ReplacementError(repl);
  if (!error.empty()) {
    args.Fail("repl", error,
              "Data-Juicer fails on every record this replacement applies to; write \\\\ for "
              "a backslash");
  }
}

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Whether a whitespace-free token can hold a match of a default pattern.
using TokenTrigger = bool (*)(std::string_view token);

bool HasAt(std::string_view token) { return token.find('@') != std::string_view::npos; }

bool HasDotOrColon(std::string_view token) {
  return token.find_first_of(".:") != std::string_view::npos;
}

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
    CheckReplacement(args(), *regex_, repl_);
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

// Data-Juicer compiles each pattern with DOTALL and substitutes them in
// order; a list of replacements pairs with the patterns by position.
class ReplaceContentMapper : public Mapper {
 public:
  ReplaceContentMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {
    const std::vector<std::string> patterns = args().GetStringList("pattern", {});
    const YAML::Node repl = args().Raw("repl");
    const bool repl_list = repl && repl.IsSequence();
    const std::vector<std::string> repls =
        repl_list ? args().GetStringList("repl", {}) : std::vector<std::string>{};
    if (repl_list && repls.size() < patterns.size()) {
      args().Fail("repl",
                  "has " + std::to_string(repls.size()) + " replacements for " +
                      std::to_string(patterns.size()) + " patterns",
                  "give one replacement per pattern, or one string for all (Data-Juicer fails "
                  "on every record)");
    }
    for (size_t i = 0; i < patterns.size(); ++i) {
      steps_.push_back(
          {std::make_unique<Regex>(UnquotePattern(patterns[i]), true, spec.name + ": pattern"),
           repl_list ? repls[i] : args().GetString("repl", "")});
      CheckReplacement(args(), *steps_.back().regex, steps_.back().repl);
    }
  }

  void Map(Sample& sample) const override {
    if (steps_.empty()) return;
    std::string text = sample.Text(text_key());
    if (SubstituteInTurn(steps_, &text)) sample.SetText(text_key(), std::move(text));
  }

 private:
  std::vector<Substitution> steps_;
};

// Removes runs of two or more lines of min_col..max_col columns (words
// separated by one space, '|' or tab), each pass in Data-Juicer's order: one
// column count at a time, a table's lines preceded by a newline.
class RemoveTableTextMapper : public Mapper {
 public:
  RemoveTableTextMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {
    const int64_t min_col = args().GetInt("min_col", 2), max_col = args().GetInt("max_col", 20);
    for (const auto& [name, value] : {std::pair{"min_col", min_col}, {"max_col", max_col}}) {
      if (value < 2 || value > 20) args().Fail(name, "must be between 2 and 20", "");
    }
    for (int64_t i = min_col - 1; i < max_col; ++i) {
      passes_.push_back({std::make_unique<Regex>(R"((?<=\n)((\S+?)([ |\t](\S+?)){)" +
                                                     std::to_string(i) + R"(}\n+){2,})",
                                                 false, spec.name),
                         ""});
    }
  }

  void Map(Sample& sample) const override {
    const std::string& current = sample.Text(text_key());
    if (current.find('\n') == std::string::npos) return;  // every table follows a newline
    std::string text = current;
    if (SubstituteInTurn(passes_, &text)) sample.SetText(text_key(), std::move(text));
  }

 private:
  std::vector<Substitution> passes_;
};

// Removes every character outside CJK U+4E00-U+9FA5 and, as asked, ASCII
// letters, ASCII digits and Data-Juicer's punctuation list: Data-Juicer's
// re.sub of the complement character class, as one pass over the UTF-8 text.
class RemoveNonChineseCharacterMapper : public Mapper {
 public:
  RemoveNonChineseCharacterMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {
    const bool alphabet = args().GetBool("keep_alphabet", true);
    const bool number = args().GetBool("keep_number", true);
    keep_punc_ = args().GetBool("keep_punc", true);
    for (int c = 0; c < 128; ++c) {
      ascii_kept_[c] = (alphabet && std::isalpha(c)) || (number && std::isdigit(c)) ||
                       (keep_punc_ && c != 0 && std::strchr(". ,-%*/&()+!", c) != nullptr);
    }
  }

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    std::string out;
    bool removed = false;
    size_t kept_from = 0;  // start of the kept run not yet copied
    for (size_t i = 0; i < text.size();) {
      const size_t at = i;
      if (Kept(ops::text::NextCodePoint(text, &i))) continue;
      if (!removed) out.reserve(text.size());
      out.append(text, kept_from, at - kept_from);
      removed = true;
      kept_from = i;
    }
    if (!removed) return;
    out.append(text, kept_from, std::string::npos);
    sample.SetText(text_key(), std::move(out));
  }

 private:
  bool Kept(uint32_t cp) const {
    if (cp < 0x80) return ascii_kept_[cp];
    if (cp >= 0x4E00 && cp <= 0x9FA5) return true;
    return keep_punc_ && std::binary_search(std::begin(kPunctuation), std::end(kPunctuation), cp);
  }

  // Data-Juicer's punctuation outside ASCII, ascending.
  static constexpr uint32_t kPunctuation[] = {0x00B7, 0x2014, 0x201C, 0x201D, 0x2022, 0x3001,
                                              0x3002, 0x300A, 0x300B, 0xFF01, 0xFF06, 0xFF08,
                                              0xFF09, 0xFF0C, 0xFF1A, 0xFF1F};
  bool ascii_kept_[128] = {};
  bool keep_punc_ = true;
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

std::unique_ptr<Operator> MakeCleanIpMapper(const recipe::OperatorSpec& spec,
                                            const std::string& text_key) {
  return std::make_unique<RegexSubMapper>(spec, text_key, kIpPattern, HasDotOrColon, ".:");
}

std::unique_ptr<Operator> MakeReplaceContentMapper(const recipe::OperatorSpec& spec,
                                                   const std::string& text_key) {
  return std::make_unique<ReplaceContentMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeRemoveTableTextMapper(const recipe::OperatorSpec& spec,
                                                    const std::string& text_key) {
  return std::make_unique<RemoveTableTextMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeRemoveNonChineseCharacterMapper(const recipe::OperatorSpec& spec,
                                                              const std::string& text_key) {
  return std::make_unique<RemoveNonChineseCharacterMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeRemoveSpecificCharsMapper(const recipe::OperatorSpec& spec,
                                                        const std::string& text_key) {
  return std::make_unique<RemoveSpecificCharsMapper>(spec, text_key);
}

}  // namespace djshard::ops
