// ByteTrie against a plain search over the keys.
#include "djshard/common/byte_trie.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace djshard {
namespace {

// The longest of `keys` that `text` starts with, as (length, index); the
// first of equal keys.
std::pair<size_t, int32_t> LongestByScan(const std::vector<std::string>& keys,
                                         std::string_view text) {
  std::pair<size_t, int32_t> best{0, -1};
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& k = keys[i];
    if (!k.empty() && k.size() > best.first && text.substr(0, k.size()) == k) {
      best = {k.size(), static_cast<int32_t>(i)};
    }
  }
  return best;
}

TEST(ByteTrie, LongestPrefixIsTheLongestKeyTheTextStartsWith) {
  std::mt19937 rng(5);
  // Few letters, so that keys share prefixes; every byte value, NUL included.
  const std::string alphabet("ab\x00\xff\xe4\xb8\x80", 7);
  std::uniform_int_distribution<size_t> letter(0, alphabet.size() - 1), length(0, 6);
  const auto random_string = [&] {
    std::string s;
    for (size_t n = length(rng); n > 0; --n) s += alphabet[letter(rng)];
    return s;
  };
  for (int round = 0; round < 50; ++round) {
    std::vector<std::string> keys(1 + round * 7);
    for (std::string& k : keys) k = random_string();
    std::vector<std::pair<std::string_view, int32_t>> index;
    for (size_t i = 0; i < keys.size(); ++i) index.emplace_back(keys[i], static_cast<int32_t>(i));
    const ByteTrie trie(index);
    for (int t = 0; t < 200; ++t) {
      const std::string text = random_string() + random_string();
      int32_t value = -1;
      const size_t length = trie.LongestPrefix(text, &value);
      const auto [want_length, want_index] = LongestByScan(keys, text);
      ASSERT_EQ(length, want_length) << "round " << round;
      if (length > 0) {
        ASSERT_EQ(value, want_index);
      }
    }
  }
}

TEST(ByteTrie, AnEmptyTrieMatchesNothing) {
  const ByteTrie trie;
  int32_t value = -1;
  EXPECT_EQ(trie.LongestPrefix(std::string("\0abc", 4), &value), 0u);
  EXPECT_EQ(trie.Child(ByteTrie::kRoot, 0), -1);
  EXPECT_EQ(trie.Child(ByteTrie::kRoot, 255), -1);
}

TEST(ByteTrie, ChildWalksOneByteAtATime) {
  const ByteTrie trie({{"ab", 1}, {"abc", 2}, {"b", 3}});
  const int32_t a = trie.Child(ByteTrie::kRoot, 'a');
  ASSERT_GE(a, 0);
  EXPECT_EQ(trie.Value(a), -1);
  const int32_t ab = trie.Child(a, 'b');
  ASSERT_GE(ab, 0);
  EXPECT_EQ(trie.Value(ab), 1);
  EXPECT_EQ(trie.Value(trie.Child(ab, 'c')), 2);
  EXPECT_EQ(trie.Child(ab, 'd'), -1);
  EXPECT_EQ(trie.Value(trie.Child(ByteTrie::kRoot, 'b')), 3);
}

}  // namespace
}  // namespace djshard
