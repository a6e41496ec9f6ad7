// Grouping keys, the candidate edges inside a key group and the keep
// decision: the part of the deduplicators that sees more than one record.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>

#include "djshard/ops/dedup.h"

namespace djshard::ops::dedup {
namespace {

bool SameGroup(const GroupKey& x, const GroupKey& y) {
  return x.part == y.part && x.bytes == y.bytes;
}

// One simhash key group: rows with equal simhashes joined to the first of
// them (from part 0 only: every row has a part-0 key), and the first rows of
// distinct simhashes within hamming_distance joined to each other.
void SimhashGroupEdges(const DedupConfig& c, const GroupKey* begin, const GroupKey* end,
                       std::vector<Edge>* out) {
  std::vector<const GroupKey*> distinct;  // first row of each simhash (sorted by simhash, row)
  std::vector<const GroupKey*> group;
  for (const GroupKey* k = begin; k != end; ++k) group.push_back(k);
  std::sort(group.begin(), group.end(), [](const GroupKey* x, const GroupKey* y) {
    return x->simhash != y->simhash ? x->simhash < y->simhash : x->row < y->row;
  });
  for (const GroupKey* k : group) {
    if (!distinct.empty() && distinct.back()->simhash == k->simhash) {
      if (begin->part == 0) out->push_back({distinct.back()->row, k->row});
      continue;
    }
    distinct.push_back(k);
  }
  for (size_t i = 0; i < distinct.size(); ++i) {
    for (size_t j = i + 1; j < distinct.size(); ++j) {
      if (__builtin_popcountll(distinct[i]->simhash ^ distinct[j]->simhash) <= c.hamming_distance) {
        out->push_back({std::min(distinct[i]->row, distinct[j]->row),
                        std::max(distinct[i]->row, distinct[j]->row)});
      }
    }
  }
}

uint64_t Find(std::vector<uint64_t>* parent, uint64_t x) {
  uint64_t root = x;
  while ((*parent)[root] != root) root = (*parent)[root];
  while ((*parent)[x] != root) {
    const uint64_t next = (*parent)[x];
    (*parent)[x] = root;
    x = next;
  }
  return root;
}

}  // namespace

int64_t KeysPerRow(const DedupConfig& c) {
  if (c.kind == Kind::kExact) return 1;
  if (c.kind == Kind::kMinhash) return c.num_bands;
  // C(m, k), stopping early once it is clearly too large
  double n = 1;
  for (int64_t i = 1; i <= c.hamming_distance; ++i) {
    n = n * static_cast<double>(c.num_blocks - c.hamming_distance + i) / static_cast<double>(i);
    if (n > 1e12) break;
  }
  return static_cast<int64_t>(n + 0.5);
}

// simhash-cpp's block permutations: the 64 bits cut into num_blocks blocks
// (block i is bits [i*64/m, (i+1)*64/m)), and for each choice of m - k blocks
// (itertools.combinations order) the mask of the chosen blocks. Two simhashes
// land in the same sorted run of find_all's table for a permutation exactly
// when they agree on that mask.
const std::vector<uint64_t>& SimhashKeyMasks(int64_t m, int64_t k) {
  static std::mutex mu;
  static std::map<std::pair<int64_t, int64_t>, std::vector<uint64_t>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& masks = cache[{m, k}];
  if (!masks.empty()) return masks;
  std::vector<uint64_t> blocks;
  for (int64_t i = 0; i < m; ++i) {
    uint64_t mask = 0;
    for (int64_t j = i * 64 / m; j < (i + 1) * 64 / m; ++j) mask |= uint64_t{1} << j;
    blocks.push_back(mask);
  }
  const int64_t r = m - k;
  std::vector<int64_t> idx(static_cast<size_t>(r));
  std::iota(idx.begin(), idx.end(), 0);
  while (true) {
    uint64_t mask = 0;
    for (int64_t i : idx) mask |= blocks[static_cast<size_t>(i)];
    masks.push_back(mask);
    int64_t i = r - 1;
    while (i >= 0 && idx[static_cast<size_t>(i)] == i + m - r) --i;
    if (i < 0) break;
    ++idx[static_cast<size_t>(i)];
    for (int64_t j = i + 1; j < r; ++j)
      idx[static_cast<size_t>(j)] = idx[static_cast<size_t>(j - 1)] + 1;
  }
  return masks;
}

void AppendKeys(const DedupConfig& c, const Signature& sig, uint64_t row,
                std::vector<GroupKey>* out) {
  if (c.kind == Kind::kExact) {
    GroupKey k;
    k.row = row;
    if (sig.empty_marker) {
      k.bytes = "EMPTY";
    } else {
      k.bytes.assign(reinterpret_cast<const char*>(sig.md5.data()), sig.md5.size());
    }
    out->push_back(std::move(k));
    return;
  }
  if (c.kind == Kind::kSimhash) {
    const std::vector<uint64_t>& masks = SimhashKeyMasks(c.num_blocks, c.hamming_distance);
    for (size_t p = 0; p < masks.size(); ++p) {
      GroupKey k;
      k.part = static_cast<uint32_t>(p);
      const uint64_t v = sig.simhash & masks[p];
      k.bytes.assign(reinterpret_cast<const char*>(&v), sizeof v);
      k.simhash = sig.simhash;
      k.row = row;
      out->push_back(std::move(k));
    }
    return;
  }
  // ray_bts sends a text without shingles under one key only (band 0's)
  const int64_t bands = sig.empty_marker ? 1 : c.num_bands;
  for (int64_t band = 0; band < bands; ++band) {
    GroupKey k;
    k.part = c.ray ? 0 : static_cast<uint32_t>(band);  // ray_bts: the band is in the bytes
    k.bytes = MinhashBandBytes(c, sig, band);
    k.row = row;
    out->push_back(std::move(k));
  }
}

namespace {

// The first 8 bytes of `bytes`, big-endian, zero-padded: ordering by it, then
// by the whole bytes where it ties, is ordering by the bytes.
uint64_t Prefix64(const std::string& bytes) {
  unsigned char b[8] = {};
  std::memcpy(b, bytes.data(), std::min<size_t>(8, bytes.size()));
  uint64_t v = 0;
  for (unsigned char c : b) v = (v << 8) | c;
  return v;
}

// Sorts *keys by (part, bytes, row): through small items that carry the
// bytes' prefix, so that most comparisons need no memcmp, then one move of
// each key into its place.
void SortKeys(std::vector<GroupKey>* keys) {
  struct Item {
    uint64_t prefix;
    uint64_t row;
    uint64_t index;
    uint32_t part;
  };
  const std::vector<GroupKey>& k = *keys;
  std::vector<Item> items(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    items[i] = {Prefix64(k[i].bytes), k[i].row, i, k[i].part};
  }
  std::sort(items.begin(), items.end(), [&k](const Item& x, const Item& y) {
    if (x.part != y.part) return x.part < y.part;
    if (x.prefix != y.prefix) return x.prefix < y.prefix;
    const std::string& a = k[x.index].bytes;
    const std::string& b = k[y.index].bytes;
    if ((a.size() > 8 || b.size() > 8 || a.size() != b.size()) && a != b) return a < b;
    return x.row < y.row;
  });
  std::vector<GroupKey> sorted;
  sorted.reserve(k.size());
  for (const Item& item : items) sorted.push_back(std::move((*keys)[item.index]));
  keys->swap(sorted);
}

// Drops from *keys those alone in their group: a key group's keys share
// (part, a hash of the bytes), so a key whose pair no other key has links
// nothing. Most keys of a corpus are such; the others are few to sort.
void KeepCandidates(std::vector<GroupKey>* keys) {
  struct Item {
    uint64_t hash;
    uint64_t index;
    uint32_t part;
  };
  std::vector<GroupKey>& k = *keys;
  std::vector<Item> items(k.size());
  for (size_t i = 0; i < k.size(); ++i) items[i] = {KeyHash(k[i].part, k[i].bytes), i, k[i].part};
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.part != b.part ? a.part < b.part : a.hash < b.hash;
  });
  std::vector<char> candidate(k.size(), 0);
  for (size_t i = 0; i < items.size();) {
    size_t j = i + 1;
    while (j < items.size() && items[j].part == items[i].part && items[j].hash == items[i].hash) {
      ++j;
    }
    for (size_t t = i; j - i > 1 && t < j; ++t) candidate[items[t].index] = 1;
    i = j;
  }
  size_t kept = 0;
  for (size_t i = 0; i < k.size(); ++i) {
    if (candidate[i] == 0) continue;
    if (kept != i) k[kept] = std::move(k[i]);
    ++kept;
  }
  k.resize(kept);
}

}  // namespace

