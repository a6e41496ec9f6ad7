#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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
  // by `repl`, a template in Python's syntax (\1..\99, \g<n> and \g<name> name
  // groups; \n, \t, \\, \xhh ... are characters). Throws OpError on a bad
  // escape or a group the pattern lacks (see ReplacementError). Returns false (leaving *out
  // untouched) when nothing matched.
  bool Replace(std::string_view text, const std::string& repl, std::string* out) const;
  // Why Replace with `repl` would fail on every match (a bad escape, a group
  // the pattern lacks), or "" when it would not.
  std::string ReplacementError(const std::string& repl) const;
  // Whether the pattern matches anywhere in `text`.
  bool Search(std::string_view text) const;
  // Python's re.finditer: `f` gets the groups of each non-overlapping match,
  // left to right (group 0 the whole match; an unset group is empty).
  void ForEachMatch(std::string_view text,
                    const std::function<void(const std::vector<std::string_view>&)>& f) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
};

// A regular expression and its replacement.
struct Substitution {
  std::unique_ptr<Regex> regex;
  std::string repl;
};

// Applies each substitution in turn to *text (Python's re.sub, one after
// another). Returns whether any matched.
bool SubstituteInTurn(const std::vector<Substitution>& steps, std::string* text);

// A Python regex written in a recipe as r'...' or r"..." loses that wrapper.
std::string UnquotePattern(const std::string& pattern);

}  // namespace djshard::ops
