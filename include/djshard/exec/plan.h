#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "djshard/ops/lineage.h"
#include "djshard/ops/operator.h"
#include "djshard/ops/registry.h"
#include "djshard/recipe/recipe.h"

namespace djshard::exec {

// One configured operator of a plan, with the recipe options that concern it.
struct PlannedOperator {
  std::unique_ptr<ops::Operator> op;
  bool skip_op_error = true;  // drop and report a failing record instead of stopping
  int line = 0, column = 0;   // the recipe entry's position
  // Lineage (SPEC-lineage): the innermost expand/gather region whose interior
  // holds the operator (-1: parent level; an expand or gather entry belongs to
  // the level around its own region).
  int region = -1;
  // Operators that process rows together: rows per call inside a region (the
  // operator's batch_size, 64 when unset), and whether one call may hold
  // children of several parents (batching_policy any_parent) or not.
  size_t call_rows = 64;
  bool single_parent = false;
  bool batching_policy_given = false;  // the recipe set batching_policy
  size_t batch_rows_wish = 0;          // rows per reader batch it asks for (0: none)
  // Inside a region: calls a failing model call may be split into to find its
  // failing rows (max_isolation_calls; default 2 x call_rows).
  size_t max_isolation_calls = 128;
};

// One expand/gather pair: `expand_idx` opens it, `gather_idx` closes it, the
// operators between run on children.
struct LineageRegion {
  std::string name;
  size_t expand_idx = 0;
  size_t gather_idx = 0;
  int parent = -1;                            // the region around this one, -1 at top level
  int depth = 1;                              // 1 for a top-level region
  const ops::ExpandConfig* expand = nullptr;  // owned by the plan's operators
  const ops::GatherConfig* gather = nullptr;
};

// A recipe compiled against the registry. Consecutive CPU Mappers and Filters
// form one fused stage that runs on a batch inside one thread (the only kind
// of stage so far).
struct Plan {
  std::vector<PlannedOperator> operators;
  bool keep_stats = true;  // keep_stats_in_res_ds: write __dj__stats__ / __dj__meta__
  // Every output record carries __dj__stats__: a filter runs outside lineage
  // regions, or a top-level gather writes into the parents' stats.
  bool writes_stats = false;
  size_t batch_rows = 1000;  // rows per batch: the largest batch_size of the recipe's operators
  int num_proc = 0;          // the largest num_proc of the recipe's operators (0: none given)
  std::string text_key = "text";       // the recipe's text_key
  std::vector<LineageRegion> regions;  // in the order their gathers appear
  // The model operators were built without their weights (a run job whose
  // model stages may alternate): RebuildOperators loads them before they run.
  bool models_deferred = false;
};

// Builds every operator of `recipe` (Error with file and line for an unknown,
// unimplemented or whole-dataset operator, or a bad argument). With
// `skip_unimplemented`, an operator this build lacks is left out of the plan
// instead (prepare checks everything else and warns about it). With
// `run_deduplicators` (djshard run), deduplicators are planned too, as
// ops::dedup::DedupOperator entries that the executor never runs itself.
Plan CompilePlan(const recipe::Recipe& recipe, const ops::Registry& registry,
                 bool skip_unimplemented = false, bool run_deduplicators = false);

// Pairs the expand and gather entries of `plan` into regions and checks them
// (SPEC-lineage §2): nesting, names, depth, modes, stats sources, checkpoint
// names inside regions. Throws Error at "<recipe>:<line>:<col>".
void CompileRegions(const recipe::Recipe& recipe, Plan* plan);

// Whether process entry `op_idx` of `recipe` lies inside an expand/gather
// region, where the stream is children, not records (a checkpoint tap there
// is skipped; the gather itself is at parent level). Looks only at entry names.
bool InsideLineageRegion(const recipe::Recipe& recipe, size_t op_idx);

// The name of the innermost expand/gather region whose interior holds process
// entry `op_idx` of `recipe` ("" at parent level). Looks only at entry names
// and the expands' `name`, so it answers before the pairs are checked.
std::string EnclosingRegionName(const recipe::Recipe& recipe, size_t op_idx);

// The operators of `plan` that run a model (model_description() set), ascending.
std::vector<size_t> ModelOperators(const Plan& plan);

// What computes the model operators of `plan` (ModelDescription::compute),
// sorted, each once: a done record's and a run summary's model_devices.
std::vector<std::string> ModelDevices(const Plan& plan);

// Builds the operators `op_idxs` of `plan` again from `recipe` (a compiled
// plan of it): with `load`, with their model weights; without, with their
// devices chosen but no weights (model::DeviceSettings::defer_weights). The
// instance replaced is destroyed, and with it the weights it held. Used by a
// run whose model stages alternate (SPEC-checkpoints §10.7).
void RebuildOperators(const recipe::Recipe& recipe, const ops::Registry& registry,
                      const std::vector<size_t>& op_idxs, bool load, Plan* plan);

// The thread count of run, worker and dlc alike: `requested` (--threads), else
// the recipe's np, else the largest num_proc of its operators, else every
// core. Throws Error when the chosen value is below 1.
int ThreadCount(std::optional<int> requested, const recipe::Recipe& recipe, const Plan& plan);

}  // namespace djshard::exec
