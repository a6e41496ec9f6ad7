// libdjshard_torch.so, part 1: the native architectures (BERT/RoBERTa
// sequence classifiers, the CLIP text tower) as plain tensor code following
// Hugging Face's modeling code in eval mode. The only translation units that
// include libtorch headers are in src/model (about 20 s each to compile);
// libdjshard reaches them through the C interface of torch_module_abi.h.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <dlfcn.h>
#include <link.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/model/torch_module_shared.h"

namespace djshard::model::torch_module {

at::ScalarType ScalarType(int dtype) {
  switch (dtype) {
    case kDjF16:
      return at::kHalf;
    case kDjBF16:
      return at::kBFloat16;
    default:
      return at::kFloat;
  }
}

double LowestOf(at::ScalarType t) {
  // Hugging Face masks with torch.finfo(dtype).min.
  if (t == at::kHalf) return -65504.0;
  if (t == at::kBFloat16) return -3.3895313892515355e38;
  return std::numeric_limits<float>::lowest();
}

void SetError(char* err, int err_len, const std::string& what) {
  if (err != nullptr && err_len > 0)
    std::snprintf(err, static_cast<size_t>(err_len), "%s", what.c_str());
}

at::Device ParseDevice(const char* device) {
  return at::Device(std::string(device ? device : "cpu"));
}

// A function of a library loaded into the process, found also when it was
// loaded as a dependency of this module: djshard opens the module with
// RTLD_LOCAL, so its BLAS is not in the global scope RTLD_DEFAULT searches.
void* LoadedFunction(const char* name) {
  if (void* p = dlsym(RTLD_DEFAULT, name)) return p;
  struct Search {
    const char* name;
    void* found;
  } search{name, nullptr};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
        void* handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        if (handle == nullptr) return 0;
        s->found = dlsym(handle, s->name);
        dlclose(handle);
        return s->found != nullptr ? 1 : 0;
      },
      &search);
  return search.found;
}

void ConfigureCpuThreads(int threads) {
  // Intra-op threads are process-wide; the executor's threads and the
  // replicas provide the parallelism, so one model does not oversubscribe.
  static std::once_flag once;
  std::call_once(once, [threads] {
    at::set_num_threads(threads > 0 ? threads : 1);
    // Debian's libtorch calls the system BLAS; OpenBLAS (libopenblas0-pthread)
    // would otherwise start a thread per core inside every executor thread.
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(LoadedFunction("openblas_set_num_threads"))) {
      set(threads > 0 ? threads : 1);
    }
  });
}

std::string CpuKernel() {
  // ATen's vectorized kernels (layer norm, softmax, GELU) follow its CPU
  // capability; matrix products go to the BLAS, whose kernel OpenBLAS picks
  // per CPU (or as OPENBLAS_CORETYPE says).
  std::string aten = "ATen";
  const std::string config = at::show_config();
  const std::string key = "CPU capability usage: ";
  const size_t at_key = config.find(key);
  if (at_key != std::string::npos) {
    const size_t begin = at_key + key.size();
    aten += " " + config.substr(begin, config.find('\n', begin) - begin);
  }
  using Text = char* (*)();
  const auto get_config = reinterpret_cast<Text>(LoadedFunction("openblas_get_config"));
  const auto get_core = reinterpret_cast<Text>(LoadedFunction("openblas_get_corename"));
  if (get_config != nullptr && get_core != nullptr) {
    // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"
    std::string version = get_config();
    const size_t space = version.find(' ', version.find(' ') + 1);
    if (space != std::string::npos) version.resize(space);
    return aten + ", " + version + " " + get_core();
  }
  Dl_info where{};
  void* sgemm = LoadedFunction("sgemm_");
  if (sgemm != nullptr && dladdr(sgemm, &where) != 0 && where.dli_fname != nullptr) {
    const std::string file = where.dli_fname;
    return aten + ", BLAS " + file.substr(file.rfind('/') + 1);
  }
  return aten + ", no BLAS";
}

}  // namespace djshard::model::torch_module

