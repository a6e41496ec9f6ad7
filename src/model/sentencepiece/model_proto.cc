#include "src/model/sentencepiece/model_proto.h"

#include <cstdint>
#include <cstring>

#include "djshard/common/error.h"

namespace djshard::model::sentencepiece {

namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

// One protobuf message's fields, in order.
class WireReader {
 public:
  WireReader(std::string_view bytes, const std::string& path) : rest_(bytes), path_(path) {}

  // The next field's number and wire type; false at the end of the message.
  bool Next(uint32_t* field, WireType* type) {
    if (rest_.empty()) return false;
    const uint64_t key = Varint();
    *field = static_cast<uint32_t>(key >> 3);
    const uint32_t wire = key & 7;
    if (wire != kVarint && wire != kFixed64 && wire != kLength && wire != kFixed32) {
      Fail("wire type " + std::to_string(wire) + " of field " + std::to_string(*field));
    }
    *type = static_cast<WireType>(wire);
    return true;
  }

  uint64_t Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty()) Fail("a number cut short");
      const auto byte = static_cast<uint8_t>(rest_[0]);
      rest_.remove_prefix(1);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    Fail("a number longer than 10 bytes");
  }

  std::string_view Bytes() {
    const uint64_t size = Varint();
    if (size > rest_.size()) Fail("a field longer than the file");
    const std::string_view bytes = rest_.substr(0, size);
    rest_.remove_prefix(size);
    return bytes;
  }

  float Float() {
    if (rest_.size() < 4) Fail("a number cut short");
    float value;
    std::memcpy(&value, rest_.data(), 4);  // little-endian, as x86-64 and aarch64 are
    rest_.remove_prefix(4);
    return value;
  }

  void Skip(WireType type) {
    switch (type) {
      case kVarint:
        Varint();
        return;
      case kLength:
        Bytes();
        return;
      case kFixed64:
      case kFixed32: {
        const size_t size = type == kFixed64 ? 8 : 4;
        if (rest_.size() < size) Fail("a number cut short");
        rest_.remove_prefix(size);
        return;
      }
    }
  }

  [[noreturn]] void Fail(const std::string& what) const {
    throw Error(path_, 0, "not a SentencePiece model: " + what + " in its protobuf data",
                "copy the model file again; it is damaged or truncated");
  }

 private:
  std::string_view rest_;
  const std::string& path_;
};

void ParsePiece(std::string_view bytes, const std::string& path, Piece* piece) {
  WireReader r(bytes, path);
  uint32_t field;
  WireType type;
  while (r.Next(&field, &type)) {
    if (field == 1 && type == kLength) {
      piece->text = std::string(r.Bytes());
    } else if (field == 2 && type == kFixed32) {
      piece->score = r.Float();
    } else if (field == 3 && type == kVarint) {
      const uint64_t value = r.Varint();
      if (value >= 1 && value <= 6) piece->type = static_cast<PieceType>(value);
    } else {
      r.Skip(type);
    }
  }
}

void ParseTrainerSpec(std::string_view bytes, const std::string& path, ModelProto* model) {
  WireReader r(bytes, path);
  uint32_t field;
  WireType type;
  while (r.Next(&field, &type)) {
    if (type != kVarint || (field != 3 && field != 24 && field != 35)) {
      r.Skip(type);
      continue;
    }
    const uint64_t value = r.Varint();
    if (field == 3) {
      if (value >= 1 && value <= 4) model->model_type = static_cast<ModelType>(value);
    } else if (field == 24) {
      model->treat_whitespace_as_suffix = value != 0;
    } else {
      model->byte_fallback = value != 0;
    }
  }
}

void ParseNormalizerSpec(std::string_view bytes, const std::string& path, ModelProto* model) {
  WireReader r(bytes, path);
  uint32_t field;
  WireType type;
  while (r.Next(&field, &type)) {
    if (field == 2 && type == kLength) {
      model->precompiled_charsmap = std::string(r.Bytes());
    } else if (field >= 3 && field <= 5 && type == kVarint) {
      const bool value = r.Varint() != 0;
      (field == 3   ? model->add_dummy_prefix
       : field == 4 ? model->remove_extra_whitespaces
                    : model->escape_whitespaces) = value;
    } else {
      r.Skip(type);
    }
  }
}

}  // namespace

ModelProto ParseModelProto(std::string_view bytes, const std::string& path) {
  ModelProto model;
  WireReader r(bytes, path);
  uint32_t field;
  WireType type;
  while (r.Next(&field, &type)) {
    if (type != kLength || field < 1 || field > 3) {
      r.Skip(type);
    } else if (field == 1) {
      ParsePiece(r.Bytes(), path, &model.pieces.emplace_back());
    } else if (field == 2) {
      ParseTrainerSpec(r.Bytes(), path, &model);
    } else {
      ParseNormalizerSpec(r.Bytes(), path, &model);
    }
  }
  return model;
}

}  // namespace djshard::model::sentencepiece
