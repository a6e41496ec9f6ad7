// Prepare against a Disk that fails at chosen steps: nothing may be published.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "djshard/common/error.h"
#include "djshard/store/prepare.h"

namespace djshard::store {
namespace {

namespace fs = std::filesystem;

class FailingDisk : public io::Disk {
 public:
  explicit FailingDisk(std::string fail_on) : fail_on_(std::move(fail_on)) {}
  void WriteAtomic(const std::string& path, std::string_view content) override {
    if (fail_on_ == "manifest" && path.ends_with("manifest.json")) {
      throw Error(path, 0, "cannot write: No space left on device");
    }
    io::Disk::WriteAtomic(path, content);
  }
  void Rename(const std::string& from, const std::string& to) override {
    // The publishing rename: the staging directory onto the job dir.
    if (fail_on_ == "publish" && to.ends_with("/job")) {
      throw Error(to, 0, "cannot rename: Input/output error");
    }
    io::Disk::Rename(from, to);
  }

 private:
  std::string fail_on_;
};

class PrepareDisk : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/djshard-disk-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/data.jsonl") << "{\"text\":\"a\"}\n{\"text\":\"b\"}\n";
    std::ofstream(dir_ + "/r.yaml") << "process:\n  - text_length_filter:\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_P(PrepareDisk, AFailedStepLeavesNoJobAndNoStaging) {
  FailingDisk disk(GetParam());
  PrepareRequest req;
  req.config_path = dir_ + "/r.yaml";
  req.dataset_path = dir_ + "/data.jsonl";
  req.job_dir = dir_ + "/job";
  req.num_shards = 2;
  EXPECT_THROW(Prepare(req, disk), Error);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"data.jsonl", "r.yaml"}));
  // The same request then succeeds on a healthy disk.
  EXPECT_FALSE(Prepare(req).already_prepared);
  EXPECT_TRUE(fs::exists(dir_ + "/job/manifest.json"));
}

INSTANTIATE_TEST_SUITE_P(Steps, PrepareDisk, ::testing::Values("manifest", "publish"));

}  // namespace
}  // namespace djshard::store
