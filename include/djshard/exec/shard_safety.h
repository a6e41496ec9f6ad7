#pragma once

#include <string>
#include <vector>

#include "djshard/ops/registry.h"
#include "djshard/recipe/recipe.h"

namespace djshard::exec {

// What a shard-safe recipe implies for preparing a job.
struct ShardSafetyReport {
  std::vector<std::string> warnings;    // printed and recorded in the manifest
  std::vector<std::string> index_keys;  // sorted, unique
};

// Proves that running `recipe` shard by shard gives the same rows as running it
// on the whole dataset: every operator is a known Mapper or Filter, none needs
// whole-dataset semantics, none exports stats on its own. Throws Error with
// the recipe's file and line otherwise. With `run_deduplicators` (djshard
// run), Data-Juicer's text deduplicators are accepted outside expand/gather
// regions: the run makes each one a stage (src/exec/dedup_run.cc).
ShardSafetyReport CheckShardSafety(const recipe::Recipe& recipe, const ops::Registry& registry,
                                   bool run_deduplicators = false);

}  // namespace djshard::exec
