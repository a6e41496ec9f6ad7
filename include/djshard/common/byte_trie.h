#pragma once
// A double-array trie over byte strings, each key holding a value: the
// longest-match and walk-by-byte lookups of tokenizers and dictionaries
// (SentencePiece's pieces, OpenCC's phrase tables).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace djshard {

class ByteTrie {
 public:
  static constexpr int32_t kRoot = 0;

  // Builds the trie of `keys` (any order; the first of equal keys is kept;
  // empty keys are ignored) with their values, which must be >= 0.
  explicit ByteTrie(std::vector<std::pair<std::string_view, int32_t>> keys);
  ByteTrie() : ByteTrie(std::vector<std::pair<std::string_view, int32_t>>{}) {}

  // The child of `node` by byte `c`, or -1.
  int32_t Child(int32_t node, unsigned char c) const {
    const size_t next = static_cast<size_t>(nodes_[node].base) + c;
    return next < nodes_.size() && nodes_[next].check == node ? static_cast<int32_t>(next) : -1;
  }
  // The value of the key that ends at `node`, or -1.
  int32_t Value(int32_t node) const { return nodes_[node].value; }

  // The longest key that is a prefix of `text`: its length (0 if none) and,
  // in *value, its value.
  size_t LongestPrefix(std::string_view text, int32_t* value) const;

 private:
  struct Node {
    int32_t base = 0;
    int32_t check = -1;  // the parent; -1 for a free slot
    int32_t value = -1;
  };
  // The keys [lo, hi) (sorted) share their first `depth` bytes, the path to `node`.
  struct Pending {
    int32_t node;
    size_t lo, hi, depth;
  };
  // Sets the value of the key ending at p.node and places its children,
  // whose own keys go on *pending.
  void InsertChildren(const Pending& p,
                      const std::vector<std::pair<std::string_view, int32_t>>& keys,
                      std::vector<Pending>* pending);
  // A base for `parent`'s children by `labels` (ascending) whose slots are
  // free; the slots are taken.
  int32_t PlaceChildren(int32_t parent, const std::vector<unsigned char>& labels);
  // Adds free slots up to `size`.
  void Grow(size_t size);
  // The first free slot at or after `from`, growing the array if none is.
  size_t NextFree(size_t from);
  // Marks `slot` used.
  void Take(size_t slot);

  std::vector<Node> nodes_;
  // While building: the bases given to a node already, and the free slots.
  std::vector<bool> base_used_;
  std::vector<uint64_t> used_;  // a bit per slot
  std::vector<uint64_t> open_;  // a bit per word of used_ that has a free slot
  size_t first_free_ = 1;       // no free slot before it
};

}  // namespace djshard
