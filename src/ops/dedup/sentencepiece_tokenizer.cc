#include "src/ops/dedup/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <map>
#include <mutex>

#include "djshard/common/error.h"

namespace djshard::ops::dedup {

struct SentencePieceTokenizer::Processor {
  sentencepiece::SentencePieceProcessor sp;
};

SentencePieceTokenizer::SentencePieceTokenizer() : processor_(std::make_unique<Processor>()) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::shared_ptr<const SentencePieceTokenizer> SentencePieceTokenizer::Load(
    const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const SentencePieceTokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[path];
  if (!slot) {
    std::shared_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
    const auto status = t->processor_->sp.Load(path);
    if (!status.ok()) {
      throw Error(path, 0, "not a SentencePiece model: " + status.ToString(),
                  "give tokenizer_model the path of a SentencePiece .model file");
    }
    t->path_ = path;
    slot = std::move(t);
  }
  return slot;
}

void SentencePieceTokenizer::Pieces(std::string_view text, std::vector<std::string>* pieces) const {
  pieces->clear();
  const auto status = processor_->sp.Encode(text, pieces);
  if (!status.ok()) {
    throw Error(path_, 0, "SentencePiece could not encode a text: " + status.ToString());
  }
}

}  // namespace djshard::ops::dedup
