#pragma once

// Shared by the translation units of libdjshard_torch.so (never by libdjshard).
#include <ATen/ATen.h>

#include <string>

#include "src/model/torch_module_abi.h"

namespace djshard::model::torch_module {

at::ScalarType ScalarType(int dtype);
// torch.finfo(t).min: the additive mask value Hugging Face uses.
double LowestOf(at::ScalarType t);
void SetError(char* err, int err_len, const std::string& what);
at::Device ParseDevice(const char* device);
// at::set_num_threads, once per process.
void ConfigureCpuThreads(int threads);
// ATen's CPU capability and the BLAS with its kernel (DjshardTorchInfo::cpu_kernel).
std::string CpuKernel();

// What djshard_model_load and djshard_script_load return.
struct Handle {
  enum Kind { kNative, kScript } kind;
  void* impl;
  at::Device device;
  at::ScalarType dtype;
};

// The native architectures (torch_module.cc).
at::Tensor RunNative(void* model, const at::Tensor& ids, const at::Tensor& mask,
                     const at::Tensor& pool_index);
void FreeNative(void* model);

// TorchScript packages (torch_script.cc).
at::Tensor RunScript(void* model, const at::Tensor& ids, const at::Tensor& mask);
void FreeScript(void* model);

}  // namespace djshard::model::torch_module
