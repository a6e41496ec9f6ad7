#include "djshard/io/discover.h"

#include <algorithm>
#include <filesystem>

#include "djshard/common/error.h"
#include "djshard/common/text.h"

namespace djshard::io {

namespace fs = std::filesystem;

namespace {

bool IsJsonlName(const std::string& name) {
  return EndsWithIgnoreCase(name, ".jsonl") || EndsWithIgnoreCase(name, ".jsonl.gz") ||
         EndsWithIgnoreCase(name, ".jsonl.zst");
}

}  // namespace

std::vector<InputCandidate> DiscoverInputs(const std::string& dataset_path,
                                           const std::string& display_root) {
  std::vector<InputCandidate> found;
  std::error_code ec;
  if (fs::is_directory(dataset_path, ec)) {
    for (auto it = fs::recursive_directory_iterator(
             dataset_path, fs::directory_options::follow_directory_symlink, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      const std::string name = it->path().filename().string();
      if (!IsJsonlName(name)) continue;
      const std::string rel = it->path().lexically_relative(dataset_path).string();
      found.push_back({it->path().string(), (fs::path(display_root) / rel).string(), rel});
    }
    if (ec) throw Error(display_root, 0, "cannot list directory: " + ec.message());
    std::sort(found.begin(), found.end(), [](const InputCandidate& a, const InputCandidate& b) {
      return a.relative_path < b.relative_path;
    });
  } else if (IsJsonlName(dataset_path)) {
    found.push_back({dataset_path, display_root, fs::path(dataset_path).filename().string()});
  }
  if (found.empty()) {
    throw Error(display_root, 0, "no input files found",
                "djshard reads files ending in .jsonl, .jsonl.gz or .jsonl.zst");
  }
  return found;
}

}  // namespace djshard::io
