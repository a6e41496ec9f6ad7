#pragma once

// tests/data/dedup-vectors.jsonl.zst (made by tests/data/make_dedup_vectors.py
// from Data-Juicer 1.4.3's own operator code), read once per test binary: the
// unit tests of the deduplicators' core and the CLI tests of `djshard run`.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/io/input.h"

namespace djshard::testing {

struct DedupVectors {
  std::map<std::string, nlohmann::json> rows;  // dataset name -> rows
  std::vector<nlohmann::json> datasets, units, load_errors, params;
  nlohmann::json permutations;
};

inline const std::string& DedupVectorsDir() {
  static const std::string dir = DJSHARD_SOURCE_DIR "/tests/data";
  return dir;
}

inline const DedupVectors& AllDedupVectors() {
  static const DedupVectors* v = [] {
    auto* out = new DedupVectors;
    io::LineReader reader(io::OpenInput(DedupVectorsDir() + "/dedup-vectors.jsonl.zst"),
                          "dedup-vectors.jsonl.zst");
    std::string_view line;
    while (reader.Next(&line)) {
      nlohmann::json j = nlohmann::json::parse(line);
      const std::string kind = j["kind"];
      if (kind == "rows") out->rows[j["dataset"]] = j["rows"];
      if (kind == "dataset") out->datasets.push_back(std::move(j));
      if (kind == "unit") out->units.push_back(std::move(j));
      if (kind == "load_error") out->load_errors.push_back(std::move(j));
      if (kind == "optimal_param") out->params.push_back(std::move(j));
      if (kind == "permutations") out->permutations = std::move(j);
    }
    return out;
  }();
  return *v;
}

}  // namespace djshard::testing
