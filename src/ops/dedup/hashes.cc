#include "src/ops/dedup/hashes.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "src/ops/dedup/simd.h"

namespace djshard::ops::dedup {
namespace {

inline uint32_t Rotl(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

inline uint32_t LoadLe32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // x86: little-endian
}

// ------------------------------------------------------------------ MD5

constexpr uint32_t kMd5K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
constexpr int kMd5Shift[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

void Md5Block(uint32_t s[4], const uint8_t* block) {
  uint32_t m[16];
  for (int i = 0; i < 16; ++i) m[i] = LoadLe32(block + 4 * i);
  uint32_t a = s[0], b = s[1], c = s[2], d = s[3];
  for (int i = 0; i < 64; ++i) {
    uint32_t f;
    int g;
    const int round = i >> 4;
    if (round == 0) {
      f = (b & c) | (~b & d);
      g = i;
    } else if (round == 1) {
      f = (d & b) | (~d & c);
      g = (5 * i + 1) & 15;
    } else if (round == 2) {
      f = b ^ c ^ d;
      g = (3 * i + 5) & 15;
    } else {
      f = c ^ (b | ~d);
      g = (7 * i) & 15;
    }
    const uint32_t t = d;
    d = c;
    c = b;
    b = b + Rotl(a + f + kMd5K[i] + m[g], kMd5Shift[round][i & 3]);
    a = t;
  }
  s[0] += a;
  s[1] += b;
  s[2] += c;
  s[3] += d;
}

// The padded last blocks of a message of `size` bytes whose final size % 64
// bytes are at `rest`, written to `out` (Merkle–Damgård: 0x80, zeros, the bit
// length, big-endian for SHA-1, little-endian for MD5); returns how many
// blocks (1 or 2) it wrote.
__attribute__((always_inline)) inline size_t PadTail(const uint8_t* rest, uint64_t size,
                                                     bool big_endian_length, uint8_t* out) {
  const size_t n = size % 64, blocks = n + 9 <= 64 ? 1 : 2, total = 64 * blocks;
  std::memset(out, 0, total);
  std::memcpy(out, rest, n);
  out[n] = 0x80;
  const uint64_t bits = size * 8;
  for (size_t k = 0; k < 8; ++k) {
    out[big_endian_length ? total - 1 - k : total - 8 + k] = static_cast<uint8_t>(bits >> (8 * k));
  }
  return blocks;
}

// Runs `block` over `data` with Merkle–Damgård padding; `big_endian_length`
// selects SHA-1's length encoding (MD5's is little-endian).
template <typename BlockFn>
void Digest(std::string_view data, bool big_endian_length, BlockFn block) {
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  const size_t whole = data.size() / 64;
  for (size_t b = 0; b < whole; ++b) block(p + 64 * b);
  uint8_t tail[128];
  const size_t blocks = PadTail(p + 64 * whole, data.size(), big_endian_length, tail);
  for (size_t b = 0; b < blocks; ++b) block(tail + 64 * b);
}

void Md5State(std::string_view data, uint32_t s[4]) {
  s[0] = 0x67452301;
  s[1] = 0xefcdab89;
  s[2] = 0x98badcfe;
  s[3] = 0x10325476;
  Digest(data, false, [s](const uint8_t* b) { Md5Block(s, b); });
}

// One MD5 step in 16 lanes (RFC 1321 §3.4): b + ((a + f + m + k) <<< shift).
template <int kShift>
__attribute__((target("avx512f"), always_inline)) inline __m512i Md5Step(__m512i a, __m512i b,
                                                                         __m512i f, __m512i m,
                                                                         uint32_t k) {
  // a + m + k does not wait for f, which the previous step's result feeds
  const __m512i sum = _mm512_add_epi32(
      f, _mm512_add_epi32(a, _mm512_add_epi32(m, _mm512_set1_epi32(static_cast<int>(k)))));
  return _mm512_add_epi32(b, _mm512_rol_epi32(sum, kShift));
}

// The message word MD5 step i adds (RFC 1321 §3.4): word i in round 1, then
// 5i + 1, 3i + 5 and 7i (mod 16) in rounds 2, 3 and 4.
constexpr int Md5MessageIndex(int i) {
  switch (i >> 4) {
    case 0:
      return i;
    case 1:
      return (5 * i + 1) & 15;
    case 2:
      return (3 * i + 5) & 15;
    default:
      return (7 * i) & 15;
  }
}

// MD5 step kStep in 16 lanes: the round's function of b, c and d (F, G, H,
// I as ternary logic), then the step's word, constant and rotation.
template <int kStep>
__attribute__((target("avx512f"), always_inline)) inline void Md5Step16(__m512i& a, __m512i& b,
                                                                        __m512i& c, __m512i& d,
                                                                        const __m512i m[16]) {
  constexpr int kRound = kStep >> 4;
  __m512i f;
  if constexpr (kRound == 0) {
    f = _mm512_ternarylogic_epi32(b, c, d, 0xCA);  // F: (b & c) | (~b & d)
  } else if constexpr (kRound == 1) {
    f = _mm512_ternarylogic_epi32(d, b, c, 0xCA);  // G: (d & b) | (~d & c)
  } else if constexpr (kRound == 2) {
    f = _mm512_ternarylogic_epi32(b, c, d, 0x96);  // H: b ^ c ^ d
  } else {
    f = _mm512_ternarylogic_epi32(b, c, d, 0x39);  // I: c ^ (b | ~d)
  }
  const __m512i t = d;
  d = c;
  c = b;
  b = Md5Step<kMd5Shift[kRound][kStep & 3]>(a, b, f, m[Md5MessageIndex(kStep)], kMd5K[kStep]);
  a = t;
}

// The 64 steps, each with its constants known at compile time.
template <int... kSteps>
__attribute__((target("avx512f"), always_inline)) inline void Md5Steps16(
    std::integer_sequence<int, kSteps...>, __m512i& a, __m512i& b, __m512i& c, __m512i& d,
    const __m512i m[16]) {
  (Md5Step16<kSteps>(a, b, c, d, m), ...);
}

// The 64 steps of two 16-lane groups, step by step.
template <int... kSteps>
__attribute__((target("avx512f"), always_inline)) inline void Md5Steps32(
    std::integer_sequence<int, kSteps...>, __m512i a[2], __m512i b[2], __m512i c[2], __m512i d[2],
    const __m512i m[2][16]) {
  ((Md5Step16<kSteps>(a[0], b[0], c[0], d[0], m[0]),
    Md5Step16<kSteps>(a[1], b[1], c[1], d[1], m[1])),
   ...);
}

// The 16 words of 16 lanes' 64-byte blocks (lane i's at rows[i]): out[j]
// holds word j of every lane, lane i in element i. The 16 x 16 matrix of
// words is transposed in four rounds of shuffles: pairs of 32-bit words,
// pairs of 64-bit words, then the 128-bit quarters twice.
__attribute__((target("avx512f"), always_inline)) inline void LoadLanes16(
    const uint8_t* const rows[16], __m512i out[16]) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(rows[i]);
  for (int i = 0; i < 16; i += 2) {  // quarter q: r_i[4q], r_i+1[4q], r_i[4q+1], r_i+1[4q+1]
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // r[g + s]: quarter q holds rows g..g+3 of word 4q + s
    r[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    r[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    r[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    r[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int s = 0; s < 4; ++s) {  // quarter q of out[4q + s] is quarter q of r[4g + s], g = 0..3
    const __m512i c0 = _mm512_shuffle_i32x4(r[s], r[4 + s], 0x44);
    const __m512i c1 = _mm512_shuffle_i32x4(r[s], r[4 + s], 0xEE);
    const __m512i c2 = _mm512_shuffle_i32x4(r[8 + s], r[12 + s], 0x44);
    const __m512i c3 = _mm512_shuffle_i32x4(r[8 + s], r[12 + s], 0xEE);
    out[s] = _mm512_shuffle_i32x4(c0, c2, 0x88);
    out[4 + s] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
    out[8 + s] = _mm512_shuffle_i32x4(c1, c3, 0x88);
    out[12 + s] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
  }
}

// One MD5 compression in each of 16 lanes: lane i's block at rows[i], its
// state in state[0..3][i] (updated).
__attribute__((target("avx512f"))) void Md5Compress16(const uint8_t* const rows[16],
                                                      uint32_t state[4][16]) {
  __m512i m[16];
  LoadLanes16(rows, m);
  const __m512i a0 = _mm512_loadu_si512(state[0]), b0 = _mm512_loadu_si512(state[1]),
                c0 = _mm512_loadu_si512(state[2]), d0 = _mm512_loadu_si512(state[3]);
  __m512i a = a0, b = b0, c = c0, d = d0;
  Md5Steps16(std::make_integer_sequence<int, 64>{}, a, b, c, d, m);
  _mm512_storeu_si512(state[0], _mm512_add_epi32(a, a0));
  _mm512_storeu_si512(state[1], _mm512_add_epi32(b, b0));
  _mm512_storeu_si512(state[2], _mm512_add_epi32(c, c0));
  _mm512_storeu_si512(state[3], _mm512_add_epi32(d, d0));
}

// Two independent 16-lane compressions, their steps interleaved: one MD5
// step waits about four cycles for the one before, and the other group's
// step fills them.
__attribute__((target("avx512f"))) void Md5Compress32(const uint8_t* const rows[32],
                                                      uint32_t state[2][4][16]) {
  alignas(64) __m512i m[2][16];
  LoadLanes16(rows, m[0]);
  LoadLanes16(rows + 16, m[1]);
  __m512i a[2], b[2], c[2], d[2], a0[2], b0[2], c0[2], d0[2];
  for (int g = 0; g < 2; ++g) {
    a[g] = a0[g] = _mm512_loadu_si512(state[g][0]);
    b[g] = b0[g] = _mm512_loadu_si512(state[g][1]);
    c[g] = c0[g] = _mm512_loadu_si512(state[g][2]);
    d[g] = d0[g] = _mm512_loadu_si512(state[g][3]);
  }
  Md5Steps32(std::make_integer_sequence<int, 64>{}, a, b, c, d, m);
  for (int g = 0; g < 2; ++g) {
    _mm512_storeu_si512(state[g][0], _mm512_add_epi32(a[g], a0[g]));
    _mm512_storeu_si512(state[g][1], _mm512_add_epi32(b[g], b0[g]));
    _mm512_storeu_si512(state[g][2], _mm512_add_epi32(c[g], c0[g]));
    _mm512_storeu_si512(state[g][3], _mm512_add_epi32(d[g], d0[g]));
  }
}

bool CpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has && !PortableKernelsOnly();
}

// ---------------------------------------------------------------- SHA-1

void Sha1BlockScalar(uint32_t s[5], const uint8_t* block) {
  uint32_t w[80];
  for (int i = 0; i < 16; ++i) w[i] = __builtin_bswap32(LoadLe32(block + 4 * i));
  for (int i = 16; i < 80; ++i) w[i] = Rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = s[0], b = s[1], c = s[2], d = s[3], e = s[4];
  for (int i = 0; i < 80; ++i) {
    uint32_t f, k;
    if (i < 20) {
      f = (b & c) | (~b & d);
      k = 0x5a827999;
    } else if (i < 40) {
      f = b ^ c ^ d;
      k = 0x6ed9eba1;
    } else if (i < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8f1bbcdc;
    } else {
      f = b ^ c ^ d;
      k = 0xca62c1d6;
    }
    const uint32_t t = Rotl(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = Rotl(b, 30);
    b = a;
    a = t;
  }
  s[0] += a;
  s[1] += b;
  s[2] += c;
  s[3] += d;
  s[4] += e;
}

// One 64-byte block with the SHA extensions: 20 groups of 4 rounds, the
// message schedule W[g] = msg2(msg1(W[g-4], W[g-3]) ^ W[g-2], W[g-1]).
__attribute__((target("sha,sse4.1,ssse3"))) void Sha1BlockShaNi(uint32_t s[5],
                                                                const uint8_t* block) {
  const __m128i byte_swap = _mm_set_epi64x(0x0001020304050607LL, 0x08090a0b0c0d0e0fLL);
  __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)), 0x1B);
  const __m128i abcd_save = abcd;
  const __m128i e_save = _mm_set_epi32(static_cast<int>(s[4]), 0, 0, 0);
  __m128i w[20];
  for (int g = 0; g < 4; ++g) {
    w[g] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * g)),
                            byte_swap);
  }
  __m128i previous = abcd;  // the abcd whose A becomes the next group's E
  for (int g = 0; g < 20; ++g) {
    if (g >= 4) {
      w[g] = _mm_sha1msg2_epu32(_mm_xor_si128(_mm_sha1msg1_epu32(w[g - 4], w[g - 3]), w[g - 2]),
                                w[g - 1]);
    }
    const __m128i e = g == 0 ? _mm_add_epi32(e_save, w[0]) : _mm_sha1nexte_epu32(previous, w[g]);
    previous = abcd;
    switch (g / 5) {
      case 0:
        abcd = _mm_sha1rnds4_epu32(abcd, e, 0);
        break;
      case 1:
        abcd = _mm_sha1rnds4_epu32(abcd, e, 1);
        break;
      case 2:
        abcd = _mm_sha1rnds4_epu32(abcd, e, 2);
        break;
      default:
        abcd = _mm_sha1rnds4_epu32(abcd, e, 3);
        break;
    }
  }
  const __m128i e_out = _mm_sha1nexte_epu32(previous, e_save);
  abcd = _mm_shuffle_epi32(_mm_add_epi32(abcd, abcd_save), 0x1B);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(s), abcd);
  s[4] = static_cast<uint32_t>(_mm_extract_epi32(e_out, 3));
}

