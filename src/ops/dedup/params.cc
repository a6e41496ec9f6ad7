// The deduplicators' arguments: parsing with Data-Juicer's names and defaults,
// the LSH parameters Data-Juicer derives (optimal_param) and the minhash
// permutations (numpy's legacy RandomState(42)).
#include <cfloat>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "djshard/common/error.h"
#include "djshard/model/model_path.h"
#include "djshard/model/sentencepiece.h"
#include "djshard/ops/dedup.h"
#include "src/ops/regex.h"

namespace djshard::ops::dedup {
namespace {

// ------------------------------------------------------ optimal_param

// QUADPACK's 21-point Gauss–Kronrod rule (dqk21), which scipy.integrate.quad
// applies to each interval: the Kronrod nodes from the end inwards, their
// weights, and the 10-point Gauss weights (at the odd Kronrod nodes).
constexpr double kXgk[11] = {
    0.995657163025808080735527280689003, 0.973906528517171720077964012084452,
    0.930157491355708226001207180059508, 0.865063366688984510732096688423493,
    0.780817726586416897063717578345042, 0.679409568299024406234327365114874,
    0.562757134668604683339000099272694, 0.433395394129247190799265943165784,
    0.294392862701460198131126603103866, 0.148874338981631210884826001129720,
    0.000000000000000000000000000000000};
constexpr double kWgk[11] = {
    0.011694638867371874278064396062192, 0.032558162307964727478818972459390,
    0.054755896574351996031381300244580, 0.075039674810919952767043140916190,
    0.093125454583697605535065465083366, 0.109387158802297641899210590325805,
    0.123491976262065851077208980111263, 0.134709217311473325928054001771707,
    0.142775938577060080797094273138717, 0.147739104901338491374841515972068,
    0.149445554002916905664936468389821};
constexpr double kWg[5] = {0.066671344308688137593568809893332, 0.149451349150580593145776339657697,
                           0.219086362515982043995534934228163, 0.269266719309996355091226921569469,
                           0.295524224714752870173892994651338};

struct QuadPiece {
  double a, b, result, error;
};

// dqk21 on [a, b]: the Kronrod result and QUADPACK's error estimate.
template <typename F>
QuadPiece Kronrod21(const F& f, double a, double b, double* resabs_out, double* resasc_out) {
  const double centr = 0.5 * (a + b);
  const double hlgth = 0.5 * (b - a);
  const double dhlgth = std::fabs(hlgth);
  const double fc = f(centr);
  double resg = 0.0;
  double resk = kWgk[10] * fc;
  double resabs = std::fabs(resk);
  double fv1[10], fv2[10];
  for (int j = 1; j <= 5; ++j) {
    const int k = 2 * j - 1;
    const double absc = hlgth * kXgk[k];
    const double f1 = f(centr - absc), f2 = f(centr + absc);
    fv1[k] = f1;
    fv2[k] = f2;
    resg += kWg[j - 1] * (f1 + f2);
    resk += kWgk[k] * (f1 + f2);
    resabs += kWgk[k] * (std::fabs(f1) + std::fabs(f2));
  }
  for (int j = 1; j <= 5; ++j) {
    const int k = 2 * j - 2;
    const double absc = hlgth * kXgk[k];
    const double f1 = f(centr - absc), f2 = f(centr + absc);
    fv1[k] = f1;
    fv2[k] = f2;
    resk += kWgk[k] * (f1 + f2);
    resabs += kWgk[k] * (std::fabs(f1) + std::fabs(f2));
  }
  const double reskh = resk * 0.5;
  double resasc = kWgk[10] * std::fabs(fc - reskh);
  for (int k = 0; k < 10; ++k) {
    resasc += kWgk[k] * (std::fabs(fv1[k] - reskh) + std::fabs(fv2[k] - reskh));
  }
  resabs *= dhlgth;
  resasc *= dhlgth;
  double err = std::fabs((resk - resg) * hlgth);
  if (resasc != 0.0 && err != 0.0)
    err = resasc * std::min(1.0, std::pow(200.0 * err / resasc, 1.5));
  if (resabs > DBL_MIN / (50.0 * DBL_EPSILON)) err = std::max(DBL_EPSILON * 50.0 * resabs, err);
  *resabs_out = resabs;
  *resasc_out = resasc;
  return {a, b, resk * hlgth, err};
}

// scipy.integrate.quad's defaults (epsabs = epsrel = 1.49e-8, 50 intervals):
// QUADPACK's dqagse without its epsilon extrapolation (bisect the interval of
// largest error until the errors sum below the bound). On these smooth
// integrands the two agree far below the gaps optimal_param compares.
template <typename F>
double Quad(const F& f, double a, double b) {
  constexpr double kEps = 1.49e-8;
  double resabs, resasc;
  std::vector<QuadPiece> pieces{Kronrod21(f, a, b, &resabs, &resasc)};
  const double first_err = pieces[0].error;
  double area = pieces[0].result;
  if (first_err == 0.0 ||
      (first_err <= std::max(kEps, kEps * std::fabs(area)) && first_err != resasc)) {
    return area;
  }
  for (int last = 2; last <= 50; ++last) {
    size_t worst = 0;
    for (size_t i = 1; i < pieces.size(); ++i) {
      if (pieces[i].error > pieces[worst].error) worst = i;
    }
    const QuadPiece p = pieces[worst];
    const double mid = 0.5 * (p.a + p.b);
    double ra, rs;
    pieces[worst] = Kronrod21(f, p.a, mid, &ra, &rs);
    pieces.push_back(Kronrod21(f, mid, p.b, &ra, &rs));
    area = 0.0;
    double errsum = 0.0;
    for (const QuadPiece& q : pieces) {
      area += q.result;
      errsum += q.error;
    }
    if (errsum <= std::max(kEps, kEps * std::fabs(area))) break;
  }
  return area;
}

// ------------------------------------------------------------- MT19937

class Mt19937 {
 public:
  explicit Mt19937(uint32_t seed) {
    mt_[0] = seed;
    for (int i = 1; i < 624; ++i) mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + i;
  }
  uint32_t Next32() {
    if (index_ >= 624) Twist();
    uint32_t y = mt_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }
  // numpy's mt19937_next64: two draws, the first in the high half.
  uint64_t Next64() {
    const uint64_t hi = Next32();
    return (hi << 32) | Next32();
  }

