// libdjshard_torch.so, part 1: the native architectures (BERT/RoBERTa
// sequence classifiers, the CLIP text tower) as plain tensor code following
// Hugging Face's modeling code in eval mode. The only translation units that
// include libtorch headers are in src/model (about 20 s each to compile);
// libdjshard reaches them through the C interface of torch_module_abi.h.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <dlfcn.h>
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

void ConfigureCpuThreads(int threads) {
  // Intra-op threads are process-wide; the executor's threads and the
  // replicas provide the parallelism, so one model does not oversubscribe.
  static std::once_flag once;
  std::call_once(once, [threads] {
    at::set_num_threads(threads > 0 ? threads : 1);
    // Debian's libtorch calls the system BLAS; OpenBLAS (libopenblas0-pthread)
    // would otherwise start a thread per core inside every executor thread.
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
      set(threads > 0 ? threads : 1);
    }
  });
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

// The CPU path: the token rows of every sequence packed without padding.
// Row-wise work (projections, layer norms, activations) runs on fixed chunks
// of kChunk token rows, so every BLAS call has one shape and a row's bits never
// depend on the rows packed beside it; attention runs per sequence at its own
// length. No FLOP is spent on padding, and the projections amortize their
// weight packing over kChunk rows (one sequence at a time ran at half speed).
constexpr int64_t kChunk = 96;  // a multiple of every sgemm row unroll (4, 6, 8, 12, 16, 24, 32)

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

// The packed layers shared by both architectures. `x` [T, H] holds the
// sequences' tokens back to back (lengths `lens`); `keep[r]` is the token of
// sequence r that the head reads. Returns [B, H]: the kept tokens after the
// last layer (CLIP: before final_layer_norm).
at::Tensor PackedLayers(const NativeModel& m, at::Tensor x, const std::vector<int64_t>& lens,
                        const std::vector<int64_t>& keep) {
  const bool clip = m.spec.arch == kDjClipText;
  const int64_t H = m.spec.hidden;
  const int64_t B = static_cast<int64_t>(lens.size());
  std::vector<int64_t> kept_rows;
  int64_t offset = 0;
  for (int64_t r = 0; r < B; ++r) {
    kept_rows.push_back(offset + keep[static_cast<size_t>(r)]);
    offset += lens[static_cast<size_t>(r)];
  }
  const at::Tensor kept_index = at::tensor(kept_rows, at::TensorOptions().dtype(at::kLong));
  for (int l = 0; l < m.spec.layers; ++l) {
    const std::string L = "L" + std::to_string(l);
    const bool last = l + 1 == m.spec.layers;
    const at::Tensor normed =
        clip ? Chunked(x, [&](const at::Tensor& c) { return LayerNorm(c, m, L + ".ln1"); }) : x;
    const at::Tensor qkv =
        Chunked(normed, [&](const at::Tensor& c) { return Linear(c, m, L + ".qkv"); });
    std::vector<at::Tensor> ctx;
    int64_t start = 0;
    for (int64_t r = 0; r < B; ++r) {
      const int64_t len = lens[static_cast<size_t>(r)];
      const at::Tensor seq = qkv.narrow(0, start, len);
      const int64_t first = last ? keep[static_cast<size_t>(r)] : 0;
      const int64_t queries = last ? 1 : len;
      ctx.push_back(SequenceAttention(seq.narrow(0, first, queries).narrow(1, 0, H),
                                      seq.narrow(1, H, H), seq.narrow(1, 2 * H, H), m, clip, clip,
                                      first));
      start += len;
    }
    const at::Tensor attended = at::cat(ctx, 0);
    const at::Tensor residual = last ? x.index_select(0, kept_index) : x;
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
  if (m.spec.layers == 0) x = x.index_select(0, kept_index);
  return x;
}

// ids and mask [B, S] with each row's tokens first (mask 1) and padding after.
at::Tensor PackedForward(const NativeModel& m, const at::Tensor& ids, const at::Tensor& mask,
                         const at::Tensor& pool_index) {
  const int64_t B = ids.size(0), S = ids.size(1);
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t* mk = mask.data_ptr<int64_t>();
  std::vector<int64_t> tokens, positions, lens, keep;
  for (int64_t r = 0; r < B; ++r) {
    int64_t len = 0;
    while (len < S && mk[r * S + len] != 0) ++len;
    len = std::max<int64_t>(len, 1);
    lens.push_back(len);
    int64_t real = 0;
    for (int64_t i = 0; i < len; ++i) {
      const int64_t t = id[r * S + i];
      tokens.push_back(t);
      if (m.spec.roberta_positions) {
        // RoBERTa: positions count the non-padding ids, after pad_token_id.
        const bool not_pad = t != m.spec.pad_token_id;
        real += not_pad ? 1 : 0;
        positions.push_back(not_pad ? real + m.spec.pad_token_id : m.spec.pad_token_id);
      } else {
        positions.push_back(i);
      }
    }
    keep.push_back(m.spec.arch == kDjClipText ? pool_index.data_ptr<int64_t>()[r] : 0);
  }
  const auto long_opts = at::TensorOptions().dtype(at::kLong);
  const at::Tensor tok = at::tensor(tokens, long_opts);
  const at::Tensor pos = at::tensor(positions, long_opts);
  at::Tensor x = at::embedding(m.W("emb.word"), tok) + at::embedding(m.W("emb.pos"), pos);
  if (m.spec.arch == kDjClipText) {
    const at::Tensor last = PackedLayers(m, x, lens, keep);
    return Chunked(
        last, [&](const at::Tensor& c) { return Linear(LayerNorm(c, m, "final_ln"), m, "proj"); });
  }
  if (m.Has("emb.type")) x = x + m.W("emb.type").select(0, 0);
  x = Chunked(x, [&](const at::Tensor& c) { return LayerNorm(c, m, "emb.ln"); });
  const at::Tensor first = PackedLayers(m, x, lens, keep);
  return Chunked(first, [&](const at::Tensor& c) {
    if (m.spec.arch == kDjEncoderClassifierRoberta) {
      return Linear(at::tanh(Linear(c, m, "head.dense")), m, "head.out");
    }
    return Linear(at::tanh(Linear(c, m, "pooler")), m, "head.out");
  });
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void djshard_query_torch(DjshardTorchInfo* out) {
  std::snprintf(out->torch_version, sizeof out->torch_version, "%s", TORCH_VERSION);
  out->cuda_available = torch::cuda::is_available() ? 1 : 0;
  out->cuda_device_count = out->cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
  out->bf16_cpu = 1;
  out->cuda_built = at::hasCUDA() ? 1 : 0;
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
