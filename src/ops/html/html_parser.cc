// Python 3.11's html/parser.py and _markupbase.py (the parts HTMLParser
// reaches), its regular expressions written out as scans. Where a pattern
// can backtrack (attribute values), the scan takes the branch Python's
// re engine finds first.
#include "src/ops/html/html_parser.h"

#include <cstring>

#include "djshard/ops/text.h"
#include "src/ops/html/entities.h"

namespace djshard::ops::html {

namespace {

constexpr size_t kNone = std::string_view::npos;

bool IsAsciiAlpha(char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }
bool IsAsciiAlnum(char c) { return IsAsciiAlpha(c) || IsDigit(c); }
// Whether `c` is one of the characters of `set` (never '\0').
bool InSet(const char* set, char c) { return c != '\0' && std::strchr(set, c) != nullptr; }
// Whether `s` is `lower` (ASCII lower case) in any ASCII case.
bool EqualsIgnoringAsciiCase(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i] >= 'A' && s[i] <= 'Z' ? static_cast<char>(s[i] + 32) : s[i];
    if (c != lower[i]) return false;
  }
  return true;
}

// Lower-cases a tag or attribute name (str.lower()).
std::string LowerName(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return text::Lower(s);
  }
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return out;
}

// Where a forward search is known to fail: a search that finds nothing from
// `from` finds nothing from any later position either. Keeps html.parser's
// rescans of the rest of the text (each '<' of "<a<a<a...", each quote that
// never closes) from making a malformed text quadratic.
class FailedSearch {
 public:
  bool Known(size_t at) const { return at >= from_; }
  void Record(size_t at) { from_ = std::min(from_, at); }

 private:
  size_t from_ = std::string_view::npos;
};

class Parser {
 public:
  Parser(std::string_view s, HtmlEvents* events) : s_(s), n_(s.size()), events_(events) {}

  void Run() {
    GoAhead(false);  // feed()
    GoAhead(true);   // close()
  }

 private:
  // ---------------------------------------------------------- characters

