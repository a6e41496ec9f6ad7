// Loading Data-Juicer YAML recipes: the shapes accepted, the global keys, and
// errors that name the recipe file and line.
#include "djshard/recipe/recipe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "djshard/common/error.h"
#include "tests/unit/temp_dir.h"

namespace djshard::recipe {
namespace {

namespace fs = std::filesystem;

class RecipeTest : public ::testing::Test {
 protected:
  Recipe Load(const std::string& yaml) { return LoadRecipe(tmp_.Write("r.yaml", yaml)); }
  std::optional<Error> Refusal(const std::string& yaml) {
    try {
      Load(yaml);
    } catch (const Error& e) {
      return e;
    }
    return std::nullopt;
  }
  testing::TempDir tmp_;
};

TEST_F(RecipeTest, LoadsOperatorsInOrderWithTheirLines) {
  const Recipe r = Load(
      "# a comment\n"
      "dataset_path: data/in.jsonl\n"
      "export_path: out.jsonl\n"
      "process:\n"
      "  - whitespace_normalization_mapper:\n"
      "  - text_length_filter:\n"
      "      min_len: 10\n"
      "  - clean_email_mapper: {}\n");
  EXPECT_EQ(r.path, tmp_.Path("r.yaml"));
  EXPECT_EQ(r.directory, tmp_.dir());
  EXPECT_EQ(r.dataset_path, "data/in.jsonl");
  EXPECT_EQ(r.export_path, "out.jsonl");
  ASSERT_EQ(r.process.size(), 3u);
  EXPECT_EQ(r.process[0].name, "whitespace_normalization_mapper");
  EXPECT_EQ(r.process[0].line, 5);
  EXPECT_EQ(r.process[1].name, "text_length_filter");
  EXPECT_EQ(r.process[1].line, 6);
  EXPECT_EQ(r.process[2].name, "clean_email_mapper");
  EXPECT_EQ(r.process[2].line, 8);
}

TEST_F(RecipeTest, GlobalKeysHaveDataJuicersDefaults) {
  const Recipe r = Load("process:\n  - clean_email_mapper:\n");
  EXPECT_EQ(r.dataset_path, std::nullopt);
  EXPECT_EQ(r.export_path, std::nullopt);
  EXPECT_EQ(r.executor_type, std::nullopt);
  EXPECT_EQ(r.text_key, "text");
  EXPECT_EQ(r.image_key, "images");
  EXPECT_EQ(r.audio_key, "audios");
  EXPECT_EQ(r.video_key, "videos");
  EXPECT_EQ(r.np, std::nullopt);
  EXPECT_TRUE(r.skip_op_error);
  EXPECT_TRUE(r.keep_stats_in_res_ds);
}

TEST_F(RecipeTest, ReadsEveryGlobalKey) {
  const Recipe r = Load(
      "executor_type: ray\n"
      "text_keys: content\n"
      "image_key: img\n"
      "audio_key: aud\n"
      "video_key: vid\n"
      "np: 6\n"
      "skip_op_error: false\n"
      "keep_stats_in_res_ds: false\n"
      "process:\n  - clean_email_mapper:\n");
  EXPECT_EQ(r.executor_type, "ray");
  EXPECT_EQ(r.text_key, "content");
  EXPECT_EQ(r.image_key, "img");
  EXPECT_EQ(r.audio_key, "aud");
  EXPECT_EQ(r.video_key, "vid");
  EXPECT_EQ(r.np, 6);
  EXPECT_FALSE(r.skip_op_error);
  EXPECT_FALSE(r.keep_stats_in_res_ds);
}

TEST_F(RecipeTest, TextKeyWinsOverTextKeys) {
  EXPECT_EQ(Load("text_key: a\ntext_keys: b\nprocess:\n  - clean_email_mapper:\n").text_key, "a");
  EXPECT_EQ(Load("text_keys: b\ntext_key: a\nprocess:\n  - clean_email_mapper:\n").text_key, "a");
}

TEST_F(RecipeTest, NullGlobalsKeepTheirDefaults) {
  const Recipe r = Load(
      "dataset_path:\nnp: ~\nskip_op_error: null\ntext_key:\nprocess:\n  - clean_email_mapper:\n");
  EXPECT_EQ(r.dataset_path, std::nullopt);
  EXPECT_EQ(r.np, std::nullopt);
  EXPECT_TRUE(r.skip_op_error);
  EXPECT_EQ(r.text_key, "text");
}

TEST_F(RecipeTest, AMissingFileIsRefusedNamingIt) {
  try {
    LoadRecipe(tmp_.Path("absent.yaml"));
    ADD_FAILURE() << "a missing recipe was loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), tmp_.Path("absent.yaml"));
    EXPECT_EQ(e.line(), 0u);
    EXPECT_EQ(e.message(), "recipe is not a readable file");
  }
  try {
    LoadRecipe(tmp_.dir());
    ADD_FAILURE() << "a directory was loaded as a recipe";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "recipe is not a readable file");
  }
}

TEST_F(RecipeTest, InvalidYamlNamesTheLine) {
  const std::optional<Error> e = Refusal("process:\n  - clean_email_mapper:\n  - [unclosed\n");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), tmp_.Path("r.yaml"));
  EXPECT_GE(e->line(), 3u);
  EXPECT_EQ(e->message().rfind("invalid YAML: ", 0), 0u) << e->message();
}

