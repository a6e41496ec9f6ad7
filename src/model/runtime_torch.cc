// The only translation unit of this layer that includes libtorch headers so
// far: they take about 20 s to compile.
#include <torch/torch.h>
#include <torch/version.h>

#include "djshard/model/runtime.h"

namespace djshard::model {

TorchRuntimeInfo QueryTorchRuntime() {
  TorchRuntimeInfo info;
  info.built_with_torch = true;
  info.torch_version = TORCH_VERSION;
  info.cuda_available = torch::cuda::is_available();
  info.cuda_device_count = info.cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
  return info;
}

}  // namespace djshard::model
