#include "src/ops/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <vector>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/ops/sample.h"

namespace djshard::ops {

namespace {
// Enough for any sane pattern on long documents; a catastrophic backtracker
// hits it in milliseconds.
constexpr uint32_t kMatchLimit = 10'000'000;

// A word character as Python's regex module has it (Unicode's "word"
// property): letters and other alphabetic characters, marks, decimal digits,
// connector punctuation and the joiners. PCRE2's \w is letters, all numbers
// and '_': combining marks are no word characters there, but circled digits are.
constexpr const char* kWordChars = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D})";

// `pattern` with \w, \W, \b and \B written out for kWordChars (inside a
// character class only \w is; \W there keeps PCRE2's meaning).
std::string WithPythonWords(const std::string& pattern) {
  if (pattern.find('\\') == std::string::npos) return pattern;
  const std::string w = std::string("[") + kWordChars + "]";
  const std::string not_w = std::string("[^") + kWordChars + "]";
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 'w') {
        out += in_class ? kWordChars : w;
      } else if (e == 'W' && !in_class) {
        out += not_w;
      } else if (e == 'b' && !in_class) {
        out += "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))";
      } else if (e == 'B' && !in_class) {
        out += "(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))";
      } else {
        out.push_back(c);
        out.push_back(e);
      }
      continue;
    }
    out.push_back(c);
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a member.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out.push_back(pattern[++i]);
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}
}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  uint32_t capture_count = 0;
  ~Code() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

namespace {
// JIT matching needs a stack; each thread gets its own (a shared one would race).
pcre2_jit_stack* ThreadJitStack(void*) {
  struct Holder {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    ~Holder() { pcre2_jit_stack_free(stack); }
  };
  thread_local Holder holder;
  return holder.stack;
}
}  // namespace

Regex::Regex(const std::string& pattern, bool dotall, const std::string& what)
    : code_(std::make_unique<Code>()) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
  if (dotall) options |= PCRE2_DOTALL;
  const std::string translated = WithPythonWords(pattern);
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                              options, &err, &offset, nullptr);
  if (code_->code == nullptr) {
    // Where the error is in the pattern as written.
    pcre2_code* original = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                         pattern.size(), options, &err, &offset, nullptr);
    pcre2_code_free(original);
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(what + ": invalid regular expression at offset " + std::to_string(offset) + ": " +
                    reinterpret_cast<const char*>(msg),
                "fix the pattern");
  }
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
  code_->context = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(code_->context, kMatchLimit);
  pcre2_jit_stack_assign(code_->context, ThreadJitStack, nullptr);
  pcre2_pattern_info(code_->code, PCRE2_INFO_CAPTURECOUNT, &code_->capture_count);
}

Regex::~Regex() = default;

namespace {

// One pcre2_match; returns the rc (>0 match, PCRE2_ERROR_NOMATCH, or error).
int MatchAt(const pcre2_code* code, pcre2_match_context* ctx, std::string_view text, size_t start,
            uint32_t options, pcre2_match_data* md) {
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start,
                             options | PCRE2_NO_UTF_CHECK, md, ctx);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    throw OpError(std::string("regular expression failed: ") + reinterpret_cast<const char*>(msg));
  }
  return rc;
}

// The character of a one-letter escape (\a \b \f \n \r \t \v \\), else 0.
char SimpleEscape(char e) {
  switch (e) {
    case 'a':
      return '\a';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'v':
      return '\v';
    case '\\':
      return '\\';
    default:
      return 0;
  }
}

bool IsOctal(char c) { return c >= '0' && c <= '7'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Python's replacement template, as the regex module reads it: \1-\99 and
// \g<n> or \g<name> name groups; \a \b \f \n \r \t \v \\, \0 and
// three-digit octal, \xhh, \uhhhh and \Uhhhhhhhh are characters; any other
// escaped ASCII letter is an error; other escaped characters stay as written.
// `group(n)` is called for a reference, `out` receives everything else.
template <typename Group>
void ExpandTemplate(const pcre2_code* code, const std::string& repl, uint32_t count,
                    std::string* out, const Group& group) {
  auto check = [&](uint32_t n) {
    if (n > count)
      throw OpError("replacement names group " + std::to_string(n) + " of " +
                    std::to_string(count));
    group(n);
  };
  for (size_t i = 0; i < repl.size(); ++i) {
    if (repl[i] != '\\' || i + 1 == repl.size()) {
      out->push_back(repl[i]);
      continue;
    }
    const char e = repl[++i];
    if (e == '0') {
      uint32_t v = 0;
      for (int k = 0; k < 2 && i + 1 < repl.size() && IsOctal(repl[i + 1]); ++k)
        v = v * 8 + (repl[++i] - '0');
      AppendUtf8(out, v);
    } else if (IsDigit(e)) {
      if (i + 2 < repl.size() && IsOctal(e) && IsOctal(repl[i + 1]) && IsOctal(repl[i + 2])) {
        const uint32_t v = (e - '0') * 64 + (repl[i + 1] - '0') * 8 + (repl[i + 2] - '0');
        if (v > 0377) throw OpError("octal escape in the replacement is above \\377");
        AppendUtf8(out, v);
        i += 2;
        continue;
      }
      uint32_t n = e - '0';
      if (i + 1 < repl.size() && IsDigit(repl[i + 1])) n = n * 10 + (repl[++i] - '0');
      check(n);
    } else if (e == 'g') {
      const size_t close =
          i + 1 < repl.size() && repl[i + 1] == '<' ? repl.find('>', i + 2) : std::string::npos;
      if (close == std::string::npos) throw OpError("bad \\g in the replacement (\\g<name>)");
      const std::string name = repl.substr(i + 2, close - i - 2);
      i = close;
      int n = -1;
      if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) {
        n = name.size() < 6 ? std::stoi(name) : -1;
      } else if (!name.empty()) {
        n = pcre2_substring_number_from_name(code, reinterpret_cast<PCRE2_SPTR>(name.c_str()));
      }
      if (n < 0) throw OpError("unknown group '" + name + "' in the replacement");
      check(static_cast<uint32_t>(n));
    } else if (e == 'x' || e == 'u' || e == 'U') {
      const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      const std::string hex = repl.substr(i + 1, digits);
      if (hex.size() != digits ||
          hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
        throw OpError(std::string("incomplete escape \\") + e + " in the replacement");
      }
      const unsigned long cp = std::stoul(hex, nullptr, 16);
      if (cp > 0x10FFFF) throw OpError("escape above U+10FFFF in the replacement");
      AppendUtf8(out, static_cast<uint32_t>(cp));
      i += digits;
    } else if (const char c = SimpleEscape(e); c != 0) {
      out->push_back(c);
    } else if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
      throw OpError(std::string("bad escape \\") + e + " in the replacement");
    } else {
      out->push_back('\\');
      out->push_back(e);
    }
  }
}

