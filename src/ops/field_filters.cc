// Filters on fields other than the text: suffix_filter, specified_field_filter,
// specified_numeric_field_filter.
#include <cmath>
#include <cstdlib>
#include <optional>

#include "djshard/io/json_text.h"
#include "djshard/ops/text.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

constexpr const char* kSuffixKey = "__dj__suffix__";

// A JSON or YAML scalar, compared the way Python compares the decoded values
// (True == 1, 1 == 1.0, "1" != 1).
struct Scalar {
  enum Kind { kString, kNumber, kNull, kOther } kind = kOther;
  std::string str;
  double num = 0;
  bool operator==(const Scalar& o) const {
    if (kind != o.kind) return false;
    if (kind == kString) return str == o.str;
    if (kind == kNumber) return num == o.num;
    return kind == kNull;
  }
};

Scalar FromJson(std::string_view raw) {
  Scalar s;
  if (raw.empty()) return s;
  if (raw.front() == '"') {
    s.kind = Scalar::kString;
    s.str = io::UnescapeJsonString(raw);
  } else if (raw == "null") {
    s.kind = Scalar::kNull;
  } else if (raw == "true" || raw == "false") {
    s.kind = Scalar::kNumber;
    s.num = raw == "true" ? 1 : 0;
  } else if (raw.front() == '-' || (raw.front() >= '0' && raw.front() <= '9')) {
    s.kind = Scalar::kNumber;
    s.num = std::strtod(std::string(raw).c_str(), nullptr);
  }
  return s;
}

Scalar FromYaml(const YAML::Node& node) {
  Scalar s;
  if (node.IsNull()) {
    s.kind = Scalar::kNull;
    return s;
  }
  if (!node.IsScalar()) return s;
  const std::string& text = node.Scalar();
  // A quoted YAML scalar is a string; a plain one may be a number or bool.
  if (node.Tag() != "!") {
    if (text == "true" || text == "True" || text == "false" || text == "False") {
      s.kind = Scalar::kNumber;
      s.num = (text == "true" || text == "True") ? 1 : 0;
      return s;
    }
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() &&
        text.find_first_of("0123456789") != std::string::npos) {
      s.kind = Scalar::kNumber;
      s.num = v;
      return s;
    }
  }
  s.kind = Scalar::kString;
  s.str = text;
  return s;
}

class SuffixFilter : public Filter {
 public:
  SuffixFilter(const recipe::OperatorSpec& spec, const std::string& key) : Filter(spec, key) {
    suffixes_ = args().GetStringList("suffixes", {});
  }
  bool uses_stats() const override { return false; }
  bool Process(Sample& sample) const override {
    if (suffixes_.empty()) return true;
    // A record without the field is one Data-Juicer's loader gave no suffix
    // of a listed kind (its column holds None there): not listed.
    const std::optional<std::string> raw = sample.Field(kSuffixKey);
    bool ok = false;
    if (const Scalar value = raw ? FromJson(*raw) : Scalar(); value.kind == Scalar::kString) {
      for (const std::string& s : suffixes_) ok = ok || s == value.str;
    }
    return reversed() ? !ok : ok;
  }

 private:
  std::vector<std::string> suffixes_;
};

// Looks the field up (an error when missing) and stores its raw value as the
// stat named by the dotted key, unless the record has that stat already.
std::string FieldStat(Sample& sample, const std::string& key) {
  const std::optional<std::string> raw = sample.Field(key);
  if (!raw) throw OpError("field '" + key + "' not found");
  if (!sample.Stat(key)) sample.SetStat(key, *raw);
  return std::string(*sample.Stat(key));
}

class SpecifiedFieldFilter : public Filter {
 public:
  // The stat is named by the dotted field key (FieldStat).
  std::vector<std::string> stat_keys() const override { return {key_}; }
  SpecifiedFieldFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : Filter(spec, key) {
    key_ = args().GetString("field_key", "");
    const YAML::Node targets = args().Raw("target_value");
    if (targets && targets.IsSequence()) {
      for (const auto& t : targets) targets_.push_back(FromYaml(t));
    } else if (targets && !targets.IsNull()) {
      targets_.push_back(FromYaml(targets));
    }
  }
  bool Process(Sample& sample) const override {
    const std::string value = FieldStat(sample, key_);
    if (key_.empty() || targets_.empty()) return true;
    std::vector<Scalar> values;
    if (!value.empty() && value.front() == '[') {
      for (std::string_view item : io::SplitArray(value)) values.push_back(FromJson(item));
    } else {
      values.push_back(FromJson(value));
    }
    bool ok = true;
    for (const Scalar& v : values) {
      bool found = false;
      for (const Scalar& t : targets_) found = found || v == t;
      ok = ok && found;
    }
    return reversed() ? !ok : ok;
  }

