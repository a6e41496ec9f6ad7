// ftfy.fix_text: the text is fixed in segments (lines, at most a million code
// points each), each segment through every step until it stops changing.
#include "src/ops/ftfy/ftfy.h"

#include <vector>

#include "djshard/ops/text.h"
#include "src/ops/ftfy/fixes.h"

namespace djshard::ops::ftfy {

namespace {

constexpr size_t kMaxDecodeLength = 1000000;  // TextFixerConfig.max_decode_length

// ASCII bytes that some step may change: '&' (HTML entities, when enabled),
// '\r' (line breaks) and the control characters that are removed (ESC, which
// starts a terminal escape, among them).
bool IsAsciiTrigger(unsigned char c, bool unescape_html) {
  return (c == '&' && unescape_html) || c == '\r' || c <= 0x08 || c == 0x0B ||
         (c >= 0x0E && c <= 0x1F) || c == 0x7F;
}

// For each BMP code point, what IsAlreadyFixed needs in one byte: special
// to ftfy, quick-check Yes for each form, a non-zero combining class. Built
// once, read by every thread.
class FastCheck {
 public:
  static const FastCheck& Get() {
    static const FastCheck table;
    return table;
  }
  static constexpr uint8_t kSpecial = 1;
  static constexpr uint8_t kCombining = 2;
  static uint8_t YesBit(unicode::NormalForm form) {
    return static_cast<uint8_t>(4 << static_cast<int>(form));
  }
  uint8_t Bits(uint32_t cp) const { return bits_[cp]; }

 private:
  FastCheck() : bits_(0x10000) {
    for (uint32_t cp = 0; cp < 0x10000; ++cp) {
      uint8_t bits = IsSpecial(cp) ? kSpecial : 0;
      for (const auto form : {unicode::NormalForm::kNfc, unicode::NormalForm::kNfd,
                              unicode::NormalForm::kNfkc, unicode::NormalForm::kNfkd}) {
        const unicode::QuickCheckValue qc = unicode::QuickCheck(form, cp);
        if (qc.yes) bits |= YesBit(form);
        if (qc.combining_class != 0) bits |= kCombining;
      }
      bits_[cp] = bits;
    }
  }
  std::vector<uint8_t> bits_;
};

// True when no step of fix_and_explain can change `segment`: nothing that a
// fixer or the mojibake heuristic looks at, and already normalized.
bool IsAlreadyFixed(std::string_view segment, bool unescape_html, unicode::NormalForm form) {
  const FastCheck& fast = FastCheck::Get();
  const uint8_t yes = FastCheck::YesBit(form);
  uint8_t last_class = 0;
  for (size_t i = 0; i < segment.size();) {
    const unsigned char c = static_cast<unsigned char>(segment[i]);
    if (c < 0x80) {
      if (IsAsciiTrigger(c, unescape_html)) return false;
      last_class = 0;
      ++i;
      continue;
    }
    const uint32_t cp = text::NextCodePoint(segment, &i);
    if (cp < 0x10000) {
      const uint8_t bits = fast.Bits(cp);
      if ((bits & (FastCheck::kSpecial | yes)) != yes) return false;
      if (!(bits & FastCheck::kCombining)) {
        last_class = 0;
        continue;
      }
    } else if (!unicode::QuickCheck(form, cp).yes) {
      return false;  // no astral code point is special
    }
    const uint8_t cls = unicode::QuickCheck(form, cp).combining_class;
    if (cls != 0 && last_class > cls) return false;
    last_class = cls;
  }
  return true;
}

std::u32string Decode(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size();) out.push_back(text::NextCodePoint(utf8, &i));
  return out;
}

// Which of the character fixers may change a text (bits of FixerNeeds).
enum Fixer : uint32_t {
  kNeedsC1 = 1,
  kNeedsLigatures = 2,
  kNeedsWidth = 4,
  kNeedsQuotes = 8,
  kNeedsLineBreaks = 16,
  kNeedsSurrogates = 32,
  kNeedsControls = 64,  // ESC, which starts a terminal escape, included
};

uint32_t FixerNeeds(const std::u32string& text) {
  uint32_t needs = 0;
  for (const char32_t c : text) {
    if (c < 0x80) {
      if (c == U'\r') needs |= kNeedsLineBreaks;
      if (c <= 0x08 || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F) needs |= kNeedsControls;
    } else if (c >= 0xD800 && c <= 0xDFFF) {
      needs |= kNeedsSurrogates;
    } else if (IsSpecial(c)) {
      if (c <= 0x9F) needs |= kNeedsC1;
      if (c == 0x85 || c == 0x2028 || c == 0x2029) needs |= kNeedsLineBreaks;
      if ((c >= 0x132 && c <= 0x1F3) || (c >= 0xFB00 && c <= 0xFB06)) needs |= kNeedsLigatures;
      if (c == 0x3000 || (c >= 0xFF01 && c <= 0xFFEF)) needs |= kNeedsWidth;
      if (c == 0x2BC || (c >= 0x2018 && c <= 0x201F)) needs |= kNeedsQuotes;
      if ((c >= 0x206A && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFC)) {
        needs |= kNeedsControls;
      }
    }
  }
  // Windows-1252 for C1 controls, and the ligature U+0149, give curly quotes.
  if (needs & (kNeedsC1 | kNeedsLigatures)) needs |= kNeedsQuotes;
  return needs;
}

void AppendUtf8(const std::u32string& text, std::string* out) {
  for (const char32_t cp : text) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else {
      text::AppendUtf8(out, cp);
    }
  }
}

