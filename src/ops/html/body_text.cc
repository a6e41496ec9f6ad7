// The HTML5 tokenizer (WHATWG HTML, §13.2.5) for data, RCDATA, RAWTEXT and
// script data, tags with their attributes, comments, DOCTYPEs and character
// references, and the insertion modes that decide whether a character token
// ends up under <body> (§13.2.6): before html, before head, in head, after
// head, in body (after body carries on into body), in table, in table body,
// in row, in cell and in caption. Whatever would move text out of token order
// or needs state this file does not keep gives up (nullopt).
#include "src/ops/html/body_text.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "djshard/common/text.h"
#include "src/ops/html/entities.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace djshard::ops::html {
namespace {

bool IsHtmlSpace(char c) { return c == '\t' || c == '\n' || c == '\f' || c == ' '; }
bool IsAsciiAlpha(char c) { return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }
bool IsAsciiAlnum(char c) { return IsAsciiAlpha(c) || (c >= '0' && c <= '9'); }
// Whether `c` ends an end tag's name ('\r': the LF the input stream makes of it).
bool EndsTagName(char c) { return IsHtmlSpace(c) || c == '\r' || c == '/' || c == '>'; }
char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

bool AllHtmlSpace(std::string_view s) {
  for (const char c : s) {
    if (!IsHtmlSpace(c)) return false;
  }
  return true;
}

bool OneOf(std::string_view name, std::initializer_list<std::string_view> names) {
  for (const std::string_view n : names) {
    if (name == n) return true;
  }
  return false;
}

// The formatting elements, which the adoption agency algorithm may move.
bool IsFormatting(std::string_view n) {
  return OneOf(n, {"a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike",
                   "strong", "tt", "u"});
}

// Elements whose start tag pushes nothing on the stack of open elements in
// body: void elements, and those in body ignores.
bool PushesNothing(std::string_view n) {
  return OneOf(n,
               {"area",   "base",  "basefont", "bgsound", "br",     "col",  "embed",   "frame",
                "hr",     "image", "img",      "input",   "keygen", "link", "meta",    "param",
                "source", "track", "wbr",      "html",    "head",   "body", "caption", "colgroup",
                "tbody",  "td",    "tfoot",    "th",      "thead",  "tr"});
}

// The special category (§13.2.4.2) plus the elements that bound a scope:
// what an end tag may not close through in this file's model.
bool IsSpecialOrScope(std::string_view n) {
  return OneOf(
      n, {"address", "applet",     "area",     "article",    "aside",     "base",     "basefont",
          "bgsound", "blockquote", "body",     "br",         "button",    "caption",  "center",
          "col",     "colgroup",   "dd",       "details",    "dir",       "div",      "dl",
          "dt",      "embed",      "fieldset", "figcaption", "figure",    "footer",   "form",
          "frame",   "frameset",   "h1",       "h2",         "h3",        "h4",       "h5",
          "h6",      "head",       "header",   "hgroup",     "hr",        "html",     "iframe",
          "img",     "input",      "keygen",   "li",         "link",      "listing",  "main",
          "marquee", "menu",       "meta",     "nav",        "noembed",   "noframes", "noscript",
          "object",  "ol",         "p",        "param",      "plaintext", "pre",      "script",
          "search",  "section",    "select",   "source",     "style",     "summary",  "table",
          "tbody",   "td",         "template", "textarea",   "tfoot",     "th",       "thead",
          "title",   "tr",         "track",    "ul",         "wbr",       "xmp"});
}

// `html` with CR LF and lone CR made LF (the input stream's preprocessing).
std::string NewlinesNormalized(std::string_view html) {
  std::string out;
  out.reserve(html.size());
  for (size_t i = 0; i < html.size(); ++i) {
    if (html[i] != '\r') {
      out.push_back(html[i]);
      continue;
    }
    out.push_back('\n');
    if (i + 1 < html.size() && html[i + 1] == '\n') ++i;
  }
  return out;
}

// A code point that a numeric character reference gives as it is, without a
// parse error: not U+0000, a surrogate, a noncharacter, a control other than
// tab, LF and FF, or beyond U+10FFFF.
bool PlainReference(uint64_t cp) {
  if (cp < 0x20) return cp == '\t' || cp == '\n' || cp == '\f';
  if (cp >= 0x7F && cp <= 0x9F) return false;
  if (cp >= 0xD800 && cp <= 0xDFFF) return false;
  if (cp >= 0xFDD0 && cp <= 0xFDEF) return false;
  if ((cp & 0xFFFE) == 0xFFFE) return false;
  return cp <= 0x10FFFF;
}

// The number of a numeric reference "&#..." or "&#x..." at s[at]: stores it
// (0x110000 for any number past U+10FFFF) and returns where its digits end,
// or 0 when there are none.
size_t ReadNumber(std::string_view s, size_t at, uint64_t* number) {
  size_t k = at + 2;
  const bool hex = k < s.size() && (s[k] == 'x' || s[k] == 'X');
  if (hex) ++k;
  const size_t digits = k;
  *number = 0;
  for (; k < s.size(); ++k) {
    const char c = s[k];
    const bool decimal = c >= '0' && c <= '9';
    if (!decimal && !(hex && (c | 0x20) >= 'a' && (c | 0x20) <= 'f')) break;
    const uint64_t v =
        decimal ? static_cast<uint64_t>(c - '0') : static_cast<uint64_t>((c | 0x20) - 'a' + 10);
    *number = std::min<uint64_t>(*number * (hex ? 16 : 10) + v, 0x110000);
  }
  return k == digits ? 0 : k;
}

// The code point a numeric reference to `number` gives in HTML5's data state
// (§13.2.5.80): U+FFFD for 0, a surrogate or a number past U+10FFFF, the
// windows-1252 character for 0x80-0x9F, else the number itself.
uint32_t NumericReferenceCodePoint(uint64_t number) {
  if (number == 0 || number > 0x10FFFF || (number >= 0xD800 && number <= 0xDFFF)) return 0xFFFD;
  const NumericReference* end = kReplacedNumbers + kReplacedNumbersSize;
  const NumericReference* it =
      std::lower_bound(kReplacedNumbers, end, number,
                       [](const NumericReference& r, uint64_t n) { return r.number < n; });
  if (it != end && it->number == number) return it->cp;
  return static_cast<uint32_t>(number);
}

// What HTML5's tokenizer makes of s[at] == '&' in the data state: the text
// it gives, where the reference ends, and whether the tokenizer repaired it
// with a parse error (a number or a legacy name without ';', a number it
// replaces or reports). No reference: "&", ending after it.
struct Reference {
  std::string text;
  size_t end = 0;
  bool repaired = false;
};
Reference ReadReference(std::string_view s, size_t at) {
  Reference r{"&", at + 1, false};
  if (at + 1 < s.size() && s[at + 1] == '#') {
    uint64_t number = 0;
    const size_t k = ReadNumber(s, at, &number);
    if (k == 0) return r;  // "&#" or "&#x" without digits: text
    const bool semicolon = k < s.size() && s[k] == ';';
    r.text.clear();
    AppendUtf8(&r.text, NumericReferenceCodePoint(number));
    r.end = semicolon ? k + 1 : k;
    r.repaired = !semicolon || !PlainReference(number);
    return r;
  }
  size_t k = at + 1;
  while (k < s.size() && IsAsciiAlnum(s[k])) ++k;
  const std::string_view name = s.substr(at + 1, k - at - 1);
  if (!name.empty() && k < s.size() && s[k] == ';') {
    if (const auto value = FindNamedReference(std::string(name) + ";")) {
      return {std::string(*value), k + 1, false};
    }
  }
  for (size_t len = name.size(); len >= 2; --len) {  // the longest legacy name
    if (const auto value = FindNamedReference(name.substr(0, len))) {
      return {std::string(*value), at + 1 + len, true};
    }
  }
  return r;
}

// At s[*i] == '&': appends what the tokenizer makes of the character
// reference (or of the '&' that starts none) and moves *i past it; false for
// a reference that the tokenizer repairs, left to a full parser.
bool DecodeReference(std::string_view s, size_t* i, std::string* out) {
  const Reference r = ReadReference(s, *i);
  if (r.repaired) return false;
  out->append(r.text);
  *i = r.end;
  return true;
}

// RCDATA's character references decoded into *out.
bool DecodeRcdata(std::string_view contents, std::string* out) {
  for (size_t i = 0; i < contents.size();) {
    const size_t amp = contents.find('&', i);
    const size_t stop = amp == std::string_view::npos ? contents.size() : amp;
    out->append(contents.substr(i, stop - i));
    i = stop;
    if (i < contents.size() && !DecodeReference(contents, &i, out)) return false;
  }
  return true;
}

// Whether raw text holds an end tag whose name is letters only, followed by
// whitespace, '/' or '>' ("</b>", "</p "): MyHTML, Data-Juicer's parser, then
// decodes the character references of the element's whole text, as in
// RCDATA ("<xmp>&amp;</b>&amp;</xmp>" gives "&</b>&", "<xmp>&amp;<b></xmp>"
// keeps "&amp;<b>"). HTML5 decodes none.
bool HoldsLetterEndTag(std::string_view text) {
  for (size_t at = text.find("</"); at != std::string_view::npos; at = text.find("</", at + 2)) {
    size_t k = at + 2;
    while (k < text.size() && IsAsciiAlpha(text[k])) ++k;
    if (k > at + 2 && k < text.size() && EndsTagName(text[k])) return true;
  }
  return false;
}

struct Tag {
  std::string name;  // lowercased
  bool end = false;
};

enum class Mode { kBeforeHtml, kBeforeHead, kInHead, kAfterHead, kInBody };

// A table's insertion modes, innermost last; in a cell or a caption the body's
// rules apply again.
enum class TableMode { kTable, kSection, kRow, kCell, kCaption };
struct TableFrame {
  TableMode mode;
  std::string name;  // the section's (tbody, thead, tfoot) or the cell's (td, th)
};

class SimpleDocument {
 public:
  explicit SimpleDocument(std::string_view html) : s_(html) {}

