#pragma once
// KenLM n-gram language models, as Data-Juicer's perplexity_filter loads them
// with the kenlm Python module: ARPA text, or KenLM's binary format as
// build_binary writes it with the probing hash tables (its default, and what
// cc_net's <lang>.arpa.bin files use) or the plain trie. The quantized and
// array-compressed tries and probing with rest costs are refused.

#include <memory>
#include <string>
#include <string_view>

namespace djshard::model {

class KenLanguageModel {
 public:
  // Reads the model at `path` (mapped, not copied, when binary). A file that
  // is neither format, is damaged or truncated, or uses a variant djshard
  // does not read: an Error naming `path`.
  static std::unique_ptr<const KenLanguageModel> Load(const std::string& path);
  // The same from bytes in memory, which must outlive the model; `name`
  // stands for the file in errors.
  static std::unique_ptr<const KenLanguageModel> FromBytes(std::string_view bytes,
                                                           const std::string& name);
  virtual ~KenLanguageModel() = default;

  // kenlm.Model.score(sentence, bos=True, eos=True): log10 p(words </s> | <s>),
  // summed in single precision as KenLM does. Words are split on ASCII
  // whitespace (\t \n \v \f \r and space) and the sentence ends at its first
  // NUL byte, as the C string KenLM receives does; unknown words are <unk>.
  // Thread-safe.
  virtual float ScoreSentence(std::string_view sentence) const = 0;

  virtual int order() const = 0;
  // "ARPA", "probing" or "trie".
  virtual const char* data_structure() const = 0;
};

}  // namespace djshard::model
