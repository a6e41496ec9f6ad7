#include "djshard/ops/operator.h"

#include <algorithm>

#include "djshard/common/error.h"
#include "djshard/ops/lineage.h"

namespace djshard::ops {

namespace {

constexpr const char* kRayScheduling =
    "Ray scheduling: djshard runs the operators in the threads of the process that claimed the "
    "shard, so there is no Ray task or actor to size or place";
constexpr const char* kOtherField =
    "a field of another modality or dialog format; djshard's operators read text_key only";

}  // namespace

// The arguments that Data-Juicer's OP, Mapper and Filter base classes take
// from every operator (data_juicer/ops/base_op.py), and save_dir, which many
// of its operators take.
const std::vector<CommonArg>& CommonArguments() {
  using enum CommonArgUse;
  static const std::vector<CommonArg> args = {
      {"text_key", kHonoured, "field the operator reads (default: the recipe's text_keys)"},
      {"skip_op_error", kHonoured,
       "true drops a record the operator fails on and reports it in the errors file; false stops "
       "the run (default: the recipe's skip_op_error, true)"},
      {"batch_size", kHonoured,
       "rows per batch; the largest batch_size of the recipe cuts every batch (default 1000); "
       "model operators: rows per model call (default 64)"},
      {"num_proc", kHonoured,
       "threads of `djshard run` when neither --threads nor the recipe's np is given (the largest "
       "num_proc of the recipe)"},
      {"index_key", kHonoured,
       "`djshard prepare` adds this field with the record's row number in the whole input"},
      {"min_closed_interval", kHonoured, "filters: whether min is inside the range (default true)"},
      {"max_closed_interval", kHonoured, "filters: whether max is inside the range (default true)"},
      {"reversed_range", kHonoured,
       "filters: keep what is outside [min, max] instead (flips both closed intervals)"},
      {"stats_export_path", kRefused,
       "every shard would overwrite the same file; stats stay in __dj__stats__"},
      {"num_cpus", kIgnored, kRayScheduling},
      {"num_gpus", kHonoured,
       "model operators: > 0 asks for a GPU (an error when none is visible; --device cpu "
       "overrides); above 1 is refused; other operators: ignored"},
      {"memory", kIgnored, kRayScheduling},
      {"runtime_env", kIgnored, kRayScheduling},
      {"ray_execution_mode", kIgnored, kRayScheduling},
      {"cpu_required", kIgnored, kRayScheduling},
      {"gpu_required", kHonoured, "model operators: as num_gpus (its alias)"},
      {"mem_required", kIgnored, kRayScheduling},
      {"auto_op_parallelism", kIgnored, kRayScheduling},
      {"adaptive_batching", kIgnored, kRayScheduling},
      {"turbo", kIgnored, "a speed-up of Data-Juicer's batched model operators"},
      {"batch_mode", kIgnored, "djshard's operators always run on batches"},
      {"accelerator", kHonoured,
       "model operators: cuda asks for a GPU, cpu keeps the operator on the CPU (default: a GPU "
       "when one is visible, else the CPU with one warning); other operators run on the CPU"},
      {"work_dir", kIgnored,
       "djshard's operators write no files; the job directory comes from the command line"},
      {"save_dir", kIgnored,
       "djshard's operators write no files (prepare warns: every worker would share it)"},
      {"image_key", kIgnored, kOtherField},
      {"audio_key", kIgnored, kOtherField},
      {"video_key", kIgnored, kOtherField},
      {"image_bytes_key", kIgnored, kOtherField},
      {"system_key", kIgnored, kOtherField},
      {"instruction_key", kIgnored, kOtherField},
      {"prompt_key", kIgnored, kOtherField},
      {"query_key", kHonoured, "query_*_detection_mapper: field holding the query (default query)"},
      {"response_key", kIgnored, kOtherField},
      {"max_isolation_calls", kHonoured,
       "model operators inside an expand/gather region: how many further calls a failing call "
       "may be split into (halves) to find the rows it fails on (default 2 x batch_size); rows "
       "left fail with isolation_budget"},
      {"batching_policy", kHonoured,
       "inside an expand/gather region: any_parent (default; model calls batch children of many "
       "parents) or single_parent (a model call never mixes parents)"},
      {"history_key", kIgnored, kOtherField},
  };
  return args;
}

const CommonArg* FindCommonArgument(std::string_view name) {
  for (const CommonArg& a : CommonArguments()) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

Operator::Operator(const recipe::OperatorSpec& spec, const std::string& default_text_key)
    : name_(spec.name), args_(spec.args) {
  const OperatorInfo* info = Registry::Global().Find(name_);
  if (info == nullptr || !info->implemented) {
    throw Error("operator '" + name_ + "' is not among this build's operators",
                "list it in src/ops/builtin.cc");
  }
  for (const std::string& key : args_.Keys()) {
    if (FindCommonArgument(key) != nullptr) continue;
    const bool own = std::any_of(info->args.begin(), info->args.end(),
                                 [&](const ArgDoc& a) { return a.name == key; });
    if (own) continue;
    std::string known;
    for (const ArgDoc& a : info->args) known += (known.empty() ? "" : ", ") + a.name;
    const std::string hint =
        (known.empty() ? "it takes only the common arguments" : "its own arguments: " + known) +
        "; 'djshard ops " + name_ + "' lists the common ones";
    // Lineage entries report recipe positions with their column (SPEC-lineage §2).
    if (name_ == kExpandName || name_ == kGatherName) {
      args_.FailAtColumn(key, "is not an argument of " + name_, hint);
    }
    args_.Fail(key, "is not an argument of " + name_, hint);
  }
  // Data-Juicer asserts this one even where Ray does not run.
  const std::string mode = args_.GetString("ray_execution_mode", "task");
  if (mode != "actor" && mode != "task") {
    args_.Fail("ray_execution_mode", "must be actor or task", "got '" + mode + "'");
  }
  text_key_ = args_.GetString("text_key", default_text_key);
}

Filter::Filter(const recipe::OperatorSpec& spec, const std::string& default_text_key)
    : Operator(spec, default_text_key) {
  lo_closed_ = args().GetBool("min_closed_interval", true);
  hi_closed_ = args().GetBool("max_closed_interval", true);
  reversed_ = args().GetBool("reversed_range", false);
  if (reversed_) {
    lo_closed_ = !lo_closed_;
    hi_closed_ = !hi_closed_;
  }
}

bool Filter::InRange(double value, std::optional<double> lo, std::optional<double> hi) const {
  bool ok = true;
  if (lo) ok = lo_closed_ ? value >= *lo : value > *lo;
  if (ok && hi) ok = hi_closed_ ? value <= *hi : value < *hi;
  return reversed_ ? !ok : ok;
}

void Operator::ProcessRows(std::span<Sample* const>, std::span<RowOutcome>) const {
  throw Error("operator '" + name_ + "' does not process rows together", "");
}

}  // namespace djshard::ops
