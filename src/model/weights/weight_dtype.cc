// The element types of weights files, by safetensors' names.
#include "djshard/model/weights.h"
#include "src/model/weights/formats.h"

namespace djshard::model {

namespace {

struct DTypeInfo {
  WeightDType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {WeightDType::kF32, "F32", 4},   {WeightDType::kF16, "F16", 2}, {WeightDType::kBF16, "BF16", 2},
    {WeightDType::kF64, "F64", 8},   {WeightDType::kI64, "I64", 8}, {WeightDType::kI32, "I32", 4},
    {WeightDType::kI16, "I16", 2},   {WeightDType::kI8, "I8", 1},   {WeightDType::kU8, "U8", 1},
    {WeightDType::kBool, "BOOL", 1},
};

const DTypeInfo& Info(WeightDType dtype) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.dtype == dtype) return d;
  }
  return kDTypes[0];  // unreachable: every enumerator has a row
}

}  // namespace

const char* WeightDTypeName(WeightDType dtype) { return Info(dtype).name; }

size_t WeightDTypeSize(WeightDType dtype) { return Info(dtype).size; }

namespace weights {

bool WeightDTypeFromName(std::string_view name, WeightDType* dtype) {
  for (const DTypeInfo& d : kDTypes) {
    if (name == d.name) {
      *dtype = d.dtype;
      return true;
    }
  }
  return false;
}

}  // namespace weights

}  // namespace djshard::model
