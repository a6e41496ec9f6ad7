// The restricted unpickler of torch.save's data.pkl: it builds a dict of
// tensor descriptions and never calls anything a pickle names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "djshard/model/weights.h"

namespace djshard::model::weights {

// A storage named by a persistent id ('storage', torch.<T>Storage, key,
// location, numel): its bytes are the archive entry <prefix>/data/<key>.
struct PickledStorage {
  std::string key;
  WeightDType dtype = WeightDType::kF32;
  uint64_t numel = 0;  // elements of dtype
};

// torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, ...):
// a strided view of a storage, in elements.
struct PickledTensor {
  size_t storage = 0;  // index into PickledStateDict::storages
  uint64_t offset = 0;
  std::vector<int64_t> size;
  std::vector<int64_t> stride;
};

struct PickledStateDict {
  std::vector<PickledStorage> storages;  // one per (key, dtype)
  std::vector<PickledTensor> tensors;    // one per tensor object (tied names share one)
  // The dict's names, in its order (a name set twice keeps its first place
  // and its last tensor, as a Python dict does) -> index into tensors.
  std::vector<std::pair<std::string, size_t>> entries;
};

// Unpickles `pickle` (the data.pkl of the archive `file`) with the opcodes of
// pickle protocols 2 to 5 that a state dict uses, and only the globals
// collections.OrderedDict, torch._utils._rebuild_tensor_v2,
// torch._utils._rebuild_parameter and torch.<T>Storage. Throws Error naming
// `file` for any other global or opcode, a malformed pickle, or a top object
// that is not a flat dict of name -> tensor. Checks nothing about storages
// beyond their description (the archive reader does).
PickledStateDict UnpickleStateDict(std::string_view pickle, const std::string& file);

}  // namespace djshard::model::weights