  // False when the document needs what this class does not model.
  bool Run() {
    while (i_ < s_.size()) {
      const size_t j = NextMarkup(i_);
      if (j > i_ && !Characters(s_.substr(i_, j - i_))) return false;
      i_ = j;
      if (i_ == s_.size()) break;
      if (s_[i_] == '\0') return false;
      if (s_[i_] == '&') {
        // after <pre> or <listing>, a reference to LF would be dropped
        std::string decoded;
        if (drop_lf_ || !DecodeReference(s_, &i_, &decoded) || !Characters(decoded)) return false;
      } else if (!TagOpen()) {
        return false;
      }
    }
    return true;
  }
  std::string& text() { return out_; }

 private:
  // The first '<', '&' or U+0000 from `from` on, or the end.
  size_t NextMarkup(size_t from) const {
    size_t k = from;
#ifdef __SSE2__
    const __m128i lt = _mm_set1_epi8('<'), amp = _mm_set1_epi8('&'), nul = _mm_setzero_si128();
    for (; k + 16 <= s_.size(); k += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s_.data() + k));
      const __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, lt), _mm_cmpeq_epi8(v, amp)),
                                       _mm_cmpeq_epi8(v, nul));
      const int mask = _mm_movemask_epi8(hit);
      if (mask != 0) return k + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    }
