// model.safetensors (https://huggingface.co/docs/safetensors): an unsigned
// 64-bit little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the data, with offsets relative to its start.
#include <nlohmann/json.hpp>

#include "djshard/common/error.h"
#include "src/model/weights/formats.h"

namespace djshard::model::weights {

namespace {

// safetensors' own reader refuses headers over 100 MB.
constexpr uint64_t kMaxHeaderSize = 100'000'000;

const char* kHint = "the file is damaged or was cut short; download it again";

uint64_t NonNegativeInteger(const nlohmann::ordered_json& v, const std::string& file,
                            const std::string& what) {
  if (!v.is_number_unsigned()) throw Error(file, 0, what + " is not a non-negative integer", kHint);
  return v.get<uint64_t>();
}

WeightTensor ParseEntry(const std::string& name, const nlohmann::ordered_json& entry,
                        std::string_view data, const std::string& file) {
  const std::string where = "tensor '" + name + "'";
  if (!entry.is_object()) throw Error(file, 0, where + ": header entry is not an object", kHint);
  WeightTensor t;
  t.name = name;
  t.file = file;
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    throw Error(file, 0, where + ": no dtype", kHint);
  }
  if (!WeightDTypeFromName(dtype->get_ref<const std::string&>(), &t.dtype)) {
    throw Error(file, 0, where + ": unknown dtype " + dtype->get<std::string>(),
                "djshard reads F64, F32, F16, BF16, I64, I32, I16, I8, U8 and BOOL tensors");
  }
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) throw Error(file, 0, where + ": no shape", kHint);
  uint64_t numel = 1;
  for (const auto& d : *shape) {
    const uint64_t n = NonNegativeInteger(d, file, where + ": a dimension");
    if (n > INT64_MAX || __builtin_mul_overflow(numel, n, &numel)) {
      throw Error(file, 0, where + ": its shape overflows", kHint);
    }
    t.shape.push_back(static_cast<int64_t>(n));
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2) {
    throw Error(file, 0, where + ": data_offsets is not [begin, end]", kHint);
  }
  const uint64_t begin = NonNegativeInteger((*offsets)[0], file, where + ": data_offsets");
  const uint64_t end = NonNegativeInteger((*offsets)[1], file, where + ": data_offsets");
  if (begin > end || end > data.size()) {
    throw Error(file, 0,
                where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                    "] lie outside the " + std::to_string(data.size()) + " bytes of data",
                kHint);
  }
  uint64_t nbytes;
  if (__builtin_mul_overflow(numel, WeightDTypeSize(t.dtype), &nbytes)) {
    throw Error(file, 0, where + ": its shape overflows", kHint);
  }
  if (nbytes != end - begin) {
    throw Error(file, 0,
                where + ": data_offsets hold " + std::to_string(end - begin) +
                    " bytes, but its shape and dtype need " + std::to_string(nbytes),
                kHint);
  }
  t.data = data.data() + begin;
  t.nbytes = static_cast<size_t>(nbytes);
  return t;
}

}  // namespace

ParsedWeights ParseSafetensors(std::string_view bytes, const std::string& file) {
  if (bytes.size() < 8) {
    throw Error(file, 0, "safetensors: the file is too short for a header length", kHint);
  }
  const uint64_t header_size = LoadLittleEndian<uint64_t>(bytes.data());
  if (header_size > bytes.size() - 8 || header_size > kMaxHeaderSize) {
    throw Error(file, 0,
                "safetensors: the header length " + std::to_string(header_size) +
                    " exceeds the file's " + std::to_string(bytes.size()) + " bytes",
                kHint);
  }
  const std::string_view header_text = bytes.substr(8, header_size);
  const std::string_view data = bytes.substr(8 + header_size);
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(header_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file, 0, std::string("safetensors: the header is not JSON: ") + e.what(), kHint);
  }
  if (!header.is_object()) {
    throw Error(file, 0, "safetensors: the header is not a JSON object", kHint);
  }
  ParsedWeights out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    out.tensors.push_back(ParseEntry(name, entry, data, file));
  }
  return out;
}

}  // namespace djshard::model::weights
