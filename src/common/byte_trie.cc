#include "djshard/common/byte_trie.h"

#include <algorithm>

namespace djshard {

ByteTrie::ByteTrie(std::vector<std::pair<std::string_view, int32_t>> keys) {
  keys.erase(
      std::remove_if(keys.begin(), keys.end(), [](const auto& k) { return k.first.empty(); }),
      keys.end());
  std::stable_sort(keys.begin(), keys.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  keys.erase(std::unique(keys.begin(), keys.end(),
                         [](const auto& a, const auto& b) { return a.first == b.first; }),
             keys.end());
  Grow(257);
  nodes_[kRoot].check = kRoot;
  used_[0] |= 1;           // the root's slot
  nodes_[kRoot].base = 1;  // no child while slots 1-256 are free
  // Depth first with a stack of its own: a key may be longer than the call
  // stack is deep.
  std::vector<Pending> pending{{kRoot, 0, keys.size(), 0}};
  while (!pending.empty()) {
    const Pending p = pending.back();
    pending.pop_back();
    InsertChildren(p, keys, &pending);
  }
  base_used_ = {};
  used_ = {};
  open_ = {};
}

void ByteTrie::InsertChildren(const Pending& p,
                              const std::vector<std::pair<std::string_view, int32_t>>& keys,
                              std::vector<Pending>* pending) {
  const size_t depth = p.depth, hi = p.hi;
  size_t lo = p.lo;
  if (lo < hi && keys[lo].first.size() == depth) {  // sorted: the key that ends here is first
    nodes_[p.node].value = keys[lo].second;
    ++lo;
  }
  if (lo == hi) return;
  std::vector<unsigned char> labels;
  std::vector<size_t> starts;
  for (size_t i = lo; i < hi; ++i) {
    const auto c = static_cast<unsigned char>(keys[i].first[depth]);
    if (labels.empty() || labels.back() != c) {
      labels.push_back(c);
      starts.push_back(i);
    }
  }
  starts.push_back(hi);
  const int32_t base = PlaceChildren(p.node, labels);
  nodes_[p.node].base = base;
  for (size_t k = labels.size(); k-- > 0;) {
    pending->push_back({base + labels[k], starts[k], starts[k + 1], depth + 1});
  }
}

void ByteTrie::Grow(size_t size) {
  nodes_.resize(size);
  base_used_.resize(size, false);
  const size_t words = (size + 63) / 64;
  for (size_t w = used_.size(); w < words; ++w) {
    if (w % 64 == 0) open_.push_back(0);
    open_[w / 64] |= uint64_t{1} << (w % 64);
  }
  used_.resize(words, 0);
}

void ByteTrie::Take(size_t slot) {
  uint64_t& word = used_[slot / 64];
  word |= uint64_t{1} << (slot % 64);
  if (word == ~uint64_t{0}) open_[slot / 64 / 64] &= ~(uint64_t{1} << (slot / 64 % 64));
}

size_t ByteTrie::NextFree(size_t from) {
  for (;;) {
    size_t word = from / 64;
    if (word < used_.size()) {
      uint64_t free = ~used_[word] & (~uint64_t{0} << (from % 64));
      if (free == 0) {
        // The next word with a free slot, by the words' summary.
        ++word;
        size_t group = word / 64;
        uint64_t open = group < open_.size() ? open_[group] & (~uint64_t{0} << (word % 64)) : 0;
        while (open == 0 && ++group < open_.size()) open = open_[group];
        if (open != 0) {
          word = group * 64 + static_cast<size_t>(__builtin_ctzll(open));
          free = ~used_[word];
        }
      }
      if (free != 0) {
        const size_t slot = word * 64 + static_cast<size_t>(__builtin_ctzll(free));
        if (slot < nodes_.size()) return slot;
      }
    }
    Grow(nodes_.size() + 256);
  }
}

int32_t ByteTrie::PlaceChildren(int32_t parent, const std::vector<unsigned char>& labels) {
  const size_t first = labels.front(), last = labels.back();
  // Try each free slot for the first child; bases start at 1.
  for (size_t slot = NextFree(std::max(first_free_, first + 1));; slot = NextFree(slot + 1)) {
    const size_t base = slot - first;
    if (base + last >= nodes_.size()) Grow(base + last + 1);
    if (base_used_[base]) continue;
    const bool fits = std::all_of(labels.begin(), labels.end(), [&](unsigned char c) {
      return !(used_[(base + c) / 64] >> ((base + c) % 64) & 1);
    });
    if (!fits) continue;
    base_used_[base] = true;
    for (const unsigned char c : labels) {
      nodes_[base + c].check = parent;
      Take(base + c);
    }
    first_free_ = NextFree(first_free_);
    return static_cast<int32_t>(base);
  }
}

size_t ByteTrie::LongestPrefix(std::string_view text, int32_t* value) const {
  size_t longest = 0;
  int32_t node = kRoot;
  for (size_t i = 0; i < text.size(); ++i) {
    node = Child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (nodes_[node].value >= 0) {
      longest = i + 1;
      *value = nodes_[node].value;
    }
  }
  return longest;
}

}  // namespace djshard
