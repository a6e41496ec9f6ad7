#include "djshard/common/crash_point.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

namespace djshard {

namespace {

// DJSHARD_TEST_KILL_AT as a point name and the hit that kills (1: the first).
struct KillTarget {
  std::string point;
  long hit = 1;
};

const KillTarget* Target() {
  static const KillTarget* const target = []() -> const KillTarget* {
    const char* env = std::getenv("DJSHARD_TEST_KILL_AT");
    if (env == nullptr) return nullptr;
    auto* t = new KillTarget;
    t->point = env;
    const size_t at = t->point.find('@');
    if (at != std::string::npos) {
      t->hit = std::atol(t->point.c_str() + at + 1);
      t->point.resize(at);
    }
    return t;
  }();
  return target;
}

}  // namespace

void CrashPoint(const char* point) {
  const KillTarget* target = Target();
  if (target == nullptr || target->point != point) return;
  static std::atomic<long> hits{0};
  if (++hits >= target->hit) std::raise(SIGKILL);
}

}  // namespace djshard
