#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace djshard::io {

// A whole file mapped read-only (model weights, KenLM models); its bytes live
// as long as the object. An empty file has empty bytes (mmap refuses it).
// Throws Error naming the path when it cannot be opened or mapped.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const {
    return addr_ == nullptr ? std::string_view()
                            : std::string_view(static_cast<const char*>(addr_), size_);
  }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace djshard::io
