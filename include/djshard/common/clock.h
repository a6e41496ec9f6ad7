#pragma once

#include <cstdint>
#include <string>

namespace djshard {

// Wall-clock nanoseconds since the Unix epoch.
int64_t NowNanos();
// Monotonic seconds, for measuring durations.
double MonotonicSeconds();
// "2026-11-30T06:45:57.123Z" for a Unix-epoch nanosecond time.
std::string FormatUtcIso8601(int64_t epoch_nanos);
// "20261130T064557Z", a file-name-safe UTC stamp.
std::string FormatUtcCompact(int64_t epoch_nanos);

}  // namespace djshard
