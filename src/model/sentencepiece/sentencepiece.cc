#include "djshard/model/sentencepiece.h"

#include <sentencepiece_processor.h>

#include <map>
#include <mutex>

#include "djshard/common/error.h"
#include "src/model/sentencepiece/model_proto.h"
#include "src/model/sentencepiece/unigram.h"

namespace djshard::model {

struct SentencePiece::Library {
  ::sentencepiece::SentencePieceProcessor processor;
};

SentencePiece::SentencePiece() : library_(std::make_unique<Library>()) {}
SentencePiece::~SentencePiece() = default;

std::shared_ptr<const SentencePiece> SentencePiece::Load(const std::string& path,
                                                         const std::string& hint) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const SentencePiece>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[path];
  if (slot) return slot;
  std::shared_ptr<SentencePiece> model(new SentencePiece());
  // The library checks the model (its pieces, its self-test samples) and
  // encodes what djshard's encoder does not reproduce.
  ::sentencepiece::util::Status status;
  try {
    status = model->library_->processor.Load(path);
  } catch (const std::exception& e) {  // its trie builder throws on some damaged models
    throw Error(path, 0, std::string("not a SentencePiece model: ") + e.what(), hint);
  }
  if (!status.ok()) throw Error(path, 0, "not a SentencePiece model: " + status.ToString(), hint);
  model->path_ = path;
  const std::string serialized = model->library_->processor.serialized_model_proto();
  model->unigram_ = SentencePieceUnigram::Build(sentencepiece::ParseModelProto(serialized, path),
                                                path, &model->why_library_);
  slot = std::move(model);
  return slot;
}

const std::vector<std::string_view>& SentencePiece::Encode(std::string_view text,
                                                           SentencePieceScratch* scratch) const {
  if (unigram_) {
    unigram_->Encode(text, scratch);
    return scratch->pieces;
  }
  scratch->library_pieces.clear();
  const auto status = library_->processor.Encode(text, &scratch->library_pieces);
  if (!status.ok()) {
    throw Error(path_, 0, "SentencePiece could not encode a text: " + status.ToString());
  }
  scratch->pieces.assign(scratch->library_pieces.begin(), scratch->library_pieces.end());
  return scratch->pieces;
}

std::vector<std::string> SentencePiece::Pieces(std::string_view text) const {
  thread_local SentencePieceScratch scratch;
  const auto& pieces = Encode(text, &scratch);
  return {pieces.begin(), pieces.end()};
}

std::vector<std::string> SentencePiece::LibraryPieces(std::string_view text) const {
  std::vector<std::string> pieces;
  const auto status = library_->processor.Encode(text, &pieces);
  if (!status.ok()) {
    throw Error(path_, 0, "SentencePiece could not encode a text: " + status.ToString());
  }
  return pieces;
}

}  // namespace djshard::model
