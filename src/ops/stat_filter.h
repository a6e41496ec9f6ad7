#pragma once

// The base of the filters that compute one stat of the text.
#include <string>
#include <vector>

#include "djshard/ops/operator.h"
#include "djshard/ops/sample.h"

namespace djshard::ops {

// A filter with one stat, computed only when the record does not have it yet.
class StatFilter : public Filter {
 public:
  struct Range {
    const char* lo_key;
    double lo_default;
    const char* hi_key;
    double hi_default;
  };

  StatFilter(const recipe::OperatorSpec& spec, const std::string& key, const char* stat_key,
             Range range)
      : Filter(spec, key), stat_key_(stat_key) {
    lo_ = args().GetDouble(range.lo_key, range.lo_default);
    hi_ = args().GetDouble(range.hi_key, range.hi_default);
  }

  std::vector<std::string> stat_keys() const override { return {stat_key_}; }

  bool Process(Sample& sample) const override {
    if (!sample.Stat(stat_key_)) sample.SetStat(stat_key_, Compute(sample.Text(text_key())));
    return InRange(sample.StatNumber(stat_key_), lo_, hi_);
  }

 protected:
  // The stat's raw JSON (IntStat or FloatStat).
  virtual std::string Compute(const std::string& text) const = 0;

 private:
  const char* stat_key_;
  double lo_, hi_;
};

}  // namespace djshard::ops
