#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

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
}  // namespace djshard::io
