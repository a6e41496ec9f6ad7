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
  nodes_.assign(1, Node{});
  base_used_.assign(1, false);
  Grow(257);
  nodes_[kRoot].check = kRoot;
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
  free_ = {};
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
  const size_t old = nodes_.size();
  nodes_.resize(size);
  base_used_.resize(size, false);
  for (size_t slot = old; slot < size; ++slot) free_.insert(free_.end(), slot);
}

int32_t ByteTrie::PlaceChildren(int32_t parent, const std::vector<unsigned char>& labels) {
  const size_t first = labels.front(), last = labels.back();
  // Try each free slot for the first child; bases start at 1.
  for (auto slot = free_.lower_bound(first + 1);; ++slot) {
    if (slot == free_.end()) {
      const size_t old = nodes_.size();
      Grow(old + 256);
      slot = free_.lower_bound(std::max(old, first + 1));
    }
    const size_t base = *slot - first;
    if (base + last >= nodes_.size()) Grow(base + last + 1);  // set iterators stay valid
    if (base_used_[base]) continue;
    const bool fits = std::all_of(labels.begin(), labels.end(),
                                  [&](unsigned char c) { return nodes_[base + c].check == -1; });
    if (!fits) continue;
    base_used_[base] = true;
    for (const unsigned char c : labels) {
      nodes_[base + c].check = parent;
      free_.erase(base + c);
    }
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