// One SHA-1 compression in each of 16 lanes: lane i's block at rows[i], its
// state in state[0..4][i] (updated).
__attribute__((target("avx512f,avx512bw"))) void Sha1Compress16(const uint8_t* const rows[16],
                                                                uint32_t state[5][16]) {
  const __m512i byte_swap = _mm512_set4_epi32(0x0c0d0e0f, 0x08090a0b, 0x04050607, 0x00010203);
  __m512i w[16];
  LoadLanes16(rows, w);
  for (__m512i& word : w) word = _mm512_shuffle_epi8(word, byte_swap);
  const __m512i a0 = _mm512_loadu_si512(state[0]), b0 = _mm512_loadu_si512(state[1]),
                c0 = _mm512_loadu_si512(state[2]), d0 = _mm512_loadu_si512(state[3]),
                e0 = _mm512_loadu_si512(state[4]);
  __m512i a = a0, b = b0, c = c0, d = d0, e = e0;
  for (int i = 0; i < 80; ++i) {
    if (i >= 16) {
      const __m512i x =
          _mm512_ternarylogic_epi32(w[(i - 3) & 15], w[(i - 8) & 15], w[(i - 14) & 15], 0x96);
      w[i & 15] = _mm512_rol_epi32(_mm512_xor_si512(x, w[i & 15]), 1);
    }
    __m512i f;
    uint32_t k;
    if (i < 20) {
      f = _mm512_ternarylogic_epi32(b, c, d, 0xCA);
      k = 0x5a827999;
    } else if (i < 40) {
      f = _mm512_ternarylogic_epi32(b, c, d, 0x96);
      k = 0x6ed9eba1;
    } else if (i < 60) {
      f = _mm512_ternarylogic_epi32(b, c, d, 0xE8);
      k = 0x8f1bbcdc;
    } else {
      f = _mm512_ternarylogic_epi32(b, c, d, 0x96);
      k = 0xca62c1d6;
    }
    const __m512i t = _mm512_add_epi32(
        _mm512_add_epi32(_mm512_rol_epi32(a, 5), f),
        _mm512_add_epi32(_mm512_add_epi32(e, w[i & 15]), _mm512_set1_epi32(static_cast<int>(k))));
    e = d;
    d = c;
    c = _mm512_rol_epi32(b, 30);
    b = a;
    a = t;
  }
  _mm512_storeu_si512(state[0], _mm512_add_epi32(a, a0));
  _mm512_storeu_si512(state[1], _mm512_add_epi32(b, b0));
  _mm512_storeu_si512(state[2], _mm512_add_epi32(c, c0));
  _mm512_storeu_si512(state[3], _mm512_add_epi32(d, d0));
  _mm512_storeu_si512(state[4], _mm512_add_epi32(e, e0));
}

