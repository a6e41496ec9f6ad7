// djshard tokenize: what a user sees on stdout and stderr.
#include <nlohmann/json.hpp>
#include <sstream>

#include "djshard/io/input.h"
#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

using nlohmann::json;

std::string TokenizerDir(const std::string& family) {
  return std::string(DJSHARD_SOURCE_DIR) + "/tests/data/tokenizers/" + family;
}

std::vector<std::string> VectorLines(const std::string& family) {
  auto in = io::OpenInput(TokenizerDir(family) + "/vectors.jsonl.zst");
  std::string all;
  char buf[1 << 16];
  size_t n;
  while ((n = in->Read(buf, sizeof buf)) > 0) all.append(buf, n);
  std::vector<std::string> lines;
  std::istringstream s(all);
  std::string line;
  while (std::getline(s, line)) lines.push_back(line);
  return lines;
}

class TokenizeCli : public CliTest {};

// The output lines are the vectors' own bytes from "ids" on, with and without
// special tokens, for single texts and pairs.
TEST_F(TokenizeCli, PrintsWhatHuggingFacePrintsByteForByte) {
  for (const std::string family : {"roberta-base", "qwen3"}) {
    const auto lines = VectorLines(family);
    for (const bool special : {true, false}) {
      std::string input, want;
      for (const auto& line : lines) {
        const json v = json::parse(line);
        if (v["add_special_tokens"].get<bool>() != special) continue;
        json record = {{"text", v["text"]}};
        if (!v["pair"].is_null()) record["pair"] = v["pair"];
        input += record.dump() + "\n";
        want.push_back('{');
        want.append(line, line.find("\"ids\":"), std::string::npos);
        want.push_back('\n');
      }
      Write("in.jsonl", input);
      std::vector<std::string> args = {"tokenize", "--tokenizer", TokenizerDir(family)};
      if (!special) args.push_back("--no-special-tokens");
      args.push_back(Path("in.jsonl"));
      const CliResult r = Run(args);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_TRUE(r.out == want) << family << " special=" << special << ": output differs";
    }
  }
}

TEST_F(TokenizeCli, CustomKeysAndNullPairMeanASingleText) {
  Write("in.jsonl",
        "{\"q\": \"Hello world\", \"p\": null}\n{\"q\": \"Hello\", \"p\": \"world\"}\n");
  const CliResult r = Run({"tokenize", "--tokenizer", TokenizerDir("roberta-base"), "--text-key",
                           "q", "--pair-key", "p", Path("in.jsonl")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"ids\":[0,31414,232,2],\"tokens\":[\"<s>\",\"Hello\",\"\xC4\xA0world\",\"</s>\"],"
            "\"type_ids\":[0,0,0,0],\"offsets\":[[0,0],[0,5],[6,11],[0,0]],"
            "\"special_tokens_mask\":[1,0,0,1]}\n"
            "{\"ids\":[0,31414,2,2,8331,2],\"tokens\":[\"<s>\",\"Hello\",\"</s>\",\"</s>\","
            "\"world\",\"</s>\"],\"type_ids\":[0,0,0,0,0,0],\"offsets\":[[0,0],[0,5],[0,0],"
            "[0,0],[0,5],[0,0]],\"special_tokens_mask\":[1,0,1,1,0,1]}\n");
}

TEST_F(TokenizeCli, BadLineIsAnErrorNamingFileAndLine) {
  Write("in.jsonl", "{\"text\": \"fine\"}\n{\"text\": 7}\n");
  const CliResult r =
      Run({"tokenize", "--tokenizer", TokenizerDir("bert-base-uncased"), Path("in.jsonl")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ERROR: " + Path("in.jsonl") + ":2: the record has no string \"text\" ("),
            std::string::npos)
      << r.err;

  Write("bad.jsonl", "not json\n");
  const CliResult r2 =
      Run({"tokenize", "--tokenizer", TokenizerDir("bert-base-uncased"), Path("bad.jsonl")});
  EXPECT_EQ(r2.exit_code, 2);
  EXPECT_NE(r2.err.find("ERROR: " + Path("bad.jsonl") + ":1: not a JSON line ("), std::string::npos)
      << r2.err;
}

TEST_F(TokenizeCli, MissingTokenizerIsAnError) {
  Write("in.jsonl", "{\"text\": \"x\"}\n");
  const CliResult r = Run({"tokenize", "--tokenizer", Path("nowhere"), Path("in.jsonl")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ERROR: " + Path("nowhere") + ": no tokenizer file here"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace djshard::testing
