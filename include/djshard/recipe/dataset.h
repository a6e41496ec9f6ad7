#pragma once

#include <optional>
#include <string>

#include "djshard/recipe/recipe.h"

namespace djshard::recipe {

// The input a command reads: a JSONL file or a directory of them.
struct DatasetPath {
  std::string path;     // absolute, without a trailing slash
  std::string display;  // as the user wrote it, for messages
};

// The dataset of `run` and `prepare`: `override_path` (--dataset-path), else
// the recipe's dataset_path resolved against the recipe's directory. Throws
// Error when neither is given or the path does not exist.
DatasetPath ResolveDatasetPath(const Recipe& recipe,
                               const std::optional<std::string>& override_path);

}  // namespace djshard::recipe
