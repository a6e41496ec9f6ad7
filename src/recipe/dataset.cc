#include "djshard/recipe/dataset.h"

#include <filesystem>

#include "djshard/common/error.h"

namespace djshard::recipe {

namespace fs = std::filesystem;

DatasetPath ResolveDatasetPath(const Recipe& recipe,
                               const std::optional<std::string>& override_path) {
  DatasetPath out;
  if (override_path) {
    out.display = *override_path;
    out.path = fs::absolute(*override_path).lexically_normal().string();
  } else if (recipe.dataset_path) {
    out.path = ResolveRecipePath(recipe, *recipe.dataset_path);
    out.display = out.path;
  } else {
    throw Error(recipe.path, 0, "no dataset path",
                "pass --dataset-path or set dataset_path in the recipe");
  }
  while (out.path.size() > 1 && out.path.back() == '/') out.path.pop_back();
  std::error_code ec;
  if (!fs::exists(out.path, ec)) {
    throw Error(out.display, 0, "dataset path does not exist",
                "check --dataset-path or dataset_path");
  }
  return out;
}

}  // namespace djshard::recipe
