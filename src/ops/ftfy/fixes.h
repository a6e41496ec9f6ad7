#pragma once

#include <cstdint>
#include <string>

// The steps of ftfy's fix_text, each on text held as code points (Python str)
// or bytes (Python bytes), with ftfy 6.3.1's results.
namespace djshard::ops::ftfy {

// --- Character data (badness.cc) ---

// True when ftfy has a use for `cp` (>= 0x80): a character of its mojibake
// heuristics, or one that a fixer replaces or removes.
bool IsSpecial(uint32_t cp);
// Its UTF8_DETECTOR_RE classes (DetectorBit flags); 0 for most code points.
uint8_t DetectorFlags(uint32_t cp);

// badness.is_bad(): some sequence of `text` looks like mojibake.
bool IsBad(const char32_t* text, size_t size);

// --- Codecs (codecs.cc) ---

// text.encode(kCharmaps[charmap].name) into *out; false when some code point
// has no byte there.
bool EncodeCharmap(const std::u32string& text, int charmap, std::string* out);
// bytes.decode("utf-8") or, with `variants`, bytes.decode("utf-8-variants")
// (CESU-8 surrogate pairs and Java's C0 80 accepted); false on a decoding error.
bool DecodeUtf8(const std::string& bytes, bool variants, std::u32string* out);
// chardata.ALTERED_UTF8_RE.search(bytes).
bool HasAlteredUtf8(const std::string& bytes);
// fixes.restore_byte_a0 / fixes.replace_lossy_sequences.
std::string RestoreByteA0(const std::string& bytes);
std::string ReplaceLossySequences(const std::string& bytes);

// --- Encoding repair (fix_encoding.cc) ---

// ftfy.fix_encoding(): undoes mojibake until nothing changes.
std::u32string FixEncoding(std::u32string text);

// --- Fixers (fixes.cc); each rewrites *text ---

void UnescapeHtml(std::u32string* text);
void RemoveTerminalEscapes(std::u32string* text);
void FixC1Controls(std::u32string* text);
void FixLatinLigatures(std::u32string* text);
void FixCharacterWidth(std::u32string* text);
void UncurlQuotes(std::u32string* text);
void FixLineBreaks(std::u32string* text);
void FixSurrogates(std::u32string* text);
void RemoveControlChars(std::u32string* text);

}  // namespace djshard::ops::ftfy
