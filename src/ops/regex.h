#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace djshard::ops {

// A compiled regular expression (PCRE2, UTF-8, Unicode \w \s \b and case
// folding, JIT-compiled). Matching is bounded by a match limit, so a
// pathological user pattern turns into an OpError on one record instead of
// hanging a worker. Thread-safe: match data is per call.
class Regex {
 public:
  // Throws Error naming `what` (operator and argument) when the pattern is invalid.
  Regex(const std::string& pattern, bool dotall, const std::string& what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Python's re.sub(pattern, repl, text): every non-overlapping match replaced
  // by `repl`, in which \1..\99, \g<n> and \g<name> name groups and \\, \n, \t
  // are escapes. Returns false (leaving *out untouched) when nothing matched.
  bool Replace(std::string_view text, const std::string& repl, std::string* out) const;
  // Whether the pattern matches anywhere in `text`.
  bool Search(std::string_view text) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
};

// A Python regex written in a recipe as r'...' or r"..." loses that wrapper.
std::string UnquotePattern(const std::string& pattern);

}  // namespace djshard::ops
