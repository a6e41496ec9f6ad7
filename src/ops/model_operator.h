#pragma once

// What the model operators share (SPEC-models §1, §5, §6): resolving the model
// argument, the device a replica runs on, the tokenizer, truncation and the
// shape-stable batcher.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/model/architecture.h"
#include "djshard/model/batcher.h"
#include "djshard/model/device_model.h"
#include "djshard/model/tokenizer.h"
#include "djshard/ops/operator.h"
#include "djshard/ops/registry.h"
#include "djshard/recipe/recipe.h"

namespace djshard::ops {

// A model operator's model, loaded once per device in the process.
class ModelRunner {
 public:
  // Reads the common model arguments of `spec` and the model named by
  // argument `model_key` (default `fallback`). Throws djshard::Error at the
  // recipe line for a bad argument, a model not on this machine, or a GPU
  // that was asked for and is not there. `truncation_default`: whether
  // over-long inputs are cut (else they fail with error_type too_long).
  ModelRunner(const recipe::OperatorSpec& spec, const std::string& model_key,
              const std::string& fallback, bool truncation_default);
  ~ModelRunner();

  // One text, encoded for the model.
  struct Encoded {
    std::vector<int64_t> ids;
    int64_t pool_index = 0;  // CLIP: where the row is pooled
    std::string error;       // non-empty: the text cannot be run
    std::string error_type;  // "too_long"
  };
  void Encode(std::string_view text, Encoded* out) const;

  // Runs the rows on this process's replicas (blocking).
  void Run(std::span<model::ModelRow> rows) const;

  const model::ModelConfig& config() const { return config_; }
  // The model directory, dtype, batch size and first device, for preflight.
  Operator::ModelDescription description() const;
  int batch_size() const { return batch_size_; }
  // Rows per executor batch: batch_size on the CPU, where every executor
  // thread runs its own rows; 8 x batch_size on a GPU, so that length
  // buckets fill (Operator::preferred_batch_rows).
  size_t preferred_batch_rows() const;

 private:
  // Resolves the model directory, reads its config, max_length and tokenizer.
  void LoadModel(const recipe::OperatorArgs& args, const std::string& model_key,
                 const std::string& fallback, const std::string& revision);
  // Loads the weights on `devices` (num_proc of them at most), one batcher each.
  void StartReplicas(const recipe::OperatorArgs& args, const std::vector<std::string>& devices,
                     model::ComputeDType dtype, int64_t wait_ms);

  std::string op_name_;
  std::string dir_;
  std::string dtype_name_;
  model::ModelConfig config_;
  std::shared_ptr<const model::Tokenizer> tokenizer_;
  bool truncation_ = false;
  int max_tokens_ = 0;
  int batch_size_ = 64;
  struct Replica;
  std::vector<std::unique_ptr<Replica>> replicas_;  // one per device
  std::string first_device_ = "cpu";                // where the first replica runs (or would run)
};

// The arguments every model operator takes besides its own, for `djshard ops`.
std::vector<ArgDoc> ModelArgumentDocs(const std::string& truncation_default);

}  // namespace djshard::ops
