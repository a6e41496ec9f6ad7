// The arguments an operator accepts: its own (the built-in table) and
// Data-Juicer's common ones; anything else is an error naming both.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "djshard/common/error.h"
#include "djshard/ops/operator.h"
#include "djshard/ops/registry.h"
#include "djshard/recipe/recipe.h"
#include "src/ops/builtin.h"

namespace djshard::ops {
namespace {

namespace fs = std::filesystem;

class OperatorArgs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/djshard-operator-args-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // Data-Juicer's assets cache, without its word lists.
    ::setenv("DATA_JUICER_ASSETS_CACHE", dir_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("DATA_JUICER_ASSETS_CACHE");
    fs::remove_all(dir_);
  }

  // Loads a recipe of one operator with `args` (YAML lines, each indented by
  // six spaces) and builds that operator.
  std::unique_ptr<Operator> Build(const std::string& op, const std::string& args) {
    const std::string path = dir_ + "/recipe.yaml";
    std::ofstream(path) << "dataset_path: data.jsonl\nprocess:\n  - " << op << ":\n" << args;
    const recipe::Recipe recipe = recipe::LoadRecipe(path);
    const OperatorInfo* info = Registry::Global().Find(op);
    EXPECT_NE(info, nullptr) << op;
    return info->factory(recipe.process.at(0), recipe.text_key);
  }
  // The error text of building `op` with `args`, or "" when it builds.
  std::string ErrorOf(const std::string& op, const std::string& args) {
    try {
      Build(op, args);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::string dir_;
};

// Model operators resolve their model after their arguments pass; no model
// is on this machine, so that lookup is the error they end with.
bool IsModelOperator(const std::string& name) {
  return name == "query_sentiment_detection_mapper" || name == "query_topic_detection_mapper" ||
         name == "text_pair_similarity_filter" || name == "token_num_filter" ||
         name == "perplexity_filter";
}
const char* kNoModel = "which is not on this machine";

// The word-list filters look for Data-Juicer's lists after their arguments
// pass; the assets cache the fixture sets holds none.
bool IsWordListOperator(const std::string& name) {
  return name == "flagged_words_filter" || name == "stopwords_filter";
}
const char* kNoWordList = "word list (*";

TEST_F(OperatorArgs, EveryOperatorAcceptsEveryCommonArgument) {
  // Values of the right type for the ones djshard reads; the rest are ignored.
  std::string args;
  for (const CommonArg& a : CommonArguments()) {
    const std::string name = a.name;
    std::string value = "1";
    if (name.find("_key") != std::string::npos) value = "text";
    if (name == "skip_op_error" || name.find("closed_interval") != std::string::npos ||
        name == "reversed_range" || name == "turbo" || name == "auto_op_parallelism") {
      value = "true";
    }
    if (name == "ray_execution_mode") value = "task";
    if (name == "runtime_env") value = "{pip: [transformers]}";
    if (name == "memory" || name == "mem_required") value = "2GB";
    if (name == "accelerator") value = "cpu";
    if (name == "work_dir" || name == "save_dir" || name == "stats_export_path") value = "/tmp/x";
    args += "      " + name + ": " + value + "\n";
  }
  size_t checked = 0;
  for (const OperatorInfo& op : Registry::Global().All()) {
    if (!op.implemented) continue;
    ++checked;
    if (op.name == "language_id_score_filter") {
      // Its model is not on this machine: the common arguments pass, then the model fails.
      EXPECT_NE(ErrorOf(op.name, args).find("lid.176.bin is not on this machine"),
                std::string::npos);
      continue;
    }
    if (op.name == "expand" || op.name == "gather") {
      // The lineage entries need a name; the common arguments pass.
      EXPECT_NE(ErrorOf(op.name, args).find("'name' is required"), std::string::npos) << op.name;
      continue;
    }
    if (IsWordListOperator(op.name)) {
      EXPECT_NE(ErrorOf(op.name, args).find(kNoWordList), std::string::npos) << op.name;
      continue;
    }
    if (IsModelOperator(op.name)) {
      // The operators' own required arguments, besides the model.
      std::string model_args;
      if (op.name == "text_pair_similarity_filter") {
        model_args = "      text_key_second: second\n";
      } else if (op.name != "token_num_filter" && op.name != "perplexity_filter") {
        model_args = "      zh_to_en_hf_model: null\n";
      }
      EXPECT_NE(ErrorOf(op.name, args + model_args).find(kNoModel), std::string::npos) << op.name;
      continue;
    }
    EXPECT_EQ(ErrorOf(op.name, args), "") << op.name;
  }
  EXPECT_EQ(checked, BuiltinOperators().size() + LineageEntries().size());
}

// An argument name YAML allows but no operator can have (a list, a map,
// null) is refused at the operator's line, not a crash (found by fuzzing).
TEST_F(OperatorArgs, ANameThatIsNotAStringIsRefused) {
  for (const char* args : {"      [a, b]: 1\n", "      {x: 1}: 2\n", "      ~: 3\n"}) {
    const std::string error = ErrorOf("text_length_filter", args);
    EXPECT_NE(error.find("text_length_filter: an argument's name is not a string"),
              std::string::npos)
        << args << error;
  }
}

TEST_F(OperatorArgs, EveryOperatorAcceptsTheArgumentsOfItsTableEntry) {
  for (const BuiltinOperator& b : BuiltinOperators()) {
    std::string args;
    // Null means "the default" to every accessor, so any argument can be given.
    for (const ArgDoc& a : b.args) {
      args += "      " + a.name + (a.name == "text_key_second" ? ": second\n" : ": null\n");
    }
    const std::string error = ErrorOf(b.name, args);
    if (IsModelOperator(b.name)) {
      EXPECT_NE(error.find(kNoModel), std::string::npos) << error;
    } else if (IsWordListOperator(b.name)) {
      EXPECT_NE(error.find(kNoWordList), std::string::npos) << error;
    } else if (b.name == "language_id_score_filter") {
      EXPECT_NE(error.find("lid.176.bin is not on this machine"), std::string::npos) << error;
    } else {
      EXPECT_EQ(error, "") << b.name;
    }
  }
}

TEST_F(OperatorArgs, ATypoIsAnErrorNamingTheOperatorTheArgumentAndItsOwnArguments) {
  EXPECT_EQ(ErrorOf("text_length_filter", "      min_len: 3\n      num_cpu: 1\n"),
            dir_ +
                "/recipe.yaml:5: text_length_filter: argument 'num_cpu' is not an argument of "
                "text_length_filter (its own arguments: min_len, max_len; 'djshard ops "
                "text_length_filter' lists the common ones)");
  EXPECT_EQ(ErrorOf("whitespace_normalization_mapper", "      num_cpus: 1\n      gpus: 1\n"),
            dir_ +
                "/recipe.yaml:5: whitespace_normalization_mapper: argument 'gpus' is not an "
                "argument of whitespace_normalization_mapper (it takes only the common "
                "arguments; 'djshard ops whitespace_normalization_mapper' lists the common ones)");
}

TEST_F(OperatorArgs, AnotherOperatorsArgumentIsRefused) {
  const std::string error = ErrorOf("clean_email_mapper", "      min_len: 3\n");
  EXPECT_NE(error.find("clean_email_mapper: argument 'min_len' is not an argument of "
                       "clean_email_mapper (its own arguments: pattern, repl;"),
            std::string::npos)
      << error;
}

TEST_F(OperatorArgs, RayExecutionModeIsActorOrTaskAsDataJuicerAsserts) {
  EXPECT_EQ(ErrorOf("text_length_filter", "      ray_execution_mode: actor\n"), "");
  EXPECT_EQ(ErrorOf("text_length_filter", "      ray_execution_mode: null\n"), "");
  EXPECT_EQ(ErrorOf("text_length_filter", "      ray_execution_mode: actors\n"),
            dir_ +
                "/recipe.yaml:4: text_length_filter: argument 'ray_execution_mode' must be actor "
                "or task (got 'actors')");
}

TEST_F(OperatorArgs, TextKeyOfTheOperatorOverridesTheRecipes) {
  EXPECT_EQ(Build("text_length_filter", "      text_key: content\n")->text_key(), "content");
  EXPECT_EQ(Build("text_length_filter", "      num_cpus: 2\n")->text_key(), "text");
}

TEST(CommonArguments, EachIsListedOnceWithWhatDjshardDoesWithIt) {
  std::set<std::string> names;
  for (const CommonArg& a : CommonArguments()) {
    EXPECT_TRUE(names.insert(a.name).second) << a.name;
    EXPECT_GT(std::string(a.meaning).size(), 10u) << a.name;
    EXPECT_EQ(FindCommonArgument(a.name), &a);
  }
  // Data-Juicer's Ray scheduling arguments are accepted and ignored, but for
  // the GPU requests, which place the model operators.
  for (const char* ray : {"num_cpus", "memory", "runtime_env", "ray_execution_mode", "cpu_required",
                          "auto_op_parallelism", "adaptive_batching", "turbo", "work_dir"}) {
    ASSERT_NE(FindCommonArgument(ray), nullptr) << ray;
    EXPECT_EQ(FindCommonArgument(ray)->use, CommonArgUse::kIgnored) << ray;
  }
  // mem_required sizes model replicas when preflight is disabled.
  for (const char* honoured :
       {"text_key", "skip_op_error", "batch_size", "num_proc", "num_gpus", "gpu_required",
        "accelerator", "mem_required", "input_columns", "output_columns"}) {
    ASSERT_NE(FindCommonArgument(honoured), nullptr) << honoured;
    EXPECT_EQ(FindCommonArgument(honoured)->use, CommonArgUse::kHonoured) << honoured;
  }
  EXPECT_EQ(FindCommonArgument("num_cpu"), nullptr);
}

}  // namespace
}  // namespace djshard::ops
