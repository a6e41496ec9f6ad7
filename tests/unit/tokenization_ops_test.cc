// `tokenization: true` in Data-Juicer's text filters: the errors of a model
// that is not on the machine, and where models are found (the vectors of
// tests/data/ops-tokenization.jsonl run in operator_vectors_test.cc).
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "djshard/common/error.h"
#include "djshard/io/input.h"
#include "djshard/io/record.h"
#include "djshard/ops/operator.h"
#include "djshard/ops/registry.h"

namespace djshard::ops {
namespace {

using nlohmann::json;

const std::string kData = DJSHARD_SOURCE_DIR "/tests/data";

std::unique_ptr<Operator> MakeOp(const std::string& name, const std::string& args_yaml) {
  const OperatorInfo* info = Registry::Global().Find(name);
  EXPECT_NE(info, nullptr) << name;
  recipe::OperatorSpec spec;
  spec.name = name;
  spec.line = 7;
  spec.args = recipe::OperatorArgs(YAML::Load(args_yaml), "recipe.yaml", name, 7);
  return info->factory(spec, "text");
}

// Sets an environment variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

std::string LoadError(const std::string& op, const std::string& args) {
  try {
    MakeOp(op, args);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), 2);
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizationOps, MissingHuggingFaceTokenizerListsEveryPathSearched) {
  const std::string dir = ::testing::TempDir() + "/hf_missing_" + std::to_string(::getpid());
  ScopedEnv hub("HF_HUB_CACHE", dir + "/hub");
  ScopedEnv home("DJSHARD_MODEL_HOME", dir + "/models");
  const std::string err = LoadError("alphanumeric_filter", "{tokenization: true}");
  EXPECT_NE(err.find("recipe.yaml:7: alphanumeric_filter: argument 'hf_tokenizer' names the "
                     "Hugging Face tokenizer 'EleutherAI/pythia-6.9b-deduped', which is not on "
                     "this machine"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("\n  " + dir + "/models/EleutherAI--pythia-6.9b-deduped\n"), std::string::npos)
      << err;
  EXPECT_NE(err.find("\n  " + dir + "/hub/models--EleutherAI--pythia-6.9b-deduped/refs/main"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("huggingface-cli download EleutherAI/pythia-6.9b-deduped"), std::string::npos)
      << err;
}

TEST(TokenizationOps, HuggingFaceCacheLayoutIsFound) {
  const std::string dir = ::testing::TempDir() + "/hf_cache_" + std::to_string(::getpid());
  const std::string repo = dir + "/hub/models--acme--tiny";
  ASSERT_EQ(
      std::system(("mkdir -p " + repo + "/refs " + repo + "/snapshots/abc123 && cp " + kData +
                   "/tokenizers/roberta-base/tokenizer.json.zst " + repo + "/snapshots/abc123/")
                      .c_str()),
      0);
  { std::ofstream(repo + "/refs/main") << "abc123"; }
  ScopedEnv hub("HF_HUB_CACHE", dir + "/hub");
  const auto op = MakeOp("alphanumeric_filter", "{tokenization: true, hf_tokenizer: acme/tiny}");
  io::Record record;
  record.Assign(R"({"text": "Hello world"})");
  Sample sample(&record);
  EXPECT_TRUE(static_cast<const Filter&>(*op).Process(sample));
  sample.Commit(true);
  std::string out;
  record.Serialize(&out);
  // 10 letters over the 2 tokens "Hello" and "Ġworld".
  EXPECT_EQ(json::parse(out)["__dj__stats__"]["alpha_token_ratio"].get<double>(), 5.0);
  std::system(("rm -rf " + dir).c_str());
}

TEST(TokenizationOps, MissingSentencePieceModelNamesLangAndPaths) {
  const std::string dir = ::testing::TempDir() + "/sp_missing_" + std::to_string(::getpid());
  ScopedEnv home("DJSHARD_MODEL_HOME", dir);
  ScopedEnv cache("DATA_JUICER_MODELS_CACHE", dir + "/dj");
  const std::string err = LoadError("words_num_filter", "{lang: zh, tokenization: true}");
  EXPECT_NE(err.find("recipe.yaml:1: words_num_filter: argument 'tokenization' needs "
                     "Data-Juicer's SentencePiece model zh.sp.model for lang 'zh'"),
            std::string::npos)
      << err;
  // DJSHARD_MODEL_HOME, then Data-Juicer's check_model: the name itself, the cache.
  EXPECT_NE(err.find("\n  " + dir + "/zh.sp.model\n  zh.sp.model\n  " + dir + "/dj/zh.sp.model"),
            std::string::npos)
      << err;
}

TEST(TokenizationOps, MissingKenLmModelNamesLangAndEveryPathSearched) {
  const std::string dir = ::testing::TempDir() + "/lm_missing_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kData + "/sentencepiece/en.sp.model", dir + "/zh.sp.model",
                             std::filesystem::copy_options::overwrite_existing);
  ScopedEnv home("DJSHARD_MODEL_HOME", dir);
  ScopedEnv external("DATA_JUICER_EXTERNAL_MODELS_HOME", " /ext/a : /ext/b");
  ScopedEnv cache("DATA_JUICER_MODELS_CACHE", dir + "/dj");
  const std::string err = LoadError("perplexity_filter", "{lang: zh}");
  EXPECT_NE(err.find("recipe.yaml:1: perplexity_filter: argument 'lang' needs Data-Juicer's "
                     "KenLM model zh.arpa.bin for lang 'zh'"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("\n  " + dir + "/zh.arpa.bin\n  zh.arpa.bin\n  /ext/a/zh.arpa.bin\n  " +
                     "/ext/b/zh.arpa.bin\n  " + dir + "/dj/zh.arpa.bin"),
            std::string::npos)
      << err;
  std::filesystem::remove_all(dir);
}

TEST(TokenizationOps, DamagedKenLmModelIsAnErrorNamingTheFile) {
  const std::string dir = ::testing::TempDir() + "/lm_damaged_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kData + "/sentencepiece/en.sp.model", dir + "/zz.sp.model",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir + "/zz.arpa.bin") << "mmap lm http://kheafield.com/code format version 5\n";
  ScopedEnv home("DJSHARD_MODEL_HOME", dir);
  const std::string err = LoadError("perplexity_filter", "{lang: zz}");
  EXPECT_NE(err.find(dir + "/zz.arpa.bin: not a KenLM model djshard can read"), std::string::npos)
      << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace djshard::ops
