// pytorch_model.bin as torch.save writes it since PyTorch 1.6: a zip archive
// of stored entries <prefix>/data.pkl (the pickled dict), <prefix>/data/<key>
// (one per storage, raw little-endian elements), <prefix>/version and, since
// PyTorch 2.1, <prefix>/byteorder.
#include <unordered_map>

#include "djshard/common/error.h"
#include "src/model/weights/formats.h"
#include "src/model/weights/state_dict_pickle.h"
#include "src/model/weights/zip_archive.h"

namespace djshard::model::weights {

namespace {

constexpr uint64_t kCopyFactor = 4;  // strided copies may hold this many times the archive

// Whether a view of `size` and `stride` covers its elements in row-major
// order without gaps; dimensions of size 1 may have any stride.
bool IsContiguous(const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
  int64_t expected = 1;
  for (size_t i = size.size(); i-- > 0;) {
    if (size[i] == 1) continue;
    if (stride[i] != expected) return false;
    expected *= size[i];
  }
  return true;
}

// Copies the elements of a strided view into contiguous row-major order.
void CopyStrided(const char* base, size_t element_size, const std::vector<int64_t>& size,
                 const std::vector<int64_t>& stride, char* out) {
  const size_t dims = size.size();
  // The innermost dimension is copied in one piece when its elements are adjacent.
  const bool inner_run = dims > 0 && stride[dims - 1] == 1;
  const size_t outer_dims = inner_run ? dims - 1 : dims;
  const size_t run = inner_run ? static_cast<size_t>(size[dims - 1]) * element_size : element_size;
  std::vector<int64_t> index(outer_dims, 0);
  for (;;) {
    int64_t at = 0;
    for (size_t d = 0; d < outer_dims; ++d) at += index[d] * stride[d];
    std::memcpy(out, base + static_cast<size_t>(at) * element_size, run);
    out += run;
    size_t d = outer_dims;
    for (; d > 0; --d) {
      if (++index[d - 1] < size[d - 1]) break;
      index[d - 1] = 0;
    }
    if (d == 0) return;
  }
}

class ArchiveReader {
 public:
  ArchiveReader(std::string_view bytes, const std::string& file) : bytes_(bytes), file_(file) {}

  ParsedWeights Read() {
    if (!bytes_.empty() && static_cast<uint8_t>(bytes_[0]) == 0x80) {
      throw Error(file_, 0,
                  "the file is a pickle in torch.save's legacy format (before PyTorch 1.6), "
                  "which djshard does not read",
                  "save the state dict again with PyTorch 1.6 or later, or convert it to "
                  "safetensors");
    }
    for (ZipEntry& e : ReadZipEntries(bytes_, file_)) entries_.emplace(e.name, e.data);
    std::string prefix;
    for (const auto& [name, data] : entries_) {
      const size_t slash = name.find('/');
      if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0 &&
          (prefix.empty() || name < prefix + "/data.pkl")) {
        prefix = name.substr(0, slash);
      }
    }
    if (prefix.empty()) {
      throw Error(file_, 0, "the zip archive has no <name>/data.pkl: it is not a torch.save file",
                  "djshard reads state dicts saved with torch.save");
    }
    if (const auto it = entries_.find(prefix + "/byteorder");
        it != entries_.end() && it->second != "little") {
      throw Error(file_, 0,
                  "the archive's byteorder is '" + std::string(it->second.substr(0, 16)) +
                      "'; djshard reads little-endian weights only",
                  "save the weights on a little-endian machine, or convert them to safetensors");
    }
    const PickledStateDict dict = UnpickleStateDict(entries_.at(prefix + "/data.pkl"), file_);
    for (const PickledStorage& s : dict.storages) storage_bytes_.push_back(StorageBytes(prefix, s));
    ParsedWeights out;
    std::vector<const char*> data(dict.tensors.size(), nullptr);
    std::vector<bool> resolved(dict.tensors.size(), false);
    for (const auto& [name, index] : dict.entries) {
      const PickledTensor& t = dict.tensors[index];
      const PickledStorage& s = dict.storages[t.storage];
      WeightTensor w;
      w.name = name;
      w.dtype = s.dtype;
      w.shape = t.size;
      w.nbytes = ViewBytes(name, t, s);
      w.file = file_;
      if (!resolved[index]) {
        data[index] = ViewData(name, t, s, w.nbytes, &out.owned);
        resolved[index] = true;
      }
      w.data = data[index];
      out.tensors.push_back(std::move(w));
    }
    return out;
  }

