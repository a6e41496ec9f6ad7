#include "djshard/common/crash_point.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

namespace djshard {

namespace {

// A point name and the hit that acts (1: the first), from DJSHARD_TEST_KILL_AT
// or DJSHARD_TEST_STOP_AT.
struct Target {
  std::string point;
  long hit = 1;
};

const Target* ParseTarget(const char* variable) {
  const char* env = std::getenv(variable);
  if (env == nullptr) return nullptr;
  auto* t = new Target;
  t->point = env;
  const size_t at = t->point.find('@');
  if (at != std::string::npos) {
    t->hit = std::atol(t->point.c_str() + at + 1);
    t->point.resize(at);
  }
  return t;
}

// Raises `sig` at the target's hit of `point`; each target counts its own hits.
void Hit(const Target* target, const char* point, std::atomic<long>& hits, int sig) {
  if (target == nullptr || target->point != point) return;
  if (++hits == target->hit || (sig == SIGKILL && hits >= target->hit)) std::raise(sig);
}

}  // namespace

void CrashPoint(const char* point) {
  static const Target* const kill_at = ParseTarget("DJSHARD_TEST_KILL_AT");
  static const Target* const stop_at = ParseTarget("DJSHARD_TEST_STOP_AT");
  static std::atomic<long> kill_hits{0}, stop_hits{0};
  Hit(kill_at, point, kill_hits, SIGKILL);
  Hit(stop_at, point, stop_hits, SIGSTOP);
}

}  // namespace djshard
