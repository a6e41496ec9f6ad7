#include "djshard/io/checksum.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/fd.h"
#include "djshard/io/sha256.h"

namespace djshard::io {

struct Xxh3::State {
  XXH3_state_t* state = nullptr;
};

Xxh3::Xxh3() : state_(std::make_unique<State>()) {
  state_->state = XXH3_createState();
  if (state_->state == nullptr || XXH3_128bits_reset(state_->state) != XXH_OK) {
    throw Error("libxxhash: cannot initialise XXH3-128");
  }
}

Xxh3::~Xxh3() { XXH3_freeState(state_->state); }

void Xxh3::Update(const void* data, size_t size) {
  if (size > 0) XXH3_128bits_update(state_->state, data, size);
}

std::string Xxh3::HexDigest() const {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state_->state));
  return HexEncode(canonical.digest, sizeof(canonical.digest));
}

std::string Checksum::field(std::string_view prefix) const {
  return std::string(prefix) + (kind == ChecksumKind::kXxh3_128 ? "xxh3_128" : "sha256");
}

std::string Checksum::Short() const { return field() + " " + hex.substr(0, 12); }

Checksum Checksum::FromJson(const nlohmann::json& j, std::string_view prefix) {
  const std::string xxh3 = std::string(prefix) + "xxh3_128";
  if (j.contains(xxh3)) return {ChecksumKind::kXxh3_128, j.at(xxh3).get<std::string>()};
  return {ChecksumKind::kSha256, j.at(std::string(prefix) + "sha256").get<std::string>()};
}

Checksum Checksum::FromJsonOrEmpty(const nlohmann::json& j, std::string_view prefix) {
  if (!j.is_object()) return {};
  const std::string p(prefix);
  for (const std::string& key : {p + "xxh3_128", p + "sha256"}) {
    const auto it = j.find(key);
    if (it != j.end() && it->is_string()) return FromJson(j, prefix);
  }
  return {};
}

void Checksum::ToJson(nlohmann::json& j, std::string_view prefix) const { j[field(prefix)] = hex; }

nlohmann::json Checksum::AsJson(std::string_view prefix) const {
  if (empty()) return nullptr;
  return {{field(prefix), hex}};
}

struct ChecksumHasher::State {
  ChecksumKind kind;
  std::unique_ptr<Xxh3> xxh3;
  std::unique_ptr<Sha256> sha256;
};

ChecksumHasher::ChecksumHasher(ChecksumKind kind) : state_(std::make_unique<State>()) {
  state_->kind = kind;
  if (kind == ChecksumKind::kXxh3_128) {
    state_->xxh3 = std::make_unique<Xxh3>();
  } else {
    state_->sha256 = std::make_unique<Sha256>();
  }
}

ChecksumHasher::~ChecksumHasher() = default;

void ChecksumHasher::Update(const void* data, size_t size) {
  if (state_->xxh3) {
    state_->xxh3->Update(data, size);
  } else {
    state_->sha256->Update(data, size);
  }
}

Checksum ChecksumHasher::Finish() {
  return {state_->kind, state_->xxh3 ? state_->xxh3->HexDigest() : state_->sha256->HexDigest()};
}

Checksum ChecksumOfFile(const std::string& path, ChecksumKind kind) {
  const ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) ThrowSystemError(path, "cannot open");
  posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  ChecksumHasher hash(kind);
  ReadChunks(fd.get(), path, 4 << 20, [&](std::string_view chunk) { hash.Update(chunk); });
  return hash.Finish();
}

}  // namespace djshard::io