struct Shape {
  const char* yaml;
  uint64_t line;
  const char* message;
};

class RecipeShape : public RecipeTest, public ::testing::WithParamInterface<Shape> {};

TEST_P(RecipeShape, IsRefusedWithFileLineAndReason) {
  const std::optional<Error> e = Refusal(GetParam().yaml);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->file(), tmp_.Path("r.yaml"));
  EXPECT_EQ(e->line(), GetParam().line);
  EXPECT_EQ(e->message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Refusals, RecipeShape,
    ::testing::Values(
        Shape{"- a\n- b\n", 0, "recipe must be a YAML mapping"},
        Shape{"dataset_path: x\n", 0, "recipe has no 'process' list"},
        Shape{"dataset_path: x\nprocess:\n", 0, "recipe has no 'process' list"},
        Shape{"dataset_path: x\nprocess:\n  a: 1\n", 3, "'process' must be a list of operators"},
        Shape{"process:\n  - clean_email_mapper:\n  - a: 1\n    b: 2\n", 3,
              "process[1] must be a mapping with exactly one key"},
        Shape{"process:\n  - just_a_name\n", 2,
              "process[0] must be a mapping with exactly one key"},
        Shape{"process:\n  - [a, b]: 1\n", 2, "process[0] must be a mapping with exactly one key"},
        Shape{"process:\n  - clean_email_mapper: [1, 2]\n", 2,
              "arguments of 'clean_email_mapper' must be a mapping"},
        Shape{"process:\n  - text_length_filter:\n      - min_len\n", 3,
              "arguments of 'text_length_filter' must be a mapping"},
        Shape{"np: four\nprocess:\n  - clean_email_mapper:\n", 1, "'np' must be an integer"},
        Shape{"process:\n  - clean_email_mapper:\nskip_op_error: maybe\n", 3,
              "'skip_op_error' must be true or false"},
        Shape{"keep_stats_in_res_ds: [1]\nprocess:\n  - clean_email_mapper:\n", 1,
              "'keep_stats_in_res_ds' must be true or false"},
        Shape{"dataset_path: [a, b]\nprocess:\n  - clean_email_mapper:\n", 1,
              "'dataset_path' must be a string"},
        Shape{"process:\n  - clean_email_mapper:\ntext_keys:\n  k: v\n", 4,
              "'text_keys' must be a string"}));

class ResolveRecipePathTest : public RecipeTest {
 protected:
  void SetUp() override {
    char buf[4096];
    ASSERT_NE(::getcwd(buf, sizeof buf), nullptr);
    old_cwd_ = buf;
    tmp_.Write("recipes/r.yaml", "process:\n  - clean_email_mapper:\n");
    tmp_.Write("recipes/beside.jsonl", "");
    tmp_.Write("cwd/only_here.jsonl", "");
    tmp_.Write("cwd/beside.jsonl", "");
    ASSERT_EQ(::chdir(tmp_.Path("cwd").c_str()), 0);
    recipe_ = LoadRecipe("../recipes/r.yaml");
  }
  void TearDown() override { ASSERT_EQ(::chdir(old_cwd_.c_str()), 0); }
  std::string old_cwd_;
  Recipe recipe_;
};

TEST_F(ResolveRecipePathTest, TheRecipeDirectoryIsAbsoluteEvenForARelativeRecipePath) {
  EXPECT_EQ(recipe_.path, "../recipes/r.yaml");
  EXPECT_EQ(recipe_.directory, tmp_.Path("recipes"));
}

TEST_F(ResolveRecipePathTest, AbsolutePathsStayAsTheyAreNormalized) {
  EXPECT_EQ(ResolveRecipePath(recipe_, "/data/./x/../in.jsonl"), "/data/in.jsonl");
}

TEST_F(ResolveRecipePathTest, TheRecipeDirectoryComesBeforeTheCurrentDirectory) {
  EXPECT_EQ(ResolveRecipePath(recipe_, "beside.jsonl"), tmp_.Path("recipes/beside.jsonl"));
}

TEST_F(ResolveRecipePathTest, ThenTheCurrentDirectory) {
  EXPECT_EQ(ResolveRecipePath(recipe_, "./only_here.jsonl"), tmp_.Path("cwd/only_here.jsonl"));
}

TEST_F(ResolveRecipePathTest, NeitherExistingGivesTheRecipeDirectoryCandidate) {
  EXPECT_EQ(ResolveRecipePath(recipe_, "sub/../nowhere.jsonl"), tmp_.Path("recipes/nowhere.jsonl"));
}

}  // namespace
}  // namespace djshard::recipe
