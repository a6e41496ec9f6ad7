// libdjshard_torch.so, part 2: TorchScript packages (any architecture traced
// by tools/export_torchscript.py) and the forward entry point shared by both
// kinds of model.
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "src/model/torch_module_shared.h"

namespace tmod = djshard::model::torch_module;

namespace djshard::model::torch_module {

at::Tensor RunScript(void* model, const at::Tensor& ids, const at::Tensor& mask) {
  auto& module = *static_cast<torch::jit::Module*>(model);
  const c10::IValue out = module.forward({ids, mask});
  if (out.isTensor()) return out.toTensor();
  if (out.isTuple()) return out.toTupleRef().elements().at(0).toTensor();
  TORCH_CHECK(false, "the TorchScript module returned neither a tensor nor a tuple");
}

void FreeScript(void* model) { delete static_cast<torch::jit::Module*>(model); }

}  // namespace djshard::model::torch_module

extern "C" __attribute__((visibility("default"))) void* djshard_script_load(
    const char* path, const char* device, int compute_dtype, int cpu_threads, char* err,
    int err_len) {
  try {
    // The first and the thousandth call of a shape run the same kernels: no
    // profiling executor, no graph optimization, no fusers.
    torch::jit::setGraphExecutorOptimize(false);
    torch::jit::getProfilingMode() = false;
    torch::jit::getExecutorMode() = false;
    const at::Device dev = tmod::ParseDevice(device);
    if (dev.is_cpu()) tmod::ConfigureCpuThreads(cpu_threads);
    auto module = std::make_unique<torch::jit::Module>(torch::jit::load(path, dev));
    module->eval();
    const at::ScalarType dtype = tmod::ScalarType(compute_dtype);
    if (dtype != at::kFloat) module->to(dtype);
    auto* handle = new tmod::Handle{tmod::Handle::kScript, module.release(), dev, dtype};
    return handle;
  } catch (const std::exception& e) {
    tmod::SetError(err, err_len, e.what());
    return nullptr;
  }
}

extern "C" __attribute__((visibility("default"))) int djshard_model_forward(
    void* model, const int64_t* ids, const int64_t* mask, const int64_t* pool_index, int64_t batch,
    int64_t seq, float* out, int64_t out_dim, int* cuda_oom, char* err, int err_len) {
  if (cuda_oom != nullptr) *cuda_oom = 0;
  try {
    const auto& h = *static_cast<const tmod::Handle*>(model);
    c10::InferenceMode guard;
    const auto long_opts = at::TensorOptions().dtype(at::kLong);
    at::Tensor ids_t = at::from_blob(const_cast<int64_t*>(ids), {batch, seq}, long_opts);
    at::Tensor mask_t = at::from_blob(const_cast<int64_t*>(mask), {batch, seq}, long_opts);
    at::Tensor pool_t;
    if (pool_index != nullptr)
      pool_t = at::from_blob(const_cast<int64_t*>(pool_index), {batch}, long_opts);
    if (!h.device.is_cpu()) {
      ids_t = ids_t.to(h.device);
      mask_t = mask_t.to(h.device);
      if (pool_t.defined()) pool_t = pool_t.to(h.device);
    }
    auto run = [&](const at::Tensor& i, const at::Tensor& m, const at::Tensor& p) {
      return h.kind == tmod::Handle::kNative ? tmod::RunNative(h.impl, i, m, p)
                                             : tmod::RunScript(h.impl, i, m);
    };
    at::Tensor result;
    if (h.device.is_cpu() && h.kind == tmod::Handle::kScript) {
      // A TorchScript module on the CPU runs each row alone at its own
      // length: no padding to compute, and a row's result depends on nothing
      // but the row, whatever the batch size or batch mates. (Native models
      // pack the rows instead: RunNative.)
      std::vector<at::Tensor> rows;
      rows.reserve(static_cast<size_t>(batch));
      for (int64_t r = 0; r < batch; ++r) {
        int64_t len = 0;
        while (len < seq && mask[r * seq + len] != 0) ++len;
        const at::Tensor i = ids_t.narrow(0, r, 1).narrow(1, 0, std::max<int64_t>(len, 1));
        const at::Tensor m = mask_t.narrow(0, r, 1).narrow(1, 0, std::max<int64_t>(len, 1));
        rows.push_back(run(i, m, pool_t));
      }
      result = at::cat(rows, 0);
    } else {
      result = run(ids_t, mask_t, pool_t);
    }
    result = result.to(at::kCPU, at::kFloat).contiguous();
    if (result.dim() != 2 || result.size(0) != batch || result.size(1) != out_dim) {
      tmod::SetError(err, err_len,
                     "the model returned shape " + c10::str(result.sizes()) + ", expected [" +
                         std::to_string(batch) + ", " + std::to_string(out_dim) + "]");
      return 1;
    }
    std::memcpy(out, result.data_ptr<float>(),
                sizeof(float) * static_cast<size_t>(batch * out_dim));
    return 0;
  } catch (const c10::OutOfMemoryError& e) {
    if (cuda_oom != nullptr) *cuda_oom = 1;
    tmod::SetError(err, err_len, e.what());
    return 1;
  } catch (const std::exception& e) {
    tmod::SetError(err, err_len, e.what());
    return 1;
  }
}

extern "C" __attribute__((visibility("default"))) void djshard_model_free(void* model) {
  auto* h = static_cast<tmod::Handle*>(model);
  if (h == nullptr) return;
  if (h->kind == tmod::Handle::kNative) {
    tmod::FreeNative(h->impl);
  } else {
    tmod::FreeScript(h->impl);
  }
  delete h;
}
