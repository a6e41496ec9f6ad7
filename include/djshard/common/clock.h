#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace djshard {

// Wall-clock nanoseconds since the Unix epoch.
int64_t NowNanos();
// A file's modification time, in nanoseconds since the Unix epoch.
inline int64_t MtimeNanos(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}
// Monotonic seconds, for measuring durations.
double MonotonicSeconds();
// "12.5 s": a duration for messages.
std::string FormatSeconds(double secs);
// "2026-11-30T06:45:57.123Z" for a Unix-epoch nanosecond time.
std::string FormatUtcIso8601(int64_t epoch_nanos);
// "2026-11-30T06:45:57.123456Z": with microseconds (run jobs' files and events).
std::string FormatUtcIso8601Micros(int64_t epoch_nanos);
// "20261130T064557Z", a file-name-safe UTC stamp.
std::string FormatUtcCompact(int64_t epoch_nanos);
// "20261130_064557", the stamp of run job ids and events file names.
std::string FormatUtcForName(int64_t epoch_nanos);
// Nanoseconds since the epoch of "2026-11-30T06:45:57[.fraction]Z" (the
// records' and events' timestamps); 0 for text that is not one.
int64_t ParseUtcIso8601(const std::string& text);

}  // namespace djshard