void ExpandReplacement(const pcre2_code* code, const std::string& repl, std::string_view text,
                       const PCRE2_SIZE* ov, uint32_t count, std::string* out) {
  ExpandTemplate(code, repl, count, out, [&](uint32_t n) {
    if (ov[2 * n] != PCRE2_UNSET) out->append(text.substr(ov[2 * n], ov[2 * n + 1] - ov[2 * n]));
  });
}

}  // namespace

bool Regex::Replace(std::string_view text, const std::string& repl, std::string* out) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  std::string result;
  size_t copied = 0, pos = 0;
  bool any = false;
  const bool plain = repl.find('\\') == std::string::npos;
  try {
    while (pos <= text.size()) {
      int rc = MatchAt(code_->code, code_->context, text, pos, 0, md);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t begin = ov[0], end = ov[1];
      if (!any) result.reserve(text.size());
      any = true;
      result.append(text.substr(copied, begin - copied));
      if (plain) {
        result.append(repl);
      } else {
        ExpandReplacement(code_->code, repl, text, ov, code_->capture_count, &result);
      }
      copied = end;
      if (end > begin) {
        pos = end;
        continue;
      }
      // An empty match: Python moves on one character and may then match at
      // the next position, including a non-empty match starting right here.
      rc = MatchAt(code_->code, code_->context, text, pos, PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED,
                   md);
      if (rc > 0) {
        const PCRE2_SIZE* ov2 = pcre2_get_ovector_pointer(md);
        if (plain) {
          result.append(repl);
        } else {
          ExpandReplacement(code_->code, repl, text, ov2, code_->capture_count, &result);
        }
        copied = ov2[1];
        pos = ov2[1];
        continue;
      }
      if (pos >= text.size()) break;
      size_t step = 1;
      while (pos + step < text.size() &&
             (static_cast<unsigned char>(text[pos + step]) & 0xC0) == 0x80)
        ++step;
      result.append(text.substr(copied, pos + step - copied));
      copied = pos + step;
      pos += step;
    }
  } catch (...) {
    pcre2_match_data_free(md);
    throw;
  }
  pcre2_match_data_free(md);
  if (!any) return false;
  result.append(text.substr(copied));
  *out = std::move(result);
  return true;
}

bool Regex::Search(std::string_view text) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  int rc = 0;
  try {
    rc = MatchAt(code_->code, code_->context, text, 0, 0, md);
  } catch (...) {
    pcre2_match_data_free(md);
    throw;
  }
  pcre2_match_data_free(md);
  return rc > 0;
}

void Regex::ForEachMatch(std::string_view text,
                         const std::function<void(const std::vector<std::string_view>&)>& f) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  std::vector<std::string_view> groups(code_->capture_count + 1);
  try {
    size_t pos = 0;
    while (pos <= text.size() &&
           MatchAt(code_->code, code_->context, text, pos, 0, md) != PCRE2_ERROR_NOMATCH) {
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      for (size_t g = 0; g < groups.size(); ++g) {
        groups[g] = ov[2 * g] == PCRE2_UNSET ? std::string_view()
                                             : text.substr(ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
      }
      f(groups);
      pos = ov[1];
      if (ov[1] == ov[0]) {  // an empty match: on to the next character
        if (pos == text.size()) break;
        ++pos;
        while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      }
    }
  } catch (...) {
    pcre2_match_data_free(md);
    throw;
  }
  pcre2_match_data_free(md);
}

std::string Regex::ReplacementError(const std::string& repl) const {
  std::string ignored;
  try {
    ExpandTemplate(code_->code, repl, code_->capture_count, &ignored, [](uint32_t) {});
  } catch (const OpError& e) {
    return e.what();
  }
  return "";
}

bool SubstituteInTurn(const std::vector<Substitution>& steps, std::string* text) {
  std::string out;
  bool changed = false;
  for (const Substitution& step : steps) {
    if (!step.regex->Replace(*text, step.repl, &out)) continue;
    text->swap(out);
    changed = true;
  }
  return changed;
}

std::string UnquotePattern(const std::string& p) {
  if (p.size() > 2 && p[0] == 'r' && (p[1] == '\'' || p[1] == '"') && p.back() == p[1]) {
    return p.substr(2, p.size() - 3);
  }
  return p;
}

}  // namespace djshard::ops
