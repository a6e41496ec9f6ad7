// ftfy.fix_encoding(): detects mojibake and decodes it again, one step at a
// time (ftfy's _fix_encoding_one_step_and_explain), until nothing changes.
#include <algorithm>

#include "src/ops/ftfy/fixes.h"
#include "src/ops/ftfy/ftfy_tables.h"

namespace djshard::ops::ftfy {

namespace {

constexpr int kLatin1 = 0;    // kCharmaps index of "latin-1"
constexpr int kMacRoman = 8;  // kCharmaps index of "macroman"

// The end of the UTF8_DETECTOR_RE match that starts at text[start], or
// `start` when none does: one or more "first byte" characters, each followed
// by as many continuation characters as its UTF-8 sequence needs, the
// alternatives tried in the regex's order.
size_t DetectorMatchEnd(const std::u32string& text, size_t start) {
  if (start > 0 && (DetectorFlags(text[start - 1]) & kContinuationStrict)) return start;
  size_t pos = start;
  while (pos < text.size()) {
    const uint8_t first = DetectorFlags(text[pos]);
    size_t matched = 0;
    for (const auto& [bit, continuations] :
         {std::pair{kFirstOf2, 1}, {kFirstOf3, 2}, {kFirstOf4, 3}}) {
      if (!(first & bit) || pos + continuations >= text.size()) continue;
      bool ok = true;
      for (int k = 1; k <= continuations && ok; ++k) {
        ok = (DetectorFlags(text[pos + k]) & kContinuation) != 0;
      }
      if (ok) {
        matched = 1 + continuations;
        break;
      }
    }
    if (matched == 0) break;
    pos += matched;
  }
  return pos;
}

bool HasUtf8Detector(const std::u32string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (DetectorMatchEnd(text, i) > i) return true;
  }
  return false;
}

// fixes.decode_inconsistent_utf8: fixes each detected UTF-8 mojibake
// sequence on its own, when it is shorter than the text and looks bad.
std::u32string DecodeInconsistentUtf8(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = DetectorMatchEnd(text, i);
    if (end == i) {
      out.push_back(text[i++]);
      continue;
    }
    std::u32string piece = text.substr(i, end - i);
    if (piece.size() < text.size() && IsBad(piece.data(), piece.size())) {
      piece = FixEncoding(std::move(piece));
    }
    out += piece;
    i = end;
  }
  return out;
}

bool HasC1(const std::u32string& text) {
  return std::any_of(text.begin(), text.end(), [](char32_t c) { return c >= 0x80 && c <= 0x9F; });
}

// Tries to read the text as UTF-8 that some charmap decoded. Returns true
// (and the decoded text) at the first charmap that works; records in
// *encodable which charmaps could encode the text.
bool RedecodeAsUtf8(const std::u32string& text, std::u32string* fixed, bool* encodable) {
  std::string bytes;
  for (int c = 0; c < kNumCharmaps; ++c) {
    encodable[c] = EncodeCharmap(text, c, &bytes);
    if (!encodable[c]) continue;
    if (c != kMacRoman && HasAlteredUtf8(bytes)) bytes = RestoreByteA0(bytes);
    if (kCharmaps[c].sloppy) bytes = ReplaceLossySequences(bytes);
    const bool variants =
        std::any_of(bytes.begin(), bytes.end(), [](char b) { return b == '\xED' || b == '\xC0'; });
    if (DecodeUtf8(bytes, variants, fixed)) return true;
  }
  return false;
}

// One step of fix_encoding; returns the text unchanged when it finds nothing.
std::u32string FixEncodingStep(std::u32string text) {
  if (text.empty()) return text;
  const bool ascii = std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x80; });
  if (ascii || !IsBad(text.data(), text.size())) return text;
  std::u32string fixed;
  bool encodable[kNumCharmaps];
  if (RedecodeAsUtf8(text, &fixed, encodable)) return fixed;
  if (HasUtf8Detector(text)) {
    fixed = DecodeInconsistentUtf8(text);
    if (fixed != text) return fixed;
  }
  // Latin-1 that was meant as Windows-1252 (strictly: five bytes undefined).
  if (encodable[kLatin1] && HasC1(text)) {
    const bool defined = std::none_of(text.begin(), text.end(), [](char32_t c) {
      return c == 0x81 || c == 0x8D || c == 0x8F || c == 0x90 || c == 0x9D;
    });
    if (defined) {
      FixC1Controls(&text);
      return text;
    }
  }
  if (HasC1(text)) FixC1Controls(&text);
  return text;
}

}  // namespace

std::u32string FixEncoding(std::u32string text) {
  while (true) {
    std::u32string fixed = FixEncodingStep(text);
    if (fixed == text) return fixed;
    text.swap(fixed);
  }
}

}  // namespace djshard::ops::ftfy
