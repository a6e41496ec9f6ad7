#include "djshard/io/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <vector>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/fd.h"

namespace djshard::io {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1) {
    throw Error("OpenSSL: cannot initialise SHA-256");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(state_->ctx); }

void Sha256::Update(const void* data, size_t size) {
  if (size > 0) EVP_DigestUpdate(state_->ctx, data, size);
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(state_->ctx, digest, &len);
  return HexEncode(digest, len);
}

void Sha256::CopyFrom(const Sha256& other) {
  if (EVP_MD_CTX_copy_ex(state_->ctx, other.state_->ctx) != 1) {
    throw Error("OpenSSL: cannot copy a SHA-256 state");
  }
}

std::string Sha256OfFile(const std::string& path) {
  const ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) ThrowSystemError(path, "cannot open");
  posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  Sha256 hash;
  ReadChunks(fd.get(), path, 4 << 20, [&](std::string_view chunk) { hash.Update(chunk); });
  return hash.HexDigest();
}

std::string Sha256Hex(const std::string& bytes) {
  io::Sha256 h;
  h.Update(bytes);
  return h.HexDigest();
}

}  // namespace djshard::io