void EmitEdges(const DedupConfig& c, std::vector<GroupKey>* keys, std::vector<Edge>* out) {
  KeepCandidates(keys);
  SortKeys(keys);
  const GroupKey* all = keys->data();
  const size_t n = keys->size();
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && SameGroup(all[i], all[j])) ++j;
    if (c.kind == Kind::kSimhash) {
      SimhashGroupEdges(c, all + i, all + j, out);
    } else {
      for (size_t t = i + 1; t < j; ++t) {
        if (all[t].row != all[i].row) out->push_back({all[i].row, all[t].row});
      }
    }
    i = j;
  }
}

uint64_t KeyHash(uint32_t part, std::string_view bytes) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ part;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  return h;
}

void EmitSimhashEdges(const DedupConfig& c,
                      const std::vector<std::pair<uint64_t, uint64_t>>& simhashes,
                      std::vector<Edge>* out) {
  struct Item {
    uint64_t masked, row, simhash;
  };
  const std::vector<uint64_t>& masks = SimhashKeyMasks(c.num_blocks, c.hamming_distance);
  std::vector<Item> items(simhashes.size());
  std::vector<GroupKey> group;
  for (size_t p = 0; p < masks.size(); ++p) {
    for (size_t i = 0; i < simhashes.size(); ++i) {
      items[i] = {simhashes[i].second & masks[p], simhashes[i].first, simhashes[i].second};
    }
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      return a.masked != b.masked ? a.masked < b.masked : a.row < b.row;
    });
    for (size_t i = 0; i < items.size();) {
      size_t j = i + 1;
      while (j < items.size() && items[j].masked == items[i].masked) ++j;
      if (j - i > 1) {
        group.clear();
        for (size_t t = i; t < j; ++t) {
          GroupKey key;
          key.part = static_cast<uint32_t>(p);
          key.bytes.assign(reinterpret_cast<const char*>(&items[t].masked), sizeof(uint64_t));
          key.simhash = items[t].simhash;
          key.row = items[t].row;
          group.push_back(std::move(key));
        }
        EmitEdges(c, &group, out);
      }
      i = j;
    }
  }
}

