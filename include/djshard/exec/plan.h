#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "djshard/ops/operator.h"
#include "djshard/ops/registry.h"
#include "djshard/recipe/recipe.h"

namespace djshard::exec {

// One configured operator of a plan, with the recipe options that concern it.
struct PlannedOperator {
  std::unique_ptr<ops::Operator> op;
  bool skip_op_error = true;  // drop and report a failing record instead of stopping
};

// A recipe compiled against the registry. Consecutive CPU Mappers and Filters
// form one fused stage that runs on a batch inside one thread (the only kind
// of stage so far).
struct Plan {
  std::vector<PlannedOperator> operators;
  bool keep_stats = true;    // keep_stats_in_res_ds: write __dj__stats__ / __dj__meta__
  bool has_filter = false;   // every output record then carries __dj__stats__
  size_t batch_rows = 1000;  // rows per batch: the largest batch_size of the recipe's operators
  int num_proc = 0;          // the largest num_proc of the recipe's operators (0: none given)
  std::string text_key = "text";  // the recipe's text_key
};

// Builds every operator of `recipe` (Error with file and line for an unknown,
// unimplemented or whole-dataset operator, or a bad argument). With
// `skip_unimplemented`, an operator this build lacks is left out of the plan
// instead (prepare checks everything else and warns about it).
Plan CompilePlan(const recipe::Recipe& recipe, const ops::Registry& registry,
                 bool skip_unimplemented = false);

// The thread count of run, worker and dlc alike: `requested` (--threads), else
// the recipe's np, else the largest num_proc of its operators, else every
// core. Throws Error when the chosen value is below 1.
int ThreadCount(std::optional<int> requested, const recipe::Recipe& recipe, const Plan& plan);

}  // namespace djshard::exec
