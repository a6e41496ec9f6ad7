#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/ops/dedup.h"

namespace djshard::ops::dedup {

// A SentencePiece model named by tokenizer_model (Data-Juicer's
// prepare_sentencepiece_model). Loaded once per process and path; thread-safe.
class SentencePieceTokenizer {
 public:
  // An unreadable or invalid model is an Error naming `path`.
  static std::shared_ptr<const SentencePieceTokenizer> Load(const std::string& path);
  ~SentencePieceTokenizer();

  // encode(text, out_type=str): the pieces of `text`, into *pieces.
  void Pieces(std::string_view text, std::vector<std::string>* pieces) const;

 private:
  struct Processor;
  SentencePieceTokenizer();
  std::unique_ptr<Processor> processor_;
  std::string path_;
};

}  // namespace djshard::ops::dedup
