#include "djshard/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "djshard/common/error.h"
#include "djshard/io/fd.h"

namespace djshard::io {

MappedFile::MappedFile(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) ThrowSystemError(path, "cannot open");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) ThrowSystemError(path, "cannot stat");
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) return;
  void* addr = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (addr == MAP_FAILED) ThrowSystemError(path, "cannot map");
  addr_ = addr;
}

MappedFile::~MappedFile() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

}  // namespace djshard::io
