// Models of tokenizer.json: BPE, WordPiece, Unigram and WordLevel.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "djshard/common/error.h"
#include "src/model/tokenizer/components.h"

namespace djshard::model::tokenizer {

namespace {

using nlohmann::json;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>>;

std::optional<uint32_t> Find(const Vocab& v, std::string_view s) {
  const auto it = v.find(s);
  if (it == v.end()) return std::nullopt;
  return it->second;
}

// Reads {"token": id, ...}; fails on anything else.
Vocab ReadVocabObject(const json& j, const std::string& component, const LoadContext& ctx,
                      std::vector<std::string>* by_id) {
  if (!j.is_object()) ctx.Fail(component, "\"vocab\" is not an object of token ids");
  Vocab vocab;
  vocab.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() > 0x7FFFFFFF) {
      ctx.Fail(component, "the id of token " + json(it.key()).dump() + " is not a valid id");
    }
    const auto id = it.value().get<uint32_t>();
    vocab[it.key()] = id;
    if (by_id->size() <= id) by_id->resize(id + 1);
    (*by_id)[id] = it.key();
  }
  return vocab;
}

bool GetBool(const json& j, const char* key, bool fallback, const std::string& component,
             const LoadContext& ctx) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) ctx.Fail(component, std::string("\"") + key + "\" is not a boolean");
  return j[key].get<bool>();
}

std::string GetOptString(const json& j, const char* key, const std::string& component,
                         const LoadContext& ctx) {
  if (!j.contains(key) || j[key].is_null()) return {};
  if (!j[key].is_string()) ctx.Fail(component, std::string("\"") + key + "\" is not a string");
  return j[key].get<std::string>();
}

std::atomic<uint64_t> next_model_instance{1};

// The value Hugging Face's loader gives a score. serde_json (without its
// float_roundtrip feature) reads "-11.102003800674737" as the digits, as an
// integer, converted to f64 and then divided by a power of ten: two roundings,
// which can differ from the nearest double by one unit in the last place, and
// the Viterbi search sees such differences in ties. The text is recovered as
// the shortest representation of the value, which is what serde_json and
// Python write.
double HuggingFaceParsedScore(double d) {
  static const std::vector<double> kPow10 = [] {
    std::vector<double> p;
    for (int k = 0; k <= 308; ++k)
      p.push_back(std::strtod(("1e" + std::to_string(k)).c_str(), nullptr));
    return p;
  }();
  if (!std::isfinite(d)) return d;
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  const std::string_view text(buf, static_cast<size_t>(r.ptr - buf));
  size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) ++i;
  uint64_t significand = 0;
  int exponent = 0;
  bool fraction = false;
  for (; i < text.size() && text[i] != 'e'; ++i) {
    if (text[i] == '.') {
      fraction = true;
      continue;
    }
    significand = significand * 10 + static_cast<uint64_t>(text[i] - '0');
    if (fraction) --exponent;
  }
  if (i < text.size()) exponent += std::atoi(std::string(text.substr(i + 1)).c_str());
  double f = static_cast<double>(significand);
  while (true) {
    const int a = exponent < 0 ? -exponent : exponent;
    if (a <= 308) {
      f = exponent >= 0 ? f * kPow10[static_cast<size_t>(a)] : f / kPow10[static_cast<size_t>(a)];
      break;
    }
    if (f == 0.0 || exponent > 0) break;
    f /= 1e308;
    exponent += 308;
  }
  return negative ? -f : f;
}

// ---------------------------------------------------------------- BPE

