// clean_copyright_mapper, remove_long_words_mapper, remove_repeat_sentences_mapper,
// remove_words_with_incorrect_substrings_mapper.
#include <unordered_set>

#include "djshard/ops/text.h"
#include "src/ops/builtin.h"
#include "src/ops/tokenization.h"

namespace djshard::ops {

namespace {

bool ContainsCopyright(std::string_view s) {
  static const char kWord[] = "copyright";
  for (size_t i = 0; i + 9 <= s.size(); ++i) {
    size_t k = 0;
    while (k < 9) {
      char c = s[i + k];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
      if (c != kWord[k]) break;
      ++k;
    }
    if (k == 9) return true;
  }
  return false;
}

class CleanCopyrightMapper : public Mapper {
 public:
  CleanCopyrightMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {}

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    // 1) The first /* ... */ block: cut when it mentions copyright, and stop.
    const size_t start = text.find("/*");
    if (start != std::string::npos) {
      size_t end = text.find("*/", start + 2);
      if (end != std::string::npos) {
        end += 2;
        if (ContainsCopyright(std::string_view(text).substr(start, end - start))) {
          sample.SetText(text_key(), text.substr(0, start) + text.substr(end));
        }
        return;
      }
    }
    // 2) Otherwise drop leading lines (split on '\n') that are empty or start
    //    with "//", "#" or "--".
    size_t pos = 0;
    size_t dropped = 0;
    while (true) {
      const size_t nl = text.find('\n', pos);
      const std::string_view line = std::string_view(text).substr(
          pos, nl == std::string::npos ? std::string::npos : nl - pos);
      const bool comment = line.empty() || line.rfind("//", 0) == 0 || line.rfind("#", 0) == 0 ||
                           line.rfind("--", 0) == 0;
      if (!comment) break;
      ++dropped;
      if (nl == std::string::npos) {
        pos = text.size() + 1;
        break;
      }
      pos = nl + 1;
    }
    if (dropped == 0) return;
    sample.SetText(text_key(), pos > text.size() ? std::string() : text.substr(pos));
  }
};

// Data-Juicer's split_on_newline_tab_whitespace, a filter on the words, then
// merge_on_whitespace_tab_newline: lines on '\n', fields on '\t', words on
// ' '; the kept words joined again, empty fields and lines dropped.
template <typename Keep>
std::string KeepWords(std::string_view text, const Keep& keep) {
  // Written straight into `out`: a separator goes in before a line's or a
  // field's first kept word, and a line or field that keeps none is cut off.
  std::string out;
  out.reserve(text.size());
  bool any_line = false;
  size_t line_start = 0;
  while (line_start <= text.size()) {
    size_t nl = text.find('\n', line_start);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line = text.substr(line_start, nl - line_start);
    const size_t line_mark = out.size();
    if (any_line) out.push_back('\n');
    bool any_field = false;
    size_t f_start = 0;
    while (f_start <= line.size()) {
      size_t tab = line.find('\t', f_start);
      if (tab == std::string_view::npos) tab = line.size();
      const std::string_view field = line.substr(f_start, tab - f_start);
      const size_t field_mark = out.size();
      if (any_field) out.push_back('\t');
      bool any_word = false;
      size_t w_start = 0;
      while (w_start <= field.size()) {
        size_t sp = field.find(' ', w_start);
        if (sp == std::string_view::npos) sp = field.size();
        const std::string_view word = field.substr(w_start, sp - w_start);
        if (!word.empty() && keep(word)) {
          if (any_word) out.push_back(' ');
          out.append(word);
          any_word = true;
        }
        w_start = sp + 1;
      }
      if (any_word) {
        any_field = true;
      } else {
        out.resize(field_mark);
      }
      f_start = tab + 1;
    }
    if (any_field) {
      any_line = true;
    } else {
      out.resize(line_mark);
    }
    line_start = nl + 1;
  }
  return out;
}

// Replaces the text at `key` by KeepWords of it, unless that is the same text
// (then the field stays as it was written).
template <typename Keep>
void SetKeptWords(Sample& sample, const std::string& key, const Keep& keep) {
  const std::string& text = sample.Text(key);
  std::string kept = KeepWords(text, keep);
  if (kept != text) sample.SetText(key, std::move(kept));
}

class RemoveLongWordsMapper : public Mapper {
 public:
  RemoveLongWordsMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {
    lo_ = static_cast<double>(args().GetInt("min_len", 1));
    hi_ = args().Has("max_len") ? static_cast<double>(args().GetInt("max_len", 0)) : kMaxSize;
  }

