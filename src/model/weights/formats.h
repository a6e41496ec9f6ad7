// The weight file formats parsed from bytes in memory: WeightSet::Load maps
// the files and calls these; the fuzz harness calls them on any bytes.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "djshard/model/weights.h"

namespace djshard::model::weights {

static_assert(std::endian::native == std::endian::little,
              "weights files hold little-endian elements, handed out as they are");

// Tensors read from one file's bytes. Each tensor's data points into those
// bytes (which must outlive it) or into `owned`. Moving a ParsedWeights keeps
// the pointers valid: the owned buffers do not move.
struct ParsedWeights {
  std::vector<WeightTensor> tensors;
  std::vector<std::vector<char>> owned;  // copies of strided views
};

// A safetensors file: 8-byte little-endian header length, JSON header, data.
// `file` names the file in errors and in each tensor.
ParsedWeights ParseSafetensors(std::string_view bytes, const std::string& file);

// A torch.save zip archive (PyTorch 1.6 and later) holding a dict of tensors.
// Strided views are copied, at most 4 times the archive's size in all.
ParsedWeights ParseTorchZip(std::string_view bytes, const std::string& file);

// The weight_map of a sharded checkpoint's index (model.safetensors.index.json,
// pytorch_model.bin.index.json): tensor name -> shard file name, in the
// index's order. A shard name must be a plain file name of the directory.
std::vector<std::pair<std::string, std::string>> ParseShardIndex(std::string_view text,
                                                                 const std::string& file);

// Whether a safetensors dtype name is known; sets *dtype.
bool WeightDTypeFromName(std::string_view name, WeightDType* dtype);

// Little-endian integer at `p` (no alignment needed).
template <typename T>
T LoadLittleEndian(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace djshard::model::weights
