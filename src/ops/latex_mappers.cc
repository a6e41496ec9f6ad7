// The LaTeX mappers of Data-Juicer's RedPajama arXiv recipe:
// remove_header_mapper, remove_comments_mapper, remove_bibliography_mapper and
// expand_macro_mapper. Each is Data-Juicer's regular expressions, quirks
// included, so that a recipe's output matches Data-Juicer's.
#include <cctype>
#include <unordered_map>

#include "djshard/ops/text.h"
#include "src/ops/builtin.h"
#include "src/ops/regex.h"

namespace djshard::ops {

namespace {

// Everything before the first sectioning command, and the command itself.
// Data-Juicer's pattern has no '|' between its paragraph and subparagraph
// alternatives, so a lone \paragraph{...} or \subparagraph{...} is no header.
std::string HeaderPattern() {
  auto command = [](const char* name) {
    return std::string(R"(\\\b)") + name + R"(\b\*?(?:\[(.*?)\])?\{(.*?)\})";
  };
  return "^(.*?)(" + command("chapter") + "|" + command("part") + "|" + command("section") + "|" +
         command("subsection") + "|" + command("subsubsection") + "|" + command("paragraph") +
         command("subparagraph") + ")";
}

// Cuts the text before its first header. A text without one stays as it is,
// whatever drop_no_head says: Data-Juicer's drop_no_head never reaches the
// record (its `continue` skips the assignment), and djshard writes what
// Data-Juicer writes.
class RemoveHeaderMapper : public Mapper {
 public:
  RemoveHeaderMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key), regex_(HeaderPattern(), true, spec.name) {
    args().GetBool("drop_no_head", true);  // checked for its type; without effect, as above
  }

  void Map(Sample& sample) const override {
    std::string out;
    if (regex_.Replace(sample.Text(text_key()), "\\2", &out)) {
      sample.SetText(text_key(), std::move(out));
    }
  }

 private:
  Regex regex_;
};

// Inline comments go with the character before their '%' (Data-Juicer's
// pattern needs one that is not a backslash); a line that starts with '%'
// goes whole, its newline included.
class RemoveCommentsMapper : public Mapper {
 public:
  RemoveCommentsMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {
    // Data-Juicer takes doc_type ('tex', or a list) and removes TeX comments whatever it says.
    args().GetStringList("doc_type", {"tex"});
    if (args().GetBool("inline", true)) {
      passes_.push_back({std::make_unique<Regex>(R"((?m)[^\\]%.+$)", false, spec.name), ""});
    }
    if (args().GetBool("multiline", true)) {
      passes_.push_back({std::make_unique<Regex>(R"((?m)^%.*\n?)", false, spec.name), ""});
    }
  }

  void Map(Sample& sample) const override {
    const std::string& current = sample.Text(text_key());
    if (passes_.empty() || current.find('%') == std::string::npos) return;
    std::string text = current;
    if (SubstituteInTurn(passes_, &text)) sample.SetText(text_key(), std::move(text));
  }

 private:
  std::vector<Substitution> passes_;
};

// From the first \appendix, \begin{references}, \begin{REFERENCES},
// \begin{thebibliography} or \bibliography{...} to the end.
class RemoveBibliographyMapper : public Mapper {
 public:
  RemoveBibliographyMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key),
        regex_(R"((\\appendix|\\begin\{references\}|\\begin\{REFERENCES\}|)"
               R"(\\begin\{thebibliography\}|\\bibliography\{.*\}).*$)",
               true, spec.name) {}

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    if (text.find('\\') == std::string::npos) return;
    std::string out;
    if (regex_.Replace(text, "", &out)) sample.SetText(text_key(), std::move(out));
  }

 private:
  Regex regex_;
};

// Expands macros without arguments: \newcommand{\name}{value} and
// \def\name{value}, each ending its line, are collected from the text (the
// last definition of a name wins, in the place of its first); then, macro by
// macro, every "\name" followed by a character that is not an ASCII letter or
// digit becomes the value and that character. Data-Juicer builds those
// patterns from the names and values escaped with "unicode-escape", so both
// stand for themselves; the definitions are expanded too.
class ExpandMacroMapper : public Mapper {
 public:
  ExpandMacroMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key),
        newcommand_(R"((?m)\\\bnewcommand\b\*?\{(\\[a-zA-Z0-9]+?)\}\{(.*?)\}$)", false, spec.name),
        def_(R"((?m)\\def\s*(\\[a-zA-Z0-9]+?)\s*\{(.*?)\}$)", false, spec.name) {}

  void Map(Sample& sample) const override {
    const std::string& current = sample.Text(text_key());
    if (current.find('\\') == std::string::npos) return;
    const std::vector<std::pair<std::string, std::string>> macros = Definitions(current);
    if (macros.empty()) return;
    std::string text = current;
    std::string out;
    bool changed = false;
    for (const auto& [macro, value] : macros) {
      if (!ExpandUses(macro, value, text, &out)) continue;
      text.swap(out);
      changed = true;
    }
    if (changed) sample.SetText(text_key(), std::move(text));
  }

 private:
  std::vector<std::pair<std::string, std::string>> Definitions(const std::string& text) const {
    std::vector<std::pair<std::string, std::string>> macros;
    std::unordered_map<std::string, size_t> at;
    for (const Regex* definition : {&newcommand_, &def_}) {
      definition->ForEachMatch(text, [&](const std::vector<std::string_view>& groups) {
        const std::string macro(groups[1]);
        const auto [it, fresh] = at.emplace(macro, macros.size());
        if (fresh) {
          macros.emplace_back(macro, std::string(groups[2]));
        } else {
          macros[it->second].second = std::string(groups[2]);
        }
      });
    }
    return macros;
  }

  // Data-Juicer's re.sub of `(\\name)([^a-zA-Z0-9])` by the value and the
  // character after the name, without a regex per macro: each use of `macro`
  // (a backslash and ASCII letters and digits) followed by a character that is
  // not an ASCII letter or digit, left to right, the search going on after
  // that character. Writes the result into *out; returns whether any matched.
  static bool ExpandUses(const std::string& macro, const std::string& value,
                         const std::string& text, std::string* out) {
    out->clear();
    size_t copied = 0;
    size_t from = 0;
    bool matched = false;
    for (;;) {
      const size_t at = text.find(macro, from);
      if (at == std::string::npos) break;
      const size_t next = at + macro.size();
      if (next == text.size()) break;
      const unsigned char c = static_cast<unsigned char>(text[next]);
      if (c < 0x80 && std::isalnum(c)) {
        from = at + 1;
        continue;
      }
      const size_t after = next + ops::text::SequenceLength(c);
      out->append(text, copied, at - copied);
      out->append(value);
      out->append(text, next, after - next);
      copied = after;
      from = after;
      matched = true;
    }
    if (matched) out->append(text, copied, std::string::npos);
    return matched;
  }

  Regex newcommand_, def_;
};

}  // namespace

std::unique_ptr<Operator> MakeRemoveHeaderMapper(const recipe::OperatorSpec& spec,
                                                 const std::string& text_key) {
  return std::make_unique<RemoveHeaderMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeRemoveCommentsMapper(const recipe::OperatorSpec& spec,
                                                   const std::string& text_key) {
  return std::make_unique<RemoveCommentsMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeRemoveBibliographyMapper(const recipe::OperatorSpec& spec,
                                                       const std::string& text_key) {
  return std::make_unique<RemoveBibliographyMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeExpandMacroMapper(const recipe::OperatorSpec& spec,
                                                const std::string& text_key) {
  return std::make_unique<ExpandMacroMapper>(spec, text_key);
}

}  // namespace djshard::ops
