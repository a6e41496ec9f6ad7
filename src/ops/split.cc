#include "djshard/ops/split.h"

#include <charconv>

#include "djshard/ops/text.h"

namespace djshard::ops {

namespace {

bool IsTerminator(uint32_t cp) {
  switch (cp) {
    case '.':
    case '!':
    case '?':
    case 0x2026:  // …
    case 0x3002:  // 。
    case 0xFF01:  // ！
    case 0xFF1F:  // ？
      return true;
    default:
      return false;
  }
}

// Terminators that end a sentence whatever follows them.
bool IsCjkTerminator(uint32_t cp) { return cp == 0x3002 || cp == 0xFF01 || cp == 0xFF1F; }

bool IsCloser(uint32_t cp) {
  switch (cp) {
    case '"':
    case '\'':
    case 0x201D:  // ”
    case 0x2019:  // ’
    case ')':
    case ']':
    case '}':
    case 0x300D:  // 」
    case 0x300F:  // 』
    case 0xFF09:  // ）
    case 0x300B:  // 》
      return true;
    default:
      return false;
  }
}

// The code point at s[i] without advancing.
uint32_t PeekCodePoint(std::string_view s, size_t i) { return text::NextCodePoint(s, &i); }

// End of the maximal run of Python whitespace starting at `i`.
size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size()) {
    size_t j = i;
    if (!IsPythonSpace(text::NextCodePoint(s, &j))) break;
    i = j;
  }
  return i;
}

// Start of the maximal run of Python whitespace that ends the text.
size_t TrailingSpaceStart(std::string_view s, size_t from) {
  size_t end = s.size();
  size_t last_non_space_end = from;
  for (size_t i = from; i < end;) {
    size_t j = i;
    if (!IsPythonSpace(text::NextCodePoint(s, &j))) last_non_space_end = j;
    i = j;
  }
  return last_non_space_end;
}

// Appends a piece, or marks the split over its limit.
bool AddPiece(TextSplit* out, size_t max_pieces, std::string_view text, std::string_view sep) {
  if (out->pieces.size() > max_pieces) {
    out->over_limit = true;
    return false;
  }
  out->pieces.push_back({text, sep});
  if (out->pieces.size() > max_pieces) {
    out->over_limit = true;
    return false;
  }
  return true;
}

// A paragraph separator \r?\n([ \t\f\v\r]*\r?\n)+ starting at `p`; returns its
// end, or p when none starts there.
size_t ParagraphSeparatorEnd(std::string_view s, size_t p) {
  size_t q = p;
  if (q < s.size() && s[q] == '\r') ++q;
  if (q >= s.size() || s[q] != '\n') return p;
  ++q;
  size_t end = p;
  for (;;) {
    size_t j = q;
    while (j < s.size() &&
           (s[j] == ' ' || s[j] == '\t' || s[j] == '\f' || s[j] == '\v' || s[j] == '\r')) {
      ++j;
    }
    if (j >= s.size() || s[j] != '\n') break;
    q = j + 1;
    end = q;
  }
  return end;
}

void SplitParagraphs(std::string_view s, size_t max_pieces, TextSplit* out) {
  const size_t start = SkipSpace(s, 0);
  out->prefix = s.substr(0, start);
  if (start == s.size()) return;
  const size_t content_end = TrailingSpaceStart(s, start);
  size_t child = start;
  for (size_t p = start; p < content_end; ++p) {
    if (s[p] != '\n' && s[p] != '\r') continue;
    const size_t end = ParagraphSeparatorEnd(s, p);
    if (end == p) continue;
    if (!AddPiece(out, max_pieces, s.substr(child, p - child), s.substr(p, end - p))) return;
    child = end;
    p = end - 1;
  }
  AddPiece(out, max_pieces, s.substr(child, content_end - child), s.substr(content_end));
}

