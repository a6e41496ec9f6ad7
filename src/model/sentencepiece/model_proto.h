#pragma once
// The fields of a SentencePiece .model file (a serialized ModelProto, from
// sentencepiece_model.proto) that encoding uses, read from the protobuf wire
// format.

#include <string>
#include <string_view>
#include <vector>

namespace djshard::model::sentencepiece {

// ModelProto.SentencePiece.Type.
enum class PieceType { kNormal = 1, kUnknown, kControl, kUserDefined, kUnused, kByte };
// TrainerSpec.ModelType.
enum class ModelType { kUnigram = 1, kBpe, kWord, kChar };

struct Piece {
  std::string text;
  float score = 0;
  PieceType type = PieceType::kNormal;
};

// Defaults are the proto's.
struct ModelProto {
  std::vector<Piece> pieces;
  ModelType model_type = ModelType::kUnigram;
  bool treat_whitespace_as_suffix = false;
  bool byte_fallback = false;
  std::string precompiled_charsmap;  // NormalizerSpec's
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Reads `bytes` as protobuf does: the last value of a repeated scalar field
// wins, fields it does not know and enum values out of range are skipped.
// Not the wire format (a truncated varint or field): an Error naming `path`.
ModelProto ParseModelProto(std::string_view bytes, const std::string& path);

}  // namespace djshard::model::sentencepiece
