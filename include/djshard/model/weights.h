#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace djshard::model {

// Element types of a weights file. Model code accepts kF32, kF16 and kBF16;
// the others are read so that a file holding them (position_ids buffers are
// int64) loads, and refused only when an architecture needs such a tensor.
enum class WeightDType { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

// "F32", "F16", "BF16", "F64", "I64", ... (safetensors' names).
const char* WeightDTypeName(WeightDType dtype);
size_t WeightDTypeSize(WeightDType dtype);

// One tensor of a weight set: contiguous row-major little-endian elements.
// `data` is not necessarily aligned to the element size (a safetensors header
// may have any length): read elements with memcpy.
struct WeightTensor {
  std::string name;
  WeightDType dtype = WeightDType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // valid while the WeightSet lives
  size_t nbytes = 0;           // product(shape) * WeightDTypeSize(dtype)
  std::string file;            // the path of the file it was read from, for error messages
};

// The weights of a Hugging Face snapshot directory, read without running any
// code from the files:
//   model.safetensors; model.safetensors.index.json with its shards;
//   pytorch_model.bin (torch.save's zip format, read by a restricted
//   unpickler that knows only collections.OrderedDict,
//   torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and the
//   torch.*Storage types; any other global is an Error);
//   pytorch_model.bin.index.json with its shards.
// safetensors is preferred when both are present. Files are memory-mapped;
// tensors point into the mappings when their bytes are contiguous (offset
// views included), and into owned copies otherwise (a transposed or strided
// view of a pickled storage). Tensors that share a pickled storage (tied
// weights) share its bytes.
class WeightSet {
 public:
  // Throws djshard::Error naming the file (and the tensor, when one is at
  // fault) for a missing weights file, a bad header, a truncated file, an
  // unknown dtype or a forbidden pickle global.
  static WeightSet Load(const std::string& dir);

  // The names Load looks for, in order of preference.
  static const std::vector<std::string>& FileNames();

  WeightSet(WeightSet&&) noexcept;
  WeightSet& operator=(WeightSet&&) noexcept;
  ~WeightSet();

  // nullptr when the set has no tensor of that name.
  const WeightTensor* Find(const std::string& name) const;
  const std::vector<WeightTensor>& tensors() const { return tensors_; }
  // The files read, in order, as names inside the directory
  // ("model.safetensors", or the shards named by the index).
  const std::vector<std::string>& files() const { return files_; }
  // "safetensors" or "pytorch_model.bin".
  const std::string& format() const { return format_; }

 private:
  WeightSet();
  struct Storage;  // mappings and owned buffers
  std::unique_ptr<Storage> storage_;
  std::vector<WeightTensor> tensors_;
  std::vector<std::string> files_;
  std::string format_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in tensors_
};

}  // namespace djshard::model
