#include <cstdio>

#include "commands.h"
#include "djshard/common/build_info.h"
#include "djshard/model/runtime.h"

namespace djshard::cli {

void AddVersionCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("version", "Print djshard's version, commit and libtorch");
  cmd->callback([exit_code]() {
    std::printf("djshard %s (commit %s)\n", version(), git_commit());
    const model::TorchRuntimeInfo torch = model::QueryTorchRuntime();
    if (!torch.built_with_torch) {
      std::printf("libtorch: not built in (model operators absent)\n");
    } else if (!torch.loaded) {
      std::printf("libtorch: module %s cannot be loaded: %s\n", torch.module_path.c_str(),
                  torch.load_error.c_str());
      *exit_code = 2;
      return;
    } else {
      std::printf("libtorch: %s\n", torch.torch_version.c_str());
      // Model outputs on the CPU may differ in the last bits between two of these.
      std::printf("cpu kernel: %s\n", torch.cpu_kernel.c_str());
      if (torch.cuda_available) {
        std::printf("devices: cpu (float32, bfloat16), cuda x %d (float32, bfloat16, float16)\n",
                    torch.cuda_device_count);
      } else {
        std::printf("devices: cpu (float32, bfloat16); CUDA not available\n");
      }
    }
    *exit_code = 0;
  });
}

}  // namespace djshard::cli