  void Map(Sample& sample) const override {
    SetKeptWords(sample, text_key(), [this](std::string_view word) { return Keep(word); });
  }

 private:
  bool Keep(std::string_view word) const {
    const double len = static_cast<double>(text::CodePointCount(word));
    if (lo_ <= len && len <= hi_) return true;
    const double stripped = static_cast<double>(text::CodePointCount(text::StripSpecial(word)));
    return lo_ <= stripped && stripped <= hi_;
  }
  double lo_, hi_;
};

// Removes the words that hold one of `substrings` once Data-Juicer's special
// characters are stripped from their ends. Without tokenization, words as
// remove_long_words_mapper splits them; with it, the SentencePiece pieces of
// <lang>.sp.model, '▁' removed, joined without separators when any piece
// went (else the text stays as it is).
class RemoveWordsWithIncorrectSubstringsMapper : public Mapper {
 public:
  RemoveWordsWithIncorrectSubstringsMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {
    substrings_ = args().GetStringList("substrings", {"http", "www", ".com", "href", "//"});
    if (args().GetBool("tokenization", false)) {
      pieces_ = SentencePieceForLang(args(), args().GetString("lang", "en"));
    }
  }

  void Map(Sample& sample) const override {
    auto keep = [this](std::string_view word) { return Keep(word); };
    if (!pieces_) {
      SetKeptWords(sample, text_key(), keep);
      return;
    }
    const std::string& text = sample.Text(text_key());
    const std::vector<std::string> pieces = pieces_->Pieces(text);
    std::string out;
    bool dropped = false;
    for (const std::string& piece : pieces) {
      const std::string word = WithoutWordMarks(piece);
      if (keep(word)) {
        out += word;
      } else {
        dropped = true;
      }
    }
    if (dropped) sample.SetText(text_key(), std::move(out));
  }

 private:
  static std::string WithoutWordMarks(const std::string& piece) {
    static const std::string kMark = "\u2581";
    std::string out;
    for (size_t i = 0; i < piece.size();) {
      if (piece.compare(i, kMark.size(), kMark) == 0) {
        i += kMark.size();
      } else {
        out.push_back(piece[i++]);
      }
    }
    return out;
  }

  bool Keep(std::string_view word) const {
    const std::string_view stripped = text::StripSpecial(word);
    for (const std::string& s : substrings_) {
      if (stripped.find(s) != std::string_view::npos) return false;
    }
    return true;
  }

  std::vector<std::string> substrings_;
  std::shared_ptr<const model::SentencePiece> pieces_;
};

bool IsClosingQuote(uint32_t cp) { return cp == 0x2019 || cp == 0x201D; }

// Sentence splitting of Data-Juicer: regex passes that insert '\n' between a
// match's two groups, without overlapping matches.
std::vector<std::u32string> SplitSentences(const std::u32string& line) {
  // Pass 1: a sentence-final mark followed by a non-quote character. (Pass 2
  // of the reference, six dots then a non-quote, can never match after it.)
  std::u32string p1;
  for (size_t i = 0; i < line.size(); ++i) {
    const char32_t c = line[i];
    const bool mark =
        c == U'.' || c == 0x3002 || c == 0xFF01 || c == U'!' || c == 0xFF1F || c == U'?';
    if (mark && i + 1 < line.size() && !IsClosingQuote(line[i + 1])) {
      p1.push_back(c);
      p1.push_back(U'\n');
      p1.push_back(line[++i]);
    } else {
      p1.push_back(c);
    }
  }
  // Pass 3: two horizontal ellipses followed by a non-quote character.
  std::u32string p3;
  for (size_t i = 0; i < p1.size(); ++i) {
    if (p1[i] == 0x2026 && i + 2 < p1.size() && p1[i + 1] == 0x2026 && !IsClosingQuote(p1[i + 2])) {
      p3.push_back(0x2026);
      p3.push_back(0x2026);
      p3.push_back(U'\n');
      p3.push_back(p1[i + 2]);
      i += 2;
    } else {
      p3.push_back(p1[i]);
    }
  }
  // Pass 4: a mark (the class also holds '{', '6', '}' and '2', as in the
  // reference) and a closing quote, followed by a non-quote character.
  std::u32string p4;
  for (size_t i = 0; i < p3.size(); ++i) {
    const char32_t c = p3[i];
    const bool mark = c == U'.' || c == 0x3002 || c == U'!' || c == 0xFF01 || c == 0xFF1F ||
                      c == U'?' || c == U'{' || c == U'6' || c == U'}' || c == 0x2026 || c == U'2';
    if (mark && i + 2 < p3.size() && IsClosingQuote(p3[i + 1]) && !IsClosingQuote(p3[i + 2])) {
      p4.push_back(c);
      p4.push_back(p3[i + 1]);
      p4.push_back(U'\n');
      p4.push_back(p3[i + 2]);
      i += 2;
    } else {
      p4.push_back(c);
    }
  }
  std::vector<std::u32string> sentences(1);
  for (char32_t c : p4) {
    if (c == U'\n') {
      sentences.emplace_back();
    } else {
      sentences.back().push_back(c);
    }
  }
  return sentences;
}

std::u32string Decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) out.push_back(text::NextCodePoint(s, &i));
  return out;
}

