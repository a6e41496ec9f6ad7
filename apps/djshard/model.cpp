// djshard model check DIR: loads a model as the operators would and says what
// it is; runs a TorchScript package's reference texts.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "djshard/common/error.h"
#include "djshard/model/batcher.h"
#include "djshard/model/device.h"
#include "djshard/model/device_model.h"
#include "djshard/model/model_path.h"
#include "djshard/model/tokenizer.h"

namespace djshard::cli {

namespace {

struct CheckOptions {
  std::string model;
  std::string device = "cpu";
  std::string dtype = "float32";
};

const char* KindName(model::ModelKind kind) {
  switch (kind) {
    case model::ModelKind::kRobertaClassifier:
    case model::ModelKind::kBertClassifier:
    case model::ModelKind::kScriptClassifier:
      return "sequence classifier";
    default:
      return "CLIP text encoder";
  }
}

// Runs `texts` one at a time (batch 1) and returns their outputs.
std::vector<std::vector<float>> RunTexts(const model::DeviceModel& m, const model::Tokenizer& tok,
                                         const std::vector<std::string>& texts) {
  const model::ModelConfig& c = m.config();
  std::vector<std::vector<float>> outputs;
  for (const std::string& text : texts) {
    const model::Encoding e = tok.Encode(text, true);
    std::vector<int64_t> ids(e.ids.begin(), e.ids.end());
    if (ids.size() > static_cast<size_t>(c.max_tokens)) {
      throw Error(c.config_file, 0,
                  "reference text of " + std::to_string(ids.size()) +
                      " tokens exceeds max_length " + std::to_string(c.max_tokens),
                  "");
    }
    std::vector<int64_t> mask(ids.size(), 1);
    int64_t pool = model::PoolIndex(c, ids);
    std::vector<float> out(static_cast<size_t>(c.out_dim));
    m.Forward(ids.data(), mask.data(), &pool, 1, static_cast<int64_t>(ids.size()), out.data());
    outputs.push_back(std::move(out));
  }
  return outputs;
}

// The model's directory, from a path or the local Hugging Face caches.
std::string FindModelDir(const std::string& model) {
  const model::ModelLookup found = model::FindHuggingFaceModel(model);
  if (!found.path) {
    throw Error(
        model, 0,
        "no such model on this machine; djshard looked in:" + model::ListSearched(found.searched),
        "give a directory, or fill the cache with `huggingface-cli download " + model +
            "` on a connected machine");
  }
  return std::filesystem::path(*found.path).lexically_normal().string();
}

model::ComputeDType ParseDType(const CheckOptions& opt) {
  const std::optional<model::ComputeDType> dtype = model::ParseComputeDType(opt.dtype);
  if (!dtype) throw Error("--dtype '" + opt.dtype + "' is unknown", "float32, bfloat16 or float16");
  if (*dtype == model::ComputeDType::kFloat16 && opt.device == "cpu") {
    throw Error("--dtype float16 runs only on CUDA", "use float32 or bfloat16 on the CPU");
  }
  return *dtype;
}

void PrintModel(const std::string& dir, const model::DeviceModel& m, const model::Tokenizer& tok) {
  const model::ModelConfig& c = m.config();
  std::printf("model: %s\n", dir.c_str());
  std::printf("architecture: %s (%s)\n", c.architecture_name.c_str(), KindName(c.kind));
  if (!c.is_script()) {
    std::printf("size: %d layers, hidden %d, %d heads; %llu parameters\n", c.layers, c.hidden,
                c.heads, static_cast<unsigned long long>(m.parameter_count()));
  }
  std::printf("weights: %s, %s; running in %s on %s\n", m.weights_format().c_str(),
              m.weights_dtype().c_str(), model::ComputeDTypeName(m.dtype()), m.device().c_str());
  std::printf("tokenizer: %s\n", tok.source().c_str());
  std::printf("max tokens: %d\n", c.max_tokens);
  if (c.is_classifier()) {
    std::string labels;
    for (const std::string& l : c.id2label) labels += (labels.empty() ? "" : ", ") + l;
    std::printf("labels: %s\n", labels.c_str());
  } else {
    std::printf("embedding width: %d\n", c.out_dim);
  }
}

// A TorchScript package's reference texts: the outputs must match within atol.
void CheckReferenceOutputs(const model::DeviceModel& m, const model::Tokenizer& tok) {
  const model::ModelConfig& c = m.config();
  const auto outputs = RunTexts(m, tok, c.reference_texts);
  double worst = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].size() != c.reference_outputs[i].size()) {
      throw Error(c.config_file, 0,
                  "reference output " + std::to_string(i) + " has " +
                      std::to_string(c.reference_outputs[i].size()) + " values, the model gives " +
                      std::to_string(outputs[i].size()),
                  "export the package again");
    }
    for (size_t k = 0; k < outputs[i].size(); ++k) {
      worst = std::max(worst, std::fabs(outputs[i][k] - c.reference_outputs[i][k]));
    }
  }
  std::printf("reference: %zu texts, largest difference %.3g (atol %.3g)\n", outputs.size(), worst,
              c.reference_atol);
  if (!(worst <= c.reference_atol)) {
    throw Error(
        c.config_file, 0,
        "the model's outputs differ from the package's reference by " + std::to_string(worst),
        "the package or its reference was modified; export it again");
  }
}

// A model without reference texts: one text must give finite outputs.
void SmokeTest(const std::string& dir, const model::DeviceModel& m, const model::Tokenizer& tok) {
  const auto outputs = RunTexts(m, tok, {"djshard model check"});
  for (float v : outputs[0]) {
    if (!std::isfinite(v)) throw Error(dir, 0, "the model's output is not finite", "");
  }
  std::printf("smoke test: ok\n");
}

void CheckModel(const CheckOptions& opt) {
  const std::string dir = FindModelDir(opt.model);
  const model::ComputeDType dtype = ParseDType(opt);
  const auto m = model::DeviceModel::Get(dir, opt.device, dtype);
  const auto tok = model::Tokenizer::Load(dir);
  PrintModel(dir, *m, *tok);
  if (!m->config().reference_texts.empty()) {
    CheckReferenceOutputs(*m, *tok);
  } else {
    SmokeTest(dir, *m, *tok);
  }
}

}  // namespace

void AddModelCommand(CLI::App& app, int* exit_code) {
  CLI::App* model_cmd = app.add_subcommand("model", "Inspect local model snapshots");
  model_cmd->require_subcommand(1);
  auto opt = std::make_shared<CheckOptions>();
  CLI::App* cmd = model_cmd->add_subcommand(
      "check",
      "Load a model directory (Hugging Face snapshot or TorchScript package) as the operators "
      "would; print its architecture, size and tokenizer; run a package's reference texts. Exit 0 "
      "when it loads and matches, else 2");
  cmd->add_option("model", opt->model, "Model directory, or an id in the local caches")->required();
  cmd->add_option("--device", opt->device, "cpu or cuda:N")->capture_default_str();
  cmd->add_option("--dtype", opt->dtype, "float32, bfloat16 or float16")->capture_default_str();
  cmd->callback([opt, exit_code]() {
    CheckModel(*opt);
    *exit_code = 0;
  });
}

}  // namespace djshard::cli