// A read-only map from 64-bit keys: open addressing, linear probing.
template <typename V>
class FlatMap {
 public:
  FlatMap() = default;
  explicit FlatMap(const std::unordered_map<uint64_t, V>& m) {
    size_t cap = 16;
    while (cap < m.size() * 2) cap *= 2;
    keys_.assign(cap, kEmpty);
    values_.resize(cap);
    mask_ = cap - 1;
    for (const auto& [k, v] : m) {
      size_t i = Slot(k);
      while (keys_[i] != kEmpty) i = (i + 1) & mask_;
      keys_[i] = k;
      values_[i] = v;
    }
  }
  const V* Find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (size_t i = Slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // no key is all ones
  size_t Slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask_;
  }
  std::vector<uint64_t> keys_;
  std::vector<V> values_;
  size_t mask_ = 0;
};
// Merge ranks by pair of ids (a << 32 | b) -> (rank, merged id).
using MergeMap = FlatMap<std::pair<uint32_t, uint32_t>>;

class Bpe : public Model {
 public:
  struct Options {
    std::string unk_token;  // empty: none
    std::string prefix, suffix;
    bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  };

  Bpe(Vocab vocab, std::vector<std::string> by_id,
      std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> merges, Options o)
      : vocab_(std::move(vocab)),
        by_id_(std::move(by_id)),
        merges_(merges),
        o_(std::move(o)),
        instance_(next_model_instance++) {
    if (!o_.unk_token.empty()) unk_id_ = Find(vocab_, o_.unk_token);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      const auto id = Find(vocab_, name);
      byte_ids_[b] = id ? static_cast<int64_t>(*id) : -1;
    }
    split_at_metaspace_ = NoMergeJoinsAWordToAMetaspace(merges);
  }

  void Tokenize(std::string_view word, std::vector<Token>* out) const override {
    if (word.empty()) return;
    if (o_.ignore_merges) {
      if (const auto id = Find(vocab_, word)) {
        out->push_back({*id, std::string(word), 0, static_cast<uint32_t>(word.size())});
        return;
      }
    }
    if (!split_at_metaspace_ || word.size() < kMaxCachedLength) {
      TokenizePiece(word, 0, out);
      return;
    }
    // A long word of a tokenizer without a pre-tokenizer (Llama 2's,
    // Mistral's: a whole text is one word, its spaces made "▁"): no merge
    // joins a character other than "▁" to a "▁" after it, so the pieces that
    // start there are merged apart, the same merges in the same order, and
    // each piece is a word the cache can hold.
    size_t start = 0;
    for (size_t at = word.find(kMetaspace, 1); at != std::string_view::npos;
         at = word.find(kMetaspace, at + kMetaspace.size())) {
      if (at >= kMetaspace.size() &&
          word.substr(at - kMetaspace.size(), kMetaspace.size()) == kMetaspace) {
        continue;  // a run of "▁" stays with the word after it
      }
      TokenizePiece(word.substr(start, at - start), static_cast<uint32_t>(start), out);
      start = at;
    }
    TokenizePiece(word.substr(start), static_cast<uint32_t>(start), out);
  }

  std::optional<uint32_t> TokenToId(std::string_view token) const override {
    return Find(vocab_, token);
  }
  size_t VocabSize() const override { return vocab_.size(); }

 private:
  static constexpr std::string_view kMetaspace = "\xe2\x96\x81";  // U+2581 "▁"

  // Whether words can be cut before each "▁" that follows another
  // character: "▁" is a token, there is no prefix, suffix or ignore_merges,
  // the unk token is not made of "▁" only, and no merge has a right side
  // starting with "▁" unless its left side is made of "▁" only (so no merge
  // ever joins what another character became to a "▁" after it).
  bool NoMergeJoinsAWordToAMetaspace(
      const std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>>& merges) const {
    if (o_.ignore_merges || !o_.prefix.empty() || !o_.suffix.empty()) return false;
    if (!Find(vocab_, kMetaspace)) return false;
    const auto only_metaspace = [](std::string_view t) {
      if (t.empty()) return false;
      for (; !t.empty(); t.remove_prefix(kMetaspace.size())) {
        if (t.substr(0, kMetaspace.size()) != kMetaspace) return false;
      }
      return true;
    };
    // An unknown character becomes the unk token, which a merge may then
    // join to the "▁" after it when the token is itself made of "▁".
    if (only_metaspace(o_.unk_token)) return false;
    for (const auto& [pair, merged] : merges) {
      const auto a = static_cast<uint32_t>(pair >> 32), b = static_cast<uint32_t>(pair);
      if (a >= by_id_.size() || b >= by_id_.size()) return false;
      if (by_id_[b].compare(0, kMetaspace.size(), kMetaspace) == 0 && !only_metaspace(by_id_[a])) {
        return false;
      }
    }
    return true;
  }

  // The tokens of one word (or piece of one, at byte `offset` of the word),
  // through the per-thread cache for short ones.
  void TokenizePiece(std::string_view word, uint32_t offset, std::vector<Token>* out) const {
    Cache& cache = ThreadCache();
    const std::vector<Piece>* pieces = nullptr;
    std::vector<Piece> fresh;
    const bool cacheable = word.size() < kMaxCachedLength;
    if (cacheable) {
      const auto it = cache.map.find(word);
      if (it != cache.map.end()) pieces = &it->second;
    }
    if (pieces == nullptr) {
      MergeWord(word, &fresh);
      if (cacheable) {
        if (cache.map.size() >= kCacheCapacity) cache.map.clear();
        pieces = &cache.map.emplace(std::string(word), std::move(fresh)).first->second;
      } else {
        pieces = &fresh;
      }
    }
    uint32_t pos = offset;
    for (const Piece& p : *pieces) {
      out->push_back({p.id, by_id_[p.id], pos, pos + p.len});
      pos += p.len;
    }
  }

  struct Piece {
    uint32_t id;
    uint32_t len;  // bytes of the word
  };
  struct Symbol {
    uint32_t id;
    int32_t prev, next;
    uint32_t len;
  };
  struct Cache {
    std::unordered_map<std::string, std::vector<Piece>, StringHash, std::equal_to<>> map;
  };
  static constexpr size_t kMaxCachedLength = 256;
  static constexpr size_t kCacheCapacity = 20'000;

  Cache& ThreadCache() const {
    thread_local std::unordered_map<uint64_t, Cache> caches;
    return caches[instance_];
  }

  void MergeWord(std::string_view w, std::vector<Piece>* out) const {
    std::vector<Symbol> sym;
    sym.reserve(w.size());
    auto add = [&](uint32_t id, uint32_t len) {
      const auto n = static_cast<int32_t>(sym.size());
      if (!sym.empty()) sym.back().next = n;
      sym.push_back({id, n - 1, -1, len});
    };
    bool has_unk = false;  // a pending unknown piece: (unk_id, unk_len)
    uint32_t unk_id = 0, unk_len = 0;
    std::string s;
    size_t i = 0;
    while (i < w.size()) {
      const size_t b = i;
      i += Utf8LeadLength(static_cast<unsigned char>(w[i]));
      const auto byte_len = static_cast<uint32_t>(i - b);
      std::optional<uint32_t> id;
      const bool plain = (b == 0 || o_.prefix.empty()) && (i < w.size() || o_.suffix.empty());
      if (plain) {
        s.assign(w.substr(b, byte_len));
      } else {
        s.clear();
        if (b != 0) s += o_.prefix;
        s += w.substr(b, byte_len);
        if (i == w.size()) s += o_.suffix;
      }
      id = Find(vocab_, s);
      if (id) {
        if (has_unk) {
          add(unk_id, unk_len);
          has_unk = false;
        }
        add(*id, byte_len);
        continue;
      }
      if (o_.byte_fallback) {
        bool all = true;
        for (const char c : s) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
        if (all) {
          for (const char c : s)
            add(static_cast<uint32_t>(byte_ids_[static_cast<unsigned char>(c)]), 1);
          continue;
        }
      }
      if (!o_.unk_token.empty()) {
        if (!unk_id_) {
          throw Error("tokenizer BPE model: the unk_token " + json(o_.unk_token).dump() +
                          " is not in the vocabulary",
                      "fix the tokenizer file");
        }
        if (has_unk && o_.fuse_unk) {
          unk_len += byte_len;
        } else {
          if (has_unk) add(unk_id, unk_len);
          has_unk = true;
          unk_id = *unk_id_;
          unk_len = byte_len;
        }
      }
    }
    if (has_unk) add(unk_id, unk_len);
    MergeAll(&sym);
    for (const Symbol& x : sym) {
      if (x.len != 0) out->push_back({x.id, x.len});
    }
  }

  // Hugging Face's merge loop: lowest rank first, then leftmost.
  void MergeAll(std::vector<Symbol>* symbols) const {
    std::vector<Symbol>& sym = *symbols;
    struct Merge {
      uint32_t rank;
      uint32_t pos;
      uint32_t new_id;
    };
    auto later = [](const Merge& a, const Merge& b) {
      return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    std::vector<Merge> heap;
    auto lookup = [&](uint32_t a, uint32_t b) {
      return merges_.Find((static_cast<uint64_t>(a) << 32) | b);
    };
    for (size_t k = 0; k + 1 < sym.size(); ++k) {
      if (const auto* m = lookup(sym[k].id, sym[k + 1].id)) {
        heap.push_back({m->first, static_cast<uint32_t>(k), m->second});
      }
    }
    std::make_heap(heap.begin(), heap.end(), later);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const Merge top = heap.back();
      heap.pop_back();
      Symbol& cur = sym[top.pos];
      if (cur.len == 0 || cur.next == -1) continue;
      const auto next_pos = static_cast<size_t>(cur.next);
      const Symbol right = sym[next_pos];
      const auto* m = lookup(cur.id, right.id);
      if (m == nullptr || m->second != top.new_id) continue;
      cur.id = top.new_id;
      cur.len += right.len;
      cur.next = right.next;
      sym[next_pos].len = 0;
      if (right.next > -1 && static_cast<size_t>(right.next) < sym.size()) {
        sym[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(top.pos);
      }
      if (cur.prev >= 0) {
        const Symbol& prev = sym[static_cast<size_t>(cur.prev)];
        if (const auto* pm = lookup(prev.id, cur.id)) {
          heap.push_back({pm->first, static_cast<uint32_t>(cur.prev), pm->second});
          std::push_heap(heap.begin(), heap.end(), later);
        }
      }
      if (cur.next >= 0 && static_cast<size_t>(cur.next) < sym.size()) {
        const Symbol& nx = sym[static_cast<size_t>(cur.next)];
        if (const auto* nm = lookup(cur.id, nx.id)) {
          heap.push_back({nm->first, top.pos, nm->second});
          std::push_heap(heap.begin(), heap.end(), later);
        }
      }
    }
  }

  Vocab vocab_;
  std::vector<std::string> by_id_;
  MergeMap merges_;  // (a << 32 | b) -> (rank, merged id)
  Options o_;
  std::optional<uint32_t> unk_id_;
  std::array<int64_t, 256> byte_ids_{};  // ids of "<0xXX>", -1 when absent
  uint64_t instance_;                    // keys the per-thread word cache
  bool split_at_metaspace_ = false;      // see NoMergeJoinsAWordToAMetaspace
};

