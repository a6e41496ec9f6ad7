// Fuzzes djshard's SentencePiece reader and encoder: the input is a model's
// bytes (after a 3-byte little-endian length) and a text to encode with it.
// Any model bytes are read or refused with djshard's Error; a model that is
// read encodes any text into pieces that cover its normalized form, without
// reading outside its buffers.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "djshard/common/error.h"
#include "src/model/sentencepiece/model_proto.h"
#include "src/model/sentencepiece/unigram.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace djshard::model;
  if (size < 3) return 0;
  const size_t model_size = std::min<size_t>(data[0] | (data[1] << 8) | (data[2] << 16), size - 3);
  // Copies, so that ASan sees a read past the end of either.
  const std::string model_bytes(reinterpret_cast<const char*>(data) + 3, model_size);
  const std::string text(reinterpret_cast<const char*>(data) + 3 + model_size,
                         size - 3 - model_size);
  try {
    const auto proto = sentencepiece::ParseModelProto(model_bytes, "fuzz.model");
    std::string why_not;
    const auto unigram = SentencePieceUnigram::Build(proto, "fuzz.model", &why_not);
    if (!unigram) return 0;
    SentencePieceScratch scratch;
    unigram->Encode(text, &scratch);
    size_t covered = 0;
    for (const std::string_view piece : scratch.pieces) {
      if (piece.empty() || piece.data() != scratch.normalized.data() + covered) std::abort();
      covered += piece.size();
    }
    if (covered != scratch.normalized.size()) std::abort();
  } catch (const djshard::Error&) {
  }
  return 0;
}
