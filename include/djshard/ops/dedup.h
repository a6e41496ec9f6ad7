#pragma once
// The exact core of Data-Juicer 1.4.3's text deduplicators, independent of the
// executor: per-record signatures, the grouping keys a distributed stage sorts
// on, the candidate edges inside one key group, and the keep decision over the
// connected components.
//
//   document_deduplicator          md5 of the (lowercased, stripped) text
//   ray_document_deduplicator      the same, "EMPTY" for a missing or falsy text
//   document_simhash_deduplicator  64-bit simhash of shingles (simhash-pybind)
//   document_minhash_deduplicator  MinHash LSH (Data-Juicer's numpy code)
//   ray_bts_minhash_deduplicator   the same hashes; a text without shingles gets
//                                  one shared key instead of failing
//
// Every kind keeps, of each cluster (connected component of the "duplicate"
// relation), the row that comes first in input order, and emits the kept rows
// in input order: that is what Data-Juicer's single-process runs keep (the
// ray operators keep one row per cluster, whichever their actors see first;
// djshard makes that the first row).

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/ops/operator.h"
#include "djshard/recipe/recipe.h"

namespace djshard::model {
class SentencePiece;
}
namespace djshard::ops {
class Regex;
}

namespace djshard::ops::dedup {

enum class Kind { kExact, kSimhash, kMinhash };
enum class Tokenization { kSpace, kPunctuation, kCharacter, kSentencePiece };

// The arguments of one deduplicator, with Data-Juicer's names and defaults.
struct DedupConfig {
  std::string op;  // the Data-Juicer operator name
  Kind kind = Kind::kExact;
  bool ray = false;  // ray_document_deduplicator / ray_bts_minhash_deduplicator
  std::string text_key = "text";
  bool lowercase = false;             // exact: false; simhash, minhash: true
  bool ignore_non_character = false;  // exact only
  Tokenization tokenization = Tokenization::kSpace;
  int64_t window_size = 6;  // simhash 6, minhash 5
  std::shared_ptr<const Regex> ignore_pattern;
  int64_t num_blocks = 6;        // simhash
  int64_t hamming_distance = 4;  // simhash
  int64_t num_permutations = 256;
  double jaccard_threshold = 0.7;
  int64_t num_bands = 0;          // given or from OptimalParam
  int64_t num_rows_per_band = 0;  // given or from OptimalParam
  std::shared_ptr<const model::SentencePiece> tokenizer;
  std::vector<uint64_t> perm_a, perm_b;  // minhash: num_permutations each
};

// Whether `op` is one of the five deduplicators above.
bool IsDedupOperator(const std::string& op);

// Reads the arguments of deduplicator `op` (Data-Juicer's names and defaults;
// text_key, and the base operator's arguments, are accepted). A bad value, an
// unknown tokenization, hamming_distance >= num_blocks, num_blocks > 64, a
// missing or unreadable tokenizer_model is an Error at the argument's line.
DedupConfig ParseDedupConfig(const std::string& op, const recipe::OperatorArgs& args);

// Data-Juicer's optimal_param: the (bands, rows per band) with b * r <= num_perm
// that minimise the mean of the false positive and false negative areas of the
// LSH S-curve at `threshold`; the first minimum in (b, r) order.
std::pair<int64_t, int64_t> OptimalParam(double threshold, int64_t num_perm);

// The first `n` (a, b) pairs of np.random.RandomState(42), drawn as Data-Juicer
// draws them: a = randint(1, 2^61-1), b = randint(0, 2^61-1), dtype uint64.
void MinhashPermutations(int64_t n, std::vector<uint64_t>* a, std::vector<uint64_t>* b);

// The value of the text key of one record, as the signature functions see it.
struct TextValue {
  enum class Type { kString, kMissing, kNull, kBool, kNumber, kArray, kObject };
  Type type = Type::kString;
  std::string_view text;  // kString: valid UTF-8
  size_t length = 0;      // kArray, kObject: Python's len()
  bool falsy = false;     // kBool, kNumber: Python's not value
  static TextValue String(std::string_view s) { return {Type::kString, s, 0, false}; }
  // A value that is not a string, from its raw JSON.
  static TextValue OfJson(std::string_view raw_json);
};

// The signature of one record.
struct Signature {
  std::array<uint8_t, 16> md5{};  // exact: the md5 digest
  bool empty_marker = false;      // ray exact: "EMPTY"; ray minhash: no shingles
  uint64_t simhash = 0;
  std::vector<uint32_t> minhash;  // num_permutations values (empty when empty_marker)
};

// Computes signatures as Data-Juicer's compute_hash does. Not thread-safe (it
// reuses buffers): one per thread over a shared config.
class Signer {
 public:
  explicit Signer(const DedupConfig& config);
  ~Signer();
  Signer(const Signer&) = delete;
  Signer& operator=(const Signer&) = delete;

