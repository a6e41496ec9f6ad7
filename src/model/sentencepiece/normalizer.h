#pragma once
// SentencePiece's normalizer, as sentencepiece 0.1.97 applies it before
// encoding: the precompiled character map (a darts-clone double array of the
// longest rules, and their NUL-ended replacements), then the whitespace
// rules of the model's NormalizerSpec.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/model/sentencepiece/model_proto.h"

namespace djshard::model::sentencepiece {

class Normalizer {
 public:
  // A character map that is not a double array followed by its replacement
  // texts: an Error naming `path` (SentencePieceUnigram::Build then leaves
  // the model to the library).
  Normalizer(const ModelProto& model, const std::string& path);

  // Normalizer::Normalize: `input` normalized into `out`.
  void Normalize(std::string_view input, std::string* out) const;

 private:
  // The replacement of the longest rule at the start of `input` (else its
  // first character, U+FFFD for a byte that starts no UTF-8 character) and
  // the bytes of `input` it stands for.
  std::pair<std::string_view, size_t> NormalizePrefix(std::string_view input) const;
  // The replacement text at `offset` of the character map, up to its NUL.
  std::string_view Replacement(uint32_t offset) const;
  void AppendSpace(std::string* out) const;

  std::vector<uint32_t> units_;  // the double array
  std::string replacements_;     // NUL-ended replacement strings
  bool treat_whitespace_as_suffix_;
  bool add_dummy_prefix_;
  bool remove_extra_whitespaces_;
  bool escape_whitespaces_;
};

}  // namespace djshard::model::sentencepiece
