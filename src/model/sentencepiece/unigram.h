#pragma once
// sentencepiece 0.1.97's unigram encoder (Model::EncodeOptimized): the best
// path over the normalized text, its float scores summed and compared as it
// does (a piece's sum in double, stored as float), the first best kept on a
// tie, unknown characters at the lowest score less 10, and runs of
// unknown pieces merged as SentencePieceProcessor::Encode merges them.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/common/byte_trie.h"
#include "djshard/model/sentencepiece.h"
#include "src/model/sentencepiece/model_proto.h"
#include "src/model/sentencepiece/normalizer.h"

namespace djshard::model {

class SentencePieceUnigram {
 public:
  // The encoder of `model`, or nullptr with `*why_not` set when it is not one
  // this encoder reproduces (not unigram, byte fallback, user-defined
  // symbols, a piece with a NUL byte, normalization rules it cannot read).
  static std::unique_ptr<const SentencePieceUnigram> Build(const sentencepiece::ModelProto& model,
                                                           const std::string& path,
                                                           std::string* why_not);

  // The pieces of `text` into scratch->pieces, viewing scratch->normalized.
  void Encode(std::string_view text, SentencePieceScratch* scratch) const;

 private:
  SentencePieceUnigram(const sentencepiece::ModelProto& model, const std::string& path);
  void Viterbi(std::string_view normalized, std::vector<SentencePieceBestPath>* paths) const;

  sentencepiece::Normalizer normalizer_;
  ByteTrie pieces_;            // normal pieces -> id
  std::vector<float> scores_;  // by id
  int32_t unk_id_ = -1;
  float unk_score_ = 0;
};

}  // namespace djshard::model