bool CpuHasAvx512Bw() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return has && !PortableKernelsOnly();
}

bool CpuHasSha() {
  static const bool has = CpuHasShaExtensions();
  return has && !PortableKernelsOnly();
}

void Sha1State(std::string_view data, uint32_t s[5], bool sha_ni) {
  s[0] = 0x67452301;
  s[1] = 0xefcdab89;
  s[2] = 0x98badcfe;
  s[3] = 0x10325476;
  s[4] = 0xc3d2e1f0;
  if (sha_ni) {
    Digest(data, true, [s](const uint8_t* b) { Sha1BlockShaNi(s, b); });
  } else {
    Digest(data, true, [s](const uint8_t* b) { Sha1BlockScalar(s, b); });
  }
}

}  // namespace

std::array<uint8_t, 16> Md5(std::string_view data) {
  uint32_t s[4];
  Md5State(data, s);
  std::array<uint8_t, 16> out;
  std::memcpy(out.data(), s, 16);  // little-endian words
  return out;
}

uint64_t Md5High64(std::string_view data) {
  uint32_t s[4];
  Md5State(data, s);
  return (static_cast<uint64_t>(__builtin_bswap32(s[0])) << 32) | __builtin_bswap32(s[1]);
}

namespace {

// Blocks per lane of the 16-lane digests: messages of up to 1015 bytes.
constexpr size_t kMaxBlocks = 16;

// One lane of PadLanes with masked loads: each 64-byte block is the
// message's bytes (none read past its end), zeros, the 0x80 and, in the last
// block, the length, written in one store.
__attribute__((target("avx512f,avx512bw"))) void PadLaneAvx512(const uint8_t* msg, size_t len,
                                                               size_t nblocks,
                                                               bool big_endian_length,
                                                               uint8_t* out) {
  const uint64_t bits = static_cast<uint64_t>(len) * 8;
  const auto length = static_cast<long long>(big_endian_length ? __builtin_bswap64(bits) : bits);
  for (size_t b = 0, from = 0; b < nblocks; ++b, from += 64) {
    const size_t have = len > from ? std::min<size_t>(len - from, 64) : 0;
    const __mmask64 bytes = have == 64 ? ~__mmask64{0} : (__mmask64{1} << have) - 1;
    __m512i v = _mm512_maskz_loadu_epi8(bytes, msg + from);
    if (len >= from && len - from < 64) {
      v = _mm512_mask_set1_epi8(v, __mmask64{1} << (len - from), static_cast<char>(0x80));
    }
    if (b + 1 == nblocks) v = _mm512_mask_set1_epi64(v, 0x80, length);
    _mm512_storeu_si512(out + from, v);
  }
}

// Pads each of the n (at most 16) messages into its lane as MD5 and SHA-1 do:
// 0x80, zeros, the bit length in the last 8 bytes (little-endian for MD5,
// big-endian for SHA-1). Lane i starts at blocks + i * *stride, *stride being
// 64 bytes times the most blocks of any lane (returned). A message too long
// for kMaxBlocks gets 0 blocks (it is hashed alone).
size_t PadLanes(const std::string_view* msgs, size_t n, bool big_endian_length, uint8_t* blocks,
                size_t* stride, size_t* nblocks) {
  size_t most = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t len = msgs[i].size();
    nblocks[i] = len + 9 > 64 * kMaxBlocks ? 0 : (len + 9 + 63) / 64;
    most = std::max(most, nblocks[i]);
  }
  *stride = 64 * std::max<size_t>(most, 1);
  const bool masked = CpuHasAvx512Bw();
  for (size_t i = 0; i < n; ++i) {
    if (nblocks[i] == 0) continue;
    const size_t len = msgs[i].size();
    uint8_t* b = blocks + i * *stride;
    if (masked) {
      PadLaneAvx512(reinterpret_cast<const uint8_t*>(msgs[i].data()), len, nblocks[i],
                    big_endian_length, b);
      continue;
    }
    std::memcpy(b, msgs[i].data(), len);
    const size_t total = 64 * nblocks[i];
    std::memset(b + len, 0, total - len);
    b[len] = 0x80;
    const uint64_t bits = static_cast<uint64_t>(len) * 8;
    for (int k = 0; k < 8; ++k) {
      b[big_endian_length ? total - 1 - k : total - 8 + k] = static_cast<uint8_t>(bits >> (8 * k));
    }
  }
  return most;
}

