#include "djshard/model/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "djshard/common/error.h"
#include "src/model/torch_module_api.h"

namespace djshard::model {

namespace {

#ifdef DJSHARD_WITH_TORCH
std::string ModulePath() {
  if (const char* env = std::getenv("DJSHARD_TORCH_MODULE"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path dir = ec ? std::filesystem::path(".") : exe.parent_path();
  for (const auto& candidate :
       {dir / "libdjshard_torch.so", dir / "../lib/djshard/libdjshard_torch.so"}) {
    if (std::filesystem::exists(candidate, ec)) return candidate.lexically_normal().string();
  }
  return (dir / "libdjshard_torch.so").string();
}
#endif

struct LoadedModule {
  TorchModuleApi api;
  std::string path;
  std::string error;  // why it did not load
};

const LoadedModule& Module() {
  static LoadedModule module;
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef DJSHARD_WITH_TORCH
    module.path = ModulePath();
    // cuBLAS needs a fixed workspace for run-to-run reproducible results when
    // several streams share a GPU; libtorch reads it when CUDA initializes.
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    // DEEPBIND: libtorch's own libprotobuf must bind to itself, not to the
    // protobuf-lite symbols that libsentencepiece (linked into djshard for the
    // tokenizing operators) exports; without it the module crashes while it loads.
    // The module stays loaded for the life of the process: libtorch does not
    // support being unloaded.
    void* handle = dlopen(module.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      const char* err = dlerror();
      module.error = err ? err : "dlopen failed";
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(handle, name);
      if (p == nullptr && module.error.empty()) module.error = std::string("module has no ") + name;
      return p;
    };
    module.api.query = reinterpret_cast<DjshardQueryTorchFn>(sym(DJSHARD_QUERY_TORCH_SYMBOL));
    module.api.load = reinterpret_cast<DjshardModelLoadFn>(sym(DJSHARD_MODEL_LOAD_SYMBOL));
    module.api.load_script = reinterpret_cast<DjshardScriptLoadFn>(sym(DJSHARD_SCRIPT_LOAD_SYMBOL));
    module.api.forward = reinterpret_cast<DjshardModelForwardFn>(sym(DJSHARD_MODEL_FORWARD_SYMBOL));
    module.api.free = reinterpret_cast<DjshardModelFreeFn>(sym(DJSHARD_MODEL_FREE_SYMBOL));
#else
    module.error = "this djshard was built without libtorch (DJSHARD_WITH_TORCH=OFF)";
#endif
  });
  return module;
}

}  // namespace

TorchRuntimeInfo QueryTorchRuntime() {
  TorchRuntimeInfo info;
#ifdef DJSHARD_WITH_TORCH
  info.built_with_torch = true;
#endif
  if (!info.built_with_torch) return info;
  const LoadedModule& m = Module();
  info.module_path = m.path;
  if (!m.error.empty()) {
    info.load_error = m.error;
    return info;
  }
  DjshardTorchInfo raw{};
  m.api.query(&raw);
  info.loaded = true;
  info.torch_version = raw.torch_version;
  info.cuda_available = raw.cuda_available != 0;
  info.cuda_device_count = raw.cuda_device_count;
  info.bf16_cpu = raw.bf16_cpu != 0;
  info.cuda_built = raw.cuda_built != 0;
  info.cpu_kernel = raw.cpu_kernel;
  return info;
}

const TorchModuleApi& TorchModule() {
  const LoadedModule& m = Module();
  if (!m.error.empty()) {
    throw Error(m.path.empty() ? "libdjshard_torch.so" : m.path, 0,
                "the libtorch module is not available: " + m.error,
                "model operators need a djshard built with libtorch (scripts/setup.sh installs "
                "libtorch-dev); DJSHARD_TORCH_MODULE names the module's path");
  }
  return m.api;
}

}  // namespace djshard::model
