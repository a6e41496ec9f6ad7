#pragma once

#include <cstddef>
#include <string_view>

namespace djshard::ops::whitespace {

// Data-Juicer's whitespace_normalization_mapper turns 23 code points into
// U+0020 (not \n, \r, \v, \f, U+0085): \t, U+0020, U+0084, U+00A0,
// U+2000..U+200D, U+202F, U+205F, U+2060, U+3000 and U+FFFC. Text is valid
// UTF-8 (the JSON parser checks it), so they are matched as bytes.

// How the replacement runs: one byte at a time, 16 bytes at a time stopping
// at each multi-byte space (SSE2), or 16 bytes at a time with the shrinking
// done by byte shuffles (SSSE3). All give the same bytes.
enum class Kernel { kScalar, kSse2, kSsse3 };

// The fastest kernel this CPU runs.
Kernel BestKernel();
// Whether this CPU and build can run `kernel`.
bool Supported(Kernel kernel);

// Index of the first of the 23 characters in `text` other than U+0020, or
// text.size() when there is none.
size_t FindOdd(std::string_view text);

// Writes `text` with each of the 23 characters replaced by one ' ' to `out`,
// which must have room for text.size() + kSlack bytes (the vector kernels
// store whole blocks). Returns the number of bytes of the result.
constexpr size_t kSlack = 16;
size_t Replace(std::string_view text, char* out, Kernel kernel);

}  // namespace djshard::ops::whitespace
