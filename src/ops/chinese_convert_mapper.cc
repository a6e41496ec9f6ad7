// chinese_convert_mapper: Simplified/Traditional Chinese and Japanese kanji
// conversion with OpenCC's configurations and dictionaries (Debian's
// libopencc, the library behind Data-Juicer's `opencc` package), converted by
// djshard's OpenCcConverter.
#include "src/ops/builtin.h"
#include "src/ops/opencc_converter.h"

namespace djshard::ops {

namespace {

constexpr const char* kModes[] = {"s2t",   "t2s",  "s2tw", "tw2s", "s2hk", "hk2s", "s2twp",
                                  "tw2sp", "t2tw", "tw2t", "hk2t", "t2hk", "t2jp", "jp2t"};

class ChineseConvertMapper : public Mapper {
 public:
  ChineseConvertMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {
    const std::string mode = args().GetString("mode", "s2t");
    std::string modes;
    bool known = false;
    for (const char* m : kModes) {
      known = known || mode == m;
      modes += std::string(modes.empty() ? "" : ", ") + m;
    }
    if (!known) args().Fail("mode", "'" + mode + "' is not a conversion", "one of " + modes);
    converter_ = &OpenCcConverter::ForMode(mode);
  }

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    std::string converted;
    converter_->Convert(text, &converted);
    if (converted != text) sample.SetText(text_key(), std::move(converted));
  }

 private:
  const OpenCcConverter* converter_ = nullptr;
};

}  // namespace

std::unique_ptr<Operator> MakeChineseConvertMapper(const recipe::OperatorSpec& spec,
                                                   const std::string& text_key) {
  return std::make_unique<ChineseConvertMapper>(spec, text_key);
}

}  // namespace djshard::ops
