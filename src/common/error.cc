#include "djshard/common/error.h"

#include <cerrno>
#include <cstring>

namespace djshard {

Error::Error(std::string what, std::string hint, int code)
    : std::runtime_error(Format("", 0, what, hint)),
      message_(std::move(what)),
      hint_(std::move(hint)),
      code_(code) {}

Error::Error(std::string file, uint64_t line, std::string what, std::string hint, int code)
    : std::runtime_error(Format(file, line, what, hint)),
      file_(std::move(file)),
      line_(line),
      message_(std::move(what)),
      hint_(std::move(hint)),
      code_(code) {}

std::string Error::Format(const std::string& file, uint64_t line, const std::string& what,
                          const std::string& hint) {
  std::string out;
  if (!file.empty()) {
    out.append(file);
    if (line > 0) out.append(":").append(std::to_string(line));
    out.append(": ");
  }
  out.append(what);
  if (!hint.empty()) out.append(" (").append(hint).append(")");
  return out;
}

bool Error::IsInfrastructure() const {
  switch (system_errno_) {
    case ENOSPC:
    case EDQUOT:
    case EROFS:
    case EIO:
    case ESTALE:
    case ETIMEDOUT:
      return true;
    default:
      return false;
  }
}

Error Error::FromErrno(const std::string& path, const std::string& action, int err) {
  Error e(path, 0, action + ": " + std::strerror(err), "check the path and its permissions");
  e.system_errno_ = err;
  return e;
}

void ThrowSystemError(const std::string& path, const std::string& action) {
  throw Error::FromErrno(path, action, errno);
}

}  // namespace djshard
