#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace djshard {

// Process exit codes. They are part of djshard's interface (docs/operations.md "Exit codes").
enum ExitCode : int {
  kExitOk = 0,
  kExitIncomplete = 1,  // status: the job is not finished yet
  kExitFailure = 2,     // bad input, refused request, failed shard or failed verification
  kExitStopped = 3,     // stopped by `djshard stop` (SPEC-checkpoints §9)
  kExitTempFail = 75,   // worker: the job directory's filesystem failed (full, read-only, I/O)
  kExitInterrupted = 130,
  kExitTerminated = 143,
};

// The one error type of djshard. It carries where the problem is (a file and,
// when known, a 1-based line), what is wrong, and what the user can do about it.
// The CLI prints it as "ERROR: <file>:<line>: <what> (<hint>)" and exits with code().
class Error : public std::runtime_error {
 public:
  explicit Error(std::string what, std::string hint = {}, int code = kExitFailure);
  Error(std::string file, uint64_t line, std::string what, std::string hint = {},
        int code = kExitFailure);

  const std::string& file() const { return file_; }
  uint64_t line() const { return line_; }  // 0 when the error has no line
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }
  int code() const { return code_; }
  // The error of a failed system call on `path`: "<action>: <strerror(err)>".
  static Error FromErrno(const std::string& path, const std::string& action, int err);
  // errno of the failed system call (FromErrno), 0 for other errors.
  int system_errno() const { return system_errno_; }
  // Whether the error is the filesystem's, not the data's or the recipe's: a
  // full disk or quota (ENOSPC, EDQUOT), a read-only mount (EROFS), an I/O
  // error (EIO), a stale or timed-out network file handle (ESTALE, ETIMEDOUT).
  bool IsInfrastructure() const;

 private:
  static std::string Format(const std::string& file, uint64_t line, const std::string& what,
                            const std::string& hint);

  std::string file_;
  uint64_t line_ = 0;
  std::string message_;
  std::string hint_;
  int code_;
  int system_errno_ = 0;
};

// Throws Error naming `path` and strerror(errno) for a failed system call.
[[noreturn]] void ThrowSystemError(const std::string& path, const std::string& action);

}  // namespace djshard
