#include "djshard/recipe/recipe.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "djshard/common/error.h"

namespace djshard::recipe {

namespace fs = std::filesystem;

namespace {

int LineOfNode(const YAML::Node& node) { return node.Mark().line >= 0 ? node.Mark().line + 1 : 0; }

std::optional<std::string> OptionalString(const YAML::Node& root, const char* key,
                                          const std::string& path) {
  const YAML::Node node = root[key];
  if (!node || node.IsNull()) return std::nullopt;
  if (!node.IsScalar()) {
    throw Error(path, LineOfNode(node), std::string("'") + key + "' must be a string");
  }
  return node.as<std::string>();
}

}  // namespace

OperatorArgs::OperatorArgs(YAML::Node args, std::string recipe_path, std::string op_name, int line)
    : args_(std::move(args)),
      recipe_path_(std::move(recipe_path)),
      op_name_(std::move(op_name)),
      line_(line) {}

bool OperatorArgs::Has(const std::string& key) const {
  return args_ && args_.IsMap() && static_cast<bool>(args_[key]);
}

std::vector<std::string> OperatorArgs::Keys() const {
  std::vector<std::string> keys;
  if (!args_ || !args_.IsMap()) return keys;
  for (const auto& kv : args_) {
    if (!kv.first.IsScalar()) {
      throw Error(recipe_path_, line_, op_name_ + ": an argument's name is not a string",
                  "write each argument as name: value under the operator");
    }
    keys.push_back(kv.first.Scalar());
  }
  return keys;
}

int OperatorArgs::LineOf(const std::string& key) const {
  if (!Has(key)) return line_;
  const int line = LineOfNode(args_[key]);
  return line > 0 ? line : line_;
}

int OperatorArgs::ColumnOf(const std::string& key) const {
  if (!Has(key) || args_[key].Mark().column < 0) return column_;
  return args_[key].Mark().column + 1;
}

void OperatorArgs::FailAtColumn(const std::string& key, const std::string& what,
                                const std::string& hint) const {
  ThrowAtPosition(recipe_path_, LineOf(key), ColumnOf(key),
                  op_name_ + ": argument '" + key + "' " + what, hint);
}

void ThrowAtPosition(const std::string& recipe_path, int line, int column, const std::string& what,
                     const std::string& hint) {
  // Error formats "<file>:<line>"; the column rides on the file part.
  throw Error(recipe_path + ":" + std::to_string(line), static_cast<uint64_t>(column), what, hint);
}

void OperatorArgs::Fail(const std::string& key, const std::string& what,
                        const std::string& hint) const {
  throw Error(recipe_path_, LineOf(key), op_name_ + ": argument '" + key + "' " + what, hint);
}

void OperatorArgs::FailAtLineOf(const std::string& key, const std::string& what,
                                const std::string& hint) const {
  throw Error(recipe_path_, LineOf(key), what, hint);
}

YAML::Node OperatorArgs::Raw(const std::string& key) const {
  return Has(key) ? args_[key] : YAML::Node();
}

std::string OperatorArgs::GetString(const std::string& key, const std::string& fallback) const {
  if (!Has(key) || args_[key].IsNull()) return fallback;
  if (!args_[key].IsScalar()) Fail(key, "must be a string", "write it as a plain value");
  return args_[key].as<std::string>();
}

int64_t OperatorArgs::GetInt(const std::string& key, int64_t fallback) const {
  if (!Has(key) || args_[key].IsNull()) return fallback;
  try {
    return args_[key].as<int64_t>();
  } catch (const YAML::Exception&) {
    Fail(key, "must be an integer", "got '" + args_[key].Scalar() + "'");
  }
}

double OperatorArgs::GetDouble(const std::string& key, double fallback) const {
  if (!Has(key) || args_[key].IsNull()) return fallback;
  try {
    return args_[key].as<double>();
  } catch (const YAML::Exception&) {
    Fail(key, "must be a number", "got '" + args_[key].Scalar() + "'");
  }
}

bool OperatorArgs::GetBool(const std::string& key, bool fallback) const {
  if (!Has(key) || args_[key].IsNull()) return fallback;
  try {
    return args_[key].as<bool>();
  } catch (const YAML::Exception&) {
    Fail(key, "must be true or false", "got '" + args_[key].Scalar() + "'");
  }
}

std::vector<std::string> OperatorArgs::GetStringList(
    const std::string& key, const std::vector<std::string>& fallback) const {
  if (!Has(key) || args_[key].IsNull()) return fallback;
  const YAML::Node node = args_[key];
  if (node.IsScalar()) return {node.as<std::string>()};
  if (!node.IsSequence()) Fail(key, "must be a string or a list of strings", "");
  std::vector<std::string> out;
  for (const auto& item : node) {
    if (!item.IsScalar()) Fail(key, "must be a string or a list of strings", "");
    out.push_back(item.as<std::string>());
  }
  return out;
}

namespace {

// The recipe file parsed as YAML; a mapping, else an Error.
YAML::Node ReadRecipeYaml(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw Error(path, 0, "recipe is not a readable file", "pass --config with a YAML recipe");
  }
  std::ifstream in(path);
  if (!in) throw Error(path, 0, "recipe is not a readable file", "check its permissions");
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::ParserException& e) {
    throw Error(path, e.mark.line + 1, "invalid YAML: " + e.msg, "fix the recipe's syntax");
  }
  if (!root.IsMap()) {
    throw Error(path, 0, "recipe must be a YAML mapping",
                "a Data-Juicer recipe has top-level keys such as dataset_path and process");
  }
  return root;
}