// ftfy.fix_and_explain on one segment, with its default configuration. A
// fixer is skipped when the text has nothing it would change.
std::u32string FixSegment(std::u32string text, bool unescape_html, unicode::NormalForm form) {
  // FixEncoding's last result, which it would return unchanged.
  std::u32string encoded;
  bool have_encoded = false;
  while (true) {
    const std::u32string original = text;
    if (unescape_html) UnescapeHtml(&text);
    if (!have_encoded || text != encoded) {
      text = FixEncoding(std::move(text));
      encoded = text;
      have_encoded = true;
    }
    const uint32_t needs = FixerNeeds(text);
    if (needs & kNeedsC1) FixC1Controls(&text);
    if (needs & kNeedsLigatures) FixLatinLigatures(&text);
    if (needs & kNeedsWidth) FixCharacterWidth(&text);
    if (needs & kNeedsQuotes) UncurlQuotes(&text);
    if (needs & kNeedsLineBreaks) FixLineBreaks(&text);
    if (needs & kNeedsSurrogates) FixSurrogates(&text);
    if (needs & kNeedsControls) {
      RemoveTerminalEscapes(&text);
      RemoveControlChars(&text);
    }
    unicode::Normalize(form, &text);
    if (text == original) return text;
  }
}

// The end of the segment that starts at text[start]: after the next '\n', or
// after kMaxDecodeLength code points.
size_t SegmentEnd(std::string_view text, size_t start) {
  const size_t newline = text.find('\n', start);
  size_t end = newline == std::string_view::npos ? text.size() : newline + 1;
  if (end - start > kMaxDecodeLength) {
    size_t i = start;
    for (size_t n = 0; n < kMaxDecodeLength && i < end; ++n) {
      i += text::SequenceLength(static_cast<unsigned char>(text[i]));
    }
    end = i;
  }
  return end;
}

}  // namespace

std::string FixText(std::string_view text, unicode::NormalForm form) {
  std::string out;
  out.reserve(text.size());
  // unescape_html="auto": off from the first segment with a '<' onwards.
  bool unescape_html = true;
  for (size_t start = 0; start < text.size();) {
    const size_t end = SegmentEnd(text, start);
    const std::string_view segment = text.substr(start, end - start);
    if (unescape_html && segment.find('<') != std::string_view::npos) unescape_html = false;
    if (IsAlreadyFixed(segment, unescape_html, form)) {
      out += segment;
    } else {
      AppendUtf8(FixSegment(Decode(segment), unescape_html, form), &out);
    }
    start = end;
  }
  return out;
}

}  // namespace djshard::ops::ftfy
