#pragma once

#include <functional>

namespace djshard {

// Installs SIGINT/SIGTERM handlers that only record the signal, so that long
// loops can stop at a safe point and clean up (staging directories, claims),
// and a SIGUSR1 handler that records a forced job stop (`djshard stop
// --force` signals the job's local processes with it).
void InstallStopHandlers();
// True once SIGINT or SIGTERM arrived, or a forced job stop was recorded:
// whatever runs must abort now.
bool StopRequested();
// The exit code for the stop: 130 (SIGINT), 143 (SIGTERM), 3 for a job stop
// (graceful or forced) without a signal; 0 if none.
int StopExitCode();
// Throws Error("interrupted", code StopExitCode()) when a stop was requested.
void ThrowIfStopRequested();
// Sleeps up to `secs`, returning within 50 ms of SIGINT/SIGTERM or a job stop
// request (graceful or forced), or as soon as `wake` (when set, asked after
// 50 ms, then at intervals growing to a quarter second) returns true.
void SleepInterruptibly(double secs, const std::function<bool()>& wake = nullptr);

// How far a `djshard stop` of this process's job has gone (SPEC-checkpoints
// §9). A graceful stop lets the work in flight finish and claims or starts
// nothing new; a forced one aborts it like a signal (StopRequested()).
enum class JobStop { kNone, kGraceful, kForced };
// Records a job stop; a later call never lowers it. Thread- and signal-safe.
void RequestJobStop(JobStop level);
JobStop JobStopLevel();
// True once a graceful or forced job stop was recorded.
inline bool JobStopRequested() { return JobStopLevel() != JobStop::kNone; }

}  // namespace djshard
