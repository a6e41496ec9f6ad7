#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "djshard/common/error.h"
#include "djshard/model/architecture.h"

namespace djshard::model {

// The dtype a model computes in. Logits and embeddings come back as float32.
enum class ComputeDType { kFloat32, kBFloat16, kFloat16 };
const char* ComputeDTypeName(ComputeDType dtype);
// "float32", "bfloat16", "float16" and their usual spellings ("fp32",
// "torch.bfloat16", "half", ...); nullopt for anything else.
std::optional<ComputeDType> ParseComputeDType(std::string_view name);

// The device ran out of memory on a batch (CUDA OOM); the caller may split it.
class DeviceOutOfMemory : public Error {
 public:
  using Error::Error;
};

// A model loaded on one device: one copy of the weights per (directory,
// device, dtype) in the process, shared by every operator and replica thread
// that asks for it. Forward is thread-safe.
class DeviceModel {
 public:
  // Loads the model of `dir` (ReadModelConfig, WeightSet, BindWeights; a
  // TorchScript package through torch.jit) on `device` ("cpu", "cuda:0"), or
  // returns the copy already loaded. Throws djshard::Error naming the file at
  // fault, or when this build has no libtorch.
  static std::shared_ptr<const DeviceModel> Get(const std::string& dir, const std::string& device,
                                                ComputeDType dtype);
  ~DeviceModel();
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  const ModelConfig& config() const { return config_; }
  const std::string& device() const { return device_; }
  ComputeDType dtype() const { return dtype_; }
  uint64_t parameter_count() const { return parameters_; }
  // "safetensors", "pytorch_model.bin" or "TorchScript"; and the stored dtype.
  const std::string& weights_format() const { return weights_format_; }
  const std::string& weights_dtype() const { return weights_dtype_; }

  // Runs one batch of `batch` rows of `seq` tokens: ids and mask row-major;
  // pool_index (CLIP only: the position each row is pooled at). Writes
  // batch x config().out_dim float32 values to `out`. Throws
  // DeviceOutOfMemory, or djshard::Error for any other failure.
  void Forward(const int64_t* ids, const int64_t* mask, const int64_t* pool_index, int64_t batch,
               int64_t seq, float* out) const;

 private:
  DeviceModel() = default;
  ModelConfig config_;
  std::string device_;
  ComputeDType dtype_ = ComputeDType::kFloat32;
  uint64_t parameters_ = 0;
  std::string weights_format_;
  std::string weights_dtype_;
  void* handle_ = nullptr;  // the torch module's model
};

}  // namespace djshard::model
