#include "djshard/model/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "src/model/torch_module_abi.h"

namespace djshard::model {

#ifdef DJSHARD_WITH_TORCH
namespace {

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

}  // namespace
#endif

TorchRuntimeInfo QueryTorchRuntime() {
  TorchRuntimeInfo info;
#ifdef DJSHARD_WITH_TORCH
  info.built_with_torch = true;
  info.module_path = ModulePath();
  // DEEPBIND: libtorch's own libprotobuf must bind to itself, not to the
  // protobuf-lite symbols that libsentencepiece (linked into djshard for the
  // tokenizing operators) exports; without it the module crashes while it loads.
  void* handle = dlopen(info.module_path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (handle == nullptr) {
    const char* err = dlerror();
    info.load_error = err ? err : "dlopen failed";
    return info;
  }
  auto query = reinterpret_cast<DjshardQueryTorchFn>(dlsym(handle, DJSHARD_QUERY_TORCH_SYMBOL));
  if (query == nullptr) {
    info.load_error = "module has no " DJSHARD_QUERY_TORCH_SYMBOL;
    return info;
  }
  DjshardTorchInfo raw{};
  query(&raw);
  info.loaded = true;
  info.torch_version = raw.torch_version;
  info.cuda_available = raw.cuda_available != 0;
  info.cuda_device_count = raw.cuda_device_count;
  // The module stays loaded for the life of the process: libtorch does not
  // support being unloaded.
#endif
  return info;
}

}  // namespace djshard::model
