// One-thread tokenizer throughput: encodes the "text" of every JSONL row with
// a tokenizer.json (special tokens added), timing only the encoding, and
// writes the ids (one row per line, space-separated) for comparison.
//
//   djshard_tokenizer_bench TOKENIZER CORPUS.jsonl IDS_OUT [REPEATS]
//
// Prints: rows, MB (UTF-8 bytes of the texts), best seconds, MB/s, rows/s.
// Each pass loads the tokenizer again (untimed), so that every pass starts
// with an empty word cache, as tokenizer_bench.js does for the Rust library.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/common/error.h"
#include "djshard/io/input.h"
#include "djshard/model/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s TOKENIZER CORPUS.jsonl IDS_OUT [REPEATS]\n", argv[0]);
    return 2;
  }
  try {
    std::vector<std::string> texts;
    size_t bytes = 0;
    djshard::io::LineReader lines(djshard::io::OpenInput(argv[2]), argv[2]);
    std::string_view line;
    while (lines.Next(&line)) {
      texts.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
      bytes += texts.back().size();
    }
    const int repeats = argc > 4 ? std::atoi(argv[4]) : 1;
    double best = 1e30;
    std::vector<std::vector<uint32_t>> ids(texts.size());
    for (int r = 0; r < repeats; ++r) {
      const auto tok = djshard::model::Tokenizer::Load(argv[1]);
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < texts.size(); ++i) ids[i] = tok->Encode(texts[i], true).ids;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, s);
    }
    std::FILE* out = std::fopen(argv[3], "w");
    if (out == nullptr) djshard::ThrowSystemError(argv[3], "open");
    std::string buf;
    for (const auto& row : ids) {
      buf.clear();
      for (size_t k = 0; k < row.size(); ++k) {
        if (k) buf.push_back(' ');
        buf += std::to_string(row[k]);
      }
      buf.push_back('\n');
      std::fwrite(buf.data(), 1, buf.size(), out);
    }
    std::fclose(out);
    const double mb = static_cast<double>(bytes) / 1e6;
    std::printf("rows=%zu mb=%.1f seconds=%.3f mb_per_s=%.2f rows_per_s=%.0f\n", texts.size(), mb,
                best, mb / best, static_cast<double>(texts.size()) / best);
  } catch (const djshard::Error& e) {
    std::fprintf(stderr, "ERROR: %s\n", e.what());
    return e.code();
  }
  return 0;
}
