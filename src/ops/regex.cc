#include "src/ops/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <vector>

#include "djshard/common/error.h"
#include "djshard/ops/sample.h"

namespace djshard::ops {

namespace {
// Enough for any sane pattern on long documents; a catastrophic backtracker
// hits it in milliseconds.
constexpr uint32_t kMatchLimit = 10'000'000;
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
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                              &err, &offset, nullptr);
  if (code_->code == nullptr) {
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

void AppendGroup(std::string* out, std::string_view text, const PCRE2_SIZE* ov, uint32_t n,
                 uint32_t count) {
  if (n > count)
    throw OpError("replacement names group " + std::to_string(n) + " that does not exist");
  if (ov[2 * n] == PCRE2_UNSET) return;
  out->append(text.substr(ov[2 * n], ov[2 * n + 1] - ov[2 * n]));
}

void ExpandReplacement(const pcre2_code* code, const std::string& repl, std::string_view text,
                       const PCRE2_SIZE* ov, uint32_t count, std::string* out) {
  for (size_t i = 0; i < repl.size(); ++i) {
    const char c = repl[i];
    if (c != '\\' || i + 1 == repl.size()) {
      out->push_back(c);
      continue;
    }
    const char e = repl[++i];
    if (e >= '0' && e <= '9') {
      uint32_t n = e - '0';
      if (i + 1 < repl.size() && repl[i + 1] >= '0' && repl[i + 1] <= '9')
        n = n * 10 + (repl[++i] - '0');
      AppendGroup(out, text, ov, n, count);
    } else if (e == 'g' && i + 1 < repl.size() && repl[i + 1] == '<') {
      const size_t close = repl.find('>', i + 2);
      if (close == std::string::npos) throw OpError("unterminated \\g< in replacement");
      const std::string name = repl.substr(i + 2, close - i - 2);
      i = close;
      int n = -1;
      if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) {
        n = std::stoi(name);
      } else {
        n = pcre2_substring_number_from_name(code, reinterpret_cast<PCRE2_SPTR>(name.c_str()));
      }
      if (n < 0) throw OpError("unknown group name '" + name + "' in replacement");
      AppendGroup(out, text, ov, static_cast<uint32_t>(n), count);
    } else if (e == 'n') {
      out->push_back('\n');
    } else if (e == 't') {
      out->push_back('\t');
    } else if (e == 'r') {
      out->push_back('\r');
    } else if (e == '\\') {
      out->push_back('\\');
    } else {
      out->push_back('\\');
      out->push_back(e);
    }
  }
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

std::string UnquotePattern(const std::string& p) {
  if (p.size() > 2 && p[0] == 'r' && (p[1] == '\'' || p[1] == '"') && p.back() == p[1]) {
    return p.substr(2, p.size() - 3);
  }
  return p;
}

}  // namespace djshard::ops
