#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "djshard/ops/registry.h"
#include "djshard/ops/sample.h"
#include "djshard/recipe/recipe.h"

namespace djshard::ops {

// A configured operator. Process methods are const and thread-safe: one
// instance serves every executor thread.
class Operator {
 public:
  // Checks the arguments against the operator's own (its entry in the
  // registry of this build, Registry::Global()) and the common ones
  // (CommonArguments()); an unknown argument is an Error naming the operator
  // and the argument. `default_text_key` is the recipe's text key.
  Operator(const recipe::OperatorSpec& spec, const std::string& default_text_key);
  virtual ~Operator() = default;
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  const std::string& name() const { return name_; }
  const std::string& text_key() const { return text_key_; }
  virtual OpKind kind() const = 0;

 protected:
  const recipe::OperatorArgs& args() const { return args_; }

 private:
  std::string name_;
  std::string text_key_;
  recipe::OperatorArgs args_;
};

// Rewrites fields of a record (usually its text).
class Mapper : public Operator {
 public:
  using Operator::Operator;
  OpKind kind() const override { return OpKind::kMapper; }
  virtual void Map(Sample& sample) const = 0;
};

// Computes its statistics into __dj__stats__ (reusing a stat already there)
// and decides whether the record stays.
class Filter : public Operator {
 public:
  Filter(const recipe::OperatorSpec& spec, const std::string& default_text_key);
  OpKind kind() const override { return OpKind::kFilter; }
  // Whether the filter writes stats (suffix_filter does not).
  virtual bool uses_stats() const { return true; }
  virtual bool Process(Sample& sample) const = 0;

 protected:
  // Data-Juicer's range test: [lo, hi] with min_closed_interval,
  // max_closed_interval and reversed_range (which also flips the closedness).
  bool InRange(double value, std::optional<double> lo, std::optional<double> hi) const;
  bool reversed() const { return reversed_; }

 private:
  bool lo_closed_ = true;
  bool hi_closed_ = true;
  bool reversed_ = false;
};

// Data-Juicer's sys.maxsize default for open upper bounds.
inline constexpr double kMaxSize = 9223372036854775807.0;

}  // namespace djshard::ops