  // Fills *out for `value`. Returns false, with *error set, for a record on
  // which Data-Juicer's compute_hash raises (no text key, a non-string text,
  // a text without shingles for document_minhash_deduplicator): the
  // deduplicator drops such a record (skip_op_error) before grouping.
  bool Sign(const TextValue& value, Signature* out, std::string* error);
  // Sign for n values at once: ok[i] is what Sign returns for values[i],
  // errors[i] its error. The exact deduplicator hashes the texts together
  // (16 at a time with AVX-512); the others sign them one by one.
  void SignMany(const TextValue* values, size_t n, Signature* out, bool* ok, std::string* errors);

 private:
  struct State;
  const DedupConfig& config_;
  std::unique_ptr<State> state_;
};

// Lower-case hex of an md5 digest (document_deduplicator's __dj__hash).
std::string Md5Hex(const std::array<uint8_t, 16>& md5);
// The bytes Data-Juicer groups band `band` of a minhash signature on:
// document_minhash_deduplicator: the band's values as big-endian uint64;
// ray_bts_minhash_deduplicator: the band index as 4 big-endian bytes, then the
// values as little-endian uint32 (for a text without shingles: band 0 and
// num_rows_per_band times 0xFFFFFFFF).
std::string MinhashBandBytes(const DedupConfig& config, const Signature& sig, int64_t band);

// ---------------------------------------------------------------- grouping

// One grouping key of one row. Rows are duplicates candidates only when they
// share a key (same part, same bytes). `part` is the band (minhash), the block
// permutation (simhash) or 0 (exact); `bytes` the md5 / band values / the
// simhash's bits in the permutation's leading blocks. `simhash` carries the
// whole simhash so that a key group can test the hamming distance.
struct GroupKey {
  uint32_t part = 0;
  std::string bytes;
  uint64_t simhash = 0;
  uint64_t row = 0;  // global input row
};

// The masks of simhash-cpp's block permutations for (num_blocks m,
// hamming_distance k), in itertools.combinations order: key p of a simhash s
// has part p and, as bytes, s & masks[p] in memory order.
const std::vector<uint64_t>& SimhashKeyMasks(int64_t m, int64_t k);

// The number of keys per row: 1 (exact), C(num_blocks, hamming_distance)
// (simhash), num_bands (minhash).
int64_t KeysPerRow(const DedupConfig& config);
// Appends the grouping keys of row `row` to *out.
void AppendKeys(const DedupConfig& config, const Signature& sig, uint64_t row,
                std::vector<GroupKey>* out);

// A fixed 64-bit hash of a key's (part, bytes): equal keys hash equal, so
// keys that share a group share it (dedup stages cut key ranges by it).
uint64_t KeyHash(uint32_t part, std::string_view bytes);

struct Edge {
  uint64_t a, b;  // global rows, a < b
};

// Given every key of some set of (part, bytes) groups (all keys of a group
// must be present; order does not matter), appends the edges that link the
// rows of each group as Data-Juicer links them: every row of an exact or
// minhash group to the group's first row; for simhash, rows of equal simhash
// to their first row, and the first rows of two simhashes that differ in at
// most hamming_distance bits (simhash-cpp's find_all over that group). Leaves
// in *keys those of groups of two or more, sorted.
void EmitEdges(const DedupConfig& config, std::vector<GroupKey>* keys, std::vector<Edge>* out);

// EmitEdges over every simhash key of the rows in `simhashes` ((row, simhash)
// pairs): the same edges, found part by part from 24 bytes per row instead of
// a GroupKey per key; only the keys of groups of two or more become GroupKeys.
void EmitSimhashEdges(const DedupConfig& config,
                      const std::vector<std::pair<uint64_t, uint64_t>>& simhashes,
                      std::vector<Edge>* out);

// Union-find over rows [0, num_rows): the keep decision. kept[r] is true when
// row r is signed (signed_rows[r]) and is the first row of its component.
std::vector<bool> KeepFirstOfComponents(uint64_t num_rows, const std::vector<bool>& signed_rows,
                                        const std::vector<Edge>& edges);

// --------------------------------------------------------- single process

struct KeptResult {
  std::vector<uint64_t> kept;                            // rows kept, in input order
  std::vector<std::pair<uint64_t, std::string>> errors;  // rows dropped by compute_hash
};

// The whole deduplicator in one process: Sign every row, AppendKeys,
// EmitEdges over all keys, KeepFirstOfComponents.
KeptResult KeptRows(const DedupConfig& config, const std::vector<TextValue>& values);

// ------------------------------------------------------------ recipe entry

// A deduplicator's recipe entry: its arguments, read and checked when the
// recipe loads (ParseDedupConfig; text_key defaults to the recipe's
// text_keys). It processes no record itself: `djshard run` runs it as a stage
// between the operators before and after it (src/exec/dedup_run.cc).
class DedupOperator : public Operator {
 public:
  DedupOperator(const recipe::OperatorSpec& spec, const std::string& default_text_key);
  OpKind kind() const override { return OpKind::kDeduplicator; }
  const DedupConfig& config() const { return config_; }

 private:
  DedupConfig config_;
};

}  // namespace djshard::ops::dedup
