// A fresh directory under /tmp for one test, removed with everything in it.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace djshard::testing {

class TempDir {
 public:
  // A new directory under `parent` (/tmp by default).
  explicit TempDir(const std::string& parent = "/tmp") {
    std::string tmpl = parent + "/djshard-unit-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed in " << parent;
    dir_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& dir() const { return dir_; }
  // Absolute path of `rel` inside the directory.
  std::string Path(const std::string& rel) const { return dir_ + "/" + rel; }
  // Writes a file (parents created) and returns its absolute path.
  std::string Write(const std::string& rel, const std::string& content) const {
    const std::string path = Path(rel);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string Read(const std::string& rel) const {
    std::ifstream in(Path(rel), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  bool Exists(const std::string& rel) const { return std::filesystem::exists(Path(rel)); }
  // Sorted names in a directory of the test ("" for its root).
  std::vector<std::string> List(const std::string& rel = "") const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(rel.empty() ? dir_ : Path(rel))) {
      names.push_back(e.path().filename());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string dir_;
};

}  // namespace djshard::testing
