#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/input.h"

namespace djshard::io {
namespace {

// Serves a string in small pieces, to exercise refills and growth.
class StringSource : public ByteSource {
 public:
  StringSource(std::string data, size_t piece) : data_(std::move(data)), piece_(piece) {}
  size_t Read(char* buf, size_t capacity) override {
    const size_t n = std::min({piece_, capacity, data_.size() - pos_});
    std::memcpy(buf, data_.data() + pos_, n);
    pos_ += n;
    return n;
  }

 private:
  std::string data_;
  size_t piece_;
  size_t pos_ = 0;
};

std::vector<std::string> Lines(const std::string& data, size_t piece) {
  LineReader reader(std::make_unique<StringSource>(data, piece), "mem");
  std::vector<std::string> out;
  std::string_view line;
  while (reader.Next(&line)) out.emplace_back(line);
  return out;
}

// CountNewlines counts in blocks of 255 x 64 bytes: every length around
// them, any newline density, any position, gives std::count's figure.
TEST(CountNewlines, CountsWhatStdCountCountsAtEveryLengthAndDensity) {
  std::string s;
  uint32_t x = 12345;
  for (size_t i = 0; i < 3 * 255 * 64 + 100; ++i) {
    x = x * 1103515245u + 12345u;
    s += (x >> 16) % 7 == 0 ? '\n' : static_cast<char>('a' + (x >> 20) % 26);
  }
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{16319},
                   size_t{16320}, size_t{16321}, s.size()}) {
    const std::string_view v(s.data(), n);
    EXPECT_EQ(CountNewlines(v), static_cast<uint64_t>(std::count(v.begin(), v.end(), '\n'))) << n;
  }
  // All newlines: 255 per lane fills each counter exactly once a block.
  const std::string all(3 * 255 * 64 + 7, '\n');
  EXPECT_EQ(CountNewlines(all), all.size());
  EXPECT_EQ(CountNewlines(std::string(100000, 'x')), 0u);
}

TEST(LineReader, SplitsOnNewlinesAndKeepsALastLineWithoutOne) {
  EXPECT_EQ(Lines("a\nbb\n\nccc", 2), (std::vector<std::string>{"a", "bb", "", "ccc"}));
  EXPECT_EQ(Lines("a\n", 1), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(Lines("", 1).empty());
}

TEST(LineReader, HandlesLinesLongerThanItsBuffer) {
  const std::string big(9 << 20, 'x');
  const auto lines = Lines("s\n" + big + "\nt", 1 << 20);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].size(), big.size());
  EXPECT_EQ(lines[2], "t");
}

TEST(LineReader, CountsLinesAndBytes) {
  LineReader reader(std::make_unique<StringSource>("x\nyy\nz", 3), "mem");
  std::string_view line;
  ASSERT_TRUE(reader.Next(&line));
  ASSERT_TRUE(reader.Next(&line));
  EXPECT_EQ(reader.line_number(), 2u);
  EXPECT_EQ(reader.bytes_consumed(), 5u);
  ASSERT_TRUE(reader.Next(&line));
  EXPECT_EQ(reader.bytes_consumed(), 6u);
  EXPECT_FALSE(reader.Next(&line));
}

}  // namespace
// OpenRanges reads the ranges one after another, in pieces as small as the
// caller asks or across ranges; a range past the end of the file, and a
// missing file, are errors naming it with the caller's hint.
TEST(OpenRanges, ReadsTheRangesInOrderAndRefusesOnesPastTheEnd) {
  char dir[] = "/tmp/djshard-ranges-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/rows.jsonl";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("0123456789abcdefghij", f);
  std::fclose(f);
  for (size_t piece : {1, 3, 64}) {
    const auto source = OpenRanges(path, {{2, 3}, {5, 0}, {10, 4}, {19, 1}}, "hint");
    std::string read;
    std::vector<char> buf(piece);
    for (size_t n; (n = source->Read(buf.data(), buf.size())) > 0;) read.append(buf.data(), n);
    EXPECT_EQ(read, "234abcdj") << piece;
  }
  EXPECT_EQ(OpenRanges(path, {}, "hint")->Read(std::vector<char>(8).data(), 8), 0u);
  const auto past = OpenRanges(path, {{0, 2}, {18, 5}}, "the file changed");
  char buf[64];
  try {
    past->Read(buf, sizeof buf);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.message(), "file ends at byte 20, inside the range it should hold from byte 18");
    EXPECT_EQ(e.hint(), "the file changed");
  }
  std::remove(path.c_str());
  try {
    OpenRanges(path, {{0, 1}}, "the file changed");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "file is missing");
    EXPECT_EQ(e.hint(), "the file changed");
  }
  ::rmdir(dir);
}

}  // namespace djshard::io