// The global keys djshard uses: paths, text and media keys, np and the two flags.
void ReadGlobalKeys(const YAML::Node& root, const std::string& path, Recipe& recipe) {
  recipe.dataset_path = OptionalString(root, "dataset_path", path);
  recipe.export_path = OptionalString(root, "export_path", path);
  recipe.executor_type = OptionalString(root, "executor_type", path);
  // Data-Juicer takes a string or a list for text_keys and uses its first key.
  if (const YAML::Node keys = root["text_keys"]; keys && keys.IsSequence()) {
    if (keys.size() == 0 || !keys[0].IsScalar()) {
      throw Error(path, LineOfNode(keys), "'text_keys' must be a string or a list of strings");
    }
    recipe.text_key = keys[0].as<std::string>();
  } else if (auto key = OptionalString(root, "text_keys", path)) {
    recipe.text_key = *key;
  }
  if (auto key = OptionalString(root, "text_key", path)) recipe.text_key = *key;
  if (auto key = OptionalString(root, "image_key", path)) recipe.image_key = *key;
  if (auto key = OptionalString(root, "audio_key", path)) recipe.audio_key = *key;
  if (auto key = OptionalString(root, "video_key", path)) recipe.video_key = *key;
  if (root["np"] && !root["np"].IsNull()) {
    try {
      recipe.np = root["np"].as<int64_t>();
    } catch (const YAML::Exception&) {
      throw Error(path, LineOfNode(root["np"]), "'np' must be an integer");
    }
    if (*recipe.np < 1) {
      throw Error(path, LineOfNode(root["np"]), "'np' must be a positive integer",
                  "it is the number of threads; got " + std::to_string(*recipe.np));
    }
  }
  for (const char* key : {"skip_op_error", "keep_stats_in_res_ds"}) {
    const YAML::Node node = root[key];
    if (!node || node.IsNull()) continue;
    bool value = false;
    try {
      value = node.as<bool>();
    } catch (const YAML::Exception&) {
      throw Error(path, LineOfNode(node), std::string("'") + key + "' must be true or false");
    }
    (std::string(key) == "skip_op_error" ? recipe.skip_op_error : recipe.keep_stats_in_res_ds) =
        value;
  }
}

// Entry i of the process list: "- name:" and its argument mapping.
OperatorSpec ReadOperatorEntry(const YAML::Node& entry, size_t i, const std::string& path) {
  const int line = LineOfNode(entry);
  if (!entry.IsMap() || entry.size() != 1 || !entry.begin()->first.IsScalar()) {
    throw Error(path, line,
                "process[" + std::to_string(i) + "] must be a mapping with exactly one key",
                "write '- operator_name:' followed by its arguments");
  }
  const auto first = entry.begin();
  OperatorSpec spec;
  spec.name = first->first.Scalar();
  spec.line = line;
  // The column of the entry's name, after "- ".
  const int column = first->first.Mark().column >= 0 ? first->first.Mark().column + 1 : 1;
  YAML::Node args = first->second;
  if (args && !args.IsNull() && !args.IsMap()) {
    throw Error(path, LineOfNode(args), "arguments of '" + spec.name + "' must be a mapping",
                "write 'name: value' pairs under the operator");
  }
  spec.args =
      OperatorArgs(args.IsMap() ? args : YAML::Node(YAML::NodeType::Map), path, spec.name, line);
  spec.args.set_column(column);
  return spec;
}

}  // namespace

Recipe LoadRecipe(const std::string& path) {
  const YAML::Node root = ReadRecipeYaml(path);
  Recipe recipe;
  recipe.path = path;
  recipe.root = root;
  recipe.directory = fs::absolute(fs::path(path)).lexically_normal().parent_path().string();
  ReadGlobalKeys(root, path, recipe);
  const YAML::Node process = root["process"];
  if (!process || process.IsNull()) {
    throw Error(path, 0, "recipe has no 'process' list",
                "list the operators to run under process:");
  }
  if (!process.IsSequence()) {
    throw Error(path, LineOfNode(process), "'process' must be a list of operators");
  }
  for (size_t i = 0; i < process.size(); ++i) {
    recipe.process.push_back(ReadOperatorEntry(process[i], i, path));
  }
  return recipe;
}

std::string ResolveRecipePath(const Recipe& recipe, const std::string& path) {
  const fs::path p(path);
  if (p.is_absolute()) return p.lexically_normal().string();
  const fs::path beside_recipe = (fs::path(recipe.directory) / p).lexically_normal();
  std::error_code ec;
  if (fs::exists(beside_recipe, ec)) return beside_recipe.string();
  const fs::path from_cwd = fs::absolute(p, ec).lexically_normal();
  if (fs::exists(from_cwd, ec)) return from_cwd.string();
  return beside_recipe.string();
}

nlohmann::json CanonicalJson(const YAML::Node& node) {
  if (!node || node.IsNull()) return nullptr;
  if (node.IsScalar()) return node.Scalar();
  if (node.IsSequence()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& item : node) a.push_back(CanonicalJson(item));
    return a;
  }
  nlohmann::json o = nlohmann::json::object();
  for (const auto& kv : node) o[kv.first.as<std::string>()] = CanonicalJson(kv.second);
  return o;
}

}  // namespace djshard::recipe