  // Bytes of the Python whitespace code point at `i` (\s, str.isspace), 0
  // when there is none.
  size_t SpaceAt(size_t i) const {
    if (i >= n_) return 0;
    const unsigned char c = static_cast<unsigned char>(s_[i]);
    if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) ? 1 : 0;
    if (c != 0xC2 && c != 0xE1 && c != 0xE2 && c != 0xE3) return 0;
    size_t next = i;
    return text::IsSpace(text::NextCodePoint(s_, &next)) ? next - i : 0;
  }
  size_t SkipSpaces(size_t i) const {
    for (size_t len; (len = SpaceAt(i)) != 0;) i += len;
    return i;
  }
  // Whether the code point before `i` is a quote, '/' or whitespace: the
  // lookbehind (?<=['"\s/]) of an attribute name.
  bool AttributeMayStartAfter(size_t i) const {
    if (i == 0) return false;
    size_t start = i - 1;
    while (start > 0 && (static_cast<unsigned char>(s_[start]) & 0xC0) == 0x80) --start;
    const char c = s_[start];
    return c == '\'' || c == '"' || c == '/' || SpaceAt(start) != 0;
  }
  // (?:\s|/(?!>))*
  size_t SkipTagFiller(size_t i) const {
    while (i < n_) {
      if (const size_t len = SpaceAt(i)) {
        i += len;
      } else if (s_[i] == '/' && !(i + 1 < n_ && s_[i + 1] == '>')) {
        ++i;
      } else {
        break;
      }
    }
    return i;
  }
  // [a-zA-Z] followed by [^\t\n\r\f />\x00]*: the end of a tag name at `i`.
  size_t TagNameEnd(size_t i) {
    if (i + 1 >= name_run_.first && i + 1 <= name_run_.second) return name_run_.second;
    const size_t begin = i + 1;
    for (++i; i < n_; ++i) {
      const char c = s_[i];
      if (c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == ' ' || c == '/' || c == '>' ||
          c == '\0') {
        break;
      }
    }
    name_run_ = {begin, i};
    return i;
  }
  // The first '<' or '&' at or after `i`, or n_.
  // (The next '&' is remembered: text without one is searched once.)
  size_t FindMarkupOrReference(size_t i) {
    if (next_ampersand_ == kNone || next_ampersand_ < i) {
      const void* amp = std::memchr(s_.data() + i, '&', n_ - i);
      next_ampersand_ = amp ? static_cast<const char*>(amp) - s_.data() : n_;
    }
    const void* lt = std::memchr(s_.data() + i, '<', next_ampersand_ - i);
    return lt ? static_cast<const char*>(lt) - s_.data() : next_ampersand_;
  }
  // s_.find(c, i) for '>', '\'' and '"', remembering failures.
  size_t Find(char c, size_t i) {
    FailedSearch& failed = c == '>' ? no_gt_ : c == '\'' ? no_apostrophe_ : no_quote_;
    if (failed.Known(i)) return kNone;
    const size_t at = s_.find(c, i);
    if (at == kNone) failed.Record(i);
    return at;
  }
  bool StartsWith(size_t i, std::string_view prefix) const {
    return s_.substr(i, prefix.size()) == prefix;
  }

  // ---------------------------------------------------------- attributes

  // One match of attrfind_tolerant at `i`:
  //   ((?<=['"\s/])[^\s/>][^\s/=>]*)(\s*=+\s*('[^']*'|"[^"]*"|(?!['"])[^>\s]*))?(?:\s|/(?!>))*
  struct AttributeMatch {
    size_t name_begin, name_end;
    bool has_value;
    size_t value_begin, value_end;  // group 3, quotes included
    size_t end;
  };
  bool MatchAttribute(size_t i, AttributeMatch* m) {
    if (i >= n_ || !AttributeMayStartAfter(i)) return false;
    if (SpaceAt(i) != 0 || s_[i] == '/' || s_[i] == '>') return false;
    m->name_begin = i;
    i += text::SequenceLength(static_cast<unsigned char>(s_[i]));
    while (i < n_ && SpaceAt(i) == 0 && s_[i] != '/' && s_[i] != '=' && s_[i] != '>') {
      i += text::SequenceLength(static_cast<unsigned char>(s_[i]));
    }
    m->name_end = i;
    m->has_value = MatchValue(i, &m->value_begin, &m->value_end);
    m->end = SkipTagFiller(m->has_value ? m->value_end : i);
    return true;
  }
  // '[^']*' | "[^"]*" | (?!['"])[^>\s]* at `i`; false when a quote at `i`
  // never closes.
  bool MatchValueText(size_t i, size_t* end) {
    if (i < n_ && (s_[i] == '\'' || s_[i] == '"')) {
      const size_t close = Find(s_[i], i + 1);
      if (close == kNone) return false;
      *end = close + 1;
      return true;
    }
    while (i < n_ && s_[i] != '>' && SpaceAt(i) == 0) ++i;
    *end = i;
    return true;
  }
  // \s*=+\s*(value) at `i`, with Python's backtracking: when the value
  // starts with a quote that never closes, the last whitespace before it
  // (or else the last of two or more '=') starts an unquoted value instead.
  bool MatchValue(size_t i, size_t* begin, size_t* end) {
    const size_t eq = SkipSpaces(i);
    if (eq >= n_ || s_[eq] != '=') return false;
    size_t after_eq = eq;
    while (after_eq < n_ && s_[after_eq] == '=') ++after_eq;
    const size_t v = SkipSpaces(after_eq);
    if (MatchValueText(v, end)) {
      *begin = v;
      return true;
    }
    if (v > after_eq) {  // an empty unquoted value at the last whitespace
      size_t last = v - 1;
      while ((static_cast<unsigned char>(s_[last]) & 0xC0) == 0x80) --last;
      *begin = *end = last;
      return true;
    }
    if (after_eq - eq >= 2) {
      *begin = after_eq - 1;
      return MatchValueText(*begin, end);
    }
    return false;
  }

  // ---------------------------------------------------------- start tags

  // locatestarttagend_tolerant's end at `i` ("<" + letter).
  size_t LocateStartTagEnd(size_t i) {
    size_t j = TagNameEnd(i + 1);
    while (j < n_ && (SpaceAt(j) != 0 || s_[j] == '/')) j += s_[j] == '/' ? 1 : SpaceAt(j);
    AttributeMatch m;
    while (MatchAttribute(j, &m)) j = m.end;
    return SkipSpaces(j);
  }
  // check_for_whole_start_tag: the end of the start tag, or -1 when it is
  // incomplete.
  long CheckForWholeStartTag(size_t i) {
    const size_t j = LocateStartTagEnd(i);
    if (j >= n_) return -1;
    const char next = s_[j];
    if (next == '>') return static_cast<long>(j + 1);
    if (next == '/') return StartsWith(j, "/>") ? static_cast<long>(j + 2) : -1;
    if (IsAsciiAlpha(next) || next == '=') return -1;
    return static_cast<long>(j);
  }
  long ParseStartTag(size_t i) {
    const long endpos_or_error = CheckForWholeStartTag(i);
    if (endpos_or_error < 0) return endpos_or_error;
    const size_t endpos = static_cast<size_t>(endpos_or_error);
    const size_t name_end = TagNameEnd(i + 1);
    const std::string tag = LowerName(s_.substr(i + 1, name_end - i - 1));
    attrs_.clear();
    size_t k = SkipTagFiller(name_end);
    AttributeMatch m;
    while (k < endpos && MatchAttribute(k, &m)) {
      Attribute& a = attrs_.emplace_back();
      a.name = LowerName(s_.substr(m.name_begin, m.name_end - m.name_begin));
      if (m.has_value) {
        std::string_view value = s_.substr(m.value_begin, m.value_end - m.value_begin);
        if (value.size() >= 2 && (value[0] == '\'' || value[0] == '"') &&
            value.back() == value[0]) {
          value = value.substr(1, value.size() - 2);
        }
        a.value.emplace();
        AppendUnescaped(value, &*a.value);
      }
      k = m.end;
    }
    const std::string_view end =
        k < endpos ? text::Strip(s_.substr(k, endpos - k)) : std::string_view();
    if (end != ">" && end != "/>") {
      events_->Data(s_.substr(i, endpos - i));
      return static_cast<long>(endpos);
    }
    if (end == "/>") {
      events_->StartEndTag(tag, attrs_);
    } else {
      events_->StartTag(tag, attrs_);
      if (tag == "script" || tag == "style") cdata_elem_ = tag;
    }
    return static_cast<long>(endpos);
  }

  // ---------------------------------------------------------- end tags

  // endtagfind, </\s*([a-zA-Z][-.a-zA-Z0-9:_]*)\s*>, at `i`: the name's span.
  bool MatchEndTag(size_t i, size_t* name_begin, size_t* name_end) const {
    size_t p = SkipSpaces(i + 2);
    if (p >= n_ || !IsAsciiAlpha(s_[p])) return false;
    size_t q = p + 1;
    while (q < n_ && (IsAsciiAlnum(s_[q]) || InSet("-.:_", s_[q]))) ++q;
    const size_t r = SkipSpaces(q);
    if (r >= n_ || s_[r] != '>') return false;
    *name_begin = p;
    *name_end = q;
    return true;
  }
  long ParseEndTag(size_t i) {
    const size_t gt = Find('>', i + 1);
    if (gt == kNone) return -1;
    const size_t gtpos = gt + 1;
    size_t name_begin, name_end;
    if (!MatchEndTag(i, &name_begin, &name_end)) {
      if (!cdata_elem_.empty()) {
        events_->Data(s_.substr(i, gtpos - i));
        return static_cast<long>(gtpos);
      }
      if (i + 2 >= n_ || !IsAsciiAlpha(s_[i + 2])) {
        if (StartsWith(i, "</>")) return static_cast<long>(i + 3);
        return ParseBogusComment(i);
      }
      const size_t tag_end = TagNameEnd(i + 2);
      const std::string tag = LowerName(s_.substr(i + 2, tag_end - i - 2));
      const size_t close = Find('>', SkipTagFiller(tag_end));
      events_->EndTag(tag);
      return static_cast<long>(close + 1);
    }
    const std::string elem = LowerName(s_.substr(name_begin, name_end - name_begin));
    if (!cdata_elem_.empty() && elem != cdata_elem_) {
      events_->Data(s_.substr(i, gtpos - i));
      return static_cast<long>(gtpos);
    }
    events_->EndTag(elem);
    cdata_elem_.clear();
    return static_cast<long>(gtpos);
  }

  // The next `</\s*script\s*>` (or style) at or after `i`, matched as
  // Python's re.IGNORECASE does: 's' also matches U+017F, 'i' also matches
  // U+0130 and U+0131.
  size_t FindCdataEnd(size_t i) {
    FailedSearch& failed = cdata_elem_ == "script" ? no_script_end_ : no_style_end_;
    if (failed.Known(i)) return kNone;
    for (size_t lt = s_.find("</", i); lt != kNone; lt = s_.find("</", lt + 1)) {
      size_t p = SkipSpaces(lt + 2);
      bool ok = true;
      for (const char want : cdata_elem_) {
        if (p >= n_) {
          ok = false;
          break;
        }
        const char c = static_cast<char>(s_[p] | 0x20);
        if (static_cast<unsigned char>(s_[p]) < 0x80) {
          ok = c == want && IsAsciiAlpha(s_[p]);
          ++p;
        } else {
          size_t next = p;
          const uint32_t cp = text::NextCodePoint(s_, &next);
          ok = (want == 's' && cp == 0x17F) || (want == 'i' && (cp == 0x130 || cp == 0x131));
          p = next;
        }
        if (!ok) break;
      }
      if (!ok) continue;
      p = SkipSpaces(p);
      if (p < n_ && s_[p] == '>') return lt;
    }
    failed.Record(i);
    return kNone;
  }

  // ---------------------------------------------------------- declarations

  long ParseComment(size_t i) {
    if (no_comment_close_.Known(i + 4)) return -1;
    for (size_t p = s_.find("--", i + 4); p != kNone; p = s_.find("--", p + 1)) {
      const size_t q = SkipSpaces(p + 2);
      if (q < n_ && s_[q] == '>') {
        events_->Comment(s_.substr(i + 4, p - i - 4));
        return static_cast<long>(q + 1);
      }
    }
    no_comment_close_.Record(i + 4);
    return -1;
  }
  long ParseBogusComment(size_t i) {
    const size_t pos = Find('>', i + 2);
    if (pos == kNone) return -1;
    events_->Comment(s_.substr(i + 2, pos - i - 2));
    return static_cast<long>(pos + 1);
  }
  long ParsePi(size_t i) {
    const size_t gt = Find('>', i + 2);
    if (gt == kNone) return -1;
    events_->Pi(s_.substr(i + 2, gt - i - 2));
    return static_cast<long>(gt + 1);
  }
  long ParseHtmlDeclaration(size_t i) {
    if (StartsWith(i, "<!--")) return ParseComment(i);
    if (StartsWith(i, "<![")) return ParseMarkedSection(i);
    if (EqualsIgnoringAsciiCase(s_.substr(i, 9), "<!doctype")) {
      const size_t gt = Find('>', i + 9);
      if (gt == kNone) return -1;
      events_->Decl(s_.substr(i + 2, gt - i - 2));
      return static_cast<long>(gt + 1);
    }
    return ParseBogusComment(i);
  }
  // _scan_name: the lower-cased name at `i` and the end of the name and the
  // whitespace after it; end -1 when they reach the end of the text.
  long ScanName(size_t i, std::string* name) const {
    if (i == n_) return -1;
    if (!IsAsciiAlpha(s_[i])) {
      throw MarkupRejected("expected name token after '<!['");
    }
    size_t q = i + 1;
    while (q < n_ && (IsAsciiAlnum(s_[q]) || InSet("-_.", s_[q]))) ++q;
    const size_t end = SkipSpaces(q);
    if (end == n_) return -1;
    *name = LowerName(s_.substr(i, q - i));
    return static_cast<long>(end);
  }
  long ParseMarkedSection(size_t i) {
    std::string name;
    if (ScanName(i + 3, &name) < 0) return -1;
    const bool double_bracket = name == "temp" || name == "cdata" || name == "ignore" ||
                                name == "include" || name == "rcdata";
    if (!double_bracket && name != "if" && name != "else" && name != "endif") {
      throw MarkupRejected("unknown status keyword '" + name + "' in marked section");
    }
    // ]\s*]\s*> or ]\s*>
    FailedSearch& failed = double_bracket ? no_double_bracket_close_ : no_bracket_close_;
    if (failed.Known(i + 3)) return -1;
    for (size_t p = s_.find(']', i + 3); p != kNone; p = s_.find(']', p + 1)) {
      size_t q = SkipSpaces(p + 1);
      if (double_bracket) {
        if (q >= n_ || s_[q] != ']') continue;
        q = SkipSpaces(q + 1);
      }
      if (q < n_ && s_[q] == '>') {
        events_->UnknownDecl(s_.substr(i + 3, p - i - 3));
        return static_cast<long>(q + 1);
      }
    }
    failed.Record(i + 3);
    return -1;
  }

  // ---------------------------------------------------------- references

  // charref, &#(?:[0-9]+|[xX][0-9a-fA-F]+)[^0-9a-fA-F], at `i`: the end of
  // the digits, or kNone.
  size_t MatchCharRef(size_t i) const {
    size_t p = i + 2;
    if (p < n_ && (s_[p] == 'x' || s_[p] == 'X')) ++p;
    const size_t digits = p;
    if (p == i + 2) {
      while (p < n_ && IsDigit(s_[p])) ++p;
    } else {
      while (p < n_ && IsHexDigit(s_[p])) ++p;
    }
    if (p == digits || p >= n_ || IsHexDigit(s_[p])) return kNone;
    return p;
  }
  // entityref, &([a-zA-Z][-.a-zA-Z0-9]*)[^a-zA-Z0-9], at `i`: the end of the
  // name, or kNone. At the end of the text the name gives back characters
  // up to its last '-' or '.', which then ends it.
  size_t MatchEntityRef(size_t i) const {
    if (i + 1 >= n_ || !IsAsciiAlpha(s_[i + 1])) return kNone;
    size_t q = i + 2;
    while (q < n_ && (IsAsciiAlnum(s_[q]) || s_[q] == '-' || s_[q] == '.')) ++q;
    if (q < n_) return q;
    for (size_t r = q - 1; r > i + 1; --r) {
      if (s_[r] == '-' || s_[r] == '.') return r;
    }
    return kNone;
  }

  // ---------------------------------------------------------- main loop

  // A construct at `i` that starts with '<': its end, -1 when incomplete,
  // or kIncompleteLessThan for a '<' that ends the text.
  static constexpr long kLoneLessThanAtEnd = -2;
  long ParseMarkup(size_t i) {
    if (i + 1 < n_ && IsAsciiAlpha(s_[i + 1])) return ParseStartTag(i);
    if (StartsWith(i, "</")) return ParseEndTag(i);
    if (StartsWith(i, "<!--")) return ParseComment(i);
    if (StartsWith(i, "<?")) return ParsePi(i);
    if (StartsWith(i, "<!")) return ParseHtmlDeclaration(i);
    if (i + 1 < n_) {
      events_->Data("<");
      return static_cast<long>(i + 1);
    }
    return kLoneLessThanAtEnd;
  }

  // goahead(end): handles the text from pos_ as far as it can.
  void GoAhead(bool end) {
    size_t i = pos_;
    while (i < n_) {
      size_t j;
      if (!cdata_elem_.empty()) {
        j = FindCdataEnd(i);
        if (j == kNone) break;
      } else {
        j = FindMarkupOrReference(i);
      }
      if (i < j) events_->Data(s_.substr(i, j - i));
      i = j;
      if (i == n_) break;
      if (s_[i] == '<') {
        long k = ParseMarkup(i);
        if (k == kLoneLessThanAtEnd) break;
        if (k < 0) {
          if (!end) break;
          size_t stop = Find('>', i + 1);
          if (stop == kNone) {
            stop = s_.find('<', i + 1);
            if (stop == kNone) stop = i + 1;
          } else {
            ++stop;
          }
          events_->Data(s_.substr(i, stop - i));
          k = static_cast<long>(stop);
        }
        i = static_cast<size_t>(k);
      } else if (StartsWith(i, "&#")) {
        const size_t digits_end = MatchCharRef(i);
        if (digits_end == kNone) {
          if (s_.find(';', i) != kNone) {  // bail by consuming "&#"
            events_->Data(s_.substr(i, 2));
            i += 2;
          }
          break;
        }
        events_->CharRef(s_.substr(i + 2, digits_end - i - 2));
        i = s_[digits_end] == ';' ? digits_end + 1 : digits_end;
      } else {
        const size_t name_end = MatchEntityRef(i);
        if (name_end != kNone) {
          events_->EntityRef(s_.substr(i + 1, name_end - i - 1));
          i = s_[name_end] == ';' ? name_end + 1 : name_end;
          continue;
        }
        if (i + 1 < n_ && IsAsciiAlpha(s_[i + 1])) {  // incomplete
          if (end && n_ - i == 2) ++i;
          break;
        }
        if (i + 1 >= n_) break;
        events_->Data("&");
        ++i;
      }
    }
    if (end && i < n_ && cdata_elem_.empty()) {
      events_->Data(s_.substr(i));
      i = n_;
    }
    pos_ = i;
  }

  const std::string_view s_;
  const size_t n_;
  HtmlEvents* events_;
  size_t pos_ = 0;                                    // where the unhandled text starts (rawdata)
  std::pair<size_t, size_t> name_run_{kNone, kNone};  // the last tag name scanned
  FailedSearch no_gt_, no_apostrophe_, no_quote_, no_script_end_, no_style_end_, no_comment_close_,
      no_bracket_close_, no_double_bracket_close_;
  size_t next_ampersand_ = kNone;  // the next '&' found (n_: none; kNone: not searched)
  std::string cdata_elem_;         // "script" or "style" inside one, else empty
  std::vector<Attribute> attrs_;
};

}  // namespace

void ParseHtml(std::string_view text, HtmlEvents* events) { Parser(text, events).Run(); }

}  // namespace djshard::ops::html