// The 16 lanes' blocks at base + i * stride.
std::array<const uint8_t*, 16> LaneRows(const uint8_t* base, size_t stride) {
  std::array<const uint8_t*, 16> rows;
  for (size_t i = 0; i < 16; ++i) rows[i] = base + i * stride;
  return rows;
}

}  // namespace

void Md5Many(const std::string_view* msgs, size_t n, std::array<uint8_t, 16>* out) {
  if (!CpuHasAvx512() || n < 2) {
    for (size_t i = 0; i < n; ++i) out[i] = Md5(msgs[i]);
    return;
  }
  // Longest first, so that the lanes run out of messages at about the same
  // time: in input order a batch's last long message keeps one lane busy
  // while the others idle (a fifth of the compressions on typical corpora).
  // Keys: the length's complement above the index.
  thread_local std::vector<uint64_t> order;
  order.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t len = std::min<uint64_t>(msgs[i].size(), UINT32_MAX);
    order[i] = ((UINT32_MAX - len) << 32) | i;
  }
  std::sort(order.begin(), order.end());
  // A lane hashes its message's whole blocks where they are, then its padded
  // tail (one or two blocks, padded once the lane reaches it, when the
  // message's end is in the cache), then takes the next message. rows[l] is
  // the lane's next block and left[l] the blocks left in its current run
  // (whole blocks or tail); an idle lane reads zeros and never runs out.
  struct Lane {
    size_t msg = SIZE_MAX;  // SIZE_MAX: idle
    bool in_tail = false;
    alignas(64) uint8_t tail[128];
  };
  alignas(64) static const uint8_t kIdle[64] = {};
  constexpr size_t kLanes = 2 * kMd5Lanes;
  Lane lanes[kLanes];
  const uint8_t* rows[kLanes];
  size_t left[kLanes], step[kLanes];
  alignas(64) uint32_t state[2][4][16];
  size_t next = 0, busy = 0;
  const auto pad_tail = [&](size_t l) {
    Lane& lane = lanes[l];
    const std::string_view m = msgs[lane.msg];
    lane.in_tail = true;
    rows[l] = lane.tail;
    left[l] = PadTail(reinterpret_cast<const uint8_t*>(m.data()) + (m.size() & ~size_t{63}),
                      m.size(), /*big_endian_length=*/false, lane.tail);
  };
  const auto start = [&](size_t l) {
    Lane& lane = lanes[l];
    if (next == n) {
      lane.msg = SIZE_MAX;
      rows[l] = kIdle;
      left[l] = SIZE_MAX;
      step[l] = 0;
      return;
    }
    lane.msg = static_cast<uint32_t>(order[next++]);
    if (next < n) __builtin_prefetch(msgs[static_cast<uint32_t>(order[next])].data());
    const std::string_view m = msgs[lane.msg];
    step[l] = 64;
    if (m.size() < 64) {
      pad_tail(l);
    } else {
      lane.in_tail = false;
      rows[l] = reinterpret_cast<const uint8_t*>(m.data());
      left[l] = m.size() / 64;
    }
    uint32_t(&s)[4][16] = state[l / 16];
    s[0][l % 16] = 0x67452301;
    s[1][l % 16] = 0xefcdab89;
    s[2][l % 16] = 0x98badcfe;
    s[3][l % 16] = 0x10325476;
    ++busy;
  };
  for (size_t l = 0; l < kLanes; ++l) start(l);
  while (busy > 0) {
    const size_t run = *std::min_element(left, left + kLanes);
    for (size_t k = 0; k < run; ++k) {
      Md5Compress32(rows, state);
      for (size_t l = 0; l < kLanes; ++l) rows[l] += step[l];
    }
    for (size_t l = 0; l < kLanes; ++l) {
      if ((left[l] -= run) > 0) continue;
      Lane& lane = lanes[l];
      if (!lane.in_tail) {
        pad_tail(l);
        continue;
      }
      for (int w = 0; w < 4; ++w) {  // little-endian words
        std::memcpy(out[lane.msg].data() + 4 * w, &state[l / 16][w][l % 16], 4);
      }
      --busy;
      start(l);
    }
  }
}

