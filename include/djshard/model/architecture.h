#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "djshard/model/weights.h"

namespace djshard::model {

// What a model directory holds, read from its config.json (a Hugging Face
// snapshot) or djshard_model.json (a TorchScript package).
enum class ModelKind {
  kRobertaClassifier,  // roberta, xlm-roberta: *ForSequenceClassification
  kBertClassifier,     // bert: BertForSequenceClassification
  kClipText,           // clip: the text tower and text_projection
  kScriptClassifier,   // TorchScript package, task sequence_classification
  kScriptClipText,     // TorchScript package, task clip_text
};

// How scores come from logits, as Hugging Face's text-classification pipeline
// chooses by default: sigmoid for one label or multi-label problems.
enum class ScoreFunction { kSoftmax, kSigmoid, kNone };

struct ModelConfig {
  std::string dir;
  std::string config_file;  // config.json or djshard_model.json, for errors
  ModelKind kind = ModelKind::kRobertaClassifier;
  std::string model_type;  // config.json's model_type
  int layers = 0, hidden = 0, heads = 0, intermediate = 0;
  int vocab_size = 0, max_position_embeddings = 0, type_vocab_size = 0;
  double layer_norm_eps = 1e-12;
  bool quick_gelu = false;
  int64_t pad_token_id = 0;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 0;
  // CLIP: pool at the first occurrence of the highest id (configs whose
  // eos_token_id is 2, as openai/clip-vit-base-patch32's), else at the first
  // eos_token_id.
  bool pool_at_highest_id = false;
  int max_tokens = 0;  // the longest input, special tokens included, the positions allow
  int out_dim = 0;     // number of labels, or the projection width
  std::vector<std::string> id2label;
  ScoreFunction score_function = ScoreFunction::kSoftmax;
  // TorchScript packages: the module file, and the reference the package was
  // exported with (texts and the outputs they must give, within atol).
  std::string script_file;
  std::vector<std::string> reference_texts;
  std::vector<std::vector<double>> reference_outputs;
  double reference_atol = 1e-4;
  std::string architecture_name;  // "RobertaForSequenceClassification", "TorchScript", ...

  bool is_classifier() const {
    return kind == ModelKind::kRobertaClassifier || kind == ModelKind::kBertClassifier ||
           kind == ModelKind::kScriptClassifier;
  }
  bool is_clip() const {
    return kind == ModelKind::kClipText || kind == ModelKind::kScriptClipText;
  }
  bool is_script() const {
    return kind == ModelKind::kScriptClassifier || kind == ModelKind::kScriptClipText;
  }
};

// Reads `dir`'s djshard_model.json (verifying the sha256 of every file it
// lists) or else its config.json. Throws djshard::Error naming the file for
// an unknown model type, an unsupported activation or a missing field.
ModelConfig ReadModelConfig(const std::string& dir);

// The position CLIP pools a row of token ids at (special tokens included):
// the first occurrence of the highest id when config.pool_at_highest_id (and
// for TorchScript CLIP packages), else the first eos_token_id (the last
// position when there is none). 0 for other models.
int64_t PoolIndex(const ModelConfig& config, const std::vector<int64_t>& ids);

// The tensors a native architecture needs, under the canonical names the
// libtorch module uses ("emb.word", "L0.q.w", "head.out.b", ...). Throws
// djshard::Error naming the weights file and the tensor when one is missing,
// has an unexpected shape or a dtype other than F32, F16 and BF16. Tensors
// the architecture does not use are ignored.
std::vector<std::pair<std::string, const WeightTensor*>> BindWeights(const ModelConfig& config,
                                                                     const WeightSet& weights);

}  // namespace djshard::model
