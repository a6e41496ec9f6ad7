#pragma once
// SentencePiece models (.model files), as Data-Juicer's operators encode with
// them (`encode_as_pieces`). A unigram model is encoded by djshard's own
// normalizer and Viterbi, which reproduce sentencepiece 0.1.97's to the bit:
// the precompiled character map, its whitespace rules, and the optimized
// Viterbi's path scores compared as it compares them, the first best path kept
// on a tie. Models it does not reproduce (BPE, WORD and CHAR models, byte
// fallback, user-defined symbols, a piece with a NUL byte) are encoded by the
// sentencepiece library itself.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace djshard::model {

class SentencePieceUnigram;

// The best path that ends at one byte of the normalized text: its last piece
// (`id`, -1 before any), where that piece starts, and the path's score.
struct SentencePieceBestPath {
  int32_t id = -1;
  float score = 0;
  int32_t starts_at = -1;
};

// Buffers one thread reuses across calls of SentencePiece::Encode.
struct SentencePieceScratch {
  std::string normalized;                    // the text the pieces point into
  std::vector<SentencePieceBestPath> paths;  // the Viterbi's table
  std::vector<std::string> library_pieces;   // pieces the library returned
  std::vector<std::string_view> pieces;      // the result
};

class SentencePiece {
 public:
  // Loads the model at `path` once per process (later calls share it). Not a
  // model, damaged or truncated: an Error naming `path`, with `hint`.
  static std::shared_ptr<const SentencePiece> Load(const std::string& path,
                                                   const std::string& hint);
  ~SentencePiece();
  SentencePiece(const SentencePiece&) = delete;
  SentencePiece& operator=(const SentencePiece&) = delete;

  // encode_as_pieces(text): the pieces, as views into `scratch`, valid until
  // its next use. Thread-safe with one scratch per thread.
  const std::vector<std::string_view>& Encode(std::string_view text,
                                              SentencePieceScratch* scratch) const;
  // The same as strings.
  std::vector<std::string> Pieces(std::string_view text) const;
  // The pieces that the sentencepiece library gives, whichever encoder Encode
  // uses: what tests compare djshard's encoder with.
  std::vector<std::string> LibraryPieces(std::string_view text) const;

  // Whether Encode uses djshard's encoder; if not, `why_library()` says why.
  bool native() const { return unigram_ != nullptr; }
  const std::string& why_library() const { return why_library_; }
  const std::string& path() const { return path_; }

 private:
  struct Library;
  SentencePiece();
  std::unique_ptr<Library> library_;
  std::unique_ptr<const SentencePieceUnigram> unigram_;
  std::string why_library_;
  std::string path_;
};

}  // namespace djshard::model