std::unique_ptr<Model> MakeBpe(const json& j, const LoadContext& ctx) {
  const std::string component = "model BPE";
  CheckKeys(j,
            {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
             "byte_fallback", "ignore_merges", "vocab", "merges"},
            component, ctx);
  if (j.contains("dropout") && !j["dropout"].is_null() &&
      !(j["dropout"].is_number() && j["dropout"].get<double>() == 0.0)) {
    ctx.Fail(component, "dropout " + j["dropout"].dump() + " is not implemented",
             "BPE dropout is random; djshard needs deterministic ids: set \"dropout\": null");
  }
  Bpe::Options o;
  o.unk_token = GetOptString(j, "unk_token", component, ctx);
  o.prefix = GetOptString(j, "continuing_subword_prefix", component, ctx);
  o.suffix = GetOptString(j, "end_of_word_suffix", component, ctx);
  o.byte_fallback = GetBool(j, "byte_fallback", false, component, ctx);
  o.fuse_unk = GetBool(j, "fuse_unk", false, component, ctx);
  o.ignore_merges = GetBool(j, "ignore_merges", false, component, ctx);
  std::vector<std::string> by_id;
  Vocab vocab = ReadVocabObject(j.contains("vocab") ? j["vocab"] : json(), component, ctx, &by_id);
  if (!j.contains("merges") || !j["merges"].is_array()) {
    ctx.Fail(component, "\"merges\" is not a list");
  }
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> merges;
  merges.reserve(j["merges"].size());
  uint32_t rank = 0;
  for (const auto& m : j["merges"]) {
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos) {
        ctx.Fail(component, "merge " + std::to_string(rank + 1) + " " + m.dump() +
                                " is not two tokens separated by a space");
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      ctx.Fail(component, "merge " + std::to_string(rank + 1) + " " + m.dump() + " is malformed");
    }
    const auto ia = Find(vocab, a), ib = Find(vocab, b);
    if (b.size() < o.prefix.size()) {
      ctx.Fail(component, "merge " + m.dump() + " is shorter than its continuing_subword_prefix");
    }
    const std::string merged = a + b.substr(o.prefix.size());
    const auto im = Find(vocab, merged);
    if (!ia || !ib || !im) {
      ctx.Fail(component, "merge " + std::to_string(rank + 1) + " " + m.dump() +
                              " names a token that is not in the vocabulary");
    }
    merges[(static_cast<uint64_t>(*ia) << 32) | *ib] = {rank, *im};
    ++rank;
  }
  if (!o.unk_token.empty() && !Find(vocab, o.unk_token)) {
    ctx.Fail(component, "unk_token " + json(o.unk_token).dump() + " is not in the vocabulary");
  }
  return std::make_unique<Bpe>(std::move(vocab), std::move(by_id), std::move(merges), std::move(o));
}

