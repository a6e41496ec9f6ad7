// The index of a sharded checkpoint, as transformers' save_pretrained writes
// it: {"metadata": {...}, "weight_map": {tensor name: shard file name}}.
#include <nlohmann/json.hpp>

#include "djshard/common/error.h"
#include "src/model/weights/formats.h"

namespace djshard::model::weights {

std::vector<std::pair<std::string, std::string>> ParseShardIndex(std::string_view text,
                                                                 const std::string& file) {
  const char* hint = "the index is damaged; download the snapshot again";
  nlohmann::ordered_json index;
  try {
    index = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file, 0, std::string("the index is not JSON: ") + e.what(), hint);
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw Error(file, 0, "the index has no weight_map object", hint);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) {
      throw Error(file, 0, "weight_map: tensor '" + name + "' has no shard file name", hint);
    }
    const std::string& s = shard.get_ref<const std::string&>();
    // A shard is a file of the snapshot directory, never a path elsewhere.
    if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos ||
        s.find('\0') != std::string::npos) {
      throw Error(file, 0,
                  "weight_map: tensor '" + name + "' names the shard '" + s +
                      "', which is not a file name of the snapshot directory",
                  hint);
    }
    out.emplace_back(name, s);
  }
  if (out.empty()) throw Error(file, 0, "the index's weight_map is empty", hint);
  return out;
}

}  // namespace djshard::model::weights