#endif
    for (; k < s_.size(); ++k) {
      const char c = s_[k];
      if (c == '<' || c == '&' || c == '\0') return k;
    }
    return s_.size();
  }

  // --- tree construction: where character tokens go -----------------------

  bool InTableText() const {
    return !tables_.empty() &&
           (tables_.back().mode == TableMode::kTable ||
            tables_.back().mode == TableMode::kSection || tables_.back().mode == TableMode::kRow);
  }

  bool Characters(std::string_view text) {
    if (drop_lf_) {
      drop_lf_ = false;
      if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
    }
    if (text.empty()) return true;
    if (mode_ != Mode::kInBody) {
      // Whitespace is dropped (before html, before head) or goes to <head> or
      // <html> (in head, after head); the first other character opens <body>.
      size_t k = 0;
      while (k < text.size() && IsHtmlSpace(text[k])) ++k;
      if (k == text.size()) return true;
      mode_ = Mode::kInBody;
      text.remove_prefix(k);
    }
    if (InTableText() && !AllHtmlSpace(text)) return false;  // foster parenting
    out_.append(text);
    return true;
  }

  void Comment() { drop_lf_ = false; }

  // A start or end tag token; false to give up.
  bool Process(const Tag& tag) {
    drop_lf_ = false;
    if (deep_) return false;
    switch (mode_) {
      case Mode::kBeforeHtml:
        if (!tag.end && tag.name == "html") {
          mode_ = Mode::kBeforeHead;
          return true;
        }
        if (tag.end && !OneOf(tag.name, {"head", "body", "html", "br"})) return true;
        mode_ = Mode::kBeforeHead;
        return Process(tag);
      case Mode::kBeforeHead:
        if (!tag.end && tag.name == "html") return true;
        if (!tag.end && tag.name == "head") {
          mode_ = Mode::kInHead;
          return true;
        }
        if (tag.end && !OneOf(tag.name, {"head", "body", "html", "br"})) return true;
        mode_ = Mode::kInHead;
        return Process(tag);
      case Mode::kInHead:
        if (!tag.end) {
          if (OneOf(tag.name, {"html", "head", "base", "basefont", "bgsound", "link", "meta"})) {
            return true;
          }
          if (OneOf(tag.name, {"title", "noframes", "style", "script", "noscript", "template"})) {
            return HeadElement(tag.name);
          }
        } else if (tag.name == "head") {
          mode_ = Mode::kAfterHead;
          return true;
        } else if (!OneOf(tag.name, {"body", "html", "br"})) {
          return true;
        }
        mode_ = Mode::kAfterHead;
        return Process(tag);
      case Mode::kAfterHead:
        if (!tag.end) {
          if (OneOf(tag.name, {"html", "head"})) return true;
          if (tag.name == "body") {
            mode_ = Mode::kInBody;
            return true;
          }
          if (tag.name == "frameset") return false;
          if (OneOf(tag.name, {"base", "basefont", "bgsound", "link", "meta"})) return true;
          if (OneOf(tag.name, {"title", "noframes", "style", "script", "template"})) {
            return HeadElement(tag.name);
          }
        } else if (!OneOf(tag.name, {"body", "html", "br"})) {
          return true;
        }
        mode_ = Mode::kInBody;
        return Process(tag);
      case Mode::kInBody:
        return InTableText() ? TableTag(tag) : BodyTag(tag);
    }
    return false;
  }

  // An element of <head> whose contents the tokenizer reads as text: skipped.
  bool HeadElement(const std::string& name) {
    if (name == "noscript" || name == "template") return false;
    return RawText(name, /*rcdata=*/name == "title", /*keep=*/false);
  }

  // The in body insertion mode, in a cell or caption too.
  bool BodyTag(const Tag& tag) {
    const TableMode* context = tables_.empty() ? nullptr : &tables_.back().mode;
    if (tag.end) {
      if (tag.name == "template") return false;
      if (context != nullptr && *context == TableMode::kCell) {
        if (OneOf(tag.name, {"td", "th"})) {
          if (tag.name == tables_.back().name) PopFrame();  // back in the row
          return true;
        }
        if (OneOf(tag.name, {"table", "tbody", "tfoot", "thead", "tr"})) {
          if (OneOf(tag.name, {"tbody", "tfoot", "thead"}) && !SectionOpen(tag.name)) return true;
          PopFrame();  // the cell closes; the token goes to the row
          return Process(tag);
        }
      }
      if (context != nullptr && *context == TableMode::kCaption) {
        if (tag.name == "caption") {
          PopFrame();
          return true;
        }
        if (tag.name == "table") {
          PopFrame();
          return Process(tag);
        }
        if (OneOf(tag.name, {"body", "col", "colgroup", "html", "tbody", "td", "tfoot", "th",
                             "thead", "tr"})) {
          return true;
        }
      }
      if (context != nullptr && *context == TableMode::kCell &&
          OneOf(tag.name, {"body", "caption", "col", "colgroup", "html"})) {
        return true;
      }
      return BodyEndTag(tag.name);
    }
    const std::string& n = tag.name;
    if (OneOf(n, {"frameset", "template", "select", "math", "svg", "noscript", "plaintext",
                  "isindex", "frame"})) {
      return false;
    }
    if (context != nullptr &&
        OneOf(n, {"caption", "col", "colgroup", "tbody", "td", "tfoot", "th", "thead", "tr"})) {
      PopFrame();  // the cell or caption closes; the token goes to the table
      return Process(tag);
    }
    if (n == "table") {
      PushFrame(TableMode::kTable, "");
      return true;
    }
    if (OneOf(n, {"pre", "listing"})) {
      drop_lf_ = true;
      open_.push_back(n);
      return true;
    }
    if (n == "textarea") return RawText(n, /*rcdata=*/true, /*keep=*/true, /*drop_lf=*/true);
    if (n == "title") return RawText(n, /*rcdata=*/true, /*keep=*/true);
    if (OneOf(n, {"style", "script", "xmp", "iframe", "noembed", "noframes"})) {
      return RawText(n, /*rcdata=*/false, /*keep=*/true);
    }
    if (IsFormatting(n)) {
      // an <a> or <nobr> while one is active runs the adoption agency algorithm
      if ((n == "a" || n == "nobr") && AfterMarker(formatting_, n)) return false;
      formatting_.push_back(n);
    }
    if (!PushesNothing(n)) open_.push_back(n);
    // End tags search these: a deeper document goes to the full parser,
    // which keeps the work linear.
    if (open_.size() > kMostOpen || formatting_.size() > kMostOpen) return false;
    return true;  // inserted (or ignored): its text stays in order
  }

  // A table, a cell or a caption starts: a marker on the stack of open
  // elements (cells and captions also on the list of active formatting
  // elements), which end tags inside do not look past.
  void PushFrame(TableMode mode, std::string name) {
    tables_.push_back({mode, std::move(name)});
    if (tables_.size() > kMostOpen) deep_ = true;
    if (mode == TableMode::kTable || mode == TableMode::kCell || mode == TableMode::kCaption) {
      open_.emplace_back();
    }
    if (mode == TableMode::kCell || mode == TableMode::kCaption) formatting_.emplace_back();
  }
  void PopFrame() {
    const TableMode mode = tables_.back().mode;
    tables_.pop_back();
    const auto clear_to_marker = [](std::vector<std::string>* list) {
      while (!list->empty() && !list->back().empty()) list->pop_back();
      if (!list->empty()) list->pop_back();
    };
    if (mode == TableMode::kTable || mode == TableMode::kCell || mode == TableMode::kCaption) {
      clear_to_marker(&open_);
    }
    if (mode == TableMode::kCell || mode == TableMode::kCaption) clear_to_marker(&formatting_);
  }

  // Whether `name` is on `list` after its last marker.
  static bool AfterMarker(const std::vector<std::string>& list, std::string_view name) {
    for (auto it = list.rbegin(); it != list.rend() && !it->empty(); ++it) {
      if (*it == name) return true;
    }
    return false;
  }

  // An end tag in body. The tree keeps text in token order as long as the
  // adoption agency algorithm moves nothing: a formatting element's end tag
  // must close the element opened last, and any other end tag may close only
  // formatting and ordinary elements on its way; else the full parser decides.
  bool BodyEndTag(const std::string& name) {
    if (OneOf(name, {"body", "html", "br"})) return true;
    if (IsFormatting(name)) {
      if (open_.empty() || open_.back() != name) return false;
      open_.pop_back();
      for (auto it = formatting_.rbegin(); it != formatting_.rend() && !it->empty(); ++it) {
        if (*it == name) {
          formatting_.erase(std::next(it).base());
          return true;
        }
      }
      return false;
    }
    if (name == "form") {  // removed from the stack, not popped
      if (open_.empty() || open_.back() != name) return false;
      open_.pop_back();
      return true;
    }
    size_t k = open_.size();
    while (k > 0 && !open_[k - 1].empty() && open_[k - 1] != name) --k;
    if (k == 0 || open_[k - 1].empty()) return true;  // not open: ignored (</p> adds an empty p)
    for (size_t j = k; j < open_.size(); ++j) {
      if (IsSpecialOrScope(open_[j])) return false;
    }
    open_.resize(k - 1);  // formatting elements closed on the way stay on the list
    return true;
  }

  bool SectionOpen(const std::string& name) const {
    for (auto it = tables_.rbegin(); it != tables_.rend(); ++it) {
      if (it->mode == TableMode::kSection) return it->name == name;
      if (it->mode == TableMode::kTable) return false;
    }
    return false;
  }

  // The in table, in table body and in row insertion modes.
  bool TableTag(const Tag& tag) {
    TableFrame& top = tables_.back();
    const std::string& n = tag.name;
    if (!tag.end) {
      if (top.mode == TableMode::kRow) {
        if (OneOf(n, {"td", "th"})) {
          PushFrame(TableMode::kCell, n);
          return true;
        }
        if (OneOf(n, {"caption", "col", "colgroup", "tbody", "tfoot", "thead", "tr"})) {
          PopFrame();
          return Process(tag);
        }
      } else if (top.mode == TableMode::kSection) {
        if (n == "tr") {
          PushFrame(TableMode::kRow, "");
          return true;
        }
        if (OneOf(n, {"td", "th"})) {
          PushFrame(TableMode::kRow, "");
          return Process(tag);
        }
        if (OneOf(n, {"caption", "col", "colgroup", "tbody", "tfoot", "thead"})) {
          PopFrame();
          return Process(tag);
        }
      } else {
        if (n == "caption") {
          PushFrame(TableMode::kCaption, "");
          return true;
        }
        if (OneOf(n, {"tbody", "tfoot", "thead"})) {
          PushFrame(TableMode::kSection, n);
          return true;
        }
        if (OneOf(n, {"td", "th", "tr"})) {
          PushFrame(TableMode::kSection, "tbody");
          return Process(tag);
        }
      }
      // in table: style and script as in head, inside the table
      if (OneOf(n, {"style", "script"})) return RawText(n, /*rcdata=*/false, /*keep=*/true);
      return false;  // colgroup, a nested table, input, form, or foster parenting
    }
    if (top.mode == TableMode::kRow) {
      if (n == "tr") {
        PopFrame();
        return true;
      }
      if (n == "table" || (OneOf(n, {"tbody", "tfoot", "thead"}) && SectionOpen(n))) {
        PopFrame();
        return Process(tag);
      }
      if (OneOf(n, {"tbody", "tfoot", "thead", "body", "caption", "col", "colgroup", "html", "td",
                    "th"})) {
        return true;
      }
      return false;
    }
    if (top.mode == TableMode::kSection) {
      if (OneOf(n, {"tbody", "tfoot", "thead"})) {
        if (n == top.name) PopFrame();
        return true;
      }
      if (n == "table") {
        PopFrame();
        return Process(tag);
      }
      if (OneOf(n, {"body", "caption", "col", "colgroup", "html", "td", "th", "tr"})) return true;
      return false;
    }
    if (n == "table") {
      PopFrame();
      return true;
    }
    if (OneOf(n, {"body", "caption", "col", "colgroup", "html", "tbody", "td", "tfoot", "th",
                  "thead", "tr"})) {
      return true;
    }
    return false;
  }

  // --- tokenizer ------------------------------------------------------------

  // At '<' in the data state.
  bool TagOpen() {
    const size_t at = i_;
    if (at + 1 == s_.size()) {  // '<' then the end
      i_ = s_.size();
      return Characters("<");
    }
    const char c = s_[at + 1];
    if (IsAsciiAlpha(c)) {
      Tag tag;
      if (!ReadTag(at + 1, &tag)) return true;  // the end of the file inside a tag: dropped
      return Process(tag);
    }
    if (c == '/') {
      if (at + 2 == s_.size()) {
        i_ = s_.size();
        return Characters("</");
      }
      const char d = s_[at + 2];
      if (IsAsciiAlpha(d)) {
        Tag tag;
        tag.end = true;
        if (!ReadTag(at + 2, &tag)) return true;
        return Process(tag);
      }
      if (d == '>') {
        // "</>": HTML5 drops it; MyHTML (Data-Juicer's parser) drops it up to
        // the end of <head> and keeps it as text after (opening the body), in
        // a table too.
        i_ = at + 3;
        if (mode_ == Mode::kAfterHead) mode_ = Mode::kInBody;
        if (mode_ == Mode::kInBody) {
          drop_lf_ = false;
          out_.append("</>");
        }
        return true;
      }
      BogusComment(at + 2);
      return true;
    }
    if (c == '!') {
      MarkupDeclaration(at + 2);
      return true;
    }
    if (c == '?') {
      BogusComment(at + 1);
      return true;
    }
    i_ = at + 1;
    return Characters("<");
  }

  // A bogus comment from `from` to the next '>' (or the end).
  void BogusComment(size_t from) {
    const size_t gt = s_.find('>', from);
    i_ = gt == std::string_view::npos ? s_.size() : gt + 1;
    Comment();
  }

  // After "<!".
  void MarkupDeclaration(size_t from) {
    if (s_.compare(from, 2, "--") == 0) {
      CommentFrom(from + 2);
      return;
    }
    // DOCTYPE: every state of it ends at '>'. CDATA outside foreign content
    // and anything else: a bogus comment, which also ends at '>'.
    BogusComment(from);
  }

  // A comment whose text starts at `from` (after "<!--").
  void CommentFrom(size_t from) {
    Comment();
    size_t k = from;
    // "<!-->" and "<!--->" end at once
    if (k < s_.size() && s_[k] == '>') {
      i_ = k + 1;
      return;
    }
    if (s_.compare(k, 2, "->") == 0) {
      i_ = k + 2;
      return;
    }
    // then "-->" or "--!>" (any number of '-' before the '>' or "!>")
    for (; k < s_.size(); ++k) {
      if (s_[k] != '-' || k + 1 >= s_.size() || s_[k + 1] != '-') continue;
      size_t e = k + 2;
      while (e < s_.size() && s_[e] == '-') ++e;
      if (e < s_.size() && s_[e] == '>') {
        i_ = e + 1;
        return;
      }
      if (e + 1 < s_.size() && s_[e] == '!' && s_[e + 1] == '>') {
        i_ = e + 2;
        return;
      }
      k = e - 1;
    }
    i_ = s_.size();
  }

  // Reads a tag whose name starts at `from`, attributes and all; false when
  // the file ends inside it. Leaves i_ after the '>'.
  bool ReadTag(size_t from, Tag* tag) {
    size_t k = from;
    while (k < s_.size() && !IsHtmlSpace(s_[k]) && s_[k] != '/' && s_[k] != '>') {
      tag->name.push_back(AsciiLower(s_[k]));
      ++k;
    }
    enum class State {
      kBeforeName,
      kName,
      kAfterName,
      kBeforeValue,
      kQuoted,
      kUnquoted,
      kAfterValue
    };
    State state = State::kBeforeName;
    char quote = 0;
    while (k < s_.size()) {
      const char c = s_[k];
      switch (state) {
        case State::kBeforeName:
          if (IsHtmlSpace(c)) break;
          if (c == '/') {
            if (k + 1 < s_.size() && s_[k + 1] == '>') {
              i_ = k + 2;
              return true;
            }
            break;
          }
          if (c == '>') {
            i_ = k + 1;
            return true;
          }
          state = State::kName;  // '=' here starts a name too
          break;
        case State::kName:
          if (IsHtmlSpace(c) || c == '/' || c == '>') {
            state = State::kAfterName;
            continue;
          }
          if (c == '=') state = State::kBeforeValue;
          break;
        case State::kAfterName:
          if (IsHtmlSpace(c)) break;
          if (c == '=') {
            state = State::kBeforeValue;
            break;
          }
          if (c == '/' || c == '>') {
            state = State::kBeforeName;
            continue;
          }
          state = State::kName;
          break;
        case State::kBeforeValue:
          if (IsHtmlSpace(c)) break;
          if (c == '"' || c == '\'') {
            quote = c;
            state = State::kQuoted;
            break;
          }
          if (c == '>') {
            i_ = k + 1;
            return true;
          }
          state = State::kUnquoted;
          break;
        case State::kQuoted:
          if (c == quote) state = State::kAfterValue;
          break;
        case State::kUnquoted:
          if (IsHtmlSpace(c)) {
            state = State::kBeforeName;
          } else if (c == '>') {
            i_ = k + 1;
            return true;
          }
          break;
        case State::kAfterValue:
          state = State::kBeforeName;
          continue;  // the character is read again before a name
      }
      ++k;
    }
    i_ = s_.size();
    return false;
  }

  // The contents of an RCDATA, RAWTEXT or script data element up to its end
  // tag (or the end of the file), kept as text or not, then the end tag.
  bool RawText(const std::string& name, bool rcdata, bool keep, bool drop_lf = false) {
    size_t end = i_;
    for (;; ++end) {
      end = s_.find("</", end);
      if (end == std::string_view::npos) {
        end = s_.size();
        break;
      }
      size_t k = end + 2, m = 0;
      while (m < name.size() && k < s_.size() && AsciiLower(s_[k]) == name[m]) ++k, ++m;
      if (m == name.size() && k < s_.size() && EndsTagName(s_[k])) {
        break;
      }
    }
    std::string_view contents = s_.substr(i_, end - i_);
    if (contents.find('\0') != std::string_view::npos) return false;
    if (name == "script" && contents.find("<!--") != std::string_view::npos) return false;
    if (drop_lf && !contents.empty()) {
      if (contents.front() == '&') return false;  // it may give the LF that is dropped
      if (contents.front() == '\n') contents.remove_prefix(1);
    }
    std::string decoded;
    if (rcdata) {
      if (!DecodeRcdata(contents, &decoded)) return false;
      contents = decoded;
    } else if (keep && name != "script" && AppendMyHtmlRawText(contents, &decoded)) {
      contents = decoded;
    }
    if (keep) out_.append(contents);  // the element's text, in body (in a table too)
    if (end == s_.size()) {
      i_ = s_.size();
      return true;
    }
    Tag tag;
    tag.end = true;
    ReadTag(end + 2, &tag);
    return true;  // the appropriate end tag closes the element: no text moves
  }

  std::string_view s_;
  size_t i_ = 0;
  Mode mode_ = Mode::kBeforeHtml;
  static constexpr size_t kMostOpen = 256;
  std::vector<TableFrame> tables_;
  // The stack of open elements of body and the list of active formatting
  // elements, as far as this file follows them ("" is a marker).
  std::vector<std::string> open_, formatting_;
  bool drop_lf_ = false;  // a LF first in the next token is dropped (after <pre>, <listing>)
  bool deep_ = false;     // tables nested deeper than kMostOpen
  std::string out_;
};

}  // namespace

