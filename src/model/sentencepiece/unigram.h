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

#include "djshard/model/sentencepiece.h"
#include "src/model/sentencepiece/model_proto.h"
#include "src/model/sentencepiece/normalizer.h"

namespace djshard::model {

class SentencePieceUnigram {
 public:
  // The encoder of `model`, or nullptr with `*why_not` set when it is not one
  // this encoder reproduces (not unigram, byte fallback, user-defined
  // symbols). Broken normalization rules: an Error naming `path`.
  static std::unique_ptr<const SentencePieceUnigram> Build(const sentencepiece::ModelProto& model,
                                                           const std::string& path,
                                                           std::string* why_not);

  // The pieces of `text` into scratch->pieces, viewing scratch->normalized.
  void Encode(std::string_view text, SentencePieceScratch* scratch) const;

 private:
  // A double-array trie of the pieces: a child of node n by byte c is node
  // base(n) + c if its check is n.
  struct TrieNode {
    int32_t base = 0;
    int32_t check = -1;  // the parent; -1 for a free slot
    int32_t id = -1;     // the piece that ends here, if any
    float score = 0;     // its score
  };

  SentencePieceUnigram(const sentencepiece::ModelProto& model, const std::string& path);
  void BuildTrie(const sentencepiece::ModelProto& model);
  void InsertChildren(int32_t node, const std::vector<std::pair<std::string_view, int32_t>>& keys,
                      size_t lo, size_t hi, size_t depth, const sentencepiece::ModelProto& model);
  // A base for `parent`'s children by `labels` (sorted) whose slots are free;
  // the slots are taken.
  int32_t PlaceChildren(int32_t parent, const std::vector<unsigned char>& labels);
  void Viterbi(std::string_view normalized, std::vector<SentencePieceBestPath>* paths) const;

  sentencepiece::Normalizer normalizer_;
  std::vector<TrieNode> trie_;
  std::vector<bool> base_used_;  // bases given to a node already
  size_t first_free_ = 1;        // no free slot before it
  int32_t unk_id_ = -1;
  float unk_score_ = 0;
};

}  // namespace djshard::model