// ---------------------------------------------------------------- WordPiece

// Byte strings with ids; finds the keys that are prefixes of a text.
class ByteTrie {
 public:
  void Insert(std::string_view key, uint32_t id) {
    uint32_t node = 0;
    for (const char c : key) {
      const uint64_t edge = (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(c);
      auto it = edges_.find(edge);
      if (it == edges_.end()) {
        ids_.push_back(-1);
        it = edges_.emplace(edge, static_cast<uint32_t>(ids_.size() - 1)).first;
      }
      node = it->second;
    }
    ids_[node] = id;
  }
  // Makes lookups fast; no Insert after it.
  void Freeze() { frozen_ = FlatMap<uint32_t>(edges_); }
  // The longest key that is a prefix of `s`: (length, id), or length 0.
  std::pair<size_t, uint32_t> Longest(std::string_view s) const {
    std::pair<size_t, uint32_t> best{0, 0};
    uint32_t node = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      const uint32_t* next =
          frozen_.Find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(s[k]));
      if (next == nullptr) break;
      node = *next;
      if (ids_[node] >= 0) best = {k + 1, static_cast<uint32_t>(ids_[node])};
    }
    return best;
  }

 private:
  std::vector<int64_t> ids_{-1};                  // per node; -1: not a key
  std::unordered_map<uint64_t, uint32_t> edges_;  // (node << 8 | byte) -> node
  FlatMap<uint32_t> frozen_;                      // the same, for lookups
};