bool AppendMyHtmlRawText(std::string_view text, std::string* out) {
  if (!HoldsLetterEndTag(text)) return false;
  for (size_t i = 0; i < text.size();) {
    const size_t amp = text.find('&', i);
    const size_t stop = amp == std::string_view::npos ? text.size() : amp;
    out->append(text.substr(i, stop - i));
    i = stop;
    if (i == text.size()) break;
    const Reference r = ReadReference(text, i);  // repairs included
    out->append(r.text);
    i = r.end;
  }
  return true;
}

bool MayReadAsMyHtml(std::string_view html) {
  if (html.find("</>") != std::string_view::npos) return true;
  if (html.find('&') == std::string_view::npos) return false;
  std::string lower(html);
  for (char& c : lower) c = AsciiLower(c);
  // what follows each opening tag of such an element, up to its own end tag
  for (const std::string name : {"xmp", "iframe", "noembed", "noframes", "style"}) {
    for (size_t at = lower.find("<" + name); at != std::string::npos;
         at = lower.find("<" + name, at + 1)) {
      const size_t from = at + 1 + name.size();
      size_t end = from;
      while ((end = lower.find("</" + name, end)) != std::string::npos) {
        const size_t k = end + 2 + name.size();
        if (k < lower.size() && EndsTagName(lower[k])) break;
        ++end;
      }
      const std::string_view text =
          html.substr(from, end == std::string::npos ? std::string_view::npos : end - from);
      if (text.find('&') != std::string_view::npos && HoldsLetterEndTag(text)) return true;
    }
  }
  return false;
}

std::optional<std::string> BodyTextOfSimpleDocument(std::string_view html) {
  std::string normalized;
  if (html.find('\r') != std::string_view::npos) {
    normalized = NewlinesNormalized(html);
    html = normalized;
  }
  SimpleDocument body(html);
  if (!body.Run()) return std::nullopt;
  return std::move(body.text());
}

}  // namespace djshard::ops::html
