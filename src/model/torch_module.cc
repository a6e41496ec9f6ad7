// libdjshard_torch.so: the code that includes libtorch headers (about 20 s to
// compile each). Loaded at run time by src/model/runtime.cc.
#include <torch/torch.h>
#include <torch/version.h>

#include <cstdio>

#include "src/model/torch_module_abi.h"

extern "C" __attribute__((visibility("default"))) void djshard_query_torch(DjshardTorchInfo* out) {
  std::snprintf(out->torch_version, sizeof out->torch_version, "%s", TORCH_VERSION);
  out->cuda_available = torch::cuda::is_available() ? 1 : 0;
  out->cuda_device_count = out->cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
}
