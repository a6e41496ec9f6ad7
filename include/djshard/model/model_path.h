#pragma once

#include <optional>
#include <string>
#include <vector>

namespace djshard::model {

// Where a model argument was found, or every place it was looked for.
struct ModelLookup {
  std::optional<std::string> path;
  std::vector<std::string> searched;
};

// Resolves a model argument without touching the network (SPEC-models §1):
// an existing directory or file is itself; an id "org/name" is looked up in
// $DJSHARD_MODEL_HOME/org--name, then in the Hugging Face cache
// ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub) as
// models--org--name/snapshots/<the revision in refs/<revision>>/.
ModelLookup FindHuggingFaceModel(const std::string& name, const std::string& revision = "main");

// A directory of Data-Juicer's cache: $<variable>, else
// $DATA_JUICER_CACHE_HOME/<name>, else $CACHE_HOME/data_juicer/<name>, else
// ~/.cache/data_juicer/<name>. ("DATA_JUICER_ASSETS_CACHE", "assets") is
// where its word lists live, ("DATA_JUICER_MODELS_CACHE", "models") its models.
std::string DataJuicerCacheDir(const char* variable, const char* name);

// Looks for the file `file_name` in $DJSHARD_MODEL_HOME, then where
// Data-Juicer's check_model looks: `file_name` itself (from the working
// directory), each directory of $DATA_JUICER_EXTERNAL_MODELS_HOME (separated
// by ':'), Data-Juicer's model cache ($DATA_JUICER_MODELS_CACHE, else
// $DATA_JUICER_CACHE_HOME/models, else ~/.cache/data_juicer/models).
ModelLookup FindDataJuicerModelFile(const std::string& file_name);

// "  <path>" lines for an error message.
std::string ListSearched(const std::vector<std::string>& searched);

}  // namespace djshard::model