namespace {

using djshard::model::torch_module::LowestOf;
using djshard::model::torch_module::SetError;

struct NativeModel {
  DjshardModelSpec spec{};
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  std::unordered_map<std::string, at::Tensor> w;
  // CPU: sequences start at multiples of row_period in the packed rows, and
  // rows computed alone sit at single_slots of a chunk (ProbeRowLayout).
  int64_t row_period = 1;
  std::vector<int64_t> single_slots{0};

  const at::Tensor& W(const std::string& name) const {
    auto it = w.find(name);
    TORCH_CHECK(it != w.end(), "tensor ", name, " was not loaded");
    return it->second;
  }
  bool Has(const std::string& name) const { return w.count(name) != 0; }
};

at::Tensor Linear(const at::Tensor& x, const NativeModel& m, const std::string& prefix) {
  const std::string b = prefix + ".b";
  return m.Has(b) ? at::linear(x, m.W(prefix + ".w"), m.W(b)) : at::linear(x, m.W(prefix + ".w"));
}

at::Tensor LayerNorm(const at::Tensor& x, const NativeModel& m, const std::string& prefix) {
  return at::layer_norm(x, {m.spec.hidden}, m.W(prefix + ".w"), m.W(prefix + ".b"),
                        m.spec.layer_norm_eps);
}

at::Tensor Activation(const at::Tensor& x, const NativeModel& m) {
  if (m.spec.quick_gelu) return x * at::sigmoid(x * 1.702);
  return at::gelu(x);  // exact (erf)
}

// Multi-head attention with the fused q|k|v projection made at load. With
// `query` defined ([B, Q, H], the rows whose outputs are needed), only those
// rows attend: keys and values still come from every row of `x`. (The GPU
// path: each call has shape batch_size x bucket.)
at::Tensor Attention(const at::Tensor& x, const at::Tensor& query, const at::Tensor& mask_add,
                     const NativeModel& m, const std::string& layer, bool scale_query_first) {
  const int64_t B = x.size(0), S = x.size(1), H = m.spec.hidden, nh = m.spec.heads;
  const int64_t hd = H / nh;
  const at::Tensor& w = m.W(layer + ".qkv.w");
  const at::Tensor& b = m.W(layer + ".qkv.b");
  at::Tensor q, k, v;
  int64_t Q = S;
  if (!query.defined()) {
    const at::Tensor qkv = at::linear(x, w, b);
    auto split = [&](int64_t i) {
      return qkv.narrow(2, i * H, H).view({B, S, nh, hd}).transpose(1, 2);
    };
    q = split(0);
    k = split(1);
    v = split(2);
  } else {
    Q = query.size(1);
    q = at::linear(query, w.narrow(0, 0, H), b.narrow(0, 0, H))
            .view({B, Q, nh, hd})
            .transpose(1, 2);
    const at::Tensor kv = at::linear(x, w.narrow(0, H, 2 * H), b.narrow(0, H, 2 * H));
    k = kv.narrow(2, 0, H).view({B, S, nh, hd}).transpose(1, 2);
    v = kv.narrow(2, H, H).view({B, S, nh, hd}).transpose(1, 2);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  at::Tensor scores;
  if (scale_query_first) {
    scores = at::matmul(q * scale, k.transpose(-1, -2));  // CLIP scales the query
  } else {
    scores = at::matmul(q, k.transpose(-1, -2)) * scale;
  }
  scores = scores + mask_add;
  const at::Tensor probs = at::softmax(scores, -1);
  return at::matmul(probs, v).transpose(1, 2).reshape({B, Q, H});
}

at::Tensor EncoderForward(const NativeModel& m, const at::Tensor& ids, const at::Tensor& mask) {
  const int64_t B = ids.size(0), S = ids.size(1);
  at::Tensor positions;
  if (m.spec.roberta_positions) {
    const at::Tensor not_pad = ids.ne(m.spec.pad_token_id).to(at::kLong);
    positions = at::cumsum(not_pad, 1) * not_pad + m.spec.pad_token_id;
  } else {
    positions = at::arange(S, ids.options()).unsqueeze(0).expand({B, S});
  }
  at::Tensor x = at::embedding(m.W("emb.word"), ids) + at::embedding(m.W("emb.pos"), positions);
  if (m.Has("emb.type")) x = x + m.W("emb.type").select(0, 0);
  x = LayerNorm(x, m, "emb.ln");
  const at::Tensor mask_add = ((1 - mask.to(m.dtype)) * LowestOf(m.dtype)).view({B, 1, 1, S});
  for (int l = 0; l < m.spec.layers; ++l) {
    const std::string L = "L" + std::to_string(l);
    // The head reads only the first token: the last layer computes that row alone.
    const bool last = l + 1 == m.spec.layers;
    const at::Tensor query = last ? x.narrow(1, 0, 1) : at::Tensor();
    const at::Tensor ctx = Attention(x, query, mask_add, m, L, false);
    at::Tensor y = LayerNorm(Linear(ctx, m, L + ".ao") + (last ? query : x), m, L + ".ao_ln");
    const at::Tensor h = Activation(Linear(y, m, L + ".in"), m);
    x = LayerNorm(Linear(h, m, L + ".out") + y, m, L + ".out_ln");
  }
  const at::Tensor first = x.select(1, 0);
  if (m.spec.arch == kDjEncoderClassifierRoberta) {
    return Linear(at::tanh(Linear(first, m, "head.dense")), m, "head.out");
  }
  return Linear(at::tanh(Linear(first, m, "pooler")), m, "head.out");
}

at::Tensor ClipTextForward(const NativeModel& m, const at::Tensor& ids, const at::Tensor& mask,
                           const at::Tensor& pool_index) {
  const int64_t B = ids.size(0), S = ids.size(1);
  at::Tensor x = at::embedding(m.W("emb.word"), ids) + m.W("emb.pos").narrow(0, 0, S).unsqueeze(0);
  const double lowest = LowestOf(m.dtype);
  const auto opts = at::TensorOptions().dtype(m.dtype).device(m.device);
  const at::Tensor causal = at::full({S, S}, lowest, opts).triu(1).view({1, 1, S, S});
  const at::Tensor padding = ((1 - mask.to(m.dtype)) * lowest).view({B, 1, 1, S});
  const at::Tensor mask_add = causal + padding;
  const at::Tensor rows = at::arange(B, ids.options());
  // The pooled row's line of the causal mask, for the last layer.
  const at::Tensor pooled_mask = mask_add.index({rows, 0, pool_index}).view({B, 1, 1, S});
  for (int l = 0; l < m.spec.layers; ++l) {
    const std::string L = "L" + std::to_string(l);
    // The projection reads only the pooled token: the last layer computes that row alone.
    const bool last = l + 1 == m.spec.layers;
    const at::Tensor normed = LayerNorm(x, m, L + ".ln1");
    const at::Tensor query = last ? normed.index({rows, pool_index}).unsqueeze(1) : at::Tensor();
    const at::Tensor r = last ? x.index({rows, pool_index}).unsqueeze(1) : x;
    at::Tensor y = r + Linear(Attention(normed, query, last ? pooled_mask : mask_add, m, L, true),
                              m, L + ".o");
    x = y +
        Linear(Activation(Linear(LayerNorm(y, m, L + ".ln2"), m, L + ".fc1"), m), m, L + ".fc2");
  }
  if (m.spec.layers == 0) x = x.index({rows, pool_index}).unsqueeze(1);
  x = LayerNorm(x, m, "final_ln");
  // x holds the pooled row alone after the last layer.
  return Linear(x.select(1, 0), m, "proj");
}

// The CPU path: the token rows of every sequence packed in one buffer.
// Row-wise work (projections, layer norms, activations) runs on fixed chunks
// of kChunk rows, so every BLAS call has one shape; attention runs per
// sequence at its own length. No FLOP is spent on padding to a bucket, and
// the projections amortize their weight packing over kChunk rows (one
// sequence at a time ran at half speed).
//
// One shape is not enough for a row's bits to depend on the row alone: a
// GEMM micro-kernel may compute the columns of its register block by
// different instruction sequences. OpenBLAS's Haswell and Zen sgemm kernels
// (the AVX2 kernels) take 12 token rows at a time as two halves of 6 whose
// sums round differently, so a token's result depended on its position
// modulo 12, that is on the lengths of the sequences packed before it. The
// model therefore learns at load which positions of a chunk the BLAS treats
// alike (ProbeRowLayout), and every sequence starts at a multiple of that
// period: its i-th token always sits in the class of i.
constexpr int64_t kChunk = 96;  // a multiple of every sgemm block width (4, 6, 8, 12, 16, 24, 32)

// f applied to `a` (and `b`, row-aligned with it) in chunks of kChunk rows,
// the last chunk padded with zero rows.
template <typename Fn>
at::Tensor Chunked(const at::Tensor& a, const at::Tensor& b, Fn&& f) {
  const int64_t T = a.size(0);
  const int64_t padded = (T + kChunk - 1) / kChunk * kChunk;
  auto pad = [&](const at::Tensor& t) {
    if (!t.defined() || padded == T) return t;
    return at::cat({t, at::zeros({padded - T, t.size(1)}, t.options())}, 0);
  };
  const at::Tensor ap = pad(a), bp = pad(b);
  std::vector<at::Tensor> out;
  for (int64_t c = 0; c < padded; c += kChunk) {
    out.push_back(f(ap.narrow(0, c, kChunk), bp.defined() ? bp.narrow(0, c, kChunk) : bp));
  }
  return at::cat(out, 0).narrow(0, 0, T);
}

template <typename Fn>
at::Tensor Chunked(const at::Tensor& a, Fn&& f) {
  return Chunked(a, at::Tensor(), [&](const at::Tensor& x, const at::Tensor&) { return f(x); });
}

// The classes of chunk positions that this process's BLAS computes by the
// same instructions, for every projection of the model: kChunk copies of one
// row go through each projection, and two positions are alike when all their
// outputs have the same bits. Sets m->row_period to the smallest divisor of
// kChunk whose multiples start rows of the same class (1: the BLAS treats
// every position alike), and m->single_slots to the positions alike to 0.
void ProbeRowLayout(NativeModel* m) {
  std::vector<std::vector<int64_t>> cls(
      kChunk);  // per position: the first alike position, per projection
  for (const auto& [name, w] : m->w) {
    if (w.dim() != 2 || name.rfind("emb.", 0) == 0 || name.size() < 2 ||
        name.compare(name.size() - 2, 2, ".w") != 0) {
      continue;
    }
    const at::Tensor row =
        at::sin(at::arange(w.size(1), at::TensorOptions().dtype(at::kFloat)) * 0.731 + 0.1)
            .to(m->dtype);
    const at::Tensor out = Linear(row.unsqueeze(0).expand({kChunk, w.size(1)}).contiguous(), *m,
                                  name.substr(0, name.size() - 2))
                               .contiguous();
    for (int64_t p = 0; p < kChunk; ++p) {
      int64_t first = p;
      for (int64_t q = 0; q < p; ++q) {
        if (at::equal(out[p], out[q])) {
          first = q;
          break;
        }
      }
      cls[static_cast<size_t>(p)].push_back(first);
    }
  }
  m->row_period = kChunk;
  for (int64_t d = 1; d < kChunk; ++d) {
    if (kChunk % d != 0) continue;
    bool periodic = true;
    for (int64_t p = d; p < kChunk && periodic; ++p) periodic = cls[p] == cls[p % d];
    if (periodic) {
      m->row_period = d;
      break;
    }
  }
  m->single_slots.clear();
  for (int64_t p = 0; p < kChunk; ++p) {
    if (cls[static_cast<size_t>(p)] == cls[0]) m->single_slots.push_back(p);
  }
}

// Self-attention of one sequence: q [Q, H] (the rows whose outputs are
// needed), k and v [L, H]; causal: query i sees keys 0..first_query+i.
at::Tensor SequenceAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const NativeModel& m, bool scale_query_first, bool causal,
                             int64_t first_query) {
  const int64_t Q = q.size(0), L = k.size(0), H = m.spec.hidden, nh = m.spec.heads;
  const int64_t hd = H / nh;
  const at::Tensor qh = q.view({Q, nh, hd}).transpose(0, 1);
  const at::Tensor kh = k.view({L, nh, hd}).transpose(0, 1);
  const at::Tensor vh = v.view({L, nh, hd}).transpose(0, 1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  at::Tensor scores = scale_query_first ? at::matmul(qh * scale, kh.transpose(-1, -2))
                                        : at::matmul(qh, kh.transpose(-1, -2)) * scale;
  if (causal) {
    const at::Tensor mask =
        at::full({Q, L}, LowestOf(m.dtype), scores.options()).triu(1 + first_query);
    scores = scores + mask;
  }
  return at::matmul(at::softmax(scores, -1), vh).transpose(0, 1).reshape({Q, H});
}

// Where the rows of a batch sit in the packed buffers.
struct PackedRows {
  std::vector<int64_t> starts, lens;  // each sequence's tokens: starts are multiples of row_period
  std::vector<int64_t> keep;          // the token of each sequence that the head reads
  int64_t rows = 0;                   // token rows, the filler between sequences included
  at::Tensor kept_tokens;             // [B]: starts[r] + keep[r]
  at::Tensor kept_slots;              // [B]: where each kept row sits among `kept_rows`
  int64_t kept_rows = 0;              // one row per sequence, each at a slot alike to position 0
};

PackedRows LayOut(const NativeModel& m, std::vector<int64_t> lens, std::vector<int64_t> keep) {
  PackedRows p;
  const auto long_opts = at::TensorOptions().dtype(at::kLong);
  const int64_t period = m.row_period;
  const auto slots = static_cast<int64_t>(m.single_slots.size());
  std::vector<int64_t> kept_tokens, kept_slots;
  for (size_t r = 0; r < lens.size(); ++r) {
    p.starts.push_back(p.rows);
    kept_tokens.push_back(p.rows + keep[r]);
    const auto i = static_cast<int64_t>(r);
    kept_slots.push_back(i / slots * kChunk + m.single_slots[static_cast<size_t>(i % slots)]);
    p.rows += (lens[r] + period - 1) / period * period;
  }
  p.kept_rows = kept_slots.empty() ? 0 : kept_slots.back() + 1;
  p.lens = std::move(lens);
  p.keep = std::move(keep);
  p.kept_tokens = at::tensor(kept_tokens, long_opts);
  p.kept_slots = at::tensor(kept_slots, long_opts);
  return p;
}

// `rows` [B, H] at the kept slots of a zero buffer.
at::Tensor AtKeptSlots(const PackedRows& p, const at::Tensor& rows) {
  return at::zeros({p.kept_rows, rows.size(1)}, rows.options()).index_copy_(0, p.kept_slots, rows);
}

// The packed layers shared by both architectures. `x` [rows, H] holds the
// sequences' tokens as `p` lays them out. Returns the kept tokens after the
// last layer (CLIP: before final_layer_norm) at their kept slots.
at::Tensor PackedLayers(const NativeModel& m, at::Tensor x, const PackedRows& p) {
  const bool clip = m.spec.arch == kDjClipText;
  const int64_t H = m.spec.hidden;
  for (int l = 0; l < m.spec.layers; ++l) {
    const std::string L = "L" + std::to_string(l);
    const bool last = l + 1 == m.spec.layers;
    const at::Tensor normed =
        clip ? Chunked(x, [&](const at::Tensor& c) { return LayerNorm(c, m, L + ".ln1"); }) : x;
    const at::Tensor qkv =
        Chunked(normed, [&](const at::Tensor& c) { return Linear(c, m, L + ".qkv"); });
    // The last layer computes the kept token of each sequence alone.
    at::Tensor attended = last ? at::Tensor() : at::zeros({p.rows, H}, x.options());
    std::vector<at::Tensor> kept;
    for (size_t r = 0; r < p.lens.size(); ++r) {
      const at::Tensor seq = qkv.narrow(0, p.starts[r], p.lens[r]);
      const int64_t first = last ? p.keep[r] : 0;
      const at::Tensor ctx =
          SequenceAttention(seq.narrow(0, first, last ? 1 : p.lens[r]).narrow(1, 0, H),
                            seq.narrow(1, H, H), seq.narrow(1, 2 * H, H), m, clip, clip, first);
      if (last) {
        kept.push_back(ctx);
      } else {
        attended.narrow(0, p.starts[r], p.lens[r]).copy_(ctx);
      }
    }
    at::Tensor residual = x;
    if (last) {
      attended = AtKeptSlots(p, at::cat(kept, 0));
      residual = AtKeptSlots(p, x.index_select(0, p.kept_tokens));
    }
    if (clip) {
      const at::Tensor y = Chunked(
          attended, residual,
          [&](const at::Tensor& a, const at::Tensor& r) { return r + Linear(a, m, L + ".o"); });
      x = Chunked(y, [&](const at::Tensor& c) {
        return c + Linear(Activation(Linear(LayerNorm(c, m, L + ".ln2"), m, L + ".fc1"), m), m,
                          L + ".fc2");
      });
    } else {
      const at::Tensor y =
          Chunked(attended, residual, [&](const at::Tensor& a, const at::Tensor& r) {
            return LayerNorm(Linear(a, m, L + ".ao") + r, m, L + ".ao_ln");
          });
      x = Chunked(y, [&](const at::Tensor& c) {
        return LayerNorm(Linear(Activation(Linear(c, m, L + ".in"), m), m, L + ".out") + c, m,
                         L + ".out_ln");
      });
    }
  }
  if (m.spec.layers == 0) x = AtKeptSlots(p, x.index_select(0, p.kept_tokens));
  return x;
}

// ids and mask [B, S] with each row's tokens first (mask 1) and padding after.
at::Tensor PackedForward(const NativeModel& m, const at::Tensor& ids, const at::Tensor& mask,
                         const at::Tensor& pool_index) {
  const int64_t B = ids.size(0), S = ids.size(1);
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t* mk = mask.data_ptr<int64_t>();
  std::vector<int64_t> lens, keep;
  for (int64_t r = 0; r < B; ++r) {
    int64_t len = 0;
    while (len < S && mk[r * S + len] != 0) ++len;
    lens.push_back(std::max<int64_t>(len, 1));
    keep.push_back(m.spec.arch == kDjClipText ? pool_index.data_ptr<int64_t>()[r] : 0);
  }
  const PackedRows p = LayOut(m, lens, keep);
  // The filler rows between sequences hold the padding token; no sequence
  // attends to them.
  std::vector<int64_t> tokens(static_cast<size_t>(p.rows), m.spec.pad_token_id);
  std::vector<int64_t> positions(static_cast<size_t>(p.rows),
                                 m.spec.roberta_positions ? m.spec.pad_token_id : 0);
  for (int64_t r = 0; r < B; ++r) {
    int64_t real = 0;
    for (int64_t i = 0; i < p.lens[static_cast<size_t>(r)]; ++i) {
      const int64_t t = id[r * S + i];
      const auto at = static_cast<size_t>(p.starts[static_cast<size_t>(r)] + i);
      tokens[at] = t;
      if (m.spec.roberta_positions) {
        // RoBERTa: positions count the non-padding ids, after pad_token_id.
        const bool not_pad = t != m.spec.pad_token_id;
        real += not_pad ? 1 : 0;
        positions[at] = not_pad ? real + m.spec.pad_token_id : m.spec.pad_token_id;
      } else {
        positions[at] = i;
      }
    }
  }
  const auto long_opts = at::TensorOptions().dtype(at::kLong);
  const at::Tensor tok = at::tensor(tokens, long_opts);
  const at::Tensor pos = at::tensor(positions, long_opts);
  at::Tensor x = at::embedding(m.W("emb.word"), tok) + at::embedding(m.W("emb.pos"), pos);
  at::Tensor out;
  if (m.spec.arch == kDjClipText) {
    const at::Tensor last = PackedLayers(m, x, p);
    out = Chunked(
        last, [&](const at::Tensor& c) { return Linear(LayerNorm(c, m, "final_ln"), m, "proj"); });
  } else {
    if (m.Has("emb.type")) x = x + m.W("emb.type").select(0, 0);
    x = Chunked(x, [&](const at::Tensor& c) { return LayerNorm(c, m, "emb.ln"); });
    const at::Tensor first = PackedLayers(m, x, p);
    out = Chunked(first, [&](const at::Tensor& c) {
      if (m.spec.arch == kDjEncoderClassifierRoberta) {
        return Linear(at::tanh(Linear(c, m, "head.dense")), m, "head.out");
      }
      return Linear(at::tanh(Linear(c, m, "pooler")), m, "head.out");
    });
  }
  return out.index_select(0, p.kept_slots);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void djshard_query_torch(DjshardTorchInfo* out) {
  std::snprintf(out->torch_version, sizeof out->torch_version, "%s", TORCH_VERSION);
  out->cuda_available = torch::cuda::is_available() ? 1 : 0;
  out->cuda_device_count = out->cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
  out->bf16_cpu = 1;
  out->cuda_built = at::hasCUDA() ? 1 : 0;
  // Fixed for the life of the process (OpenBLAS picks its kernel when it
  // loads); described once, since every model operator's description asks.
  static const std::string kernel = djshard::model::torch_module::CpuKernel();
  std::snprintf(out->cpu_kernel, sizeof out->cpu_kernel, "%s", kernel.c_str());
}

extern "C" __attribute__((visibility("default"))) void* djshard_model_load(
    const DjshardModelSpec* spec, char* err, int err_len) {
  try {
    auto m = std::make_unique<NativeModel>();
    m->spec = *spec;
    m->spec.tensors = nullptr;
    m->spec.device = nullptr;
    m->device = djshard::model::torch_module::ParseDevice(spec->device);
    m->dtype = djshard::model::torch_module::ScalarType(spec->compute_dtype);
    if (m->device.is_cpu()) djshard::model::torch_module::ConfigureCpuThreads(spec->cpu_threads);
    c10::InferenceMode guard;
    for (int i = 0; i < spec->num_tensors; ++i) {
      const DjshardTensorDesc& d = spec->tensors[i];
      std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
      const at::Tensor host = at::from_blob(
          const_cast<void*>(d.data), shape,
          at::TensorOptions().dtype(djshard::model::torch_module::ScalarType(d.dtype)));
      // One owned copy per device, in the compute dtype.
      m->w[d.name] =
          host.to(m->device, m->dtype, /*non_blocking=*/false, /*copy=*/true).contiguous();
    }
    // Fuse each layer's query, key and value projections into one GEMM.
    for (int l = 0; l < spec->layers; ++l) {
      const std::string L = "L" + std::to_string(l);
      for (const char* part : {".w", ".b"}) {
        const std::string q = L + ".q" + part, k = L + ".k" + part, v = L + ".v" + part;
        if (!m->Has(q)) continue;
        m->w[L + ".qkv" + part] = at::cat({m->W(q), m->W(k), m->W(v)}, 0).contiguous();
        m->w.erase(q);
        m->w.erase(k);
        m->w.erase(v);
      }
    }
    if (m->device.is_cpu()) ProbeRowLayout(m.get());
    auto* handle = new djshard::model::torch_module::Handle{
        djshard::model::torch_module::Handle::kNative, m.get(), m->device, m->dtype};
    m.release();
    return handle;
  } catch (const std::exception& e) {
    SetError(err, err_len, e.what());
    return nullptr;
  }
}

namespace djshard::model::torch_module {

at::Tensor RunNative(void* model, const at::Tensor& ids, const at::Tensor& mask,
                     const at::Tensor& pool_index) {
  const NativeModel& m = *static_cast<const NativeModel*>(model);
  if (m.device.is_cpu()) return PackedForward(m, ids.contiguous(), mask.contiguous(), pool_index);
  if (m.spec.arch == kDjClipText) return ClipTextForward(m, ids, mask, pool_index);
  return EncoderForward(m, ids, mask);
}

void FreeNative(void* model) { delete static_cast<NativeModel*>(model); }

}  // namespace djshard::model::torch_module
