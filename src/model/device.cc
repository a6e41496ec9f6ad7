#include "djshard/model/device.h"

#include <cstdlib>

#include "djshard/model/runtime.h"

namespace djshard::model {

namespace {
DeviceSettings& Settings() {
  static DeviceSettings settings;
  return settings;
}
}  // namespace

void SetDeviceSettings(const DeviceSettings& settings) { Settings() = settings; }
const DeviceSettings& GetDeviceSettings() { return Settings(); }

CheckOnlyScope::CheckOnlyScope() : previous_(Settings().check_only) {
  Settings().check_only = true;
}
CheckOnlyScope::~CheckOnlyScope() { Settings().check_only = previous_; }

DeferWeightsScope::DeferWeightsScope() : previous_(Settings().defer_weights) {
  Settings().defer_weights = true;
}
DeferWeightsScope::~DeferWeightsScope() { Settings().defer_weights = previous_; }

std::optional<DeviceSettings::Request> ParseDeviceRequest(const std::string& name) {
  if (name == "cpu") return DeviceSettings::Request::kCpu;
  if (name == "cuda" || name == "gpu") return DeviceSettings::Request::kCuda;
  if (name == "auto") return DeviceSettings::Request::kAuto;
  return std::nullopt;
}

std::vector<std::string> UsableCudaDevices() {
  const TorchRuntimeInfo info = QueryTorchRuntime();
  std::vector<std::string> devices;
  if (!info.loaded || !info.cuda_available) return devices;
  const std::vector<int>& wanted = GetDeviceSettings().gpus;
  for (int i = 0; i < info.cuda_device_count; ++i) {
    bool ok = wanted.empty();
    for (int w : wanted) ok = ok || w == i;
    if (ok) devices.push_back("cuda:" + std::to_string(i));
  }
  return devices;
}

std::string DescribeNoCuda() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string why = v == nullptr ? std::string("CUDA_VISIBLE_DEVICES unset")
                                 : std::string("CUDA_VISIBLE_DEVICES=\"") + v + "\"";
  const TorchRuntimeInfo info = QueryTorchRuntime();
  if (info.loaded && !info.cuda_built) {
    why += "; this djshard's libtorch " + info.torch_version +
           " is built without CUDA, see docs/operations.md, Build options";
  }
  return "no CUDA device is visible (" + why + ")";
}

}  // namespace djshard::model