class WordPiece : public Model {
 public:
  WordPiece(Vocab vocab, std::string unk, std::string prefix, size_t max_chars)
      : vocab_(std::move(vocab)),
        unk_(std::move(unk)),
        prefix_(std::move(prefix)),
        max_chars_(max_chars) {
    for (const auto& [k, v] : vocab_) {
      words_.Insert(k, v);
      if (k.size() > prefix_.size() && k.compare(0, prefix_.size(), prefix_) == 0) {
        continuations_.Insert(std::string_view(k).substr(prefix_.size()), v);
      }
    }
    words_.Freeze();
    continuations_.Freeze();
    unk_id_ = Find(vocab_, unk_);
  }

  void Tokenize(std::string_view word, std::vector<Token>* out) const override {
    size_t chars = 0;
    for (const char c : word) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    const auto whole_unk = [&] {
      if (!unk_id_) {
        throw Error("tokenizer WordPiece model: the unk_token " + json(unk_).dump() +
                        " is not in the vocabulary",
                    "fix the tokenizer file");
      }
      out->push_back({*unk_id_, unk_, 0, static_cast<uint32_t>(word.size())});
    };
    if (chars > max_chars_) return whole_unk();
    // Greedy longest match: the longest vocabulary entry at each position
    // (with the continuing prefix after the first), found with a trie. Keys
    // are whole UTF-8 strings, so a match ends on a char boundary.
    const size_t first = out->size();
    size_t start = 0;
    while (start < word.size()) {
      const auto [len, id] = (start == 0 ? words_ : continuations_).Longest(word.substr(start));
      if (len == 0) {
        out->resize(first);
        return whole_unk();
      }
      std::string value = start > 0 ? prefix_ : std::string();
      value += word.substr(start, len);
      out->push_back(
          {id, std::move(value), static_cast<uint32_t>(start), static_cast<uint32_t>(start + len)});
      start += len;
    }
  }

