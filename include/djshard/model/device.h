#pragma once

#include <optional>
#include <string>
#include <vector>

namespace djshard::model {

// Where the command line puts model operators (`--device`, `--gpus`), for the
// whole process. Set once by the CLI before a plan is compiled.
struct DeviceSettings {
  enum class Request { kAuto, kCpu, kCuda };
  Request request = Request::kAuto;
  // --gpus: indices among the visible CUDA devices (empty: all of them).
  std::vector<int> gpus;
  // prepare: check arguments, model paths and configs, but load no weights
  // and place nothing (the head node may have no GPU).
  bool check_only = false;
  // run jobs whose model stages may alternate: choose the devices, but load
  // no weights (the operator is built again, loaded, for the phase that runs it).
  bool defer_weights = false;
};

void SetDeviceSettings(const DeviceSettings& settings);
const DeviceSettings& GetDeviceSettings();

// Sets check_only for its lifetime (prepare compiles the plan this way).
class CheckOnlyScope {
 public:
  CheckOnlyScope();
  ~CheckOnlyScope();
  CheckOnlyScope(const CheckOnlyScope&) = delete;
  CheckOnlyScope& operator=(const CheckOnlyScope&) = delete;

 private:
  bool previous_;
};

// Sets defer_weights for its lifetime.
class DeferWeightsScope {
 public:
  DeferWeightsScope();
  ~DeferWeightsScope();
  DeferWeightsScope(const DeferWeightsScope&) = delete;
  DeferWeightsScope& operator=(const DeferWeightsScope&) = delete;

 private:
  bool previous_;
};

// "cpu" | "cuda" | "auto" for --device; nullopt for anything else.
std::optional<DeviceSettings::Request> ParseDeviceRequest(const std::string& name);

// The CUDA devices model replicas may use: "cuda:N" for each visible device
// (libtorch's count, which follows CUDA_VISIBLE_DEVICES), restricted by
// --gpus. Empty when the build has no CUDA or no device is visible.
std::vector<std::string> UsableCudaDevices();

// Why no CUDA device can be used, for messages: this libtorch has no CUDA,
// or none is visible ("CUDA_VISIBLE_DEVICES=\"...\"" or "... unset").
std::string DescribeNoCuda();

}  // namespace djshard::model
