// language_id_score_filter: fastText language identification (Debian's
// libfasttext). The model is Data-Juicer's lid.176.bin, found where
// Data-Juicer keeps its models, or a file given by model_path.
#include <fasttext/fasttext.h>

#include <algorithm>
#include <sstream>

#include "djshard/common/error.h"
#include "djshard/io/json_text.h"
#include "djshard/model/model_path.h"
#include "djshard/ops/text.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

class LanguageIdScoreFilter : public Filter {
 public:
  std::vector<std::string> stat_keys() const override { return {"lang", "lang_score"}; }
  LanguageIdScoreFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : Filter(spec, key) {
    langs_ = args().GetStringList("lang", {});
    langs_.erase(std::remove(langs_.begin(), langs_.end(), std::string()), langs_.end());
    min_score_ = args().GetDouble("min_score", 0.8);
    const std::string path = ModelPath();
    try {
      model_.loadModel(path);
    } catch (const std::exception& e) {
      args().Fail("model_path", "cannot be loaded: " + std::string(e.what()),
                  "check that " + path + " is a fastText .bin model");
    }
  }

  // model_path when given (a djshard argument), else Data-Juicer's
  // lid.176.bin from its model cache, as prepare_fasttext_model finds it.
  std::string ModelPath() const {
    std::string path = args().GetString("model_path", "");
    if (!path.empty()) return path;
    const model::ModelLookup found = model::FindDataJuicerModelFile("lid.176.bin");
    if (!found.path) {
      args().Fail("model_path",
                  "is not given, and Data-Juicer's fastText model lid.176.bin is not on this "
                  "machine; djshard looked in:" +
                      model::ListSearched(found.searched),
                  "copy lid.176.bin from Data-Juicer's model cache (~/.cache/data_juicer/models) "
                  "into DJSHARD_MODEL_HOME, or give its path as model_path");
    }
    return *found.path;
  }

  bool Process(Sample& sample) const override {
    if (!sample.Stat("lang") || !sample.Stat("lang_score")) {
      // As Data-Juicer: lower-cased, newlines as spaces, the top prediction.
      std::string text = text::Lower(sample.Text(text_key()));
      for (char& c : text) {
        if (c == '\n') c = ' ';
      }
      text.push_back('\n');
      std::istringstream in(text);
      std::vector<std::pair<fasttext::real, std::string>> predictions;
      model_.predictLine(in, predictions, 1, 0.0);
      if (predictions.empty()) throw OpError("fastText made no prediction");
      std::string label = predictions[0].second;
      if (label.rfind("__label__", 0) == 0) label.erase(0, 9);
      std::string raw;
      io::AppendJsonString(&raw, label);
      sample.SetStat("lang", raw);
      sample.SetStat("lang_score", FloatStat(static_cast<double>(predictions[0].first)));
    }
    const std::optional<std::string_view> lang_raw = sample.Stat("lang");
    const std::string lang =
        lang_raw->size() >= 2 && lang_raw->front() == '"' ? io::UnescapeJsonString(*lang_raw) : "";
    const double score = sample.StatNumber("lang_score");
    if (langs_.empty()) return score >= min_score_;
    const bool known = std::find(langs_.begin(), langs_.end(), lang) != langs_.end();
    return known && score >= min_score_;
  }

 private:
  std::vector<std::string> langs_;
  double min_score_ = 0;
  fasttext::FastText model_;
};

}  // namespace

std::unique_ptr<Operator> MakeLanguageIdScoreFilter(const recipe::OperatorSpec& spec,
                                                    const std::string& text_key) {
  return std::make_unique<LanguageIdScoreFilter>(spec, text_key);
}

}  // namespace djshard::ops
