// Fuzzes the weights file readers on bytes in memory: the safetensors header,
// the zip directory of pytorch_model.bin, the restricted unpickler and the
// shard index. Any bytes are read or refused with djshard's Error, never a
// crash or another exception; every tensor read lies inside the input or a
// copy (each of its bytes is touched, so ASan sees an out-of-bounds view).
#include <cstdint>
#include <string>
#include <string_view>

#include "djshard/common/error.h"
#include "src/model/weights/formats.h"
#include "src/model/weights/state_dict_pickle.h"

namespace {

volatile uint8_t sink;

void Touch(const djshard::model::weights::ParsedWeights& parsed) {
  uint8_t sum = 0;
  for (const auto& t : parsed.tensors) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    for (size_t i = 0; i < t.nbytes; ++i) sum = static_cast<uint8_t>(sum + p[i]);
  }
  sink = sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace djshard;
  using namespace djshard::model::weights;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto refused_or_read = [](auto&& read) {
    try {
      read();
    } catch (const Error&) {
    }
  };
  refused_or_read([&] { Touch(ParseSafetensors(bytes, "model.safetensors")); });
  refused_or_read([&] { Touch(ParseTorchZip(bytes, "pytorch_model.bin")); });
  refused_or_read([&] { UnpickleStateDict(bytes, "pytorch_model.bin"); });
  refused_or_read([&] { ParseShardIndex(bytes, "model.safetensors.index.json"); });
  return 0;
}