void Md5High64Batch(const std::string_view* msgs, size_t n, uint64_t* out) {
  if (!CpuHasAvx512() || n < 2) {
    for (size_t i = 0; i < n; ++i) out[i] = Md5High64(msgs[i]);
    return;
  }
  // Each lane's message padded to 1 to kMaxBlocks blocks; longer ones are hashed alone.
  alignas(64) uint8_t blocks[kMd5Lanes * 64 * kMaxBlocks];
  size_t nblocks[kMd5Lanes] = {}, stride = 0;
  const size_t most = PadLanes(msgs, n, /*big_endian_length=*/false, blocks, &stride, nblocks);
  alignas(64) uint32_t state[4][16];
  for (int l = 0; l < 16; ++l) {
    state[0][l] = 0x67452301;
    state[1][l] = 0xefcdab89;
    state[2][l] = 0x98badcfe;
    state[3][l] = 0x10325476;
  }
  for (size_t pass = 0; pass < most; ++pass) {
    alignas(64) uint32_t before[4][16];
    std::memcpy(before, state, sizeof state);
    Md5Compress16(LaneRows(blocks + 64 * pass, stride).data(), state);
    for (size_t i = 0; i < kMd5Lanes; ++i) {
      if (nblocks[i] > pass) continue;  // this lane was done: keep its digest
      for (int w = 0; w < 4; ++w) state[w][i] = before[w][i];
    }
  }
  for (size_t i = 0; i < n; ++i) {
    out[i] = nblocks[i] > 0 ? (static_cast<uint64_t>(__builtin_bswap32(state[0][i])) << 32) |
                                  __builtin_bswap32(state[1][i])
                            : Md5High64(msgs[i]);
  }
}

