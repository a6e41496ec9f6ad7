#include "djshard/common/clock.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace djshard {

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {
std::tm UtcTm(int64_t epoch_nanos) {
  const time_t secs = static_cast<time_t>(epoch_nanos / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return tm;
}

// ISO 8601 UTC with `digits` (3 or 6) digits of fraction.
std::string UtcIso8601(int64_t epoch_nanos, int digits) {
  const std::tm tm = UtcTm(epoch_nanos);
  const int64_t fraction =
      digits == 6 ? (epoch_nanos / 1000) % 1000000 : (epoch_nanos / 1000000) % 1000;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%0*dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, digits,
                static_cast<int>(fraction));
  return buf;
}
}  // namespace

std::string FormatSeconds(double secs) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", secs);
  return buf;
}

std::string FormatUtcIso8601(int64_t epoch_nanos) { return UtcIso8601(epoch_nanos, 3); }

std::string FormatUtcIso8601Micros(int64_t epoch_nanos) { return UtcIso8601(epoch_nanos, 6); }

std::string FormatUtcForName(int64_t epoch_nanos) {
  const std::tm tm = UtcTm(epoch_nanos);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d_%H%M%S", &tm);
  return buf;
}

std::string FormatUtcCompact(int64_t epoch_nanos) {
  const std::tm tm = UtcTm(epoch_nanos);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d%02d%02dT%02d%02d%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

int64_t ParseUtcIso8601(const std::string& text) {
  std::tm tm{};
  char frac[16] = {0};
  if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d.%15[0-9]", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, frac) < 6) {
    return 0;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::string f = std::string(frac).substr(0, 9);
  while (f.size() < 9) f.push_back('0');
  return static_cast<int64_t>(timegm(&tm)) * 1000000000 + std::atoll(f.c_str());
}

}  // namespace djshard
