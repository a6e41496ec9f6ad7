#pragma once

#include <string>

namespace djshard::model {

// What this build knows of libtorch, for `djshard version`.
struct TorchRuntimeInfo {
  bool built_with_torch = false;  // the torch module was built (DJSHARD_WITH_TORCH=ON)
  bool loaded = false;            // and could be loaded now
  std::string load_error;         // why not, when built but not loaded
  std::string module_path;
  std::string torch_version;  // e.g. "1.13.1"
  bool cuda_available = false;
  int cuda_device_count = 0;
  bool bf16_cpu = false;
  bool cuda_built = false;  // libtorch has CUDA (whether or not a device is visible)
  // ATen's CPU capability and the BLAS with its kernel, e.g. "ATen AVX2,
  // OpenBLAS 0.3.21 Haswell": model outputs on the CPU may differ in the last
  // bits between two of them.
  std::string cpu_kernel;
};

// libtorch lives in a separate module (libdjshard_torch.so, beside the
// binary) that is loaded on first use, so commands that need no model pay
// neither its start-up time nor its memory. DJSHARD_TORCH_MODULE overrides
// the module's path.
TorchRuntimeInfo QueryTorchRuntime();

// The entry points of the loaded torch module (src/model/torch_module_abi.h
// names their types). Loaded once per process; throws djshard::Error saying
// why when this build has no libtorch or the module does not load.
struct TorchModuleApi;
const TorchModuleApi& TorchModule();

}  // namespace djshard::model