  std::optional<uint32_t> TokenToId(std::string_view token) const override {
    return Find(vocab_, token);
  }
  size_t VocabSize() const override { return vocab_.size(); }

 private:
  Vocab vocab_;
  std::string unk_;
  std::string prefix_;
  size_t max_chars_;
  ByteTrie words_;          // every entry, for the start of a word
  ByteTrie continuations_;  // entries with the prefix, without it
  std::optional<uint32_t> unk_id_;
};

// ---------------------------------------------------------------- Unigram

class Unigram : public Model {
 public:
  Unigram(std::vector<std::pair<std::string, double>> pieces, std::optional<uint32_t> unk_id,
          bool byte_fallback)
      : pieces_(std::move(pieces)), unk_id_(unk_id), byte_fallback_(byte_fallback) {
    min_score_ = INFINITY;
    nodes_.push_back({});
    for (size_t id = 0; id < pieces_.size(); ++id) {
      ids_[pieces_[id].first] = static_cast<uint32_t>(id);
      min_score_ = std::min(min_score_, pieces_[id].second);
      uint32_t node = 0;
      for (const char c : pieces_[id].first) {
        const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(c);
        auto it = edges_.find(key);
        if (it == edges_.end()) {
          nodes_.push_back({});
          it = edges_.emplace(key, static_cast<uint32_t>(nodes_.size() - 1)).first;
        }
        node = it->second;
      }
      nodes_[node].terminal = true;
    }
    frozen_ = FlatMap<uint32_t>(edges_);
  }

