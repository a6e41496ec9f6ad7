// text_pair_similarity_filter: cosine similarity of the CLIP text embeddings
// of two text fields of a record, kept by range (any/all over the stat list).
#include <cmath>

#include "src/ops/builtin.h"
#include "src/ops/model_operator.h"

namespace djshard::ops {

namespace {

constexpr const char* kStat = "text_pair_similarity";

class TextPairSimilarityFilter : public Filter {
 public:
  std::vector<std::string> stat_keys() const override { return {kStat}; }
  TextPairSimilarityFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : Filter(spec, key) {
    if (!args().Has("text_key_second") || args().Raw("text_key_second").IsNull()) {
      args().Fail("text_key_second", "is required: it names the second text of each pair",
                  "e.g. text_key_second: target_text (Data-Juicer logs an error and keeps every "
                  "record instead)");
    }
    second_key_ = args().GetString("text_key_second", "");
    min_ = args().GetDouble("min_score", 0.1);
    max_ = args().GetDouble("max_score", 1.0);
    const std::string mode = args().GetString("any_or_all", "any");
    if (mode != "any" && mode != "all") args().Fail("any_or_all", "must be 'any' or 'all'", "");
    all_ = mode == "all";
    runner_ = std::make_unique<ModelRunner>(spec, "hf_clip", "openai/clip-vit-base-patch32", false);
    if (!runner_->config().is_clip()) {
      args().Fail("hf_clip", "names a model that is not CLIP", "use a CLIP snapshot");
    }
  }

  bool processes_rows_together() const override { return true; }
  size_t preferred_batch_rows() const override { return runner_->preferred_batch_rows(); }
  std::optional<ModelDescription> model_description() const override {
    return runner_->description();
  }

  bool Process(Sample& sample) const override {
    Sample* rows[] = {&sample};
    RowOutcome outcome;
    ProcessRows(rows, std::span<RowOutcome>(&outcome, 1));
    if (!outcome.error.empty()) throw OpError(outcome.error, outcome.error_type);
    return outcome.keep;
  }

  void ProcessRows(std::span<Sample* const> rows, std::span<RowOutcome> outcomes) const override {
    const size_t dim = static_cast<size_t>(runner_->config().out_dim);
    thread_local std::vector<ModelRunner::Encoded> encoded;
    thread_local std::vector<model::ModelRow> model_rows;
    thread_local std::vector<size_t> row_of;
    thread_local std::vector<float> embeds;
    encoded.resize(2 * rows.size());
    embeds.resize(2 * rows.size() * dim);
    model_rows.clear();
    row_of.clear();
    for (size_t i = 0; i < rows.size(); ++i) {
      Sample& s = *rows[i];
      if (s.Stat(kStat)) continue;  // computed before: Data-Juicer reuses it
      try {
        // Data-Juicer's order: text missing, text empty, second missing,
        // second empty; the first that holds gives [] and keeps the record.
        // Copies: a reference from Sample::Text moves when the next text loads.
        const std::string first = s.Has(text_key()) ? s.Text(text_key()) : std::string();
        const std::string second =
            first.empty() || !s.Has(second_key_) ? std::string() : s.Text(second_key_);
        if (first.empty() || second.empty()) {
          s.SetStat(kStat, "[]");
          continue;
        }
        runner_->Encode(first, &encoded[2 * i]);
        runner_->Encode(second, &encoded[2 * i + 1]);
      } catch (const std::exception& e) {
        outcomes[i].error = e.what();
        continue;
      }
      for (size_t h = 0; h < 2; ++h) {
        if (!encoded[2 * i + h].error.empty()) {
          outcomes[i].error = encoded[2 * i + h].error;
          outcomes[i].error_type = encoded[2 * i + h].error_type;
        }
      }
      if (!outcomes[i].error.empty()) continue;
      for (size_t h = 0; h < 2; ++h) {
        model_rows.push_back({&encoded[2 * i + h].ids, encoded[2 * i + h].pool_index,
                              embeds.data() + (2 * i + h) * dim, false});
      }
      row_of.push_back(i);
    }
    runner_->Run(model_rows);
    for (size_t j = 0; j < row_of.size(); ++j) {
      const size_t i = row_of[j];
      const model::ModelRow& a = model_rows[2 * j];
      const model::ModelRow& b = model_rows[2 * j + 1];
      if (a.out_of_memory || b.out_of_memory) {
        outcomes[i].error = "the device ran out of memory on this row alone";
        outcomes[i].error_type = "oom";
        continue;
      }
      // torch.cosine_similarity: x.y / max(|x| |y|, 1e-8).
      double dot = 0, na = 0, nb = 0;
      for (size_t k = 0; k < dim; ++k) {
        dot += static_cast<double>(a.out[k]) * b.out[k];
        na += static_cast<double>(a.out[k]) * a.out[k];
        nb += static_cast<double>(b.out[k]) * b.out[k];
      }
      const float cos = static_cast<float>(dot / std::max(std::sqrt(na) * std::sqrt(nb), 1e-8));
      std::string stat = "[";
      stat += FloatStat(static_cast<double>(cos));
      stat += ']';
      rows[i]->SetStat(kStat, std::move(stat));
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!outcomes[i].error.empty()) continue;
      outcomes[i].keep = Keep(*rows[i]);
    }
  }

 private:
  bool Keep(Sample& s) const {
    const std::optional<std::string_view> raw = s.Stat(kStat);
    std::vector<double> values;
    std::string_view list = raw ? *raw : std::string_view("[]");
    if (list.size() >= 2 && list.front() == '[') list = list.substr(1, list.size() - 2);
    while (!list.empty()) {
      const size_t comma = list.find(',');
      const std::string item(list.substr(0, comma));
      values.push_back(std::strtod(item.c_str(), nullptr));
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    if (values.empty()) return true;
    bool any = false, all = true;
    for (double v : values) {
      const bool in = InRange(v, min_, max_);
      any = any || in;
      all = all && in;
    }
    return all_ ? all : any;
  }

  std::string second_key_;
  double min_ = 0.1, max_ = 1.0;
  bool all_ = false;
  std::unique_ptr<ModelRunner> runner_;
};

}  // namespace

std::unique_ptr<Operator> MakeTextPairSimilarityFilter(const recipe::OperatorSpec& s,
                                                       const std::string& k) {
  return std::make_unique<TextPairSimilarityFilter>(s, k);
}

}  // namespace djshard::ops
