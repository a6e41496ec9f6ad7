// query_sentiment_detection_mapper and query_topic_detection_mapper: a
// Hugging Face sequence classifier over the query, label and score into
// __dj__meta__, as the text-classification pipeline Data-Juicer calls returns
// them (argmax label, probability at the argmax).
#include <cmath>

#include "djshard/io/json_text.h"
#include "src/ops/builtin.h"
#include "src/ops/model_operator.h"

namespace djshard::ops {

namespace {

class QueryDetectionMapper : public Mapper {
 public:
  QueryDetectionMapper(const recipe::OperatorSpec& spec, const std::string& key,
                       const char* default_model, const char* label_key, const char* score_key)
      : Mapper(spec, key) {
    if (!args().Has("zh_to_en_hf_model") || !args().Raw("zh_to_en_hf_model").IsNull()) {
      args().Fail("zh_to_en_hf_model",
                  "names a translation model ('" +
                      args().GetString("zh_to_en_hf_model", "Helsinki-NLP/opus-mt-zh-en") +
                      "', Data-Juicer's default), and djshard has none",
                  "set zh_to_en_hf_model: null");
    }
    query_key_ = args().GetString("query_key", "query");
    label_key_ = args().GetString("label_key", label_key);
    score_key_ = args().GetString("score_key", score_key);
    runner_ = std::make_unique<ModelRunner>(spec, "hf_model", default_model, false);
    if (!runner_->config().is_classifier()) {
      args().Fail("hf_model", "names a model that is not a sequence classifier",
                  "use a *ForSequenceClassification snapshot");
    }
  }

  bool processes_rows_together() const override { return true; }
  size_t preferred_batch_rows() const override { return runner_->preferred_batch_rows(); }
  std::optional<ModelDescription> model_description() const override {
    return runner_->description();
  }

  void Map(Sample& sample) const override {
    Sample* rows[] = {&sample};
    RowOutcome outcome;
    ProcessRows(rows, std::span<RowOutcome>(&outcome, 1));
    if (!outcome.error.empty()) throw OpError(outcome.error, outcome.error_type);
  }

  void ProcessRows(std::span<Sample* const> rows, std::span<RowOutcome> outcomes) const override {
    const size_t out_dim = static_cast<size_t>(runner_->config().out_dim);
    thread_local std::vector<ModelRunner::Encoded> encoded;
    thread_local std::vector<model::ModelRow> model_rows;
    thread_local std::vector<size_t> row_of;
    thread_local std::vector<float> logits;
    encoded.resize(rows.size());
    model_rows.clear();
    row_of.clear();
    logits.resize(rows.size() * out_dim);
    for (size_t i = 0; i < rows.size(); ++i) {
      Sample& s = *rows[i];
      // Already tagged: Data-Juicer skips such records (it looks only at a
      // batch's first record; djshard looks at each).
      if (s.Meta(label_key_) && s.Meta(score_key_)) continue;
      try {
        runner_->Encode(s.Text(query_key_), &encoded[i]);
      } catch (const std::exception& e) {
        outcomes[i].error = e.what();
        continue;
      }
      if (!encoded[i].error.empty()) {
        outcomes[i].error = encoded[i].error;
        outcomes[i].error_type = encoded[i].error_type;
        continue;
      }
      model_rows.push_back({&encoded[i].ids, 0, logits.data() + i * out_dim, false});
      row_of.push_back(i);
    }
    runner_->Run(model_rows);
    const model::ModelConfig& c = runner_->config();
    for (size_t j = 0; j < model_rows.size(); ++j) {
      const size_t i = row_of[j];
      if (model_rows[j].out_of_memory) {
        outcomes[i].error = "the device ran out of memory on this row alone";
        outcomes[i].error_type = "oom";
        continue;
      }
      const float* l = model_rows[j].out;
      size_t best = 0;
      for (size_t k = 1; k < out_dim; ++k) {
        if (l[k] > l[best]) best = k;
      }
      // The pipeline's postprocess, in float32 as numpy runs it.
      float score = l[best];
      if (c.score_function == model::ScoreFunction::kSoftmax) {
        float sum = 0;
        for (size_t k = 0; k < out_dim; ++k) sum += std::exp(l[k] - l[best]);
        score = 1.0f / sum;
      } else if (c.score_function == model::ScoreFunction::kSigmoid) {
        score = 1.0f / (1.0f + std::exp(-l[best]));
      }
      std::string label;
      io::AppendJsonString(&label, c.id2label[best]);
      rows[i]->SetMeta(label_key_, std::move(label));
      rows[i]->SetMeta(score_key_, FloatStat(static_cast<double>(score)));
    }
  }

 private:
  std::string query_key_, label_key_, score_key_;
  std::unique_ptr<ModelRunner> runner_;
};

}  // namespace

std::unique_ptr<Operator> MakeQuerySentimentDetectionMapper(const recipe::OperatorSpec& s,
                                                            const std::string& k) {
  return std::make_unique<QueryDetectionMapper>(
      s, k, "mrm8488/distilroberta-finetuned-financial-news-sentiment-analysis",
      "query_sentiment_label", "query_sentiment_label_score");
}

std::unique_ptr<Operator> MakeQueryTopicDetectionMapper(const recipe::OperatorSpec& s,
                                                        const std::string& k) {
  return std::make_unique<QueryDetectionMapper>(s, k,
                                                "dstefa/roberta-base_topic_classification_nyt_news",
                                                "query_topic_label", "query_topic_label_score");
}

}  // namespace djshard::ops