  void Tokenize(std::string_view s, std::vector<Token>* out) const override {
    if (s.empty()) return;
    const std::vector<Best> best = BestPaths(s);
    const std::vector<std::pair<size_t, size_t>> spans = BackTrack(best, s.size());
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      EmitPiece(s.substr(it->first, it->second - it->first), static_cast<uint32_t>(it->first),
                static_cast<uint32_t>(it->second), out);
    }
  }

  std::optional<uint32_t> TokenToId(std::string_view token) const override {
    const auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  size_t VocabSize() const override { return pieces_.size(); }

 private:
  // The best segmentation of s[0, i) ends with piece `id`, starting at
  // `starts_at` (-1: none yet), with total `score`.
  struct Best {
    uint32_t id = 0;
    double score = 0;
    int64_t starts_at = -1;
  };

  // Viterbi over the pieces that start at each character: best[i] for every
  // end i. A character no piece covers is the unknown piece.
  std::vector<Best> BestPaths(std::string_view s) const {
    const double unk_score = min_score_ - 10.0;
    std::vector<Best> best(s.size() + 1);
    size_t start = 0;
    while (start < s.size()) {
      const double here = best[start].score;
      const size_t mblen = Utf8LeadLength(static_cast<unsigned char>(s[start]));
      bool single = false;
      uint32_t node = 0;
      for (size_t k = start; k < s.size(); ++k) {
        const uint32_t* next =
            frozen_.Find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(s[k]));
        if (next == nullptr) break;
        node = *next;
        if (!nodes_[node].terminal) continue;
        const size_t key_pos = k + 1;
        const uint32_t id = ids_.find(s.substr(start, key_pos - start))->second;
        const double cand = pieces_[id].second + here;
        Best& t = best[key_pos];
        if (t.starts_at < 0 || cand > t.score) {
          t = {id, cand, static_cast<int64_t>(start)};
        }
        if (key_pos - start == mblen) single = true;
      }
      if (!single) {
        if (!unk_id_) {
          throw Error(
              "tokenizer Unigram model: a character is not in the vocabulary and the "
              "model has no unk_id",
              "fix the tokenizer file");
        }
        Best& t = best[start + mblen];
        const double cand = unk_score + here;
        if (t.starts_at < 0 || cand > t.score) t = {*unk_id_, cand, static_cast<int64_t>(start)};
      }
      start += mblen;
    }
    return best;
  }

  // The [begin, end) spans of the best segmentation of a text of `size`
  // bytes, last first, consecutive unknown pieces fused.
  std::vector<std::pair<size_t, size_t>> BackTrack(const std::vector<Best>& best,
                                                   size_t size) const {
    std::vector<std::pair<size_t, size_t>> spans;
    size_t end = size;
    std::optional<std::pair<size_t, size_t>> unk;
    while (end > 0) {
      const Best& node = best[end];
      const auto b = static_cast<size_t>(node.starts_at);
      if (unk_id_ && node.id == *unk_id_) {
        unk = unk ? std::make_pair(b, unk->second) : std::make_pair(b, end);
      } else {
        if (unk) {
          spans.push_back(*unk);
          unk.reset();
        }
        spans.emplace_back(b, end);
      }
      end = b;
    }
    if (unk) spans.push_back(*unk);
    return spans;
  }

  // The token of `piece` at [b, e): its own id, else its bytes' <0xNN>
  // pieces (byte_fallback, when the vocabulary has them all), else unk.
  void EmitPiece(std::string_view piece, uint32_t b, uint32_t e, std::vector<Token>* out) const {
    const auto found = ids_.find(piece);
    if (found != ids_.end()) {
      out->push_back({found->second, std::string(piece), b, e});
      return;
    }
    if (byte_fallback_) {
      bool all = true;
      std::vector<Token> bytes;
      for (const char c : piece) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned char>(c));
        const auto id = ids_.find(std::string_view(name));
        if (id == ids_.end()) {
          all = false;
          break;
        }
        bytes.push_back({id->second, name, b, e});
      }
      if (all) {
        out->insert(out->end(), bytes.begin(), bytes.end());
        return;
      }
    }
    out->push_back({*unk_id_, std::string(piece), b, e});
  }

  struct Node {
    bool terminal = false;
  };
  std::vector<std::pair<std::string, double>> pieces_;
  Vocab ids_;
  std::optional<uint32_t> unk_id_;
  bool byte_fallback_;
  double min_score_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> edges_;  // (node << 8 | byte) -> node
  FlatMap<uint32_t> frozen_;                      // the same, for lookups
};

// ---------------------------------------------------------------- WordLevel

class WordLevel : public Model {
 public:
  WordLevel(Vocab vocab, std::string unk) : vocab_(std::move(vocab)), unk_(std::move(unk)) {}
  void Tokenize(std::string_view word, std::vector<Token>* out) const override {
    const auto len = static_cast<uint32_t>(word.size());
    if (const auto id = Find(vocab_, word)) {
      out->push_back({*id, std::string(word), 0, len});
    } else if (const auto unk = Find(vocab_, unk_)) {
      out->push_back({*unk, unk_, 0, len});
    } else {
      throw Error("tokenizer WordLevel model: a word is not in the vocabulary and the unk_token " +
                      json(unk_).dump() + " is not either",
                  "fix the tokenizer file");
    }
  }
  std::optional<uint32_t> TokenToId(std::string_view token) const override {
    return Find(vocab_, token);
  }
  size_t VocabSize() const override { return vocab_.size(); }

