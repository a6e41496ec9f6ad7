#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace djshard::testing {

// What a user sees from one djshard invocation.
struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the real djshard binary with `args` in `cwd` (default: the test's dir).
CliResult RunDjshard(const std::vector<std::string>& args, const std::string& cwd = "");

// A fresh temporary directory per test, removed afterwards.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Absolute path of `rel` inside the test's directory.
  std::string Path(const std::string& rel) const { return dir_ + "/" + rel; }
  // Writes a file (parents created) and returns its absolute path.
  std::string Write(const std::string& rel, const std::string& content) const;
  std::string Read(const std::string& rel) const;
  bool Exists(const std::string& rel) const;
  // Names in the test directory, for "nothing was left behind" checks.
  std::vector<std::string> List(const std::string& rel = "") const;
  // A recipe with whitespace_normalization_mapper + text_length_filter over `dataset`.
  std::string DemoRecipe(const std::string& dataset = "data.jsonl",
                         const std::string& extra_ops = "") const;
  CliResult Run(const std::vector<std::string>& args) const { return RunDjshard(args, dir_); }

  // Plays the part of a worker that finished every shard unchanged: copies
  // each shard into an attempt directory and publishes its done record.
  void FinishAllShards(const std::string& job_dir, const std::string& hostname = "node-a") const;

  std::string dir_;
};

}  // namespace djshard::testing
