// chinese_convert_mapper: Simplified/Traditional Chinese and Japanese kanji
// conversion through OpenCC (Debian's libopencc), the library behind
// Data-Juicer's `opencc` package.
#include <opencc.h>

#include <map>
#include <mutex>

#include "djshard/common/error.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

constexpr const char* kModes[] = {"s2t",   "t2s",  "s2tw", "tw2s", "s2hk", "hk2s", "s2twp",
                                  "tw2sp", "t2tw", "tw2t", "hk2t", "t2hk", "t2jp", "jp2t"};

// One OpenCC converter per mode, opened once per process and shared by every
// thread (a conversion only reads the converter's dictionaries).
class Converter {
 public:
  static const Converter& ForMode(const std::string& mode) {
    static std::mutex mu;
    static std::map<std::string, std::unique_ptr<Converter>> open;
    std::lock_guard<std::mutex> lock(mu);
    auto& slot = open[mode];
    if (!slot) slot.reset(new Converter(mode));
    return *slot;
  }
  ~Converter() { opencc_close(handle_); }
  Converter(const Converter&) = delete;
  Converter& operator=(const Converter&) = delete;

  std::string Convert(const std::string& text) const {
    char* converted = opencc_convert_utf8(handle_, text.data(), text.size());
    if (converted == nullptr) throw OpError(std::string("OpenCC failed: ") + opencc_error());
    std::string out(converted);
    opencc_convert_utf8_free(converted);
    return out;
  }

 private:
  explicit Converter(const std::string& mode) : handle_(opencc_open((mode + ".json").c_str())) {
    if (handle_ == reinterpret_cast<opencc_t>(-1)) {
      throw Error("OpenCC cannot open its configuration " + mode + ".json: " + opencc_error(),
                  "scripts/setup.sh installs libopencc-dev and its dictionaries");
    }
  }
  opencc_t handle_;
};

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
    converter_ = &Converter::ForMode(mode);
  }

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    std::string converted = converter_->Convert(text);
    if (converted != text) sample.SetText(text_key(), std::move(converted));
  }

 private:
  const Converter* converter_ = nullptr;
};

}  // namespace

std::unique_ptr<Operator> MakeChineseConvertMapper(const recipe::OperatorSpec& spec,
                                                   const std::string& text_key) {
  return std::make_unique<ChineseConvertMapper>(spec, text_key);
}

}  // namespace djshard::ops
