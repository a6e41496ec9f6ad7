#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace djshard::io {

// Incremental SHA-256 (OpenSSL). Not copyable.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // Lowercase hex digest. The object must not be updated afterwards.
  std::string HexDigest();
  // Takes `other`'s state: the bytes it has hashed, as if this one had.
  void CopyFrom(const Sha256& other);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// SHA-256 of a whole file's bytes, read in large blocks.
std::string Sha256OfFile(const std::string& path);

// SHA-256 of a string's bytes, hex.
std::string Sha256Hex(const std::string& bytes);

}  // namespace djshard::io
