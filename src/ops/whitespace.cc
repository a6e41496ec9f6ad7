#include "src/ops/whitespace.h"

#include <cstdint>
#ifdef __SSE2__
#include <emmintrin.h>
#include <tmmintrin.h>
#endif

namespace djshard::ops::whitespace {

namespace {

// Length of the odd whitespace character at `p`, or 0 when `p` starts
// another character; `left` bytes are readable.
inline size_t OddLength(const unsigned char* p, size_t left) {
  switch (p[0]) {
    case '\t':
      return 1;
    case 0xC2:
      return left >= 2 && (p[1] == 0x84 || p[1] == 0xA0) ? 2 : 0;
    case 0xE2:
      if (left < 3) return 0;
      if (p[1] == 0x80) return (p[2] >= 0x80 && p[2] <= 0x8D) || p[2] == 0xAF ? 3 : 0;
      if (p[1] == 0x81) return p[2] == 0x9F || p[2] == 0xA0 ? 3 : 0;
      return 0;
    case 0xE3:
      return left >= 3 && p[1] == 0x80 && p[2] == 0x80 ? 3 : 0;
    case 0xEF:
      return left >= 3 && p[1] == 0xBF && p[2] == 0xBC ? 3 : 0;
    default:
      return 0;
  }
}

// Replaces from in[i] to the end, one byte at a time.
size_t ReplaceTail(const unsigned char* in, size_t i, size_t size, unsigned char* dst) {
  const unsigned char* start = dst;
  while (i < size) {
    const size_t len = OddLength(in + i, size - i);
    if (len != 0) {
      *dst++ = ' ';
      i += len;
    } else {
      *dst++ = in[i++];
    }
  }
  return static_cast<size_t>(dst - start);
}

#ifdef __SSE2__
inline __m128i Load16(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline __m128i EqByte(__m128i v, unsigned char c) {
  return _mm_cmpeq_epi8(v, _mm_set1_epi8(static_cast<char>(c)));
}

// Lanes where a two-byte (`two`) or three-byte (`three`) odd whitespace
// character starts at p[i], for i < 16. Reads p[0..18).
struct Starts {
  __m128i two, three;
};
inline Starts MultiByteStarts(const unsigned char* p) {
  const __m128i b0 = Load16(p), b1 = Load16(p + 1), b2 = Load16(p + 2);
  // C2 84, C2 A0
  const __m128i two =
      _mm_and_si128(EqByte(b0, 0xC2), _mm_or_si128(EqByte(b1, 0x84), EqByte(b1, 0xA0)));
  // E2 80 80..8D, E2 80 AF, E2 81 9F, E2 81 A0
  const __m128i off = _mm_sub_epi8(b2, _mm_set1_epi8(static_cast<char>(0x80)));
  const __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(off, _mm_set1_epi8(0x0D)), off);
  const __m128i e2 = _mm_or_si128(
      _mm_and_si128(EqByte(b1, 0x80), _mm_or_si128(low, EqByte(b2, 0xAF))),
      _mm_and_si128(EqByte(b1, 0x81), _mm_or_si128(EqByte(b2, 0x9F), EqByte(b2, 0xA0))));
  __m128i three = _mm_and_si128(EqByte(b0, 0xE2), e2);
  // E3 80 80, EF BF BC
  three = _mm_or_si128(
      three, _mm_and_si128(_mm_and_si128(EqByte(b0, 0xE3), EqByte(b1, 0x80)), EqByte(b2, 0x80)));
  three = _mm_or_si128(
      three, _mm_and_si128(_mm_and_si128(EqByte(b0, 0xEF), EqByte(b1, 0xBF)), EqByte(b2, 0xBC)));
  return {two, three};
}

inline unsigned Bits(__m128i v) { return static_cast<unsigned>(_mm_movemask_epi8(v)); }

// `v` with tabs and the lanes set in `also` turned into spaces.
inline __m128i Spaced(__m128i v, __m128i also) {
  const __m128i to_space = _mm_or_si128(EqByte(v, '\t'), also);
  return _mm_or_si128(_mm_andnot_si128(to_space, v), _mm_and_si128(to_space, _mm_set1_epi8(' ')));
}

// Tabs become spaces inside the vector; the loop stops at each multi-byte
// character, which shrinks to one byte.
size_t ReplaceSse2(const unsigned char* in, size_t size, unsigned char* out) {
  size_t i = 0;
  unsigned char* dst = out;
  while (i + 18 <= size) {
    const Starts s = MultiByteStarts(in + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), Spaced(Load16(in + i), _mm_setzero_si128()));
    const unsigned mask = Bits(_mm_or_si128(s.two, s.three));
    if (mask == 0) {
      i += 16;
      dst += 16;
      continue;
    }
    const size_t k = static_cast<size_t>(__builtin_ctz(mask));
    dst += k;
    i += k;
    *dst++ = ' ';
    i += in[i] == 0xC2 ? 2 : 3;
  }
  return static_cast<size_t>(dst - out) + ReplaceTail(in, i, size, dst);
}

// For each 8-bit mask of bytes to drop from an 8-byte half: the shuffle that
// moves the kept bytes to the front, and how many there are.
struct DropTable {
  uint8_t shuffle[256][16];
  uint8_t kept[256];
  constexpr DropTable() : shuffle{}, kept{} {
    for (int mask = 0; mask < 256; ++mask) {
      int k = 0;
      for (int b = 0; b < 8; ++b) {
        if (((mask >> b) & 1) == 0) shuffle[mask][k++] = static_cast<uint8_t>(b);
      }
      kept[mask] = static_cast<uint8_t>(k);
      for (; k < 16; ++k) shuffle[mask][k] = 0x80;
    }
  }
};
alignas(64) constexpr DropTable kDrop;

// Every block is stored whole: leads of multi-byte characters and tabs
// become spaces in the vector, and their continuation bytes are dropped by
// shuffling each 8-byte half. A character that ends past the block drops its
// last bytes from the next one (`carry`).
__attribute__((target("ssse3"))) size_t ReplaceSsse3(const unsigned char* in, size_t size,
                                                     unsigned char* out) {
  size_t i = 0;
  unsigned char* dst = out;
  uint32_t carry = 0;
  while (i + 18 <= size) {
    const Starts s = MultiByteStarts(in + i);
    const uint32_t two = Bits(s.two), three = Bits(s.three);
    if ((two | three | carry) == 0) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                       Spaced(Load16(in + i), _mm_setzero_si128()));
      i += 16;
      dst += 16;
      continue;
    }
    uint32_t drop = carry | (two << 1) | (three << 1) | (three << 2);
    carry = drop >> 16;
    drop &= 0xFFFF;
    const __m128i w = Spaced(Load16(in + i), _mm_or_si128(s.two, s.three));
    const uint32_t lo = drop & 0xFF, hi = drop >> 8;
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst),
        _mm_shuffle_epi8(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kDrop.shuffle[lo]))));
    dst += kDrop.kept[lo];
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst),
        _mm_shuffle_epi8(_mm_srli_si128(w, 8),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(kDrop.shuffle[hi]))));
    dst += kDrop.kept[hi];
    i += 16;
  }
  // Continuation bytes of a character that started in the last block.
  i += static_cast<size_t>(__builtin_popcount(carry));
  return static_cast<size_t>(dst - out) + ReplaceTail(in, i, size, dst);
}
#endif

}  // namespace

