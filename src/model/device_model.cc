#include "djshard/model/device_model.h"

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "djshard/model/weights.h"
#include "src/model/torch_module_api.h"

namespace djshard::model {

const char* ComputeDTypeName(ComputeDType dtype) {
  switch (dtype) {
    case ComputeDType::kBFloat16:
      return "bfloat16";
    case ComputeDType::kFloat16:
      return "float16";
    default:
      return "float32";
  }
}

std::optional<ComputeDType> ParseComputeDType(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  if (name == "float32" || name == "fp32" || name == "float") return ComputeDType::kFloat32;
  if (name == "bfloat16" || name == "bf16") return ComputeDType::kBFloat16;
  if (name == "float16" || name == "fp16" || name == "half") return ComputeDType::kFloat16;
  return std::nullopt;
}

namespace {

int AbiDType(ComputeDType dtype) {
  switch (dtype) {
    case ComputeDType::kBFloat16:
      return kDjBF16;
    case ComputeDType::kFloat16:
      return kDjF16;
    default:
      return kDjF32;
  }
}

int AbiDType(WeightDType dtype) {
  if (dtype == WeightDType::kF16) return kDjF16;
  if (dtype == WeightDType::kBF16) return kDjBF16;
  return kDjF32;
}

int AbiArch(ModelKind kind) {
  switch (kind) {
    case ModelKind::kBertClassifier:
      return kDjEncoderClassifierBert;
    case ModelKind::kClipText:
      return kDjClipText;
    default:
      return kDjEncoderClassifierRoberta;
  }
}

}  // namespace

std::shared_ptr<const DeviceModel> DeviceModel::Get(const std::string& dir,
                                                    const std::string& device, ComputeDType dtype) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, std::string, ComputeDType>,
                  std::weak_ptr<const DeviceModel>>
      loaded;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(dir, device, dtype);
  if (auto it = loaded.find(key); it != loaded.end()) {
    if (auto alive = it->second.lock()) return alive;
  }
  const TorchModuleApi& api = TorchModule();
  std::shared_ptr<DeviceModel> m(new DeviceModel());
  m->config_ = ReadModelConfig(dir);
  m->device_ = device;
  m->dtype_ = dtype;
  char err[2048] = {0};
  const int threads = 1;  // parallelism comes from the executor's threads
  if (m->config_.is_script()) {
    m->weights_format_ = "TorchScript";
    m->weights_dtype_ = "F32";
    m->handle_ = api.load_script(m->config_.script_file.c_str(), device.c_str(), AbiDType(dtype),
                                 threads, err, sizeof err);
    if (m->handle_ == nullptr) {
      throw Error(m->config_.script_file, 0,
                  std::string("the TorchScript module did not load: ") + err,
                  "export it again with tools/export_torchscript.py");
    }
  } else {
    const WeightSet weights = WeightSet::Load(dir);
    const auto bound = BindWeights(m->config_, weights);
    std::vector<DjshardTensorDesc> descs;
    descs.reserve(bound.size());
    for (const auto& [name, t] : bound) {
      descs.push_back({name.c_str(), AbiDType(t->dtype), static_cast<int>(t->shape.size()),
                       t->shape.data(), t->data});
      uint64_t n = 1;
      for (int64_t d : t->shape) n *= static_cast<uint64_t>(d);
      m->parameters_ += n;
    }
    m->weights_format_ = weights.format();
    m->weights_dtype_ = bound.empty() ? "F32" : WeightDTypeName(bound.front().second->dtype);
    const ModelConfig& c = m->config_;
    DjshardModelSpec spec{};
    spec.arch = AbiArch(c.kind);
    spec.layers = c.layers;
    spec.hidden = c.hidden;
    spec.heads = c.heads;
    spec.intermediate = c.intermediate;
    spec.layer_norm_eps = c.layer_norm_eps;
    spec.pad_token_id = c.pad_token_id;
    spec.roberta_positions = c.kind == ModelKind::kRobertaClassifier ? 1 : 0;
    spec.quick_gelu = c.quick_gelu ? 1 : 0;
    spec.out_dim = c.out_dim;
    spec.device = device.c_str();
    spec.compute_dtype = AbiDType(dtype);
    spec.cpu_threads = threads;
    spec.num_tensors = static_cast<int>(descs.size());
    spec.tensors = descs.data();
    if (c.heads < 1 || c.layers < 0 || c.hidden % c.heads != 0) {
      throw Error(c.config_file, 0,
                  "hidden_size must be a multiple of a positive num_attention_heads", "");
    }
    m->handle_ = api.load(&spec, err, sizeof err);
    if (m->handle_ == nullptr) {
      throw Error(dir, 0, std::string("the model did not load on ") + device + ": " + err, "");
    }
  }
  loaded[key] = m;
  return m;
}

DeviceModel::~DeviceModel() {
  if (handle_ != nullptr) TorchModule().free(handle_);
}

void DeviceModel::Forward(const int64_t* ids, const int64_t* mask, const int64_t* pool_index,
                          int64_t batch, int64_t seq, float* out) const {
  char err[2048] = {0};
  int oom = 0;
  const int rc = TorchModule().forward(handle_, ids, mask, pool_index, batch, seq, out,
                                       config_.out_dim, &oom, err, sizeof err);
  if (rc == 0) return;
  if (oom) throw DeviceOutOfMemory(config_.dir, 0, std::string("out of device memory: ") + err, "");
  throw Error(config_.dir, 0, std::string("the model failed on a batch: ") + err, "");
}

}  // namespace djshard::model