std::string Encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) text::AppendUtf8(&out, c);
  return out;
}

class RemoveRepeatSentencesMapper : public Mapper {
 public:
  RemoveRepeatSentencesMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {
    lowercase_ = args().GetBool("lowercase", false);
    ignore_special_ = args().GetBool("ignore_special_character", true);
    min_len_ = args().GetInt("min_repeat_sentence_length", 2);
  }

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    std::unordered_set<std::string> seen;
    std::string out;
    out.reserve(text.size());
    size_t line_start = 0;
    bool first = true;
    while (line_start <= text.size()) {
      size_t nl = text.find('\n', line_start);
      if (nl == std::string::npos) nl = text.size();
      if (!first) out.push_back('\n');
      first = false;
      const std::string_view line = std::string_view(text).substr(line_start, nl - line_start);
      if (!line.empty()) {
        for (const std::u32string& sentence : SplitSentences(Decode(line))) {
          const std::string encoded = Encode(sentence);
          std::string key(text::Strip(encoded));
          if (lowercase_) key = text::Lower(key);
          if (ignore_special_) key = KeepPlainCharacters(key);
          if (static_cast<int64_t>(text::CodePointCount(key)) < min_len_ ||
              seen.insert(key).second) {
            out.append(encoded);
          }
        }
      }
      line_start = nl + 1;
    }
    sample.SetText(text_key(), std::move(out));
  }

 private:
  // Keeps ASCII letters and digits, U+4E00..U+9FA5, '\n', '\t' and ' '.
  static std::string KeepPlainCharacters(std::string_view s) {
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      const size_t start = i;
      const uint32_t cp = text::NextCodePoint(s, &i);
      const bool keep = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
                        (cp >= '0' && cp <= '9') || (cp >= 0x4E00 && cp <= 0x9FA5) || cp == '\n' ||
                        cp == '\t' || cp == ' ';
      if (keep) out.append(s.substr(start, i - start));
    }
    return out;
  }

  bool lowercase_;
  bool ignore_special_;
  int64_t min_len_;
};

}  // namespace

std::unique_ptr<Operator> MakeCleanCopyrightMapper(const recipe::OperatorSpec& spec,
                                                   const std::string& text_key) {
  return std::make_unique<CleanCopyrightMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeRemoveLongWordsMapper(const recipe::OperatorSpec& spec,
                                                    const std::string& text_key) {
  return std::make_unique<RemoveLongWordsMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeRemoveWordsWithIncorrectSubstringsMapper(
    const recipe::OperatorSpec& spec, const std::string& text_key) {
  return std::make_unique<RemoveWordsWithIncorrectSubstringsMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeRemoveRepeatSentencesMapper(const recipe::OperatorSpec& spec,
                                                          const std::string& text_key) {
  return std::make_unique<RemoveRepeatSentencesMapper>(spec, text_key);
}

}  // namespace djshard::ops
