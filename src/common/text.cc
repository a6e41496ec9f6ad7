#include "djshard/common/text.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <random>

#include "djshard/common/error.h"

namespace djshard {

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string HexEncode(const unsigned char* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 15];
  }
  return out;
}

std::string RandomHex(size_t num_chars) {
  unsigned char bytes[64];
  const size_t n = (num_chars + 1) / 2;
  if (n > sizeof bytes) throw Error("RandomHex: too many characters requested");
  std::random_device device;  // reads the kernel's random source on Linux
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(device());
  return HexEncode(bytes, n).substr(0, num_chars);
}

bool IsBlank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\v' && c != '\f' && c != '\r') return false;
  }
  return true;
}

bool EndsWithIgnoreCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  const std::string_view tail = s.substr(s.size() - suffix.size());
  for (size_t i = 0; i < suffix.size(); ++i) {
    char a = tail[i], b = suffix[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z') b = static_cast<char>(b - 'A' + 'a');
    if (a != b) return false;
  }
  return true;
}

int DecimalDigits(uint64_t n) {
  int d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

std::string ZeroPad(uint64_t n, int width) {
  std::string s = std::to_string(n);
  if (static_cast<int>(s.size()) < width) s.insert(0, width - s.size(), '0');
  return s;
}

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

uint64_t CountNewlines(std::string_view s) {
  // Blocks of 255 x 64 bytes into 64 byte-wide counters that cannot
  // overflow: a loop the compiler turns into vector compares and adds.
  constexpr size_t kLanes = 64, kBlock = 255 * kLanes;
  uint64_t total = 0;
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    const size_t k = n < kBlock ? n : kBlock;
    unsigned char lanes[kLanes] = {};
    size_t i = 0;
    for (; i + kLanes <= k; i += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) lanes[j] += p[i + j] == '\n' ? 1 : 0;
    }
    for (size_t j = 0; j < kLanes; ++j) total += lanes[j];
    for (; i < k; ++i) total += p[i] == '\n' ? 1 : 0;
    p += k;
    n -= k;
  }
  return total;
}

}  // namespace djshard
