#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace djshard::model {

// One encoded text (or pair of texts), laid out as Hugging Face's `Encoding`.
struct Encoding {
  std::vector<uint32_t> ids;
  std::vector<std::string> tokens;
  std::vector<uint32_t> type_ids;
  // [start, end) in Unicode code points of the original text of the sequence
  // the token belongs to (a pair's tokens count from the start of the pair).
  // Tokens added by the post-processor have [0, 0].
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
  // 1 only for tokens the post-processor added.
  std::vector<uint8_t> special_tokens_mask;
};

namespace tokenizer {
class Pipeline;
}

// A Hugging Face `tokenizer.json` (normalizer, pre-tokenizer, model,
// post-processor, added tokens) that encodes exactly as Hugging Face's own
// `tokenizers` library does with truncation and padding switched off: the
// file's "truncation" and "padding" are not applied (they belong to the
// operator) and its "decoder" is not read. Loading refuses, naming the
// component and the file, any component type or option it does not implement.
// Immutable after loading and safe to use from many threads at once.
class Tokenizer {
 public:
  // `path` is a tokenizer.json (or tokenizer.json.zst) file, or a directory
  // holding one. Throws djshard::Error naming the file on any problem.
  static std::shared_ptr<const Tokenizer> Load(const std::string& path);
  // The same from the text of a tokenizer.json; `source` names it in errors.
  static std::shared_ptr<const Tokenizer> FromJson(std::string_view json,
                                                   const std::string& source);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Encodes `text` (valid UTF-8), with the post-processor's special tokens
  // when `add_special_tokens`. Never throws on any valid UTF-8 input except
  // for a regular expression that exceeds its match limit (djshard::Error).
  Encoding Encode(std::string_view text, bool add_special_tokens) const;
  // Encodes `text` and `pair` as one pair of sequences.
  Encoding EncodePair(std::string_view text, std::string_view pair, bool add_special_tokens) const;

  // The id of a token of the vocabulary or of the added tokens.
  std::optional<uint32_t> TokenToId(std::string_view token) const;
  // The file or source the tokenizer came from.
  const std::string& source() const;

 private:
  explicit Tokenizer(std::unique_ptr<tokenizer::Pipeline> pipeline);
  std::unique_ptr<tokenizer::Pipeline> pipeline_;
};

}  // namespace djshard::model
