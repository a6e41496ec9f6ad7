// fix_unicode_mapper: ftfy.fix_text(text, normalization=...) through djshard's
// native port of ftfy 6.3.1 (src/ops/ftfy).
#include <string>

#include "src/ops/builtin.h"
#include "src/ops/ftfy/ftfy.h"

namespace djshard::ops {

namespace {

// A plain YAML scalar that Data-Juicer's YAML loader (YAML 1.1) reads as
// False or 0.
bool IsFalseScalar(const YAML::Node& node) {
  if (!node || !node.IsScalar() || node.Tag() != "?") return false;
  const std::string& v = node.Scalar();
  for (const char* f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "0"}) {
    if (v == f) return true;
  }
  return false;
}

class FixUnicodeMapper : public Mapper {
 public:
  FixUnicodeMapper(const recipe::OperatorSpec& spec, const std::string& key) : Mapper(spec, key) {
    // Data-Juicer: a false value (None, "", YAML's false or 0) means NFC;
    // otherwise normalization.upper() must be one of the four forms.
    const std::string given = IsFalseScalar(args().Raw("normalization"))
                                  ? std::string()
                                  : args().GetString("normalization", "");
    std::string upper = given;
    for (char& c : upper) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    if (upper.empty() || upper == "NFC") {
      form_ = unicode::NormalForm::kNfc;
    } else if (upper == "NFD") {
      form_ = unicode::NormalForm::kNfd;
    } else if (upper == "NFKC") {
      form_ = unicode::NormalForm::kNfkc;
    } else if (upper == "NFKD") {
      form_ = unicode::NormalForm::kNfkd;
    } else {
      args().Fail("normalization", "'" + given + "' is not a normalization form",
                  "one of NFC, NFKC, NFD, NFKD, in any case");
    }
  }

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    std::string fixed = ftfy::FixText(text, form_);
    if (fixed != text) sample.SetText(text_key(), std::move(fixed));
  }

 private:
  unicode::NormalForm form_ = unicode::NormalForm::kNfc;
};

}  // namespace

std::unique_ptr<Operator> MakeFixUnicodeMapper(const recipe::OperatorSpec& spec,
                                               const std::string& text_key) {
  return std::make_unique<FixUnicodeMapper>(spec, text_key);
}

}  // namespace djshard::ops
