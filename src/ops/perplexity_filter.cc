// perplexity_filter: the perplexity of a text's SentencePiece pieces under
// Data-Juicer's KenLM model of its language (<lang>.sp.model and
// <lang>.arpa.bin, found where Data-Juicer's check_model finds them).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "djshard/model/kenlm.h"
#include "djshard/ops/text.h"
#include "src/ops/builtin.h"
#include "src/ops/stat_filter.h"
#include "src/ops/tokenization.h"

namespace djshard::ops {

namespace {

// The KenLM model at `path`, loaded once per process.
std::shared_ptr<const model::KenLanguageModel> LoadKenLm(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const model::KenLanguageModel>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[path];
  if (!slot) slot = model::KenLanguageModel::Load(path);
  return slot;
}

// Python's len(line.split()): runs of code points that are not str.isspace().
int64_t CountPythonWords(std::string_view line) {
  int64_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < line.size();) {
    const bool space = text::IsSpace(text::NextCodePoint(line, &i));
    words += !space && !in_word;
    in_word = !space;
  }
  return words;
}

// Python's round(x, 1): the nearest one-decimal number, ties to even on the
// exact binary value (glibc's printf rounds exactly so), read back.
double PythonRound1(double x) {
  if (!std::isfinite(x)) return x;
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return std::strtod(buf, nullptr);
}

class PerplexityFilter : public StatFilter {
 public:
  PerplexityFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, "perplexity", {"min_ppl", 0, "max_ppl", 1500}) {
    const std::string lang = args().GetString("lang", "en");
    pieces_ = SentencePieceForLang(args(), lang, "lang");
    lm_ = LoadKenLm(
        FindDataJuicerModelArgument(args(), "lang", lang + ".arpa.bin", "KenLM model", lang));
  }

  // Data-Juicer: the pieces joined by spaces, then per line (str.splitlines)
  // KenLM's sentence score, over the words (str.split) plus one </s> per line.
  std::string Compute(const std::string& text) const override {
    thread_local model::SentencePieceScratch scratch;
    thread_local std::string joined;
    joined.clear();
    for (const std::string_view piece : pieces_->Encode(text, &scratch)) {
      joined += piece;
      joined += ' ';
    }
    if (!joined.empty()) joined.pop_back();  // " ".join(pieces)
    double logits = 0;
    int64_t length = 0;
    for (std::string_view line : text::SplitLines(joined)) {
      logits += lm_->ScoreSentence(line);
      length += CountPythonWords(line) + 1;
    }
    if (length == 0) return FloatStat(0.0);
    const double exponent = -logits / static_cast<double>(length);
    const double ppl = std::pow(10.0, exponent);
    if (std::isinf(ppl) && std::isfinite(exponent)) {
      throw OpError("OverflowError: (34, 'Numerical result out of range')");
    }
    return FloatStat(PythonRound1(ppl));
  }

 private:
  std::shared_ptr<const model::SentencePiece> pieces_;
  std::shared_ptr<const model::KenLanguageModel> lm_;
};

}  // namespace

std::unique_ptr<Operator> MakePerplexityFilter(const recipe::OperatorSpec& spec,
                                               const std::string& text_key) {
  return std::make_unique<PerplexityFilter>(spec, text_key);
}

}  // namespace djshard::ops
