#pragma once

// The C interface between libdjshard and the libtorch module
// (libdjshard_torch.so). Plain C types only, so the two sides may be built
// with different C++ flags and libtorch never leaks into libdjshard.
#include <stdint.h>

extern "C" {

struct DjshardTorchInfo {
  char torch_version[64];
  int cuda_available;
  int cuda_device_count;
  int bf16_cpu;    // bfloat16 matmuls run on this CPU
  int cuda_built;  // this libtorch was built with CUDA
  // What computes a model on the CPU: ATen's CPU capability and the BLAS
  // with its kernel ("ATen AVX2, OpenBLAS 0.3.21 Haswell"). Results may
  // differ in the last bits between two of them.
  char cpu_kernel[160];
};

// Element types of DjshardTensorDesc::dtype (as djshard::model::WeightDType).
enum DjshardDType { kDjF32 = 0, kDjF16 = 1, kDjBF16 = 2 };

// One weight, by the canonical name the architecture uses ("L0.q.w").
struct DjshardTensorDesc {
  const char* name;
  int dtype;  // DjshardDType
  int ndim;
  const int64_t* shape;
  const void* data;  // read during the load call only
};

// Architectures built natively.
enum DjshardArch {
  kDjEncoderClassifierRoberta = 1,  // RoBERTa/XLM-R: head dense -> tanh -> out_proj on token 0
  kDjEncoderClassifierBert = 2,     // BERT: pooler tanh, then classifier
  kDjClipText = 3,                  // CLIP text tower + text_projection
};

struct DjshardModelSpec {
  int arch;  // DjshardArch
  int layers, hidden, heads, intermediate;
  double layer_norm_eps;
  int64_t pad_token_id;
  int roberta_positions;  // position ids start after pad_token_id and skip padding
  int quick_gelu;         // CLIP's x * sigmoid(1.702 x); else exact erf GELU
  int out_dim;            // labels, or the projection width
  const char* device;     // "cpu" or "cuda:N"
  int compute_dtype;      // DjshardDType the module computes in
  int cpu_threads;        // at::set_num_threads on CPU (intra-op threads)
  int num_tensors;
  const DjshardTensorDesc* tensors;
};

// Loads a model (copies every tensor to the device, cast to compute_dtype).
// Returns the model, or nullptr with a message in err.
typedef void* (*DjshardModelLoadFn)(const DjshardModelSpec* spec, char* err, int err_len);

// A TorchScript package's module file (torch.jit.load), called as
// forward(input_ids, attention_mask).
typedef void* (*DjshardScriptLoadFn)(const char* path, const char* device, int compute_dtype,
                                     int cpu_threads, char* err, int err_len);

// Runs one batch: ids and mask are batch x seq int64, row-major; pool_index
// (CLIP: the position pooled in each row; else unused, may be null). Writes
// batch x out_dim float32 to out. Returns 0, or nonzero with a message in
// err (cuda_oom set when the device ran out of memory). Thread-safe: many
// threads may run batches on one model at once.
typedef int (*DjshardModelForwardFn)(void* model, const int64_t* ids, const int64_t* mask,
                                     const int64_t* pool_index, int64_t batch, int64_t seq,
                                     float* out, int64_t out_dim, int* cuda_oom, char* err,
                                     int err_len);

typedef void (*DjshardModelFreeFn)(void* model);

// Exported by libdjshard_torch.so.
typedef void (*DjshardQueryTorchFn)(DjshardTorchInfo* out);
#define DJSHARD_QUERY_TORCH_SYMBOL "djshard_query_torch"
#define DJSHARD_MODEL_LOAD_SYMBOL "djshard_model_load"
#define DJSHARD_SCRIPT_LOAD_SYMBOL "djshard_script_load"
#define DJSHARD_MODEL_FORWARD_SYMBOL "djshard_model_forward"
#define DJSHARD_MODEL_FREE_SYMBOL "djshard_model_free"
}
