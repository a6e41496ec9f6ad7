// Top-level keys of Data-Juicer's config in a recipe: the ones djshard uses
// and the executor settings it accepts and ignores.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "djshard/common/error.h"
#include "djshard/recipe/recipe.h"

namespace djshard::recipe {
namespace {

namespace fs = std::filesystem;

class RecipeKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/djshard-recipe-keys-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& text) {
    const std::string path = dir_ + "/recipe.yaml";
    std::ofstream(path) << text;
    return path;
  }
  std::string ErrorOf(const std::string& text) {
    try {
      LoadRecipe(Write(text));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string dir_;
};

TEST_F(RecipeKeys, DataJuicersExecutorSettingsAreAcceptedAndIgnored) {
  const Recipe recipe =
      LoadRecipe(Write("project_name: elastic-sharding-gpu-demo\n"
                       "dataset_path: data.jsonl\n"
                       "export_path: out.jsonl\n"
                       "executor_type: ray\n"
                       "ray_address: local\n"
                       "override_num_blocks: 64\n"
                       "np: 3\n"
                       "open_tracer: true\n"
                       "op_list_to_trace: []\n"
                       "trace_num: 10\n"
                       "use_cache: false\n"
                       "ds_cache_dir: /tmp/cache\n"
                       "cache_compress: zstd\n"
                       "use_checkpoint: false\n"
                       "op_fusion: false\n"
                       "fusion_strategy: probe\n"
                       "work_dir: ./outputs\n"
                       "export_shard_size: 0\n"
                       "export_in_parallel: false\n"
                       "open_monitor: false\n"
                       "process:\n"
                       "  - text_length_filter:\n"));
  EXPECT_EQ(recipe.executor_type, "ray");
  EXPECT_EQ(recipe.np, 3);
  EXPECT_EQ(recipe.dataset_path, "data.jsonl");
  ASSERT_EQ(recipe.process.size(), 1u);
}

TEST_F(RecipeKeys, TextKeysMayBeAListOfWhichTheFirstIsUsed) {
  const std::string ops = "process:\n  - text_length_filter:\n";
  EXPECT_EQ(LoadRecipe(Write("text_keys: [content, title]\n" + ops)).text_key, "content");
  EXPECT_EQ(LoadRecipe(Write("text_keys: content\n" + ops)).text_key, "content");
  EXPECT_EQ(LoadRecipe(Write(ops)).text_key, "text");
  EXPECT_EQ(ErrorOf("text_keys: []\n" + ops),
            dir_ + "/recipe.yaml:1: 'text_keys' must be a string or a list of strings");
}

TEST_F(RecipeKeys, NpIsAPositiveNumberOfThreads) {
  const std::string ops = "process:\n  - text_length_filter:\n";
  EXPECT_EQ(ErrorOf("np: 0\n" + ops), dir_ +
                                          "/recipe.yaml:1: 'np' must be a positive integer (it is "
                                          "the number of threads; got 0)");
  EXPECT_EQ(ErrorOf("np: four\n" + ops), dir_ + "/recipe.yaml:1: 'np' must be an integer");
}

}  // namespace
}  // namespace djshard::recipe
