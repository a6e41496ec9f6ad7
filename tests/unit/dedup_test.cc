// The deduplicators' core against tests/data/dedup-vectors.jsonl.zst (made by
// tests/data/make_dedup_vectors.py from Data-Juicer 1.4.3's own operator code):
// every per-row signature, every kept set, Data-Juicer's unit-test datasets,
// its LSH parameters and permutations; and the properties the distributed
// stage relies on.
#include "djshard/ops/dedup.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "djshard/common/error.h"
#include "djshard/io/input.h"
#include "src/ops/dedup/hashes.h"
#include "src/ops/dedup/minhash_kernel.h"
#include "tests/unit/dedup_vectors.h"

namespace djshard::ops::dedup {
namespace {

using nlohmann::json;

const std::string kData = DJSHARD_SOURCE_DIR "/tests/data";

using Vectors = djshard::testing::DedupVectors;
const Vectors& AllVectors() { return djshard::testing::AllDedupVectors(); }

DedupConfig Config(const std::string& op, const json& args) {
  std::string yaml = args.dump();
  for (size_t at; (at = yaml.find("@DATA@")) != std::string::npos;) yaml.replace(at, 6, kData);
  return ParseDedupConfig(op, recipe::OperatorArgs(YAML::Load(yaml), "vectors", op, 1));
}

// The value of the text key of a vector's row, as a record reader hands it over.
TextValue ValueOf(const json& row, const std::string& key) {
  TextValue v;
  if (!row.contains(key)) {
    v.type = TextValue::Type::kMissing;
    return v;
  }
  const json& t = row[key];
  if (t.is_string()) return TextValue::String(t.get_ref<const std::string&>());
  if (t.is_null()) v.type = TextValue::Type::kNull;
  if (t.is_boolean()) v.type = TextValue::Type::kBool, v.falsy = !t.get<bool>();
  if (t.is_number()) v.type = TextValue::Type::kNumber, v.falsy = t.get<double>() == 0;
  if (t.is_array()) v.type = TextValue::Type::kArray, v.length = t.size();
  if (t.is_object()) v.type = TextValue::Type::kObject, v.length = t.size();
  return v;
}

std::vector<TextValue> ValuesOf(const json& rows, const std::string& key) {
  std::vector<TextValue> values;
  for (const json& r : rows) values.push_back(ValueOf(r, key));
  return values;
}

std::string Hex(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (unsigned char b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

// The signature Data-Juicer stored for a row, as the vector writes it.
json SignatureJson(const DedupConfig& c, const Signature& sig) {
  if (c.kind == Kind::kExact) return sig.empty_marker ? json("EMPTY") : json(Md5Hex(sig.md5));
  if (c.kind == Kind::kSimhash) return json(std::to_string(sig.simhash));
  json keys = json::array();
  const int64_t bands = c.ray && sig.empty_marker ? 1 : c.num_bands;
  for (int64_t b = 0; b < bands; ++b) keys.push_back(Hex(MinhashBandBytes(c, sig, b)));
  return keys;
}

// "" when every row's signature and error, and the kept rows, are the vector's.
std::string CheckDataset(const json& v, const json& rows) {
  const DedupConfig c = Config(v["op"], v["args"]);
  const std::vector<TextValue> values = ValuesOf(rows, c.text_key);
  Signer signer(c);
  for (size_t r = 0; r < values.size(); ++r) {
    Signature sig;
    std::string error;
    const bool ok = signer.Sign(values[r], &sig, &error);
    const bool want_error = v["errors"].contains(std::to_string(r));
    if (ok == want_error) {
      return "row " + std::to_string(r) + ": " +
             (ok ? "signed, want error " : "error '" + error + "', want a signature") +
             (want_error ? v["errors"][std::to_string(r)].dump() : "");
    }
    if (!ok) continue;
    const json& want = v["sig"][r];
    if (!want.is_null() && SignatureJson(c, sig) != want) {
      return "row " + std::to_string(r) + ": signature " + SignatureJson(c, sig).dump() +
             " != " + want.dump();
    }
    // Data-Juicer keeps the values its bands cover (num_bands * num_rows_per_band of them)
    if (v.contains("minhash") && !v["minhash"][r].is_null()) {
      const json& values = v["minhash"][r];
      const std::vector<uint32_t> got(
          sig.minhash.begin(), sig.minhash.begin() + std::min(sig.minhash.size(), values.size()));
      if (json(got) != values) return "row " + std::to_string(r) + ": minhash values differ";
    }
  }
  const KeptResult got = KeptRows(c, values);
  if (json(got.kept) != v["kept"])
    return "kept " + json(got.kept).dump() + " != " + v["kept"].dump();
  return "";
}

TEST(DedupVectors, EverySignatureAndKeptSetIsDataJuicers) {
  const Vectors& all = AllVectors();
  ASSERT_GE(all.datasets.size(), 150u);
  std::set<std::string> ops;
  int failures = 0;
  for (const json& v : all.datasets) {
    ops.insert(v["op"]);
    const std::string problem = CheckDataset(v, all.rows.at(v["dataset"]));
    if (!problem.empty() && ++failures <= 10) {
      ADD_FAILURE() << v["op"] << " " << v["args"].dump() << " on " << v["dataset"] << ": "
                    << problem;
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(ops.size(), 5u);
}

// The portable kernels, which machines without AVX-512 or SHA instructions
// run, give the same signatures and kept sets.
TEST(DedupVectors, ThePortableKernelsGiveTheSameResults) {
  UsePortableKernelsOnly(true);
  const Vectors& all = AllVectors();
  int failures = 0;
  for (const json& v : all.datasets) {
    const std::string problem = CheckDataset(v, all.rows.at(v["dataset"]));
    if (!problem.empty() && ++failures <= 10) {
      ADD_FAILURE() << v["op"] << " " << v["args"].dump() << " on " << v["dataset"] << ": "
                    << problem;
    }
  }
  UsePortableKernelsOnly(false);
  EXPECT_EQ(failures, 0);
}

TEST(DedupVectors, DataJuicerUnitTestDatasetsKeepTheSameRows) {
  const Vectors& all = AllVectors();
  ASSERT_GE(all.units.size(), 14u);
  for (const json& u : all.units) {
    EXPECT_EQ(u["result"], "passed") << u["test"];
    const DedupConfig c = Config(u["op"], u["args"]);
    const KeptResult got = KeptRows(c, ValuesOf(u["rows"], c.text_key));
    EXPECT_EQ(json(got.kept), u["kept"]) << u["op"] << " " << u["test"];
  }
}

TEST(DedupVectors, ArgumentsDataJuicerFailsOnAreRefusedAtLoad) {
  const Vectors& all = AllVectors();
  ASSERT_GE(all.load_errors.size(), 7u);
  for (const json& v : all.load_errors) {
    EXPECT_THROW(Config(v["op"], v["args"]), Error) << v["op"] << " " << v["args"].dump();
  }
}

TEST(DedupParams, OptimalParamIsScipys) {
  const Vectors& all = AllVectors();
  ASSERT_GE(all.params.size(), 300u);
  for (const json& p : all.params) {
    const auto [b, r] = OptimalParam(p["threshold"].get<double>(), p["num_perm"].get<int64_t>());
    EXPECT_EQ(b, p["bands"].get<int64_t>()) << p.dump();
    EXPECT_EQ(r, p["rows"].get<int64_t>()) << p.dump();
  }
}

TEST(DedupParams, PermutationsAreNumpyRandomState42) {
  const json& p = AllVectors().permutations;
  std::vector<uint64_t> a, b;
  MinhashPermutations(p["num_perm"].get<int64_t>(), &a, &b);
  ASSERT_EQ(a.size(), p["a"].size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::to_string(a[i]), p["a"][i].get<std::string>()) << i;
    EXPECT_EQ(std::to_string(b[i]), p["b"][i].get<std::string>()) << i;
  }
  MinhashPermutations(3, &a, &b);  // a shorter draw is the same prefix
  EXPECT_EQ(std::to_string(a[2]), p["a"][2].get<std::string>());
}

TEST(DedupParams, BadArgumentsAreErrorsAtTheRecipeLine) {
  const auto refuse = [](const std::string& op, const std::string& yaml) {
    try {
      ParseDedupConfig(op, recipe::OperatorArgs(YAML::Load(yaml), "r.yaml", op, 7));
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("r.yaml:", 0), 0u) << e.what();
      return;
    }
    ADD_FAILURE() << op << " " << yaml << " was accepted";
  };
  refuse("document_simhash_deduplicator", "{window_size: 0}");
  refuse("document_simhash_deduplicator", "{tokenization: sentencepiece}");
  refuse("document_simhash_deduplicator", "{num_blocks: 40, hamming_distance: 20}");
  refuse("document_minhash_deduplicator", "{jaccard_threshold: 1.5}");
  refuse("document_minhash_deduplicator", "{num_permutations: -1}");
  refuse("document_minhash_deduplicator",
         "{tokenization: sentencepiece, tokenizer_model: /nonexistent/x.model}");
  refuse("ray_bts_minhash_deduplicator",
         "{num_bands: 3, num_rows_per_band: 5, num_permutations: 8}");
  refuse("ray_document_deduplicator", "{backend: spark}");
  refuse("document_deduplicator", "{lowercase: maybe}");
}

TEST(DedupHashes, ShaExtensionsAgreeWithTheScalarSha1) {
  std::mt19937 rng(5);
  for (size_t len = 0; len < 300; ++len) {
    std::string s(len, '\0');
    for (char& ch : s) ch = static_cast<char>(rng());
    ASSERT_EQ(Sha1Low32(s), Sha1Low32Scalar(s)) << len;
  }
}

// The 16-lane digests equal the one-message ones for batches of 1 to 16
// messages of mixed lengths, those too long for a lane (over 1015 bytes)
// included.
TEST(DedupHashes, BatchedDigestsEqualOneMessageDigests) {
  std::mt19937 rng(11);
  for (int round = 0; round < 400; ++round) {
    const size_t n = 1 + rng() % 16;
    std::vector<std::string> texts(n);
    for (std::string& t : texts) {
      const size_t len = rng() % 4 == 0 ? rng() % 1100 : rng() % 130;
      for (size_t k = 0; k < len; ++k) t.push_back(static_cast<char>(rng()));
    }
    const std::vector<std::string_view> msgs(texts.begin(), texts.end());
    uint64_t md5[kMd5Lanes];
    uint32_t sha1[kSha1Lanes];
    Md5High64Batch(msgs.data(), n, md5);
    Sha1Low32Batch(msgs.data(), n, sha1);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(md5[i], Md5High64(msgs[i])) << "round " << round << " lane " << i;
      ASSERT_EQ(sha1[i], Sha1Low32Scalar(msgs[i])) << "round " << round << " lane " << i;
    }
  }
}

// The kernel's minima are those of the set of a document's hashes, however
// often each comes, beyond the table of seen hashes too, and a document
// does not inherit the hashes the one before it saw.
TEST(DedupMinhashKernel, MinimaAreThoseOfTheSetOfTheDocumentsHashes) {
  std::mt19937_64 rng(3);
  std::vector<uint64_t> a(24), b(24);
  for (size_t j = 0; j < a.size(); ++j) a[j] = rng() % ((uint64_t{1} << 61) - 1), b[j] = rng();
  const auto minima = [&](const std::vector<uint32_t>& hashes) {
    std::vector<uint32_t> out(a.size(), UINT32_MAX);
    for (size_t j = 0; j < a.size(); ++j) {
      for (uint32_t hv : hashes) {
        const uint64_t x = (uint64_t{hv} * a[j] + b[j]) % ((uint64_t{1} << 61) - 1);
        out[j] = std::min(out[j], static_cast<uint32_t>(x & 0xFFFFFFFFu));
      }
    }
    return out;
  };
  MinhashKernel kernel;
  kernel.Reset(a, b);
  for (const size_t n : {size_t{600000}, size_t{40}, size_t{3000}}) {
    std::vector<uint32_t> hashes;
    for (size_t k = 0; k < n; ++k) hashes.push_back(static_cast<uint32_t>(rng() % (n / 2 + 1)));
    kernel.Start();
    for (uint32_t hv : hashes) kernel.Add(hv);
    std::vector<uint32_t> got;
    kernel.Finish(&got);
    ASSERT_EQ(got, minima(hashes)) << n << " hashes";
  }
}

TEST(DedupHashes, Md5ManyEqualsMd5OfEachMessage) {
  std::mt19937 rng(13);
  for (int round = 0; round < 200; ++round) {
    // up to 40 messages (lanes left idle) or up to 300 (lanes refilled)
    const size_t n = 1 + rng() % (round % 2 == 0 ? 40 : 300);
    std::vector<std::string> texts(n);
    for (std::string& t : texts) {
      // around the block edges too: 55 and 56 bytes left need one and two tail blocks
      constexpr size_t kEdges[] = {0, 55, 56, 63};
      const size_t len = rng() % 4 == 0   ? 64 * (rng() % 20) + kEdges[rng() % 4]
                         : rng() % 3 == 0 ? rng() % 5000
                                          : rng() % 140;
      for (size_t k = 0; k < len; ++k) t.push_back(static_cast<char>(rng()));
    }
    const std::vector<std::string_view> msgs(texts.begin(), texts.end());
    std::vector<std::array<uint8_t, 16>> got(n);
    Md5Many(msgs.data(), n, got.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], Md5(msgs[i])) << "round " << round << " " << i;
  }
}

// Signing a dataset's rows all at once gives each row the signature (or the
// error) that signing it alone gives, for every deduplicator of the vectors.
TEST(DedupVectors, SigningManyRowsAtOnceGivesEachRowsOwnSignature) {
  const Vectors& all = AllVectors();
  for (const json& v : all.datasets) {
    const DedupConfig c = Config(v["op"], v["args"]);
    const std::vector<TextValue> values = ValuesOf(all.rows.at(v["dataset"]), c.text_key);
    Signer one(c), many(c);
    std::vector<Signature> sigs(values.size());
    std::vector<std::string> errors(values.size());
    std::unique_ptr<bool[]> ok(new bool[values.size()]);
    many.SignMany(values.data(), values.size(), sigs.data(), ok.get(), errors.data());
    for (size_t r = 0; r < values.size(); ++r) {
      Signature sig;
      std::string error;
      const bool alone = one.Sign(values[r], &sig, &error);
      ASSERT_EQ(ok[r], alone) << v["op"] << " row " << r;
      ASSERT_EQ(errors[r], alone ? "" : error) << v["op"] << " row " << r;
      if (!alone) continue;
      EXPECT_EQ(sigs[r].md5, sig.md5) << v["op"] << " row " << r;
      EXPECT_EQ(sigs[r].simhash, sig.simhash) << v["op"] << " row " << r;
      EXPECT_EQ(sigs[r].minhash, sig.minhash) << v["op"] << " row " << r;
      EXPECT_EQ(sigs[r].empty_marker, sig.empty_marker) << v["op"] << " row " << r;
    }
  }
}

// The distributed stage groups keys by ranges and unions the edges of all
// ranges: any split of the key groups gives the single-process kept set.
TEST(DedupGrouping, KeptSetDoesNotDependOnHowKeyGroupsAreSplit) {
  const Vectors& all = AllVectors();
  int checked = 0;
  for (const json& v : all.datasets) {
    if (v["dataset"] != "corpus") continue;
    const DedupConfig c = Config(v["op"], v["args"]);
    const json& rows = all.rows.at("corpus");
    const std::vector<TextValue> values = ValuesOf(rows, c.text_key);
    Signer signer(c);
    std::vector<GroupKey> keys;
    std::vector<bool> signed_rows(values.size());
    // rows signed in reverse, as shards would finish in any order
    for (size_t r = values.size(); r-- > 0;) {
      Signature sig;
      std::string error;
      if (!signer.Sign(values[r], &sig, &error)) continue;
      signed_rows[r] = true;
      AppendKeys(c, sig, r, &keys);
    }
    for (size_t ranges : {1u, 3u, 7u}) {
      std::vector<std::vector<GroupKey>> split(ranges);
      for (const GroupKey& k : keys) {
        split[(std::hash<std::string>()(k.bytes) + k.part) % ranges].push_back(k);
      }
      std::vector<Edge> edges;
      for (auto& part : split) EmitEdges(c, &part, &edges);
      std::reverse(edges.begin(), edges.end());
      const std::vector<bool> kept = KeepFirstOfComponents(values.size(), signed_rows, edges);
      std::vector<uint64_t> kept_rows;
      for (uint64_t r = 0; r < kept.size(); ++r) {
        if (kept[r]) kept_rows.push_back(r);
      }
      EXPECT_EQ(json(kept_rows), v["kept"]) << v["op"] << " " << v["args"].dump() << " " << ranges;
    }
    ++checked;
  }
  EXPECT_GE(checked, 50);
}

DedupConfig SimhashConfig(int num_blocks, int hamming_distance) {
  DedupConfig c;
  c.kind = Kind::kSimhash;
  c.num_blocks = num_blocks;
  c.hamming_distance = hamming_distance;
  return c;
}

// `rows` simhashes: `seeds` random ones, then copies of earlier ones with
// fewer than `max_flips` random bits flipped.
std::vector<uint64_t> NearSimhashes(std::mt19937_64& rng, int rows, int seeds, int max_flips) {
  std::vector<uint64_t> hashes;
  for (int i = 0; i < rows; ++i) {
    uint64_t h = i < seeds ? rng() : hashes[rng() % hashes.size()];
    for (int f = static_cast<int>(rng() % max_flips); f > 0; --f) h ^= uint64_t{1} << (rng() % 64);
    hashes.push_back(h);
  }
  return hashes;
}

// simhash-cpp's find_all finds exactly the pairs of distinct simhashes within
// hamming_distance bits; the block keys must find every one of them.
TEST(DedupGrouping, SimhashKeysFindEveryPairWithinHammingDistance) {
  std::mt19937_64 rng(9);
  for (const auto& [m, k] : std::vector<std::pair<int, int>>{{6, 4}, {4, 3}, {9, 2}, {64, 2}}) {
    const DedupConfig c = SimhashConfig(m, k);
    const std::vector<uint64_t> hashes = NearSimhashes(rng, 60, 10, k + 2);
    std::vector<GroupKey> keys;
    for (size_t r = 0; r < hashes.size(); ++r) {
      Signature sig;
      sig.simhash = hashes[r];
      AppendKeys(c, sig, r, &keys);
    }
    std::vector<Edge> edges;
    EmitEdges(c, &keys, &edges);
    std::set<std::pair<uint64_t, uint64_t>> got;
    for (const Edge& e : edges) {
      got.insert({hashes[e.a], hashes[e.b]});
      got.insert({hashes[e.b], hashes[e.a]});
    }
    for (size_t i = 0; i < hashes.size(); ++i) {
      for (size_t j = 0; j < hashes.size(); ++j) {
        if (hashes[i] == hashes[j] || __builtin_popcountll(hashes[i] ^ hashes[j]) > k) continue;
        EXPECT_TRUE(got.count({hashes[i], hashes[j]})) << m << "/" << k << " " << i << " " << j;
      }
    }
    for (const auto& [x, y] : got) {
      EXPECT_LE(__builtin_popcountll(x ^ y), k);
    }
  }
}

// EmitSimhashEdges, from (row, simhash) pairs, links the rows exactly as
// EmitEdges over every key does: the same components, so the same kept rows.
TEST(DedupGrouping, SimhashPairsKeepWhatEveryKeyKeeps) {
  std::mt19937_64 rng(11);
  for (const auto& [m, k] : std::vector<std::pair<int, int>>{{6, 4}, {4, 3}, {9, 2}, {10, 8}}) {
    const DedupConfig c = SimhashConfig(m, k);
    const std::vector<uint64_t> hashes = NearSimhashes(rng, 300, 40, k + 3);
    std::vector<GroupKey> keys;
    std::vector<std::pair<uint64_t, uint64_t>> pairs;
    for (size_t r = 0; r < hashes.size(); ++r) {
      Signature sig;
      sig.simhash = hashes[r];
      AppendKeys(c, sig, r, &keys);
      pairs.emplace_back(r, hashes[r]);
    }
    std::shuffle(pairs.begin(), pairs.end(), rng);
    std::vector<Edge> by_keys, by_pairs;
    EmitEdges(c, &keys, &by_keys);
    EmitSimhashEdges(c, pairs, &by_pairs);
    const std::vector<bool> all(hashes.size(), true);
    const std::vector<bool> kept = KeepFirstOfComponents(hashes.size(), all, by_keys);
    EXPECT_EQ(KeepFirstOfComponents(hashes.size(), all, by_pairs), kept) << m << "/" << k;
    EXPECT_LT(std::count(kept.begin(), kept.end(), true), static_cast<long>(hashes.size()));
  }
}

}  // namespace
}  // namespace djshard::ops::dedup