 private:
  void Twist() {
    for (int i = 0; i < 624; ++i) {
      const uint32_t y = (mt_[i] & 0x80000000u) | (mt_[(i + 1) % 624] & 0x7fffffffu);
      mt_[i] = mt_[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1) ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }
  uint32_t mt_[624];
  int index_ = 624;
};

// RandomState.randint(low, high, dtype=np.uint64) for a range wider than 32
// bits: masked rejection sampling on 64-bit draws (numpy's legacy path).
uint64_t RandintUint64(Mt19937* mt, uint64_t low, uint64_t high) {
  const uint64_t rng = high - 1 - low;
  uint64_t mask = rng;
  for (int s = 1; s < 64; s <<= 1) mask |= mask >> s;
  uint64_t v;
  do {
    v = mt->Next64() & mask;
  } while (v > rng);
  return low + v;
}

// ------------------------------------------------------------ arguments

const std::set<std::string>& DedupOperators() {
  static const std::set<std::string> ops = {
      "document_deduplicator", "ray_document_deduplicator", "document_simhash_deduplicator",
      "document_minhash_deduplicator", "ray_bts_minhash_deduplicator"};
  return ops;
}

int64_t PositiveInt(const recipe::OperatorArgs& args, const std::string& key, int64_t fallback) {
  const int64_t v = args.GetInt(key, fallback);
  if (v < 1) args.Fail(key, "must be a positive integer", "got " + std::to_string(v));
  return v;
}

Tokenization ParseTokenization(const recipe::OperatorArgs& args, bool minhash) {
  const std::string t = args.GetString("tokenization", "space");
  if (t == "space") return Tokenization::kSpace;
  if (t == "punctuation") return Tokenization::kPunctuation;
  if (t == "character") return Tokenization::kCharacter;
  if (t == "sentencepiece" && minhash) return Tokenization::kSentencePiece;
  args.Fail("tokenization", "unknown tokenization '" + t + "'",
            minhash ? "use space, punctuation, character or sentencepiece"
                    : "use space, punctuation or character");
}

void ParseShingling(const recipe::OperatorArgs& args, DedupConfig* c) {
  const bool minhash = c->kind == Kind::kMinhash;
  c->tokenization = ParseTokenization(args, minhash);
  c->window_size = PositiveInt(args, "window_size", minhash ? 5 : 6);
  c->lowercase = args.GetBool("lowercase", true);
  const std::string pattern = args.GetString("ignore_pattern", "");
  if (!pattern.empty()) {
    c->ignore_pattern = std::make_shared<const Regex>(UnquotePattern(pattern), false,
                                                      c->op + ": argument 'ignore_pattern'");
  }
}

// simhash-cpp refuses these in find_all; the block permutations number
// C(num_blocks, hamming_distance) and each is a key of every row.
void ParseSimhash(const recipe::OperatorArgs& args, DedupConfig* c) {
  c->num_blocks = PositiveInt(args, "num_blocks", 6);
  c->hamming_distance = PositiveInt(args, "hamming_distance", 4);
  if (c->num_blocks > 64) {
    args.Fail("num_blocks", "must not exceed 64 (the bits of a simhash)",
              "got " + std::to_string(c->num_blocks));
  }
  if (c->hamming_distance >= c->num_blocks) {
    args.Fail("hamming_distance", "must be less than num_blocks",
              std::to_string(c->hamming_distance) + " >= " + std::to_string(c->num_blocks));
  }
  if (KeysPerRow(*c) > 100000) {
    args.Fail("hamming_distance",
              "gives " + std::to_string(KeysPerRow(*c)) +
                  " block permutations (C(num_blocks, hamming_distance)); at most 100000",
              "use fewer num_blocks or a hamming_distance further from num_blocks / 2");
  }
}

std::shared_ptr<const model::SentencePiece> LoadTokenizer(const recipe::OperatorArgs& args,
                                                          const std::string& op) {
  const std::string name = args.GetString("tokenizer_model", "");
  if (name.empty()) {
    args.Fail("tokenizer_model", "is required with tokenization: sentencepiece",
              "give the path of a SentencePiece model");
  }
  const model::ModelLookup found = model::FindDataJuicerModelFile(name);
  if (!found.path) {
    args.Fail("tokenizer_model",
              "names a SentencePiece model that is not on this machine; djshard looked in:" +
                  model::ListSearched(found.searched),
              "give an existing path, or copy the model into DJSHARD_MODEL_HOME");
  }
  (void)op;
  return model::SentencePiece::Load(*found.path,
                                    "give tokenizer_model the path of a SentencePiece .model file");
}

void ParseMinhash(const recipe::OperatorArgs& args, DedupConfig* c) {
  c->num_permutations = PositiveInt(args, "num_permutations", 256);
  c->jaccard_threshold = args.GetDouble("jaccard_threshold", 0.7);
  if (!(c->jaccard_threshold >= 0.0 && c->jaccard_threshold <= 1.0)) {
    args.Fail("jaccard_threshold", "must be between 0 and 1",
              args.Raw("jaccard_threshold").Scalar());
  }
  const bool has_bands = args.Has("num_bands") && !args.Raw("num_bands").IsNull();
  const bool has_rows = args.Has("num_rows_per_band") && !args.Raw("num_rows_per_band").IsNull();
  c->num_bands = has_bands ? PositiveInt(args, "num_bands", 1) : 0;
  c->num_rows_per_band = has_rows ? PositiveInt(args, "num_rows_per_band", 1) : 0;
  if (!has_bands || !has_rows) {  // Data-Juicer recomputes both when either is missing
    std::tie(c->num_bands, c->num_rows_per_band) =
        OptimalParam(c->jaccard_threshold, c->num_permutations);
  }
  if (c->ray && (c->num_bands - 1) * c->num_rows_per_band >= c->num_permutations) {
    // its calc_minhash indexes the first value of every band
    args.Fail("num_bands",
              "leaves a band without minhash values (num_bands * num_rows_per_band exceeds "
              "num_permutations by a whole band)",
              "lower num_bands or num_rows_per_band");
  }
  if (c->tokenization == Tokenization::kSentencePiece) c->tokenizer = LoadTokenizer(args, c->op);
  MinhashPermutations(c->num_permutations, &c->perm_a, &c->perm_b);
}

}  // namespace

bool IsDedupOperator(const std::string& op) { return DedupOperators().count(op) > 0; }

std::pair<int64_t, int64_t> OptimalParam(double threshold, int64_t num_perm) {
  double min_error = INFINITY;
  std::pair<int64_t, int64_t> opt{0, 0};
  for (int64_t b = 1; b <= num_perm; ++b) {
    const int64_t max_r = num_perm / b;
    for (int64_t r = 1; r <= max_r; ++r) {
      const double rows = static_cast<double>(r), bands = static_cast<double>(b);
      const double fp = Quad(
          [&](double s) { return 1.0 - std::pow(1.0 - std::pow(s, rows), bands); }, 0.0, threshold);
      const double fn =
          Quad([&](double s) { return 1.0 - (1.0 - std::pow(1.0 - std::pow(s, rows), bands)); },
               threshold, 1.0);
      const double error = fp * 0.5 + fn * 0.5;
      if (error < min_error) {
        min_error = error;
        opt = {b, r};
      }
    }
  }
  return opt;
}

void MinhashPermutations(int64_t n, std::vector<uint64_t>* a, std::vector<uint64_t>* b) {
  constexpr uint64_t kMersenne = (uint64_t{1} << 61) - 1;
  static std::mutex mu;
  static std::vector<uint64_t> cached_a, cached_b;  // the longest prefix drawn so far
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int64_t>(cached_a.size()) < n) {
    Mt19937 mt(42);
    cached_a.clear();
    cached_b.clear();
    for (int64_t i = 0; i < n; ++i) {
      cached_a.push_back(RandintUint64(&mt, 1, kMersenne));
      cached_b.push_back(RandintUint64(&mt, 0, kMersenne));
    }
  }
  a->assign(cached_a.begin(), cached_a.begin() + n);
  b->assign(cached_b.begin(), cached_b.begin() + n);
}

DedupConfig ParseDedupConfig(const std::string& op, const recipe::OperatorArgs& args) {
  if (!IsDedupOperator(op)) throw Error("not a deduplicator: " + op);
  DedupConfig c;
  c.op = op;
  c.text_key = args.GetString("text_key", "text");
  if (op == "document_deduplicator" || op == "ray_document_deduplicator") {
    c.kind = Kind::kExact;
    c.ray = op == "ray_document_deduplicator";
    c.lowercase = args.GetBool("lowercase", false);
    c.ignore_non_character = args.GetBool("ignore_non_character", false);
    if (c.ray) {
      const std::string backend = args.GetString("backend", "ray_actor");
      if (backend != "ray_actor" && backend != "redis") {
        args.Fail("backend", "unknown backend '" + backend + "'", "use ray_actor or redis");
      }
    }
    return c;
  }
  if (op == "document_simhash_deduplicator") {
    c.kind = Kind::kSimhash;
    ParseShingling(args, &c);
    ParseSimhash(args, &c);
    return c;
  }
  c.kind = Kind::kMinhash;
  c.ray = op == "ray_bts_minhash_deduplicator";
  ParseShingling(args, &c);
  ParseMinhash(args, &c);
  return c;
}

}  // namespace djshard::ops::dedup
