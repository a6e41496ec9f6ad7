#pragma once
// The two digests the deduplicators need: MD5 (document_deduplicator's
// hexdigest, simhash-pybind's unsigned_hash) and SHA-1 (Data-Juicer's
// sha1_hash32 for minhash), one message at a time.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace djshard::ops::dedup {

// The MD5 digest of `data`.
std::array<uint8_t, 16> Md5(std::string_view data);

// The MD5 digests of n messages of any length: out[i] = Md5(msgs[i]). With
// AVX-512, 16 messages are hashed at once, each lane taking the next message
// as soon as its own ends.
void Md5Many(const std::string_view* msgs, size_t n, std::array<uint8_t, 16>* out);

// simhash-pybind's unsigned_hash: the first 8 bytes of MD5 as a big-endian integer.
uint64_t Md5High64(std::string_view data);

// Md5High64 of up to kMd5Lanes messages at once: out[i] = Md5High64(msgs[i]).
// Messages of at most 1015 bytes (16 MD5 blocks) go through 16 AVX-512 lanes
// when the CPU has them; the others one at a time.
constexpr size_t kMd5Lanes = 16;
void Md5High64Batch(const std::string_view* msgs, size_t n, uint64_t* out);

// Adds, for each bit b, the number of `hashes` with bit b set to ones[b].
void CountBits(const uint64_t* hashes, size_t n, int64_t ones[64]);

// Data-Juicer's sha1_hash32: the first 4 bytes of SHA-1 as a little-endian integer.
uint32_t Sha1Low32(std::string_view data);

// Sha1Low32 of up to kSha1Lanes messages at once (16 AVX-512 lanes for messages
// of at most 1015 bytes when the CPU has them).
constexpr size_t kSha1Lanes = 16;
void Sha1Low32Batch(const std::string_view* msgs, size_t n, uint32_t* out);

// The same without the CPU's SHA instructions (tests compare the two).
uint32_t Sha1Low32Scalar(std::string_view data);

// Makes every deduplicator kernel (these digests, bit counts and the minhash
// permutations) use its portable code whatever the CPU has, as on a machine
// without AVX-512 or SHA instructions: tests check both paths on one machine.
// Not thread-safe against kernels running at the time.
void UsePortableKernelsOnly(bool portable);
bool PortableKernelsOnly();

// Whether Sha1Low32 uses the CPU's SHA instructions (for the benchmark's report).
bool Sha1UsesShaExtensions();

}  // namespace djshard::ops::dedup
