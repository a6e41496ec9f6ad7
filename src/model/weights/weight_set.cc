// Which weights file of a snapshot directory is read, and the mappings that
// its tensors point into.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <unordered_set>

#include "djshard/common/error.h"
#include "djshard/io/fd.h"
#include "djshard/io/mapped_file.h"
#include "djshard/model/weights.h"
#include "src/model/weights/formats.h"

namespace djshard::model {

namespace {

constexpr const char* kSafetensors = "model.safetensors";
constexpr const char* kSafetensorsIndex = "model.safetensors.index.json";
constexpr const char* kTorchBin = "pytorch_model.bin";
constexpr const char* kTorchBinIndex = "pytorch_model.bin.index.json";

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Join(const std::string& dir, const std::string& name) {
  return !dir.empty() && dir.back() == '/' ? dir + name : dir + "/" + name;
}

using Parser = weights::ParsedWeights (*)(std::string_view, const std::string&);

// What the tensors of a set point into.
struct Holdings {
  std::vector<std::unique_ptr<io::MappedFile>> mappings;
  std::vector<std::vector<char>> owned;  // copies of strided views
};

// Maps dir/name, parses it and appends its tensors.
void ReadWeightsFile(const std::string& dir, const std::string& name, Parser parse,
                     Holdings* storage, std::vector<WeightTensor>* tensors) {
  const std::string path = Join(dir, name);
  auto mapping = std::make_unique<io::MappedFile>(path);
  weights::ParsedWeights parsed = parse(mapping->bytes(), path);
  storage->mappings.push_back(std::move(mapping));
  for (std::vector<char>& o : parsed.owned) storage->owned.push_back(std::move(o));
  for (WeightTensor& t : parsed.tensors) tensors->push_back(std::move(t));
}

// Reads each shard that the index names, once, in the order of first mention.
std::vector<std::string> ReadShards(const std::string& dir, const std::string& index_name,
                                    Parser parse, Holdings* storage,
                                    std::vector<WeightTensor>* tensors) {
  const std::string index_path = Join(dir, index_name);
  const io::MappedFile index(index_path);
  const auto weight_map = weights::ParseShardIndex(index.bytes(), index_path);
  std::vector<std::string> shards;
  std::unordered_set<std::string> seen;
  for (const auto& [tensor, shard] : weight_map) {
    if (!seen.insert(shard).second) continue;
    if (!IsFile(Join(dir, shard))) {
      throw Error(index_path, 0,
                  "the shard " + shard + " of tensor '" + tensor + "' is not in " + dir,
                  "download the whole snapshot again");
    }
    shards.push_back(shard);
    ReadWeightsFile(dir, shard, parse, storage, tensors);
  }
  std::unordered_set<std::string> read;  // "shard path\0tensor name"
  for (const WeightTensor& t : *tensors) read.insert(t.file + '\0' + t.name);
  for (const auto& [tensor, shard] : weight_map) {
    if (read.count(Join(dir, shard) + '\0' + tensor) == 0) {
      throw Error(Join(dir, shard), 0,
                  "tensor '" + tensor + "' is missing, though " + index_name + " places it here",
                  "the snapshot is incomplete or mixed; download it again");
    }
  }
  return shards;
}

}  // namespace

struct WeightSet::Storage : Holdings {};

const std::vector<std::string>& WeightSet::FileNames() {
  static const std::vector<std::string> names = {kSafetensors, kSafetensorsIndex, kTorchBin,
                                                 kTorchBinIndex};
  return names;
}

WeightSet WeightSet::Load(const std::string& dir) {
  WeightSet set;
  if (IsFile(Join(dir, kSafetensors))) {
    ReadWeightsFile(dir, kSafetensors, weights::ParseSafetensors, set.storage_.get(),
                    &set.tensors_);
    set.files_ = {kSafetensors};
    set.format_ = "safetensors";
  } else if (IsFile(Join(dir, kSafetensorsIndex))) {
    set.files_ = ReadShards(dir, kSafetensorsIndex, weights::ParseSafetensors, set.storage_.get(),
                            &set.tensors_);
    set.format_ = "safetensors";
  } else if (IsFile(Join(dir, kTorchBin))) {
    ReadWeightsFile(dir, kTorchBin, weights::ParseTorchZip, set.storage_.get(), &set.tensors_);
    set.files_ = {kTorchBin};
    set.format_ = "pytorch_model.bin";
  } else if (IsFile(Join(dir, kTorchBinIndex))) {
    set.files_ =
        ReadShards(dir, kTorchBinIndex, weights::ParseTorchZip, set.storage_.get(), &set.tensors_);
    set.format_ = "pytorch_model.bin";
  } else {
    std::string names;
    for (const std::string& n : FileNames()) names += (names.empty() ? "" : ", ") + n;
    throw Error(dir, 0, "no weights file: looked for " + names,
                "point the model argument at a Hugging Face snapshot directory that holds its "
                "weights (huggingface-cli download <org/name> on a connected machine)");
  }
  for (size_t i = 0; i < set.tensors_.size(); ++i) {
    const WeightTensor& t = set.tensors_[i];
    const auto [it, added] = set.index_.emplace(t.name, i);
    if (!added) {
      throw Error(t.file, 0, "tensor '" + t.name + "' is also in " + set.tensors_[it->second].file,
                  "the snapshot mixes shards of two checkpoints; download it again");
    }
  }
  return set;
}

WeightSet::WeightSet() : storage_(std::make_unique<Storage>()) {}
WeightSet::WeightSet(WeightSet&&) noexcept = default;
WeightSet& WeightSet::operator=(WeightSet&&) noexcept = default;
WeightSet::~WeightSet() = default;

const WeightTensor* WeightSet::Find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace djshard::model
