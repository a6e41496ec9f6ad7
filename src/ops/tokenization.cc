#include "src/ops/tokenization.h"

#include <utf8proc.h>

#include <map>
#include <mutex>

#include "djshard/common/error.h"
#include "djshard/model/model_path.h"
#include "djshard/ops/text.h"

namespace djshard::ops {

namespace {

std::mutex models_mu;  // guards the two caches below

}  // namespace

std::string ResolveModelArgument(const recipe::OperatorArgs& args, const std::string& key,
                                 const std::string& fallback, const std::string& revision,
                                 const std::string& what, const std::string& needs) {
  const std::string name = args.GetString(key, fallback);
  const model::ModelLookup found = model::FindHuggingFaceModel(name, revision);
  if (!found.path) {
    args.Fail(key,
              "names the " + what + " '" + name +
                  "', which is not on this machine; djshard looked in:" +
                  model::ListSearched(found.searched),
              "on a connected machine run `huggingface-cli download " + name +
                  "` and copy the snapshot here, set DJSHARD_MODEL_HOME, or give '" + key +
                  "' a local directory" + needs);
  }
  return *found.path;
}

std::shared_ptr<const model::Tokenizer> LoadHfTokenizer(const recipe::OperatorArgs& args,
                                                        const std::string& key,
                                                        const std::string& fallback) {
  const std::string path = ResolveModelArgument(
      args, key, fallback, "main", "Hugging Face tokenizer", " holding tokenizer.json");
  static std::map<std::string, std::shared_ptr<const model::Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(models_mu);
  auto& slot = cache[path];
  if (!slot) slot = model::Tokenizer::Load(path);
  return slot;
}

std::string FindDataJuicerModelArgument(const recipe::OperatorArgs& args, const std::string& key,
                                        const std::string& file, const std::string& what,
                                        const std::string& lang) {
  const model::ModelLookup found = model::FindDataJuicerModelFile(file);
  if (!found.path) {
    args.Fail(key,
              "needs Data-Juicer's " + what + " " + file + " for lang '" + lang +
                  "', which is not on this machine; djshard looked in:" +
                  model::ListSearched(found.searched),
              "copy " + file +
                  " from Data-Juicer's model cache (~/.cache/data_juicer/models on "
                  "a machine where Data-Juicer ran this operator) into DJSHARD_MODEL_HOME");
  }
  return *found.path;
}

std::shared_ptr<const model::SentencePiece> SentencePieceForLang(const recipe::OperatorArgs& args,
                                                                 const std::string& lang,
                                                                 const std::string& key) {
  const std::string path =
      FindDataJuicerModelArgument(args, key, lang + ".sp.model", "SentencePiece model", lang);
  return model::SentencePiece::Load(path, "copy the file again from Data-Juicer's model cache");
}

bool IsAlpha(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  // Python: the letter categories, of the Unicode version of its str.isalnum() table.
  const auto k = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO && text::IsAlnum(cp);
}

size_t CountAlpha(std::string_view s) {
  size_t n = 0, i = 0;
  while (i < s.size()) n += IsAlpha(text::NextCodePoint(s, &i));
  return n;
}

}  // namespace djshard::ops