void SplitSentences(std::string_view s, size_t max_pieces, TextSplit* out) {
  const size_t start = SkipSpace(s, 0);
  out->prefix = s.substr(0, start);
  size_t sentence = start;
  size_t i = start;
  while (i < s.size()) {
    size_t j = i;
    const uint32_t cp = text::NextCodePoint(s, &j);
    if (IsPythonSpace(cp)) {
      const size_t run_end = SkipSpace(s, i);
      const bool has_newline = s.substr(i, run_end - i).find('\n') != std::string_view::npos;
      if ((has_newline || run_end == s.size()) && i > sentence) {
        if (!AddPiece(out, max_pieces, s.substr(sentence, i - sentence),
                      s.substr(i, run_end - i))) {
          return;
        }
        sentence = run_end;
      }
      i = run_end;
      continue;
    }
    if (!IsTerminator(cp)) {
      i = j;
      continue;
    }
    // A maximal run of terminators, then any closers.
    bool cjk = false;
    size_t k = i;
    while (k < s.size()) {
      size_t next = k;
      const uint32_t c = text::NextCodePoint(s, &next);
      if (!IsTerminator(c)) break;
      cjk = cjk || IsCjkTerminator(c);
      k = next;
    }
    while (k < s.size()) {
      size_t next = k;
      if (!IsCloser(text::NextCodePoint(s, &next))) break;
      k = next;
    }
    if (cjk || k == s.size() || IsPythonSpace(PeekCodePoint(s, k))) {
      const size_t sep_end = SkipSpace(s, k);
      if (!AddPiece(out, max_pieces, s.substr(sentence, k - sentence), s.substr(k, sep_end - k))) {
        return;
      }
      sentence = sep_end;
      i = sep_end;
      continue;
    }
    i = k;
  }
  if (sentence < s.size()) AddPiece(out, max_pieces, s.substr(sentence), {});
}

void SplitLinesKeepingBreaks(std::string_view s, size_t max_pieces, TextSplit* out) {
  size_t line = 0;
  while (line < s.size()) {
    const size_t nl = s.find('\n', line);
    if (nl == std::string_view::npos) {
      AddPiece(out, max_pieces, s.substr(line), {});
      return;
    }
    const size_t text_end = nl > line && s[nl - 1] == '\r' ? nl - 1 : nl;
    if (!AddPiece(out, max_pieces, s.substr(line, text_end - line),
                  s.substr(text_end, nl + 1 - text_end))) {
      return;
    }
    line = nl + 1;
  }
}

void SplitChars(std::string_view s, size_t n, size_t max_pieces, TextSplit* out) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t begin = i;
    for (size_t c = 0; c < n && i < s.size(); ++c) i += text::SequenceLength(s[i]);
    if (!AddPiece(out, max_pieces, s.substr(begin, i - begin), {})) return;
  }
}

}  // namespace

bool IsPythonSpace(uint32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  if (cp >= 0x1C && cp <= 0x20) return true;
  if (cp < 0x80) return false;
  if (cp == 0x85 || cp == 0xA0 || cp == 0x1680) return true;
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  return cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool ParseSplitBy(std::string_view by, SplitBy* out, std::string* why) {
  if (by == "paragraph") {
    out->mode = SplitMode::kParagraph;
  } else if (by == "sentence") {
    out->mode = SplitMode::kSentence;
  } else if (by == "lines") {
    out->mode = SplitMode::kLines;
  } else if (by.starts_with("chars:")) {
    const std::string_view digits = by.substr(6);
    long long n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
      *why = "chars:N needs a whole number N";
      return false;
    }
    if (n < 1) {
      *why = "chars:N needs N >= 1";
      return false;
    }
    out->mode = SplitMode::kChars;
    out->chars = static_cast<size_t>(n);
  } else if (by.starts_with("field:")) {
    if (by.size() == 6) {
      *why = "field:KEY needs the name of a list field";
      return false;
    }
    out->mode = SplitMode::kField;
    out->field = std::string(by.substr(6));
  } else {
    *why = "known modes: paragraph, sentence, lines, chars:N, field:KEY";
    return false;
  }
  return true;
}

std::string SplitByName(const SplitBy& by) {
  switch (by.mode) {
    case SplitMode::kParagraph:
      return "paragraph";
    case SplitMode::kSentence:
      return "sentence";
    case SplitMode::kLines:
      return "lines";
    case SplitMode::kChars:
      return "chars:" + std::to_string(by.chars);
    case SplitMode::kField:
      return "field:" + by.field;
  }
  return "";
}

void SplitText(std::string_view text, const SplitBy& by, size_t max_pieces, TextSplit* out) {
  out->prefix = {};
  out->pieces.clear();
  out->over_limit = false;
  switch (by.mode) {
    case SplitMode::kParagraph:
      SplitParagraphs(text, max_pieces, out);
      break;
    case SplitMode::kSentence:
      SplitSentences(text, max_pieces, out);
      break;
    case SplitMode::kLines:
      SplitLinesKeepingBreaks(text, max_pieces, out);
      break;
    case SplitMode::kChars:
      SplitChars(text, by.chars, max_pieces, out);
      break;
    case SplitMode::kField:
      break;
  }
}

}  // namespace djshard::ops
