#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "djshard/ops/registry.h"
#include "djshard/ops/sample.h"
#include "djshard/recipe/recipe.h"

namespace djshard::ops {

// What became of one row in Operator::ProcessRows.
struct RowOutcome {
  bool keep = true;
  std::string error;       // non-empty: a record error; the row is dropped and reported
  std::string error_type;  // optional class of the error ("too_long", "oom")
};

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

  // Operators that process the live rows of a batch together (the model
  // operators, which batch rows for a device) return true, and the executor
  // calls ProcessRows instead of Map or Process.
  virtual bool processes_rows_together() const { return false; }
  // Runs every sample of `rows`. outcomes[i] says whether rows[i] stays
  // (filters) or why it failed (a record error, as Map/Process throwing
  // OpError). Throwing fails the whole run (a device that broke).
  virtual void ProcessRows(std::span<Sample* const> rows, std::span<RowOutcome> outcomes) const;
  // Rows per executor batch that this operator works best with (0: no
  // preference); the plan takes the largest.
  virtual size_t preferred_batch_rows() const { return 0; }

  // A model operator's model, for preflight (SPEC-checkpoints §10): nullopt
  // for operators without one.
  struct ModelDescription {
    std::string dir;      // the resolved model directory
    std::string dtype;    // float32, bfloat16 or float16
    int batch_size = 64;  // rows per model call
    std::string device;   // the device its first replica runs on ("cpu", "cuda:0")
    // What computes it, as done records and run summaries list it under
    // model_devices: "cpu/float32 (ATen AVX2, OpenBLAS 0.3.21 Haswell)". Two
    // of them may give results that differ in the last bits.
    std::string compute;
  };
  virtual std::optional<ModelDescription> model_description() const { return std::nullopt; }

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
  // The __dj__stats__ keys the filter writes (empty when it declares none).
  virtual std::vector<std::string> stat_keys() const { return {}; }
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
