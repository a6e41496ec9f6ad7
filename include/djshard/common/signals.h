#pragma once

#include <functional>

namespace djshard {

// Installs SIGINT/SIGTERM handlers that only record the signal, so that long
// loops can stop at a safe point and clean up (staging directories, claims).
void InstallStopHandlers();
// True once SIGINT or SIGTERM arrived.
bool StopRequested();
// The exit code for the signal received: 130 (SIGINT) or 143 (SIGTERM); 0 if none.
int StopExitCode();
// Throws Error("interrupted", code StopExitCode()) when a stop was requested.
void ThrowIfStopRequested();
// Sleeps up to `secs`, returning within 50 ms of SIGINT/SIGTERM, or as soon
// as `wake` (when set, asked every quarter second) returns true.
void SleepInterruptibly(double secs, const std::function<bool()>& wake = nullptr);

}  // namespace djshard
