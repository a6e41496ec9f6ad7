// djshard tokenize: encode JSONL texts with a Hugging Face tokenizer.json and
// print what Hugging Face's tokenizers library would give, one line per record.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "djshard/common/error.h"
#include "djshard/io/input.h"
#include "djshard/io/json_text.h"
#include "djshard/model/tokenizer.h"

namespace djshard::cli {

namespace {

class StdinSource : public io::ByteSource {
 public:
  size_t Read(char* buf, size_t capacity) override {
    while (true) {
      const ssize_t n = ::read(0, buf, capacity);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) ThrowSystemError("<stdin>", "read");
    }
  }
};

// A JSON string as the tokenizer vectors write it: UTF-8, with \uXXXX for
// control characters, U+007F..U+009F, U+2028 and U+2029.
void AppendString(std::string* out, const std::string& s) {
  io::AppendJsonStringEscapingSeparators(out, s);
}

template <typename T>
void AppendNumbers(std::string* out, const std::vector<T>& v) {
  out->push_back('[');
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out->push_back(',');
    out->append(std::to_string(v[i]));
  }
  out->push_back(']');
}

void AppendEncoding(std::string* out, const model::Encoding& e) {
  out->append("{\"ids\":");
  AppendNumbers(out, e.ids);
  out->append(",\"tokens\":[");
  for (size_t i = 0; i < e.tokens.size(); ++i) {
    if (i) out->push_back(',');
    AppendString(out, e.tokens[i]);
  }
  out->append("],\"type_ids\":");
  AppendNumbers(out, e.type_ids);
  out->append(",\"offsets\":[");
  for (size_t i = 0; i < e.offsets.size(); ++i) {
    if (i) out->push_back(',');
    out->append("[" + std::to_string(e.offsets[i].first) + "," +
                std::to_string(e.offsets[i].second) + "]");
  }
  out->append("],\"special_tokens_mask\":");
  AppendNumbers(out, e.special_tokens_mask);
  out->append("}\n");
}

struct TokenizeArgs {
  std::string tokenizer;
  std::string text_key = "text";
  std::string pair_key = "pair";
  bool no_special_tokens = false;
  std::string input = "-";
};

void Tokenize(const TokenizeArgs& a) {
  const auto tok = model::Tokenizer::Load(a.tokenizer);
  const std::string display = a.input == "-" ? "<stdin>" : a.input;
  std::unique_ptr<io::ByteSource> source;
  if (a.input == "-") {
    source = std::make_unique<StdinSource>();
  } else {
    source = io::OpenInput(a.input);
  }
  io::LineReader lines(std::move(source), display);
  std::string out;
  std::string_view line;
  while (lines.Next(&line)) {
    const uint64_t n = lines.line_number();
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(display, n, "not a JSON line", "each line must be one JSON object");
    }
    if (!record.is_object()) {
      throw Error(display, n, "the record is not a JSON object",
                  "each line must be one JSON object");
    }
    const auto text = record.find(a.text_key);
    if (text == record.end() || !text->is_string()) {
      throw Error(display, n, "the record has no string \"" + a.text_key + "\"",
                  "give the text field with --text-key");
    }
    const auto pair = record.find(a.pair_key);
    if (pair != record.end() && !pair->is_null() && !pair->is_string()) {
      throw Error(display, n, "\"" + a.pair_key + "\" is neither a string nor null",
                  "a pair is a string; absent or null means a single text");
    }
    const bool special = !a.no_special_tokens;
    const std::string& t = text->get_ref<const std::string&>();
    const model::Encoding e =
        (pair == record.end() || pair->is_null())
            ? tok->Encode(t, special)
            : tok->EncodePair(t, pair->get_ref<const std::string&>(), special);
    AppendEncoding(&out, e);
    if (out.size() > (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

void AddTokenizeCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Encode JSONL texts with a Hugging Face tokenizer.json, one JSON line of ids, tokens, "
      "type_ids, offsets and special_tokens_mask per record");
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer.json, or a directory holding one")
      ->required();
  cmd->add_option("--text-key", a->text_key, "Field holding the text")->capture_default_str();
  cmd->add_option("--pair-key", a->pair_key,
                  "Field holding the second text of a pair (absent or null: a single text)")
      ->capture_default_str();
  cmd->add_flag("--no-special-tokens", a->no_special_tokens,
                "Encode without the post-processor's special tokens");
  cmd->add_option("input", a->input, "JSONL file (.gz/.zst read too), or - for stdin")
      ->capture_default_str();
  cmd->callback([a, exit_code]() {
    Tokenize(*a);
    *exit_code = kExitOk;
  });
}

}  // namespace djshard::cli
