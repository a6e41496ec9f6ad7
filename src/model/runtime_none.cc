// Built instead of runtime_torch.cc when DJSHARD_WITH_TORCH=OFF.
#include "djshard/model/runtime.h"

namespace djshard::model {

TorchRuntimeInfo QueryTorchRuntime() { return TorchRuntimeInfo{}; }

}  // namespace djshard::model