 private:
  Vocab vocab_;
  std::string unk_;
};

}  // namespace

std::unique_ptr<Model> MakeModel(const json& j, const LoadContext& ctx) {
  if (!j.is_object()) ctx.Fail("model", "is missing or not an object");
  std::string type =
      j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
  if (type.empty()) {
    // Old files leave the type out; Hugging Face then guesses from the keys.
    if (j.contains("merges")) {
      type = "BPE";
    } else if (j.contains("continuing_subword_prefix") || j.contains("max_input_chars_per_word")) {
      type = "WordPiece";
    } else {
      ctx.Fail("model", "has no \"type\"");
    }
  }
  const std::string component = "model " + type;
  if (type == "BPE") return MakeBpe(j, ctx);
  if (type == "WordPiece") {
    CheckKeys(j, {"unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"},
              component, ctx);
    std::vector<std::string> by_id;
    Vocab vocab =
        ReadVocabObject(j.contains("vocab") ? j["vocab"] : json(), component, ctx, &by_id);
    std::string unk = j.contains("unk_token") ? GetOptString(j, "unk_token", component, ctx)
                                              : std::string("[UNK]");
    std::string prefix = j.contains("continuing_subword_prefix")
                             ? GetOptString(j, "continuing_subword_prefix", component, ctx)
                             : std::string("##");
    size_t max_chars = 100;
    if (j.contains("max_input_chars_per_word")) {
      if (!j["max_input_chars_per_word"].is_number_unsigned()) {
        ctx.Fail(component, "\"max_input_chars_per_word\" is not a number");
      }
      max_chars = j["max_input_chars_per_word"].get<size_t>();
    }
    return std::make_unique<WordPiece>(std::move(vocab), std::move(unk), std::move(prefix),
                                       max_chars);
  }
  if (type == "Unigram") {
    CheckKeys(j, {"unk_id", "vocab", "byte_fallback"}, component, ctx);
    if (!j.contains("vocab") || !j["vocab"].is_array()) {
      ctx.Fail(component, "\"vocab\" is not a list of [piece, score]");
    }
    std::vector<std::pair<std::string, double>> pieces;
    pieces.reserve(j["vocab"].size());
    for (const auto& p : j["vocab"]) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_number()) {
        ctx.Fail(component, "vocab entry " + p.dump() + " is not [piece, score]");
      }
      pieces.emplace_back(p[0].get<std::string>(), HuggingFaceParsedScore(p[1].get<double>()));
    }
    std::optional<uint32_t> unk_id;
    if (j.contains("unk_id") && !j["unk_id"].is_null()) {
      if (!j["unk_id"].is_number_unsigned() || j["unk_id"].get<uint64_t>() >= pieces.size()) {
        ctx.Fail(component, "unk_id " + j["unk_id"].dump() + " is not an id of the vocabulary");
      }
      unk_id = j["unk_id"].get<uint32_t>();
    }
    return std::make_unique<Unigram>(std::move(pieces), unk_id,
                                     GetBool(j, "byte_fallback", false, component, ctx));
  }
  if (type == "WordLevel") {
    CheckKeys(j, {"vocab", "unk_token"}, component, ctx);
    std::vector<std::string> by_id;
    Vocab vocab =
        ReadVocabObject(j.contains("vocab") ? j["vocab"] : json(), component, ctx, &by_id);
    return std::make_unique<WordLevel>(std::move(vocab),
                                       GetOptString(j, "unk_token", component, ctx));
  }
  ctx.Fail(component, "is not implemented");
}

}  // namespace djshard::model::tokenizer
