// perplexity_filter on one thread: the whole operator over a JSONL corpus,
// then its two parts on their own (SentencePiece pieces; KenLM scores of the
// joined pieces), to say where the time goes. Models are found as the
// operator finds them (DJSHARD_MODEL_HOME). Reading the corpus is not timed.
//
//   djshard_perplexity_bench CORPUS.jsonl LANG [REPEATS]
//
// Prints: bytes, seconds and MB/s of the operator, seconds of SentencePiece,
// of KenLM and of the rest (the operator's time minus both).
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/io/record.h"
#include "djshard/model/kenlm.h"
#include "djshard/model/model_path.h"
#include "djshard/ops/operator.h"
#include "djshard/ops/registry.h"
#include "djshard/ops/sample.h"
#include "djshard/ops/text.h"
#include "src/ops/tokenization.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace djshard;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CORPUS.jsonl LANG [REPEATS]\n", argv[0]);
    return 2;
  }
  const std::string lang = argv[2];
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 1;
  std::vector<std::string> lines, texts;
  size_t bytes = 0;
  std::ifstream in(argv[1]);
  for (std::string line; std::getline(in, line);) {
    texts.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
    bytes += texts.back().size();
    lines.push_back(std::move(line));
  }
  const ops::OperatorInfo* info = ops::Registry::Global().Find("perplexity_filter");
  recipe::OperatorSpec spec;
  spec.name = "perplexity_filter";
  spec.line = 1;
  YAML::Node args;
  args["lang"] = lang;
  spec.args = recipe::OperatorArgs(args, "bench", "perplexity_filter", 1);
  const auto op = info->factory(spec, "text");
  const auto& filter = static_cast<const ops::Filter&>(*op);

  double op_seconds = 1e300, sp_seconds = 1e300, lm_seconds = 1e300;
  size_t kept = 0;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    kept = 0;
    for (const std::string& line : lines) {
      io::Record record;
      record.Assign(line);
      ops::Sample sample(&record);
      kept += filter.Process(sample);
    }
    op_seconds = std::min(op_seconds, Seconds(t0));
  }
  // The parts: pieces joined by spaces, then KenLM over their lines.
  const auto sp = ops::SentencePieceForLang(spec.args, lang, "lang");
  const auto lm =
      model::KenLanguageModel::Load(*model::FindDataJuicerModelFile(lang + ".arpa.bin").path);
  std::vector<std::string> joined(texts.size());
  model::SentencePieceScratch scratch;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < texts.size(); ++i) {
      joined[i].clear();
      for (std::string_view p : sp->Encode(texts[i], &scratch)) (joined[i] += p) += ' ';
    }
    sp_seconds = std::min(sp_seconds, Seconds(t0));
    t0 = std::chrono::steady_clock::now();
    double total = 0;
    for (const std::string& j : joined) {
      for (std::string_view l : ops::text::SplitLines(j)) total += lm->ScoreSentence(l);
    }
    lm_seconds = std::min(lm_seconds, Seconds(t0));
    if (total == 1) std::printf("?");
  }
  std::printf("bytes %zu rows %zu kept %zu\n", bytes, lines.size(), kept);
  std::printf("operator %.3f s %.2f MB/s\n", op_seconds, bytes / 1e6 / op_seconds);
  std::printf("sentencepiece %.3f s (%.0f%%)\n", sp_seconds, 100 * sp_seconds / op_seconds);
  std::printf("kenlm %.3f s (%.0f%%)\n", lm_seconds, 100 * lm_seconds / op_seconds);
  std::printf("rest %.3f s (%.0f%%)\n", op_seconds - sp_seconds - lm_seconds,
              100 * (op_seconds - sp_seconds - lm_seconds) / op_seconds);
  return 0;
}
