#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace djshard::recipe {

// The arguments of one operator in a recipe, with typed accessors whose
// errors name the recipe file, the line, the operator and the argument.
class OperatorArgs {
 public:
  OperatorArgs() = default;
  OperatorArgs(YAML::Node args, std::string recipe_path, std::string op_name, int line);

  bool Has(const std::string& key) const;
  // Argument names in the order they were written.
  std::vector<std::string> Keys() const;
  // 1-based line of an argument (the operator's line when absent).
  int LineOf(const std::string& key) const;
  // 1-based column of an argument's value (the operator's column when absent).
  int ColumnOf(const std::string& key) const;

  std::string GetString(const std::string& key, const std::string& fallback) const;
  int64_t GetInt(const std::string& key, int64_t fallback) const;
  double GetDouble(const std::string& key, double fallback) const;
  bool GetBool(const std::string& key, bool fallback) const;
  // A string or a list of strings (a single string becomes a one-item list).
  std::vector<std::string> GetStringList(const std::string& key,
                                         const std::vector<std::string>& fallback) const;
  // The raw YAML node, for arguments of unusual shape.
  YAML::Node Raw(const std::string& key) const;

  // Throws an Error for argument `key` of this operator.
  [[noreturn]] void Fail(const std::string& key, const std::string& what,
                         const std::string& hint) const;
  // Throws an Error at the line of `key` (the operator's line when absent)
  // whose message is `what` as given.
  [[noreturn]] void FailAtLineOf(const std::string& key, const std::string& what,
                                 const std::string& hint) const;
  // Like Fail, with the column too: "<recipe>:<line>:<col>: <op>: argument ...".
  [[noreturn]] void FailAtColumn(const std::string& key, const std::string& what,
                                 const std::string& hint) const;

  // The entry's column, for positions of absent arguments.
  void set_column(int column) { column_ = column; }
  int column() const { return column_; }

 private:
  YAML::Node args_;
  std::string recipe_path_;
  std::string op_name_;
  int line_ = 0;
  int column_ = 0;
};

// An Error at a recipe position: "<recipe>:<line>:<col>: <what> (<hint>)".
[[noreturn]] void ThrowAtPosition(const std::string& recipe_path, int line, int column,
                                  const std::string& what, const std::string& hint);

// One entry of the recipe's `process` list.
struct OperatorSpec {
  std::string name;
  int line = 0;  // 1-based line in the recipe (its column: args.column())
  OperatorArgs args;
};

// A Data-Juicer YAML recipe. Knows no operator: names are checked by exec.
// Top-level keys other than these (Data-Juicer's executor settings such as
// ray_address, override_num_blocks, open_tracer, use_cache, op_fusion) are
// accepted and ignored.
struct Recipe {
  std::string path;       // as given by the user
  std::string directory;  // absolute directory of the recipe file
  std::optional<std::string> dataset_path;
  std::optional<std::string> export_path;
  std::optional<std::string> executor_type;
  std::string text_key = "text";  // text_key, else text_keys (its first key when a list)
  std::string image_key = "images";
  std::string audio_key = "audios";
  std::string video_key = "videos";
  std::optional<int64_t> np;
  bool skip_op_error = true;         // default of every operator's skip_op_error
  bool keep_stats_in_res_ds = true;  // keep __dj__stats__ and __dj__meta__ in the output
  std::vector<OperatorSpec> process;
  // The whole parsed document (sections such as partition: and checkpoint:
  // are read from it by the layers that own them).
  YAML::Node root;
};

// Loads and checks the shape of a recipe: a readable YAML file whose top level
// is a mapping, and whose `process` is a list of one-key mappings with mapping
// (or null) arguments. Throws Error with file and line.
Recipe LoadRecipe(const std::string& path);

// Resolves a recipe-relative path: absolute stays; relative is tried against
// the recipe's directory first, then against the current directory. Returns
// the first that exists, or the recipe-directory candidate when neither does.
std::string ResolveRecipePath(const Recipe& recipe, const std::string& path);

// A YAML document as canonical JSON: mappings with sorted keys, scalars as
// their text, so comments and formatting do not change it.
nlohmann::json CanonicalJson(const YAML::Node& node);

}  // namespace djshard::recipe