namespace {

// Bytes of 0xFF where a bit is set, subtracted from 64 byte counters.
__attribute__((target("avx512f,avx512bw"))) void CountBitsAvx512(const uint64_t* hashes, size_t n,
                                                                 int64_t ones[64]) {
  __m512i counts = _mm512_setzero_si512();
  for (size_t i = 0; i < n; ++i) {
    counts = _mm512_sub_epi8(counts, _mm512_movm_epi8(hashes[i]));
  }
  alignas(64) uint8_t bytes[64];
  _mm512_store_si512(bytes, counts);
  for (int b = 0; b < 64; ++b) ones[b] += bytes[b];
}

}  // namespace

void CountBits(const uint64_t* hashes, size_t n, int64_t ones[64]) {
  if (CpuHasAvx512Bw()) {
    for (size_t i = 0; i < n; i += 255)
      CountBitsAvx512(hashes + i, std::min<size_t>(255, n - i), ones);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    for (int b = 0; b < 64; ++b) ones[b] += (hashes[i] >> b) & 1;
  }
}

uint32_t Sha1Low32(std::string_view data) {
  uint32_t s[5];
  Sha1State(data, s, CpuHasSha());
  return __builtin_bswap32(s[0]);
}

void Sha1Low32Batch(const std::string_view* msgs, size_t n, uint32_t* out) {
  if (!CpuHasAvx512Bw() || n < 2) {
    for (size_t i = 0; i < n; ++i) out[i] = Sha1Low32(msgs[i]);
    return;
  }
  alignas(64) uint8_t blocks[kSha1Lanes * 64 * kMaxBlocks];
  size_t nblocks[kSha1Lanes] = {}, stride = 0;
  const size_t most = PadLanes(msgs, n, /*big_endian_length=*/true, blocks, &stride, nblocks);
  alignas(64) uint32_t state[5][16];
  constexpr uint32_t kInit[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  for (int w = 0; w < 5; ++w) {
    for (int l = 0; l < 16; ++l) state[w][l] = kInit[w];
  }
  for (size_t pass = 0; pass < most; ++pass) {
    alignas(64) uint32_t before[5][16];
    std::memcpy(before, state, sizeof state);
    Sha1Compress16(LaneRows(blocks + 64 * pass, stride).data(), state);
    for (size_t i = 0; i < kSha1Lanes; ++i) {
      if (nblocks[i] > pass) continue;
      for (int w = 0; w < 5; ++w) state[w][i] = before[w][i];
    }
  }
  for (size_t i = 0; i < n; ++i) {
    out[i] = nblocks[i] > 0 ? __builtin_bswap32(state[0][i]) : Sha1Low32(msgs[i]);
  }
}

uint32_t Sha1Low32Scalar(std::string_view data) {
  uint32_t s[5];
  Sha1State(data, s, false);
  return __builtin_bswap32(s[0]);
}

bool Sha1UsesShaExtensions() { return CpuHasSha(); }

namespace {
std::atomic<bool> portable_only{false};
}  // namespace

void UsePortableKernelsOnly(bool portable) { portable_only.store(portable); }
bool PortableKernelsOnly() { return portable_only.load(std::memory_order_relaxed); }

}  // namespace djshard::ops::dedup
