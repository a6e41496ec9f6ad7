#pragma once

#include <string>
#include <vector>

namespace djshard::io {

// One JSONL input file found under a dataset path.
struct InputCandidate {
  std::string path;           // absolute
  std::string display_path;   // as the user would name it in an error
  std::string relative_path;  // to the dataset directory (the file name for a file)
};

// A single file, or every file below a directory (recursively, hidden ones
// too) whose name ends in .jsonl, .jsonl.gz or .jsonl.zst (any case), sorted
// by relative path in byte order. Throws Error when none is found.
std::vector<InputCandidate> DiscoverInputs(const std::string& dataset_path,
                                           const std::string& display_root);

}  // namespace djshard::io
