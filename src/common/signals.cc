#include "djshard/common/signals.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <thread>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"

namespace djshard {

namespace {
volatile std::sig_atomic_t g_signal = 0;
// A JobStop, as an int: set by RequestJobStop and by SIGUSR1 (forced).
volatile std::sig_atomic_t g_job_stop = 0;

extern "C" void RecordSignal(int sig) { g_signal = sig; }
extern "C" void RecordForcedJobStop(int) { g_job_stop = static_cast<int>(JobStop::kForced); }
}  // namespace

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = RecordSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction usr {};
  usr.sa_handler = RecordForcedJobStop;
  sigemptyset(&usr.sa_mask);
  sigaction(SIGUSR1, &usr, nullptr);
}

bool StopRequested() { return g_signal != 0 || JobStopLevel() == JobStop::kForced; }

int StopExitCode() {
  if (g_signal == SIGINT) return kExitInterrupted;
  if (g_signal == SIGTERM) return kExitTerminated;
  if (JobStopRequested()) return kExitStopped;
  return 0;
}

void ThrowIfStopRequested() {
  if (!StopRequested()) return;
  if (g_signal == 0) {
    throw Error("stopped by djshard stop", "nothing was published", StopExitCode());
  }
  throw Error("interrupted by a signal", "nothing was published", StopExitCode());
}

void SleepInterruptibly(double secs, const std::function<bool()>& wake) {
  const double until = MonotonicSeconds() + secs;
  // wake is asked after 50 ms, then at intervals growing by half up to a
  // quarter second: what it waits for is noticed soon after a short wait (a
  // worker waiting for the other's last shard), and a long wait costs four
  // checks a second.
  double interval = 0.05;
  double next_wake_check = MonotonicSeconds() + interval;
  while (!StopRequested() && !JobStopRequested()) {
    const double now = MonotonicSeconds();
    if (now >= until) return;
    const double next = wake ? std::min(until, next_wake_check) : until;
    const double nap = std::clamp(next - now, 0.005, 0.05);
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(nap * 1e6)));
    if (wake && MonotonicSeconds() >= next_wake_check) {
      if (wake()) return;
      interval = std::min(0.25, interval * 1.5);
      next_wake_check = MonotonicSeconds() + interval;
    }
  }
}

void RequestJobStop(JobStop level) {
  if (static_cast<int>(level) > g_job_stop) g_job_stop = static_cast<int>(level);
}

JobStop JobStopLevel() { return static_cast<JobStop>(static_cast<int>(g_job_stop)); }

}  // namespace djshard
