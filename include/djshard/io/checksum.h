#pragma once

// Content checksums of the files djshard checks itself (SPEC-elastic-sharding
// "Integrity"): XXH3-128 in every record written now (field `xxh3_128`, 32
// lowercase hex in the canonical big-endian form), SHA-256 in records of older
// schemas (field `sha256`), which stay readable. SHA-256 for what people read
// (the manifest's inputs, the merged output) is io/sha256.h.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace djshard::io {

// Incremental XXH3-128 (libxxhash). Not copyable.
class Xxh3 {
 public:
  Xxh3();
  ~Xxh3();
  Xxh3(const Xxh3&) = delete;
  Xxh3& operator=(const Xxh3&) = delete;

  void Update(const void* data, size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // 32 lowercase hex digits, big-endian (XXH128_canonicalFromHash).
  std::string HexDigest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

enum class ChecksumKind { kXxh3_128, kSha256 };

// A checksum as a record holds it.
struct Checksum {
  ChecksumKind kind = ChecksumKind::kXxh3_128;
  std::string hex;

  // The record field: "xxh3_128" or "sha256", after `prefix` ("origins_",
  // "input_partition_", ...).
  std::string field(std::string_view prefix = "") const;
  bool empty() const { return hex.empty(); }
  bool operator==(const Checksum& o) const { return kind == o.kind && hex == o.hex; }
  bool operator!=(const Checksum& o) const { return !(*this == o); }
  // "xxh3_128 0123456789ab" (12 digits), for messages.
  std::string Short() const;

  static Checksum Xxh3(std::string hex) { return {ChecksumKind::kXxh3_128, std::move(hex)}; }
  // j[prefix + "xxh3_128"], else j[prefix + "sha256"] (a record of an older
  // schema); throws nlohmann::json::out_of_range when j has neither, as a
  // missing field does.
  static Checksum FromJson(const nlohmann::json& j, std::string_view prefix = "");
  // The same, or an empty checksum when j is no object or has neither field.
  static Checksum FromJsonOrEmpty(const nlohmann::json& j, std::string_view prefix = "");
  // Sets j[field(prefix)] = hex.
  void ToJson(nlohmann::json& j, std::string_view prefix = "") const;
  // {field(prefix): hex}, or null when empty.
  nlohmann::json AsJson(std::string_view prefix = "") const;
};

// Hashes bytes with one checksum kind: XXH3-128 for new records, or the kind
// of a record being checked.
class ChecksumHasher {
 public:
  explicit ChecksumHasher(ChecksumKind kind = ChecksumKind::kXxh3_128);
  ~ChecksumHasher();
  ChecksumHasher(const ChecksumHasher&) = delete;
  ChecksumHasher& operator=(const ChecksumHasher&) = delete;

  void Update(const void* data, size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // The checksum; the hasher must not be updated afterwards.
  Checksum Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The checksum of a whole file's bytes, of the given kind.
Checksum ChecksumOfFile(const std::string& path, ChecksumKind kind = ChecksumKind::kXxh3_128);

}  // namespace djshard::io
