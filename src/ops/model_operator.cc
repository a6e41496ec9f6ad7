#include "src/ops/model_operator.h"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>

#include "djshard/common/error.h"
#include "djshard/common/log.h"
#include "djshard/model/device.h"
#include "djshard/model/runtime.h"
#include "src/ops/tokenization.h"

namespace djshard::ops {

namespace {

// The reasons a recipe asks for a GPU, as "num_gpus: 1"; empty when it does not.
std::string GpuRequest(const recipe::OperatorArgs& args, std::string* key) {
  for (const char* k : {"gpu_required", "num_gpus"}) {
    if (args.Has(k) && !args.Raw(k).IsNull() && args.GetDouble(k, 0) > 0) {
      *key = k;
      return std::string(k) + ": " + args.Raw(k).Scalar();
    }
  }
  if (args.Has("accelerator") && args.GetString("accelerator", "") == "cuda") {
    *key = "accelerator";
    return "accelerator: cuda";
  }
  return "";
}

void WarnOnce(const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (said.insert(message).second) Log(LogLevel::kWarn, "warning", "WARNING: " + message);
}

// model_params: Hugging Face's from_pretrained arguments that djshard reads.
struct ModelParams {
  std::string revision = "main";
  std::string dtype_name;
};

ModelParams ReadModelParams(const recipe::OperatorArgs& args) {
  ModelParams out;
  out.dtype_name = args.GetString("dtype", "float32");
  if (!args.Has("model_params") || args.Raw("model_params").IsNull()) return out;
  const YAML::Node params = args.Raw("model_params");
  if (!params.IsMap())
    args.Fail("model_params", "must be a mapping", "e.g. {torch_dtype: bfloat16}");
  for (const auto& kv : params) {
    const std::string k = kv.first.as<std::string>();
    if (k == "torch_dtype") {
      out.dtype_name = kv.second.as<std::string>();
    } else if (k == "revision") {
      out.revision = kv.second.as<std::string>();
    } else if (k != "trust_remote_code") {
      args.Fail("model_params", "key '" + k + "' is not supported",
                "djshard reads torch_dtype and revision; trust_remote_code has no effect");
    }
  }
  return out;
}

model::ComputeDType ParseDType(const recipe::OperatorArgs& args, const std::string& dtype_name) {
  const std::optional<model::ComputeDType> dtype = model::ParseComputeDType(dtype_name);
  if (!dtype) {
    args.Fail(args.Has("dtype") ? "dtype" : "model_params", "dtype '" + dtype_name + "' is unknown",
              "float32, bfloat16 or float16");
  }
  return *dtype;
}

[[noreturn]] void FailFloat16OnCpu(const recipe::OperatorArgs& args) {
  args.Fail(args.Has("dtype") ? "dtype" : "model_params", "float16 runs only on CUDA",
            "use float32 or bfloat16 on the CPU");
}

// The device arguments that fail before any device is looked at: more than
// one GPU per replica, float16 where the CPU was asked for.
void CheckDeviceArguments(const recipe::OperatorArgs& args, const model::DeviceSettings& settings,
                          model::ComputeDType dtype) {
  if (args.Has("gpu_required") || args.Has("num_gpus")) {
    const char* k = args.Has("gpu_required") ? "gpu_required" : "num_gpus";
    if (!args.Raw(k).IsNull() && args.GetDouble(k, 0) > 1) {
      args.Fail(k, "multi-GPU models are not supported",
                "give each replica at most one GPU (<= 1)");
    }
  }
  if (dtype == model::ComputeDType::kFloat16 &&
      (settings.request == model::DeviceSettings::Request::kCpu ||
       args.GetString("accelerator", "cuda") == "cpu")) {
    FailFloat16OnCpu(args);
  }
}

// The devices the replicas run on, "cpu" alone when no GPU is used: SPEC-models
// §6. No silent CPU fallback when a GPU was asked for.
std::vector<std::string> ChooseDevices(const recipe::OperatorSpec& spec,
                                       const model::DeviceSettings& settings,
                                       model::ComputeDType dtype) {
  const recipe::OperatorArgs& args = spec.args;
  const std::vector<int>& wanted = settings.gpus;
  std::string gpu_key;
  const std::string gpu_request = GpuRequest(args, &gpu_key);
  const bool cpu_asked = settings.request == model::DeviceSettings::Request::kCpu ||
                         args.GetString("accelerator", "cuda") == "cpu";
  std::vector<std::string> devices;
  if (!cpu_asked) {
    devices = model::UsableCudaDevices();
    const bool gpu_required =
        settings.request == model::DeviceSettings::Request::kCuda || !gpu_request.empty();
    if (devices.empty() && gpu_required) {
      const std::string why = gpu_request.empty() ? std::string("--device cuda") : gpu_request;
      const std::string what =
          spec.name + " needs a GPU (" + why + ") but " + model::DescribeNoCuda();
      const std::string hint = "use accelerator: cpu or --device cpu";
      args.FailAtLineOf(gpu_key, what, hint);
    }
    if (devices.empty()) {
      WarnOnce(spec.name + " runs on the CPU: " + model::DescribeNoCuda());
    }
  }
  if (dtype == model::ComputeDType::kFloat16 && devices.empty()) FailFloat16OnCpu(args);
  if (!cpu_asked && !wanted.empty()) {
    const model::TorchRuntimeInfo info = model::QueryTorchRuntime();
    for (int g : wanted) {
      if (g >= info.cuda_device_count) {
        throw Error("--gpus " + std::to_string(g) + " is not a visible GPU (" +
                        std::to_string(info.cuda_device_count) + " visible)",
                    "list indices among the visible devices, e.g. --gpus 0,1");
      }
    }
  }
  if (devices.empty()) devices.push_back("cpu");
  return devices;
}

}  // namespace

struct ModelRunner::Replica {
  std::shared_ptr<const model::DeviceModel> model;
  std::unique_ptr<model::BucketBatcher> batcher;
};

ModelRunner::ModelRunner(const recipe::OperatorSpec& spec, const std::string& model_key,
                         const std::string& fallback, bool truncation_default)
    : op_name_(spec.name) {
  const recipe::OperatorArgs& args = spec.args;
  const ModelParams params = ReadModelParams(args);
  const model::ComputeDType dtype = ParseDType(args, params.dtype_name);
  batch_size_ = static_cast<int>(args.GetInt("batch_size", 64));
  if (batch_size_ < 1) args.Fail("batch_size", "must be at least 1", "");
  if (!args.GetBool("deterministic_shapes", true)) {
    args.Fail("deterministic_shapes", "false is not supported by this build",
              "leave it at true: results then never depend on batch mates or thread count");
  }
  const int64_t wait_ms = args.GetInt("max_batch_wait_ms", 5);
  if (wait_ms < 0) args.Fail("max_batch_wait_ms", "must be 0 or more", "");
  truncation_ = args.GetBool("truncation", truncation_default);
  dtype_name_ = params.dtype_name;
  LoadModel(args, model_key, fallback, params.revision);

  const model::DeviceSettings& settings = model::GetDeviceSettings();
  CheckDeviceArguments(args, settings, dtype);
  if (settings.check_only) return;
  try {
    model::TorchModule();
  } catch (const Error& e) {
    args.FailAtLineOf(model_key, spec.name + " cannot run: " + e.message(), e.hint());
  }
  const std::vector<std::string> devices = ChooseDevices(spec, settings, dtype);
  first_device_ = devices.front();
  if (settings.defer_weights) return;
  StartReplicas(args, devices, dtype, wait_ms);
}

void ModelRunner::LoadModel(const recipe::OperatorArgs& args, const std::string& model_key,
                            const std::string& fallback, const std::string& revision) {
  // The model directory, never from the network.
  dir_ =
      std::filesystem::path(ResolveModelArgument(args, model_key, fallback, revision, "model", ""))
          .lexically_normal()
          .string();
  config_ = model::ReadModelConfig(dir_);
  max_tokens_ = config_.max_tokens;
  if (args.Has("max_length") && !args.Raw("max_length").IsNull()) {
    const int64_t m = args.GetInt("max_length", 0);
    if (m < 2 || m > config_.max_tokens) {
      args.Fail("max_length", "must be between 2 and " + std::to_string(config_.max_tokens),
                "the model's positions allow " + std::to_string(config_.max_tokens) + " tokens");
    }
    max_tokens_ = static_cast<int>(m);
  }
  tokenizer_ = model::Tokenizer::Load(dir_);
}

void ModelRunner::StartReplicas(const recipe::OperatorArgs& args,
                                const std::vector<std::string>& devices, model::ComputeDType dtype,
                                int64_t wait_ms) {
  // num_proc replicas go round-robin over the devices; replicas on one device
  // share its copy of the weights, so one batcher per device serves them all.
  const int64_t num_proc = args.Has("num_proc") && !args.Raw("num_proc").IsNull()
                               ? std::max<int64_t>(1, args.GetInt("num_proc", 1))
                               : static_cast<int64_t>(devices.size());
  const size_t used = std::min(devices.size(), static_cast<size_t>(num_proc));
  if (devices.front() != "cpu" && static_cast<size_t>(num_proc) > devices.size()) {
    WarnOnce(op_name_ + ": num_proc " + std::to_string(num_proc) + " lowered to " +
             std::to_string(devices.size()) +
             " device replicas (one copy of the weights per GPU; every executor thread feeds "
             "them)");
  }
  for (size_t i = 0; i < used; ++i) {
    auto replica = std::make_unique<Replica>();
    replica->model = model::DeviceModel::Get(dir_, devices[i], dtype);
    model::BatcherOptions options;
    options.batch_size = batch_size_;
    options.out_dim = config_.out_dim;
    options.max_tokens = max_tokens_;
    options.pad_token_id = config_.pad_token_id;
    options.fill_token_id = config_.bos_token_id;
    options.max_batch_wait = std::chrono::milliseconds(wait_ms);
    // On the CPU the module packs rows without padding, so a call's rows
    // run at once, in the calling thread, without waiting for batch mates.
    options.direct = devices[i] == "cpu";
    const model::DeviceModel* m = replica->model.get();
    replica->batcher = std::make_unique<model::BucketBatcher>(
        options, [m](const int64_t* ids, const int64_t* mask, const int64_t* pool, int64_t batch,
                     int64_t seq, float* out) { m->Forward(ids, mask, pool, batch, seq, out); });
    replicas_.push_back(std::move(replica));
  }
}

ModelRunner::~ModelRunner() = default;

Operator::ModelDescription ModelRunner::description() const {
  Operator::ModelDescription d;
  d.dir = dir_;
  d.dtype = dtype_name_;
  d.batch_size = batch_size_;
  d.device = first_device_;
  const model::TorchRuntimeInfo torch = model::QueryTorchRuntime();
  const bool cpu = first_device_ == "cpu";
  d.compute = std::string(cpu ? "cpu" : "cuda") + "/" + dtype_name_ + " (" +
              (cpu ? torch.cpu_kernel : "libtorch " + torch.torch_version) + ")";
  return d;
}

size_t ModelRunner::preferred_batch_rows() const {
  const bool gpu = first_device_ != "cpu";
  return static_cast<size_t>(batch_size_) * (gpu ? 8 : 1);
}

void ModelRunner::Encode(std::string_view text, Encoded* out) const {
  const model::Encoding e = tokenizer_->Encode(text, true);
  out->error.clear();
  out->error_type.clear();
  out->ids.assign(e.ids.begin(), e.ids.end());
  if (out->ids.size() > static_cast<size_t>(max_tokens_)) {
    if (!truncation_) {
      out->error = "the text has " + std::to_string(out->ids.size()) +
                   " tokens, more than the model's " + std::to_string(max_tokens_) +
                   " (set truncation: true to cut it)";
      out->error_type = "too_long";
      return;
    }
    // Keep the special tokens at both ends; cut the text between them.
    size_t head = 0, tail = 0;
    while (head < e.special_tokens_mask.size() && e.special_tokens_mask[head]) ++head;
    while (tail < e.special_tokens_mask.size() - head &&
           e.special_tokens_mask[e.special_tokens_mask.size() - 1 - tail]) {
      ++tail;
    }
    if (head + tail >= static_cast<size_t>(max_tokens_)) {
      out->error = "max_length " + std::to_string(max_tokens_) +
                   " leaves no room for the text beside the special tokens";
      out->error_type = "too_long";
      return;
    }
    const size_t keep = static_cast<size_t>(max_tokens_) - head - tail;
    std::vector<int64_t> cut(out->ids.begin(),
                             out->ids.begin() + static_cast<std::ptrdiff_t>(head + keep));
    cut.insert(cut.end(), out->ids.end() - static_cast<std::ptrdiff_t>(tail), out->ids.end());
    out->ids = std::move(cut);
  }
  // Hugging Face's CLIP pools at the end-of-text token.
  out->pool_index = model::PoolIndex(config_, out->ids);
}

void ModelRunner::Run(std::span<model::ModelRow> rows) const {
  if (replicas_.empty())
    throw Error(op_name_ +
                    ": the model was not loaded (prepare only checks it; an alternating run "
                    "loads it in its phase)",
                "");
  // Each calling thread keeps to one replica, spread round-robin.
  static std::atomic<size_t> next{0};
  thread_local size_t slot = next++;
  replicas_[slot % replicas_.size()]->batcher->Run(rows);
}

std::vector<ArgDoc> ModelArgumentDocs(const std::string& truncation_default) {
  return {
      {"dtype", "float32",
       "float32, bfloat16 or float16 (CUDA only); model_params.torch_dtype too"},
      {"max_length", "null",
       "the longest input in tokens (null: what the model's positions allow)"},
      {"truncation", truncation_default,
       "cut over-long inputs (keeping the special tokens); false fails them with error_type "
       "too_long"},
      {"deterministic_shapes", "true",
       "shape-stable batching: a row's result never depends on its batch mates or the thread count "
       "(on the CPU, not on batch_size either); false is refused by this build"},
      {"max_batch_wait_ms", "5", "how long a partial length bucket waits for more rows"},
  };
}

}  // namespace djshard::ops
