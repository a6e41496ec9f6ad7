#include "djshard/common/signals.h"

#include <chrono>
#include <csignal>
#include <thread>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"

namespace djshard {

namespace {
volatile std::sig_atomic_t g_signal = 0;

extern "C" void RecordSignal(int sig) { g_signal = sig; }
}  // namespace

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = RecordSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool StopRequested() { return g_signal != 0; }

int StopExitCode() {
  if (g_signal == SIGINT) return kExitInterrupted;
  if (g_signal == SIGTERM) return kExitTerminated;
  return 0;
}

void ThrowIfStopRequested() {
  if (StopRequested()) {
    throw Error("interrupted by a signal", "nothing was published", StopExitCode());
  }
}

void SleepInterruptibly(double secs, const std::function<bool()>& wake) {
  const double until = MonotonicSeconds() + secs;
  double next_wake_check = MonotonicSeconds() + 0.25;
  while (!StopRequested() && MonotonicSeconds() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (wake && MonotonicSeconds() >= next_wake_check) {
      if (wake()) return;
      next_wake_check += 0.25;
    }
  }
}

}  // namespace djshard