 private:
  std::string_view StorageBytes(const std::string& prefix, const PickledStorage& s) const {
    const std::string entry = prefix + "/data/" + s.key;
    const auto it = entries_.find(entry);
    if (it == entries_.end()) {
      throw Error(file_, 0, "storage " + s.key + " has no entry " + entry + " in the archive",
                  "the file is damaged; download it again");
    }
    const size_t element_size = WeightDTypeSize(s.dtype);
    if (s.numel > it->second.size() / element_size) {
      throw Error(file_, 0,
                  "storage " + s.key + " holds " + std::to_string(it->second.size()) +
                      " bytes, fewer than its " + std::to_string(s.numel) + " " +
                      WeightDTypeName(s.dtype) + " elements",
                  "the file is damaged; download it again");
    }
    return it->second;
  }

  [[noreturn]] void FailView(const std::string& name, const std::string& what) const {
    throw Error(file_, 0, "tensor '" + name + "': " + what,
                "the file is damaged; download it again");
  }

  // product(size) * element size, after checking that every element of the
  // view lies inside its storage.
  size_t ViewBytes(const std::string& name, const PickledTensor& t, const PickledStorage& s) const {
    uint64_t numel = 1;
    uint64_t last = t.offset;  // the highest element index the view reaches
    for (size_t d = 0; d < t.size.size(); ++d) {
      const uint64_t n = static_cast<uint64_t>(t.size[d]);
      if (n == 0) return 0;
      if (__builtin_mul_overflow(numel, n, &numel)) FailView(name, "its size overflows");
      uint64_t reach;
      if (__builtin_mul_overflow(n - 1, static_cast<uint64_t>(t.stride[d]), &reach) ||
          __builtin_add_overflow(last, reach, &last)) {
        FailView(name, "its strides overflow");
      }
    }
    if (last >= s.numel) {
      FailView(name, "its view reaches element " + std::to_string(last) + " of storage " + s.key +
                         ", which holds " + std::to_string(s.numel));
    }
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, WeightDTypeSize(s.dtype), &nbytes)) {
      FailView(name, "its size overflows");
    }
    return static_cast<size_t>(nbytes);
  }

  // Points into the storage when the view is contiguous, else into a copy.
  const char* ViewData(const std::string& name, const PickledTensor& t, const PickledStorage& s,
                       size_t nbytes, std::vector<std::vector<char>>* owned) {
    const char* storage = storage_bytes_[t.storage].data();
    const size_t element_size = WeightDTypeSize(s.dtype);
    if (nbytes == 0) return storage;
    if (IsContiguous(t.size, t.stride)) return storage + t.offset * element_size;
    copied_ += nbytes;
    if (copied_ > kCopyFactor * bytes_.size()) {
      FailView(name, "copying the strided views of the file would take more than " +
                         std::to_string(kCopyFactor) + " times its size");
    }
    owned->emplace_back(nbytes);
    CopyStrided(storage + t.offset * element_size, element_size, t.size, t.stride,
                owned->back().data());
    return owned->back().data();
  }

  std::string_view bytes_;
  const std::string& file_;
  std::unordered_map<std::string, std::string_view> entries_;  // zip entry name -> bytes
  std::vector<std::string_view> storage_bytes_;                // per PickledStateDict::storages
  uint64_t copied_ = 0;  // bytes of strided views copied so far
};

}  // namespace

ParsedWeights ParseTorchZip(std::string_view bytes, const std::string& file) {
  return ArchiveReader(bytes, file).Read();
}

}  // namespace djshard::model::weights