namespace djshard::ops::dedup {
namespace {

// bench/ops_bench_dedup.sh: Signer::Sign over every "text" of
// $DJSHARD_DEDUP_BENCH_INPUT on this thread, for each variant of
// $DJSHARD_DEDUP_BENCH_VARIANTS ("op:{json args}" separated by ';'); prints
// MB/s of CPU time, best of 3.
TEST(DedupBench, DISABLED_SignaturesPerCpuSecond) {
  const char* input = std::getenv("DJSHARD_DEDUP_BENCH_INPUT");
  const char* variants = std::getenv("DJSHARD_DEDUP_BENCH_VARIANTS");
  ASSERT_TRUE(input != nullptr && variants != nullptr);
  std::vector<std::string> texts;
  io::LineReader reader(io::OpenInput(input), input);
  std::string_view line;
  double mb = 0;
  while (reader.Next(&line)) {
    texts.push_back(json::parse(line)["text"].get<std::string>());
    mb += static_cast<double>(texts.back().size()) / 1e6;
  }
  std::string all = variants;
  for (size_t start = 0; start < all.size();) {
    size_t end = all.find(';', start);
    if (end == std::string::npos) end = all.size();
    const std::string variant = all.substr(start, end - start);
    start = end + 1;
    const size_t colon = variant.find(':');
    const std::string op = variant.substr(0, colon);
    const json args =
        colon == std::string::npos ? json::object() : json::parse(variant.substr(colon + 1));
    const DedupConfig c = Config(op, args);
    Signer signer(c);
    // as the sign tasks call it: 256 rows at a time
    constexpr size_t kMany = 256;
    std::vector<TextValue> values;
    for (const std::string& t : texts) values.push_back(TextValue::String(t));
    std::vector<Signature> sigs(kMany);
    std::vector<std::string> errors(kMany);
    bool ok[kMany];
    double best = 1e30;
    for (int round = 0; round < 10; ++round) {  // best of 10: a round of the exact one is ms
      const std::clock_t t0 = std::clock();
      for (size_t i = 0; i < values.size(); i += kMany) {
        const size_t n = std::min(kMany, values.size() - i);
        signer.SignMany(&values[i], n, sigs.data(), ok, errors.data());
      }
      best = std::min(best, static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC);
    }
    std::printf("%s %s %.2f MB %.4f s %.2f MB/s\n", op.c_str(), args.dump().c_str(), mb, best,
                mb / best);
  }
}

}  // namespace
}  // namespace djshard::ops::dedup