 private:
  std::string key_;
  std::vector<Scalar> targets_;
};

// Python's float() of a string: surrounding whitespace, '_' between digits,
// "nan" and "inf"/"infinity" in any case. nullopt when it would raise.
std::optional<double> PythonFloat(const std::string& raw_text) {
  std::string s(text::Strip(raw_text));
  if (s.empty()) return std::nullopt;
  std::string cleaned;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      const bool between = i > 0 && i + 1 < s.size() &&
                           std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                           std::isdigit(static_cast<unsigned char>(s[i + 1]));
      if (!between) return std::nullopt;
      continue;
    }
    cleaned.push_back(s[i]);
  }
  std::string lower;
  for (char c : cleaned)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  std::string body = lower;
  double sign = 1;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    sign = body[0] == '-' ? -1 : 1;
    body.erase(0, 1);
  }
  if (body == "nan") return std::nan("");
  if (body == "inf" || body == "infinity") return sign * INFINITY;
  if (body.empty() || body.find_first_of("0123456789") == std::string::npos) return std::nullopt;
  for (char c : body) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != '+' &&
        c != '-') {
      return std::nullopt;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(cleaned.c_str(), &end);
  if (end != cleaned.c_str() + cleaned.size()) return std::nullopt;
  return v;
}

class SpecifiedNumericFieldFilter : public Filter {
 public:
  // The stat is named by the dotted field key (FieldStat).
  std::vector<std::string> stat_keys() const override { return {key_}; }
  SpecifiedNumericFieldFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : Filter(spec, key) {
    key_ = args().GetString("field_key", "");
    lo_ = args().GetDouble("min_value", -kMaxSize);
    hi_ = args().GetDouble("max_value", kMaxSize);
  }
  bool Process(Sample& sample) const override {
    const std::string value = NumericFieldStat(sample);
    if (key_.empty()) return true;
    // Truthy and float()-convertible, as in Data-Juicer: 0, "" and null are not
    // numbers; a non-empty list or object makes float() raise.
    std::optional<double> number;
    if (value.empty()) return false;
    const char c = value.front();
    if (c == '"') {
      const std::string s = io::UnescapeJsonString(value);
      if (!s.empty()) number = PythonFloat(s);
    } else if (value == "true") {
      number = 1.0;
    } else if (c == '[' || c == '{') {
      if (value.size() > 2 && value.find_first_not_of(" \t\r\n", 1) != value.size() - 1) {
        throw OpError("field '" + key_ + "' is not a number: float() of a " +
                      (c == '[' ? "list" : "dict"));
      }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const double v = std::strtod(value.c_str(), nullptr);
      if (v != 0) number = v;
    }
    if (!number) return false;  // not reversed even with reversed_range, as in Data-Juicer
    return InRange(*number, lo_, hi_);
  }

 private:
  // FieldStat, except for a record that lacks only the last part of the path:
  // Data-Juicer reads such records through the dataset's Arrow schema, which
  // gives them None there, a value that is not a number and drops the record
  // without an error. A parent that is missing, null or not an object makes
  // Data-Juicer's lookup raise, so it stays an operator error.
  std::string NumericFieldStat(Sample& sample) const {
    Sample::FieldLookup found = sample.LookupField(key_);
    if (!found.value) {
      if (key_.empty()) throw OpError("field '' not found");
      if (!found.only_last_part_missing) {
        throw OpError("field '" + key_ + "' not found: a parent is missing, null or not an object");
      }
      found.value = "null";
    }
    if (!sample.Stat(key_)) sample.SetStat(key_, *found.value);
    return std::string(*sample.Stat(key_));
  }

  std::string key_;
  double lo_, hi_;
};

}  // namespace

std::unique_ptr<Operator> MakeSuffixFilter(const recipe::OperatorSpec& s, const std::string& k) {
  return std::make_unique<SuffixFilter>(s, k);
}
std::unique_ptr<Operator> MakeSpecifiedFieldFilter(const recipe::OperatorSpec& s,
                                                   const std::string& k) {
  return std::make_unique<SpecifiedFieldFilter>(s, k);
}
std::unique_ptr<Operator> MakeSpecifiedNumericFieldFilter(const recipe::OperatorSpec& s,
                                                          const std::string& k) {
  return std::make_unique<SpecifiedNumericFieldFilter>(s, k);
}

}  // namespace djshard::ops
