#pragma once

// The torch module's entry points, as libdjshard holds them after loading it.
#include "djshard/model/runtime.h"
#include "src/model/torch_module_abi.h"

namespace djshard::model {

struct TorchModuleApi {
  DjshardQueryTorchFn query = nullptr;
  DjshardModelLoadFn load = nullptr;
  DjshardScriptLoadFn load_script = nullptr;
  DjshardModelForwardFn forward = nullptr;
  DjshardModelFreeFn free = nullptr;
};

}  // namespace djshard::model
