#include "djshard/exec/shard_safety.h"

#include <algorithm>

#include "djshard/common/error.h"
#include "djshard/exec/plan.h"
#include "djshard/ops/dedup.h"

namespace djshard::exec {

namespace {

bool NeedsWholeDataset(const std::string& name) {
  return name.find("deduplicator") != std::string::npos ||
         name.find("global_") != std::string::npos ||
         name.find("full_dataset_") != std::string::npos;
}

// executor_type: djshard, or one that djshard's executor stands in for.
void CheckExecutorType(const recipe::Recipe& recipe, ShardSafetyReport* report) {
  if (!recipe.executor_type) return;
  const std::string& type = *recipe.executor_type;
  if (type == "default" || type == "ray" || type == "ray_partitioned") {
    report->warnings.push_back("executor_type '" + type +
                               "' is run in-process by djshard's executor");
  } else if (type != "djshard") {
    throw Error(recipe.path, 0, "executor_type '" + type + "' is not supported",
                "use default, ray, ray_partitioned or djshard");
  }
}

// Between an expand and its gather only per-record operators run, on
// children (SPEC-lineage §2 rule 3).
void CheckRegionMember(const recipe::Recipe& recipe, size_t idx, const ops::OperatorInfo* info) {
  const recipe::OperatorSpec& op = recipe.process[idx];
  const std::string region = EnclosingRegionName(recipe, idx);
  if (region.empty() ||
      !(NeedsWholeDataset(op.name) || (info != nullptr && info->kind != ops::OpKind::kMapper &&
                                       info->kind != ops::OpKind::kFilter))) {
    return;
  }
  recipe::ThrowAtPosition(
      recipe.path, op.line, op.args.column(),
      "operator '" + op.name + "' inside region '" + region + "' is a " +
          (info != nullptr ? ops::OpKindName(info->kind) : "whole-dataset operator") +
          ", which needs whole-dataset semantics; only per-record Mappers and Filters (and "
          "nested expand/gather pairs) run on children",
      "run it on the merged output; djshard shards only Mappers and Filters");
}

// The operator's arguments that cannot be shared by shards (stats_export_path,
// save_dir) and the index_key it adds.
void CheckOperatorArgs(const recipe::Recipe& recipe, const recipe::OperatorSpec& op,
                       ShardSafetyReport* report) {
  const std::string& path = recipe.path;
  const std::string where = "operator '" + op.name + "'";
  if (op.args.Has("stats_export_path")) {
    throw Error(path, op.args.LineOf("stats_export_path"),
                where + ": stats_export_path is not allowed",
                "each shard would overwrite the file; stats stay in __dj__stats__");
  }
  if (op.args.Has("save_dir")) {
    report->warnings.push_back(where +
                               ": save_dir is shared by every worker; files written there "
                               "are not part of the job's verified output");
  }
  if (op.args.Has("index_key")) {
    const YAML::Node key = op.args.Raw("index_key");
    if (!key.IsScalar() || key.Scalar().empty()) {
      throw Error(path, op.args.LineOf("index_key"),
                  where + ": index_key must be a non-empty string", "name the field to add");
    }
    report->index_keys.push_back(key.Scalar());
  }
}

// One operator of the recipe: a per-record Mapper or Filter this build knows,
// or a deduplicator where `run_deduplicators`.
void CheckOperator(const recipe::Recipe& recipe, const ops::Registry& registry, size_t idx,
                   bool run_deduplicators, ShardSafetyReport* report) {
  const std::string& path = recipe.path;
  const recipe::OperatorSpec& op = recipe.process[idx];
  const std::string where = "operator '" + op.name + "'";
  const ops::OperatorInfo* info = registry.Find(op.name);
  CheckRegionMember(recipe, idx, info);
  if (ops::dedup::IsDedupOperator(op.name)) {
    if (run_deduplicators) return;
    throw Error(path, op.line,
                where +
                    " requires whole-dataset semantics: it runs as a dedup stage, which this "
                    "job does not record",
                "prepare the job with this djshard (prepare records the recipe's dedup stages), "
                "or use 'djshard run' on one machine");
  }
  if (NeedsWholeDataset(op.name)) {
    throw Error(path, op.line, where + " requires whole-dataset semantics",
                "run it on the merged output; djshard shards only Mappers and Filters");
  }
  if (info == nullptr) {
    throw Error(path, op.line, "Unknown operator '" + op.name + "'; cannot prove it is shard-safe",
                "check the name against 'djshard ops'");
  }
  if (info->kind != ops::OpKind::kMapper && info->kind != ops::OpKind::kFilter) {
    throw Error(
        path, op.line,
        where + " is a " + ops::OpKindName(info->kind) + " and requires whole-dataset semantics",
        "only Mappers and Filters can run shard by shard");
  }
  CheckOperatorArgs(recipe, op, report);
  if (!info->implemented) {
    report->warnings.push_back(where +
                               " is not implemented by this djshard build; workers "
                               "will refuse the job until it is");
  }
}

}  // namespace

ShardSafetyReport CheckShardSafety(const recipe::Recipe& recipe, const ops::Registry& registry,
                                   bool run_deduplicators) {
  ShardSafetyReport report;
  CheckExecutorType(recipe, &report);
  for (size_t idx = 0; idx < recipe.process.size(); ++idx) {
    CheckOperator(recipe, registry, idx, run_deduplicators, &report);
  }
  std::sort(report.index_keys.begin(), report.index_keys.end());
  report.index_keys.erase(std::unique(report.index_keys.begin(), report.index_keys.end()),
                          report.index_keys.end());
  return report;
}

}  // namespace djshard::exec
