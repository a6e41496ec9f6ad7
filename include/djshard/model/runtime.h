#pragma once

#include <string>

namespace djshard::model {

// What this build knows of libtorch, for `djshard version`.
struct TorchRuntimeInfo {
  bool built_with_torch = false;
  std::string torch_version;  // e.g. "1.13.1"; empty without torch
  bool cuda_available = false;
  int cuda_device_count = 0;
};

// Queries libtorch (CUDA availability is probed at call time).
TorchRuntimeInfo QueryTorchRuntime();

}  // namespace djshard::model