std::vector<bool> KeepFirstOfComponents(uint64_t num_rows, const std::vector<bool>& signed_rows,
                                        const std::vector<Edge>& edges) {
  std::vector<uint64_t> parent(num_rows);
  std::iota(parent.begin(), parent.end(), uint64_t{0});
  for (const Edge& e : edges) {
    const uint64_t ra = Find(&parent, e.a), rb = Find(&parent, e.b);
    if (ra == rb) continue;
    // the smaller root wins: a component's root is its first row
    parent[std::max(ra, rb)] = std::min(ra, rb);
  }
  std::vector<bool> kept(num_rows);
  for (uint64_t r = 0; r < num_rows; ++r) kept[r] = signed_rows[r] && Find(&parent, r) == r;
  return kept;
}

KeptResult KeptRows(const DedupConfig& c, const std::vector<TextValue>& values) {
  KeptResult result;
  Signer signer(c);
  Signature sig;
  std::vector<GroupKey> keys;
  std::vector<bool> signed_rows(values.size());
  for (uint64_t r = 0; r < values.size(); ++r) {
    std::string error;
    if (!signer.Sign(values[r], &sig, &error)) {
      result.errors.emplace_back(r, std::move(error));
      continue;
    }
    signed_rows[r] = true;
    AppendKeys(c, sig, r, &keys);
  }
  std::vector<Edge> edges;
  EmitEdges(c, &keys, &edges);
  const std::vector<bool> kept = KeepFirstOfComponents(values.size(), signed_rows, edges);
  for (uint64_t r = 0; r < values.size(); ++r) {
    if (kept[r]) result.kept.push_back(r);
  }
  return result;
}

}  // namespace djshard::ops::dedup