bool Supported(Kernel kernel) {
  switch (kernel) {
    case Kernel::kScalar:
      return true;
#ifdef __SSE2__
    case Kernel::kSse2:
      return true;
    case Kernel::kSsse3:
      return __builtin_cpu_supports("ssse3");
#endif
    default:
      return false;
  }
}

Kernel BestKernel() {
  static const Kernel best = Supported(Kernel::kSsse3)  ? Kernel::kSsse3
                             : Supported(Kernel::kSse2) ? Kernel::kSse2
                                                        : Kernel::kScalar;
  return best;
}

size_t FindOdd(std::string_view text) {
  const auto* data = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
#ifdef __SSE2__
  for (; i + 18 <= size; i += 16) {
    const Starts s = MultiByteStarts(data + i);
    const unsigned mask =
        Bits(_mm_or_si128(_mm_or_si128(s.two, s.three), EqByte(Load16(data + i), '\t')));
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(mask));
  }
#endif
  for (; i < size; ++i) {
    if (OddLength(data + i, size - i) != 0) return i;
  }
  return size;
}

size_t Replace(std::string_view text, char* out, Kernel kernel) {
  const auto* in = reinterpret_cast<const unsigned char*>(text.data());
  auto* dst = reinterpret_cast<unsigned char*>(out);
  switch (kernel) {
#ifdef __SSE2__
    case Kernel::kSse2:
      return ReplaceSse2(in, text.size(), dst);
    case Kernel::kSsse3:
      return ReplaceSsse3(in, text.size(), dst);
#endif
    default:
      return ReplaceTail(in, 0, text.size(), dst);
  }
}

}  // namespace djshard::ops::whitespace
