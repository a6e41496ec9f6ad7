// config.json and djshard_model.json, and the tensor names of Hugging Face's
// state dicts for the architectures djshard builds natively.
#include "djshard/model/architecture.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "djshard/common/error.h"
#include "djshard/io/disk.h"
#include "djshard/io/sha256.h"

namespace djshard::model {

namespace {

nlohmann::json ReadJsonFile(const std::string& path) {
  try {
    return nlohmann::json::parse(io::ReadFile(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, 0, std::string("not valid JSON: ") + e.what(), "");
  }
}

template <typename T>
T Get(const nlohmann::json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

std::vector<std::string> Labels(const nlohmann::json& id2label) {
  std::map<int64_t, std::string> by_id;
  for (const auto& [k, v] : id2label.items()) {
    char* end = nullptr;
    const long long id = std::strtoll(k.c_str(), &end, 10);
    if (k.empty() || *end != '\0') return {};
    by_id[id] = v.get<std::string>();
  }
  std::vector<std::string> labels;
  for (const auto& [id, name] : by_id) {
    if (id != static_cast<int64_t>(labels.size())) return {};
    labels.push_back(name);
  }
  return labels;
}

bool HasArchitecture(const nlohmann::json& j, const std::string& suffix) {
  const nlohmann::json architectures = j.value("architectures", nlohmann::json::array());
  for (const auto& a : architectures) {
    const std::string name = a.get<std::string>();
    if (name.size() >= suffix.size() && name.ends_with(suffix)) return true;
  }
  return false;
}

void ReadActivation(ModelConfig* c, const std::string& act) {
  if (act == "gelu") {
    c->quick_gelu = false;
  } else if (act == "quick_gelu") {
    c->quick_gelu = true;
  } else {
    throw Error(c->config_file, 0, "hidden_act '" + act + "' is not supported",
                "djshard builds gelu and quick_gelu natively; export other models as a "
                "TorchScript package with tools/export_torchscript.py");
  }
}

ModelConfig ReadEncoder(ModelConfig c, const nlohmann::json& j, bool roberta) {
  c.kind = roberta ? ModelKind::kRobertaClassifier : ModelKind::kBertClassifier;
  c.layers = Get(j, "num_hidden_layers", 12);
  c.hidden = Get(j, "hidden_size", 768);
  c.heads = Get(j, "num_attention_heads", 12);
  c.intermediate = Get(j, "intermediate_size", 3072);
  c.vocab_size = Get(j, "vocab_size", roberta ? 50265 : 30522);
  c.max_position_embeddings = Get(j, "max_position_embeddings", 512);
  c.type_vocab_size = Get(j, "type_vocab_size", 2);
  c.layer_norm_eps = Get(j, "layer_norm_eps", 1e-12);
  c.pad_token_id = Get<int64_t>(j, "pad_token_id", roberta ? 1 : 0);
  c.bos_token_id = Get<int64_t>(j, "bos_token_id", 0);
  c.eos_token_id = Get<int64_t>(j, "eos_token_id", 2);
  ReadActivation(&c, Get<std::string>(j, "hidden_act", "gelu"));
  const std::string pe = Get<std::string>(j, "position_embedding_type", "absolute");
  if (pe != "absolute") {
    throw Error(c.config_file, 0, "position_embedding_type '" + pe + "' is not supported",
                "only absolute position embeddings are built natively");
  }
  // RoBERTa's positions start after the padding id.
  c.max_tokens = roberta ? c.max_position_embeddings - static_cast<int>(c.pad_token_id) - 1
                         : c.max_position_embeddings;
  if (!HasArchitecture(j, "ForSequenceClassification")) {
    throw Error(c.config_file, 0,
                "the model has no sequence-classification head (architectures: " +
                    j.value("architectures", nlohmann::json::array()).dump() + ")",
                "use a *ForSequenceClassification snapshot");
  }
  c.architecture_name =
      roberta ? "RobertaForSequenceClassification" : "BertForSequenceClassification";
  if (c.model_type == "xlm-roberta") c.architecture_name = "XLMRobertaForSequenceClassification";
  if (j.contains("id2label")) {
    c.id2label = Labels(j["id2label"]);
    if (c.id2label.empty()) {
      throw Error(c.config_file, 0, "id2label must number its labels 0, 1, ... n-1", "");
    }
  }
  const int num_labels = Get(j, "num_labels", static_cast<int>(c.id2label.size()));
  if (c.id2label.empty()) {
    for (int i = 0; i < std::max(num_labels, 2); ++i)
      c.id2label.push_back("LABEL_" + std::to_string(i));
  }
  c.out_dim = static_cast<int>(c.id2label.size());
  const std::string problem = Get<std::string>(j, "problem_type", "");
  c.score_function = (problem == "multi_label_classification" || c.out_dim == 1)
                         ? ScoreFunction::kSigmoid
                         : ScoreFunction::kSoftmax;
  return c;
}

ModelConfig ReadClip(ModelConfig c, const nlohmann::json& top) {
  const nlohmann::json& j = top.value("model_type", "") == "clip" ? top.at("text_config") : top;
  c.kind = ModelKind::kClipText;
  c.layers = Get(j, "num_hidden_layers", 12);
  c.hidden = Get(j, "hidden_size", 512);
  c.heads = Get(j, "num_attention_heads", 8);
  c.intermediate = Get(j, "intermediate_size", 2048);
  c.vocab_size = Get(j, "vocab_size", 49408);
  c.max_position_embeddings = Get(j, "max_position_embeddings", 77);
  c.layer_norm_eps = Get(j, "layer_norm_eps", 1e-5);
  c.pad_token_id = Get<int64_t>(j, "pad_token_id", 1);
  c.bos_token_id = Get<int64_t>(j, "bos_token_id", 49406);
  c.eos_token_id = Get<int64_t>(j, "eos_token_id", 49407);
  c.pool_at_highest_id = c.eos_token_id == 2;
  ReadActivation(&c, Get<std::string>(j, "hidden_act", "quick_gelu"));
  c.max_tokens = c.max_position_embeddings;
  c.out_dim = Get(top, "projection_dim", Get(j, "projection_dim", 512));
  c.architecture_name = "CLIPTextModelWithProjection";
  return c;
}

ModelConfig ReadPackage(ModelConfig c, const std::string& path) {
  const nlohmann::json j = ReadJsonFile(path);
  try {
    const std::string task = j.at("task").get<std::string>();
    if (task == "sequence_classification") {
      c.kind = ModelKind::kScriptClassifier;
    } else if (task == "clip_text") {
      c.kind = ModelKind::kScriptClipText;
    } else {
      throw Error(path, 0, "task '" + task + "' is not supported",
                  "djshard runs sequence_classification and clip_text packages");
    }
    c.architecture_name = "TorchScript (" + task + ")";
    const std::vector<std::string> inputs =
        j.value("inputs", std::vector<std::string>{"input_ids", "attention_mask"});
    if (inputs != std::vector<std::string>{"input_ids", "attention_mask"}) {
      throw Error(path, 0, "inputs must be [\"input_ids\", \"attention_mask\"]",
                  "re-export the package with tools/export_torchscript.py");
    }
    c.max_tokens = j.at("max_length").get<int>();
    c.pad_token_id = j.value("pad_token_id", int64_t{0});
    const std::string module = j.value("module", std::string("model.ts.pt"));
    c.script_file = c.dir + "/" + module;
    if (c.kind == ModelKind::kScriptClassifier) {
      c.id2label = Labels(j.at("id2label"));
      if (c.id2label.empty()) throw Error(path, 0, "id2label must number labels 0..n-1", "");
      c.out_dim = static_cast<int>(c.id2label.size());
      const std::string f = j.value("function_to_apply", std::string("softmax"));
      if (f == "softmax") {
        c.score_function = ScoreFunction::kSoftmax;
      } else if (f == "sigmoid") {
        c.score_function = ScoreFunction::kSigmoid;
      } else if (f == "none") {
        c.score_function = ScoreFunction::kNone;
      } else {
        throw Error(path, 0, "function_to_apply '" + f + "' is unknown",
                    "softmax, sigmoid or none");
      }
    } else {
      c.out_dim = j.at("embedding_dim").get<int>();
    }
    // Every file the package consists of is pinned by its sha256, the
    // module first of all; names stay inside the package directory.
    const nlohmann::json files = j.value("files", nlohmann::json::object());
    if (!files.contains(module)) {
      throw Error(path, 0, "files does not list the module " + module + " with its sha256",
                  "export the package with tools/export_torchscript.py");
    }
    for (const auto& [name, sha] : files.items()) {
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
        throw Error(path, 0, "files names '" + name + "', which is not a file of the package", "");
      }
      const std::string file = c.dir + "/" + name;
      const std::string actual = io::Sha256OfFile(file);
      if (actual != sha.get<std::string>()) {
        throw Error(file, 0,
                    "sha256 " + actual + " differs from the package's " + sha.get<std::string>(),
                    "the package was modified after export; export it again");
      }
    }
    if (j.contains("reference")) {
      const nlohmann::json& r = j["reference"];
      c.reference_texts = r.at("texts").get<std::vector<std::string>>();
      c.reference_outputs = r.at("outputs").get<std::vector<std::vector<double>>>();
      c.reference_atol = r.value("atol", 1e-4);
      if (c.reference_texts.size() != c.reference_outputs.size()) {
        throw Error(path, 0, "reference.texts and reference.outputs differ in length", "");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, 0, std::string("bad package description: ") + e.what(),
                "see tools/export_torchscript.py for the format");
  }
  return c;
}

// Adds `canonical` from `source`, checking its shape and dtype.
class Binder {
 public:
  Binder(const ModelConfig& config, const WeightSet& weights)
      : config_(config), weights_(weights) {}

  void Add(const std::string& canonical, const std::string& source, std::vector<int64_t> shape,
           bool optional = false) {
    const WeightTensor* t = weights_.Find(source);
    if (t == nullptr) {
      if (optional) return;
      const std::string file = weights_.files().empty() ? config_.dir : weights_.files().front();
      throw Error(
          file, 0, "tensor '" + source + "' is missing",
          "the weights do not match config.json's architecture " + config_.architecture_name);
    }
    if (t->dtype != WeightDType::kF32 && t->dtype != WeightDType::kF16 &&
        t->dtype != WeightDType::kBF16) {
      throw Error(t->file, 0, "tensor '" + source + "' has dtype " + WeightDTypeName(t->dtype),
                  "model weights must be F32, F16 or BF16");
    }
    if (t->shape != shape) {
      auto str = [](const std::vector<int64_t>& s) {
        std::string out = "[";
        for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
        return out + "]";
      };
      throw Error(t->file, 0,
                  "tensor '" + source + "' has shape " + str(t->shape) + ", expected " + str(shape),
                  "the weights do not match " + config_.config_file);
    }
    bound_.emplace_back(canonical, t);
  }
  void Linear(const std::string& canonical, const std::string& source, int64_t out, int64_t in,
              bool bias = true) {
    Add(canonical + ".w", source + ".weight", {out, in});
    if (bias) Add(canonical + ".b", source + ".bias", {out});
  }
  void Norm(const std::string& canonical, const std::string& source, int64_t n) {
    Add(canonical + ".w", source + ".weight", {n});
    Add(canonical + ".b", source + ".bias", {n});
  }
  // The prefix under which the model's tensors are stored.
  std::string Prefix(std::initializer_list<const char*> candidates,
                     const std::string& probe) const {
    for (const char* p : candidates) {
      if (weights_.Find(p + probe) != nullptr) return p;
    }
    return *candidates.begin();
  }
  std::vector<std::pair<std::string, const WeightTensor*>> Take() { return std::move(bound_); }

 private:
  const ModelConfig& config_;
  const WeightSet& weights_;
  std::vector<std::pair<std::string, const WeightTensor*>> bound_;
};

}  // namespace

ModelConfig ReadModelConfig(const std::string& dir) {
  ModelConfig c;
  c.dir = dir;
  const std::string package = dir + "/djshard_model.json";
  if (std::filesystem::exists(package)) {
    c.config_file = package;
    return ReadPackage(c, package);
  }
  c.config_file = dir + "/config.json";
  if (!std::filesystem::exists(c.config_file)) {
    throw Error(c.config_file, 0, "the model directory has no config.json or djshard_model.json",
                "point the operator at a Hugging Face snapshot or a TorchScript package");
  }
  const nlohmann::json j = ReadJsonFile(c.config_file);
  try {
    c.model_type = j.value("model_type", std::string());
    if (c.model_type == "roberta" || c.model_type == "xlm-roberta") return ReadEncoder(c, j, true);
    if (c.model_type == "bert") return ReadEncoder(c, j, false);
    if (c.model_type == "clip" || c.model_type == "clip_text_model") return ReadClip(c, j);
  } catch (const nlohmann::json::exception& e) {
    throw Error(c.config_file, 0, std::string("bad config: ") + e.what(), "");
  }
  throw Error(c.config_file, 0, "model_type '" + c.model_type + "' is not built natively",
              "djshard reads roberta, xlm-roberta, bert and clip snapshots; export other "
              "architectures as a TorchScript package with tools/export_torchscript.py");
}

int64_t PoolIndex(const ModelConfig& config, const std::vector<int64_t>& ids) {
  if (!config.is_clip() || ids.empty()) return 0;
  if (config.pool_at_highest_id || config.is_script()) {
    // std::max_element returns the first of equal maxima.
    return std::max_element(ids.begin(), ids.end()) - ids.begin();
  }
  const auto eos = std::find(ids.begin(), ids.end(), config.eos_token_id);
  return eos == ids.end() ? static_cast<int64_t>(ids.size()) - 1 : eos - ids.begin();
}

std::vector<std::pair<std::string, const WeightTensor*>> BindWeights(const ModelConfig& c,
                                                                     const WeightSet& weights) {
  Binder b(c, weights);
  const int64_t H = c.hidden, I = c.intermediate;
  if (c.kind == ModelKind::kRobertaClassifier || c.kind == ModelKind::kBertClassifier) {
    const bool roberta = c.kind == ModelKind::kRobertaClassifier;
    const std::string p = roberta ? b.Prefix({"roberta.", ""}, "embeddings.word_embeddings.weight")
                                  : b.Prefix({"bert.", ""}, "embeddings.word_embeddings.weight");
    b.Add("emb.word", p + "embeddings.word_embeddings.weight", {c.vocab_size, H});
    b.Add("emb.pos", p + "embeddings.position_embeddings.weight", {c.max_position_embeddings, H});
    b.Add("emb.type", p + "embeddings.token_type_embeddings.weight", {c.type_vocab_size, H},
          /*optional=*/c.type_vocab_size == 0);
    b.Norm("emb.ln", p + "embeddings.LayerNorm", H);
    for (int l = 0; l < c.layers; ++l) {
      const std::string L = "L" + std::to_string(l);
      const std::string s = p + "encoder.layer." + std::to_string(l) + ".";
      b.Linear(L + ".q", s + "attention.self.query", H, H);
      b.Linear(L + ".k", s + "attention.self.key", H, H);
      b.Linear(L + ".v", s + "attention.self.value", H, H);
      b.Linear(L + ".ao", s + "attention.output.dense", H, H);
      b.Norm(L + ".ao_ln", s + "attention.output.LayerNorm", H);
      b.Linear(L + ".in", s + "intermediate.dense", I, H);
      b.Linear(L + ".out", s + "output.dense", H, I);
      b.Norm(L + ".out_ln", s + "output.LayerNorm", H);
    }
    if (roberta) {
      b.Linear("head.dense", "classifier.dense", H, H);
      b.Linear("head.out", "classifier.out_proj", c.out_dim, H);
    } else {
      b.Linear("pooler", p + "pooler.dense", H, H);
      b.Linear("head.out", "classifier", c.out_dim, H);
    }
  } else if (c.kind == ModelKind::kClipText) {
    const std::string p = "text_model.";
    b.Add("emb.word", p + "embeddings.token_embedding.weight", {c.vocab_size, H});
    b.Add("emb.pos", p + "embeddings.position_embedding.weight", {c.max_position_embeddings, H});
    for (int l = 0; l < c.layers; ++l) {
      const std::string L = "L" + std::to_string(l);
      const std::string s = p + "encoder.layers." + std::to_string(l) + ".";
      b.Norm(L + ".ln1", s + "layer_norm1", H);
      b.Linear(L + ".q", s + "self_attn.q_proj", H, H);
      b.Linear(L + ".k", s + "self_attn.k_proj", H, H);
      b.Linear(L + ".v", s + "self_attn.v_proj", H, H);
      b.Linear(L + ".o", s + "self_attn.out_proj", H, H);
      b.Norm(L + ".ln2", s + "layer_norm2", H);
      b.Linear(L + ".fc1", s + "mlp.fc1", I, H);
      b.Linear(L + ".fc2", s + "mlp.fc2", H, I);
    }
    b.Norm("final_ln", p + "final_layer_norm", H);
    b.Linear("proj", "text_projection", c.out_dim, H, /*bias=*/false);
  } else {
    throw Error(c.config_file, 0, "a TorchScript package has no weights to bind", "");
  }
  return b.Take();
}

}  // namespace djshard::model
