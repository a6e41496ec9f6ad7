#include "djshard/exec/plan.h"

#include <algorithm>
#include <set>
#include <thread>

#include "djshard/common/error.h"
#include "djshard/exec/shard_safety.h"
#include "djshard/model/device.h"

namespace djshard::exec {

Plan CompilePlan(const recipe::Recipe& recipe, const ops::Registry& registry,
                 bool skip_unimplemented, bool run_deduplicators) {
  // The same operator rules as for sharded jobs: only Mappers and Filters
  // (and, for djshard run, deduplicators).
  CheckShardSafety(recipe, registry, run_deduplicators);
  Plan plan;
  plan.keep_stats = recipe.keep_stats_in_res_ds;
  plan.text_key = recipe.text_key;
  size_t batch_size = 0;
  for (const recipe::OperatorSpec& spec : recipe.process) {
    const ops::OperatorInfo* info = registry.Find(spec.name);
    if (!info->implemented) {
      if (skip_unimplemented) continue;
      throw Error(recipe.path, spec.line,
                  "operator '" + spec.name + "' is not implemented by this djshard build" +
                      (info->absent_reason.empty() ? "" : " (it " + info->absent_reason + ")"),
                  "'djshard ops' lists the operators djshard runs");
    }
    PlannedOperator planned;
    planned.op = info->factory(spec, recipe.text_key);
    planned.line = spec.line;
    planned.column = spec.args.column();
    if (spec.args.Has("batching_policy")) {
      const std::string policy = spec.args.GetString("batching_policy", "any_parent");
      if (policy != "any_parent" && policy != "single_parent") {
        spec.args.FailAtColumn("batching_policy", "'" + policy + "' is unknown",
                               "any_parent or single_parent");
      }
      planned.single_parent = policy == "single_parent";
      planned.batching_policy_given = true;
    }
    if (planned.op->processes_rows_together()) {
      planned.call_rows =
          static_cast<size_t>(std::max<int64_t>(1, spec.args.GetInt("batch_size", 64)));
      const int64_t isolation =
          spec.args.GetInt("max_isolation_calls", 2 * static_cast<int64_t>(planned.call_rows));
      if (isolation < 0) spec.args.FailAtColumn("max_isolation_calls", "must be 0 or more", "");
      planned.max_isolation_calls = static_cast<size_t>(isolation);
    }
    planned.skip_op_error = spec.args.GetBool("skip_op_error", recipe.skip_op_error);
    // A model operator's batch_size is rows per model call; it asks for its
    // executor batch through preferred_batch_rows instead.
    if (spec.args.Has("batch_size") && !planned.op->processes_rows_together()) {
      const int64_t b = spec.args.GetInt("batch_size", 1000);
      if (b < 1) spec.args.Fail("batch_size", "must be at least 1", "");
      batch_size = std::max(batch_size, static_cast<size_t>(b));
      planned.batch_rows_wish = static_cast<size_t>(b);
    }
    // Data-Juicer's num_proc: null or -1 (its default) lets the engine choose.
    if (spec.args.Has("num_proc") && !spec.args.Raw("num_proc").IsNull() &&
        spec.args.GetInt("num_proc", -1) != -1) {
      const int64_t n = spec.args.GetInt("num_proc", 0);
      if (n < 1) spec.args.Fail("num_proc", "must be at least 1, or -1 for automatic", "");
      plan.num_proc = std::max(plan.num_proc, static_cast<int>(n));
    }
    batch_size = std::max(batch_size, planned.op->preferred_batch_rows());
    planned.batch_rows_wish = std::max(planned.batch_rows_wish, planned.op->preferred_batch_rows());
    // A filter inside an expand/gather region filters children: the parents
    // keep exactly their own fields (SPEC-lineage §4), stats included.
    const auto op_idx = static_cast<size_t>(&spec - recipe.process.data());
    if (info->kind == ops::OpKind::kFilter && !InsideLineageRegion(recipe, op_idx)) {
      plan.writes_stats = true;
    }
    plan.operators.push_back(std::move(planned));
  }
  plan.batch_rows = batch_size > 0 ? batch_size : 1000;  // Data-Juicer's default batch size
  CompileRegions(recipe, &plan);
  for (const LineageRegion& region : plan.regions) {
    if (region.parent == -1 && region.gather->Has(ops::GatherInto::kStats))
      plan.writes_stats = true;
  }
  return plan;
}

std::vector<size_t> ModelOperators(const Plan& plan) {
  std::vector<size_t> out;
  for (size_t i = 0; i < plan.operators.size(); ++i) {
    if (plan.operators[i].op->model_description().has_value()) out.push_back(i);
  }
  return out;
}

std::vector<std::string> ModelDevices(const Plan& plan) {
  std::set<std::string> devices;
  for (size_t i : ModelOperators(plan))
    devices.insert(plan.operators[i].op->model_description()->compute);
  return {devices.begin(), devices.end()};
}

void RebuildOperators(const recipe::Recipe& recipe, const ops::Registry& registry,
                      const std::vector<size_t>& op_idxs, bool load, Plan* plan) {
  for (size_t i : op_idxs) {
    const recipe::OperatorSpec& spec = recipe.process.at(i);
    const ops::OperatorInfo* info = registry.Find(spec.name);
    std::unique_ptr<ops::Operator> op;
    if (load) {
      op = info->factory(spec, recipe.text_key);
    } else {
      const model::DeferWeightsScope deferred;
      op = info->factory(spec, recipe.text_key);
    }
    plan->operators.at(i).op = std::move(op);
  }
}

int ThreadCount(std::optional<int> requested, const recipe::Recipe& recipe, const Plan& plan) {
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string source = "every core";
  if (plan.num_proc > 0) {
    threads = plan.num_proc;
    source = "num_proc";
  }
  if (recipe.np) {
    threads = static_cast<int>(*recipe.np);
    source = "np";
  }
  if (requested) {
    threads = *requested;
    source = "--threads";
  }
  if (threads < 1) {
    throw Error(source + " must be at least 1", "got " + std::to_string(threads));
  }
  return threads;
}

}  // namespace djshard::exec
