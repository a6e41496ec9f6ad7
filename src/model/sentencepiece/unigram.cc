#include "src/model/sentencepiece/unigram.h"

#include <algorithm>
#include <cfloat>

#include "djshard/common/error.h"

namespace djshard::model {

using sentencepiece::ModelProto;
using sentencepiece::ModelType;
using sentencepiece::PieceType;

namespace {

// sentencepiece's OneCharLen: the length a UTF-8 lead byte announces (1 for
// a trail byte).
size_t OneCharLength(unsigned char lead) { return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[lead >> 4]; }

constexpr float kUnknownPenalty = 10.0f;

}  // namespace

std::unique_ptr<const SentencePieceUnigram> SentencePieceUnigram::Build(const ModelProto& model,
                                                                        const std::string& path,
                                                                        std::string* why_not) {
  if (model.model_type != ModelType::kUnigram) {
    *why_not = "it is not a unigram model";
  } else if (model.byte_fallback) {
    *why_not = "it falls back to bytes";
  } else if (std::any_of(model.pieces.begin(), model.pieces.end(),
                         [](const auto& p) { return p.type == PieceType::kUserDefined; })) {
    *why_not = "it has user-defined symbols";
  } else if (std::any_of(model.pieces.begin(), model.pieces.end(),
                         [](const auto& p) { return p.text.find('\0') != std::string::npos; })) {
    // The library's trie takes a piece as a C string: it ends at its NUL.
    *why_not = "a piece holds a NUL byte";
  } else if (std::count_if(model.pieces.begin(), model.pieces.end(),
                           [](const auto& p) { return p.type == PieceType::kUnknown; }) != 1) {
    *why_not = "it does not have exactly one unknown piece";
  } else {
    try {
      return std::unique_ptr<const SentencePieceUnigram>(new SentencePieceUnigram(model, path));
    } catch (const Error& e) {  // a character map the library loads and djshard does not read
      *why_not = e.message();
    }
  }
  return nullptr;
}

SentencePieceUnigram::SentencePieceUnigram(const ModelProto& model, const std::string& path)
    : normalizer_(model, path) {
  float min_score = FLT_MAX;
  for (size_t id = 0; id < model.pieces.size(); ++id) {
    const auto& piece = model.pieces[id];
    if (piece.type == PieceType::kNormal) min_score = std::min(min_score, piece.score);
    if (piece.type == PieceType::kUnknown) unk_id_ = static_cast<int32_t>(id);
  }
  unk_score_ = min_score - kUnknownPenalty;
  // Unused pieces are in sentencepiece's trie but never on a path: leaving
  // them out gives the same paths.
  std::vector<std::pair<std::string_view, int32_t>> keys;
  scores_.resize(model.pieces.size());
  for (size_t id = 0; id < model.pieces.size(); ++id) {
    const auto& piece = model.pieces[id];
    scores_[id] = piece.score;
    if (piece.type == PieceType::kNormal) keys.emplace_back(piece.text, static_cast<int32_t>(id));
  }
  // A repeated piece is refused by the library's Load before this runs.
  pieces_ = ByteTrie(std::move(keys));
}

void SentencePieceUnigram::Viterbi(std::string_view normalized,
                                   std::vector<SentencePieceBestPath>* paths) const {
  const size_t size = normalized.size();
  const auto* bytes = reinterpret_cast<const unsigned char*>(normalized.data());
  paths->assign(size + 1, SentencePieceBestPath{});
  SentencePieceBestPath* best = paths->data();
  // Each piece that starts at a character offers the path to its end the
  // best path to its start plus its score; a later offer wins only if higher.
  for (size_t start = 0; start < size;) {
    const float score_here = best[start].score;
    const size_t char_length = std::min(OneCharLength(bytes[start]), size - start);
    bool has_single_character = false;
    int32_t node = ByteTrie::kRoot;
    for (size_t end = start; end < size;) {
      node = pieces_.Child(node, bytes[end]);
      if (node < 0) break;
      ++end;
      const int32_t id = pieces_.Value(node);
      if (id < 0) continue;
      // sentencepiece's piece score is a double there (the other arm of its
      // conditional is), so the sum is compared unrounded and stored as float.
      SentencePieceBestPath& target = best[end];
      const double candidate = static_cast<double>(scores_[id]) + score_here;
      if (target.starts_at == -1 || candidate > target.score) {
        target = {id, static_cast<float>(candidate), static_cast<int32_t>(start)};
      }
      has_single_character |= end - start == char_length;
    }
    if (!has_single_character) {
      SentencePieceBestPath& target = best[start + char_length];
      const float candidate = unk_score_ + score_here;
      if (target.starts_at == -1 || candidate > target.score) {
        target = {unk_id_, candidate, static_cast<int32_t>(start)};
      }
    }
    start += char_length;
  }
}

void SentencePieceUnigram::Encode(std::string_view text, SentencePieceScratch* scratch) const {
  std::string& normalized = scratch->normalized;
  normalizer_.Normalize(text, &normalized);
  std::vector<std::string_view>& pieces = scratch->pieces;
  pieces.clear();
  if (normalized.empty()) return;
  Viterbi(normalized, &scratch->paths);
  const SentencePieceBestPath* best = scratch->paths.data();
  for (size_t end = normalized.size(); end > 0;) {
    const size_t start = static_cast<size_t>(best[end].starts_at);
    pieces.emplace_back(normalized.data() + start, end - start);
    end = start;
  }
  std::reverse(pieces.begin(), pieces.end());
  // Runs of unknown pieces become one piece, as the processor merges them.
  size_t kept = 0;
  bool previous_unknown = false;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const size_t end = pieces[i].data() + pieces[i].size() - normalized.data();
    const bool unknown = best[end].id == unk_id_;
    if (unknown && previous_unknown) {
      std::string_view& last = pieces[kept - 1];
      last = std::string_view(last.data(), last.size() + pieces[i].size());
    } else {
      pieces[kept++] = pieces[i];
    }
    previous_unknown = unknown;
  }
  pieces.resize(kept);
}

}  // namespace djshard::model
