#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace djshard {

// 32 lowercase hex characters from the kernel's random source (claim tokens,
// staging-directory names).
std::string RandomHex(size_t num_chars = 32);

// Appends code point `cp` encoded as UTF-8.
void AppendUtf8(std::string* out, uint32_t cp);

// Lowercase hex of raw bytes.
std::string HexEncode(const unsigned char* data, size_t size);

// True when every byte of `s` is ASCII whitespace (space, \t, \n, \v, \f, \r).
bool IsBlank(std::string_view s);

bool EndsWithIgnoreCase(std::string_view s, std::string_view suffix);

// Decimal digits of n (digits(0) == 1).
int DecimalDigits(uint64_t n);

// n rendered with at least `width` digits, zero-padded.
std::string ZeroPad(uint64_t n, int width);

// The current host name, as workers record it.
std::string HostName();

// How many '\n' bytes `s` holds: the row count of JSONL bytes, at several
// GB/s (std::count runs a byte at a time).
uint64_t CountNewlines(std::string_view s);

}  // namespace djshard
