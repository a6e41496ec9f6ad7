// Pairing and checking the expand/gather entries of a plan (SPEC-lineage §2).
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "djshard/common/error.h"
#include "djshard/common/log.h"
#include "djshard/exec/plan.h"

namespace djshard::exec {

namespace {

constexpr int kMaxDepth = 4;

[[noreturn]] void Fail(const recipe::Recipe& recipe, const PlannedOperator& at,
                       const std::string& what, const std::string& hint) {
  recipe::ThrowAtPosition(recipe.path, at.line, at.column, what, hint);
}

std::string Where(const PlannedOperator& p) {
  return "line " + std::to_string(p.line) + ":" + std::to_string(p.column);
}

bool IsTextMode(const ops::SplitBy& by) { return by.mode != ops::SplitMode::kField; }

// The first expand named `name` after entry `idx`, if any.
const PlannedOperator* LaterExpand(const std::vector<PlannedOperator>& ops, size_t idx,
                                   const std::string& name) {
  for (size_t j = idx + 1; j < ops.size(); ++j) {
    const auto* expand = dynamic_cast<const ops::ExpandEntry*>(ops[j].op.get());
    if (expand != nullptr && expand->config().name == name) return &ops[j];
  }
  return nullptr;
}

// One name of an operator's input_columns or output_columns, with its position.
struct Column {
  std::string name;
  int line = 0, column = 0;
};

// The operator's declared `key` contract (input_columns or output_columns);
// nullopt when it declares none (unknown).
std::optional<std::vector<Column>> DeclaredColumns(const recipe::OperatorSpec& spec,
                                                   const std::string& key) {
  const recipe::OperatorArgs& args = spec.args;
  if (!args.Has(key) || args.Raw(key).IsNull()) return std::nullopt;
  const YAML::Node value = args.Raw(key);
  auto column_of = [&](const YAML::Node& item) {
    if (!item.IsScalar() || item.Scalar().empty()) {
      args.FailAtColumn(key, "must be a list of field names", "e.g. [text, __dj__meta__.score]");
    }
    Column c{item.Scalar(), args.LineOf(key), args.ColumnOf(key)};
    if (item.Mark().line >= 0 && item.Mark().column >= 0) {
      c.line = item.Mark().line + 1;
      c.column = item.Mark().column + 1;
    }
    return c;
  };
  std::vector<Column> columns;
  if (value.IsSequence()) {
    for (const auto& item : value) columns.push_back(column_of(item));
  } else {
    columns.push_back(column_of(value));
  }
  return columns;
}

// The recipe entry of a planned operator (the plan may leave entries out).
const recipe::OperatorSpec* SpecOf(const recipe::Recipe& recipe, const PlannedOperator& p) {
  for (const recipe::OperatorSpec& spec : recipe.process) {
    if (spec.line == p.line && spec.args.column() == p.column) return &spec;
  }
  return nullptr;
}

// The top-level field of a dotted path ("meta" of "meta.lang").
std::string FieldOf(const std::string& path) { return path.substr(0, path.find('.')); }

// Whether a declared output column writes top-level `field` (a trailing * in
// the output's first part matches a prefix).
bool WritesField(const std::string& output, const std::string& field) {
  const std::string head = FieldOf(output);
  if (!head.empty() && head.back() == '*') {
    return field.compare(0, head.size() - 1, head, 0, head.size() - 1) == 0;
  }
  return head == field;
}

// Whether a declared output column can produce `path`: equal, one nested in
// the other, or a trailing * matching a prefix (as preflight matches contracts).
bool Produces(const std::string& output, const std::string& path) {
  auto prefix_of = [](const std::string& p, const std::string& full) {
    if (!p.empty() && p.back() == '*') {
      return full.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0;
    }
    return full == p ||
           (full.size() > p.size() && full.compare(0, p.size(), p) == 0 && full[p.size()] == '.');
  };
  return prefix_of(output, path) || prefix_of(path, output);
}

// Names the checkpoint strategy `manual` taps after (checkpoint.op_names).
std::vector<std::string> ManualTapNames(const recipe::Recipe& recipe) {
  std::vector<std::string> names;
  const YAML::Node cp = recipe.root["checkpoint"];
  if (!cp || !cp.IsMap()) return names;
  const YAML::Node strategy = cp["strategy"];
  if (!strategy || !strategy.IsScalar() || strategy.Scalar() != "manual") return names;
  const YAML::Node list = cp["op_names"];
  if (!list) return names;
  if (list.IsScalar()) {
    std::string all = list.Scalar();
    size_t start = 0;
    while (start <= all.size()) {
      size_t comma = all.find(',', start);
      if (comma == std::string::npos) comma = all.size();
      std::string n = all.substr(start, comma - start);
      n.erase(0, n.find_first_not_of(' '));
      n.erase(n.find_last_not_of(' ') + 1);
      if (!n.empty()) names.push_back(n);
      start = comma + 1;
    }
  } else if (list.IsSequence()) {
    for (const auto& n : list) {
      if (n.IsScalar()) names.push_back(n.Scalar());
    }
  }
  return names;
}

// Pairs each gather with the innermost open expand, in plan order, and checks
// the entries' batching_policy, names, nesting and into: modes; the regions
// go into the plan in the order their gathers close them.
class EntryPairing {
 public:
  EntryPairing(const recipe::Recipe& recipe, Plan* plan)
      : recipe_(recipe), ops_(plan->operators), regions_(plan->regions) {}

  void Run() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      PlannedOperator& p = ops_[i];
      p.region = -1;
      if (p.batching_policy_given && (dynamic_cast<const ops::ExpandEntry*>(p.op.get()) ||
                                      dynamic_cast<const ops::GatherEntry*>(p.op.get()))) {
        Fail(recipe_, p, "'" + p.op->name() + "' takes no batching_policy",
             "set it on the operators between the expand and its gather");
      }
      if (const auto* expand = dynamic_cast<const ops::ExpandEntry*>(p.op.get())) {
        Open(i, expand);
      } else if (const auto* gather = dynamic_cast<const ops::GatherEntry*>(p.op.get())) {
        Close(i, *gather);
      } else if (p.batching_policy_given && stack_.empty()) {
        Fail(recipe_, p,
             "operator '" + p.op->name() +
                 "': batching_policy applies only between an "
                 "expand and its gather",
             "remove it, or move the operator into a region");
      }
    }
    if (!stack_.empty()) {
      const OpenExpand& open = stack_.back();
      Fail(recipe_, ops_[open.idx],
           "expand '" + open.expand->config().name + "' is never closed by a gather",
           "add '- gather: {name: " + open.expand->config().name + "}' after its operators");
    }
  }

 private:
  // An expand whose gather has not come yet.
  struct OpenExpand {
    size_t idx;
    const ops::ExpandEntry* expand;
  };

  void Open(size_t i, const ops::ExpandEntry* expand) {
    const PlannedOperator& p = ops_[i];
    const std::string& name = expand->config().name;
    if (const auto [it, added] = names_.emplace(name, i); !added) {
      Fail(recipe_, p,
           "expand name '" + name + "' is used twice (first by the expand at " +
               Where(ops_[it->second]) + ")",
           "each expand/gather pair needs its own name");
    }
    if (stack_.size() >= static_cast<size_t>(kMaxDepth)) {
      Fail(recipe_, p,
           "expand '" + name + "' nests regions " + std::to_string(stack_.size() + 1) +
               " deep (inside expand '" + stack_.back().expand->config().name + "' at " +
               Where(ops_[stack_.back().idx]) + ")",
           "regions nest at most " + std::to_string(kMaxDepth) + " deep");
    }
    stack_.push_back({i, expand});
  }

  void Close(size_t i, const ops::GatherEntry& gather) {
    const std::string& name = gather.config().name;
    if (stack_.empty()) FailNothingOpen(i, name);
    const OpenExpand& top = stack_.back();
    if (top.expand->config().name != name) FailOtherOpen(i, name);
    const ops::ExpandConfig& ec = top.expand->config();
    const ops::GatherConfig& gc = gather.config();
    CheckInto(ops_[i], name, ec, gc);
    LineageRegion region;
    region.name = name;
    region.expand_idx = top.idx;
    region.gather_idx = i;
    region.depth = static_cast<int>(stack_.size());
    region.expand = &ec;
    region.gather = &gc;
    stack_.pop_back();
    regions_.push_back(region);
  }

  // Gather i closes nothing: no expand is open.
  [[noreturn]] void FailNothingOpen(size_t i, const std::string& name) const {
    const auto it = names_.find(name);
    std::string why;
    if (it != names_.end()) {
      why = " (expand '" + name + "' at " + Where(ops_[it->second]) + " is already closed)";
    } else if (const PlannedOperator* later = LaterExpand(ops_, i, name)) {
      why = ": the expand '" + name + "' at " + Where(*later) + " comes after it";
    }
    Fail(recipe_, ops_[i], "gather '" + name + "' has no open expand" + why,
         "put an expand with name: " + name + " before it");
  }

  // Gather i names an expand other than the innermost open one.
  [[noreturn]] void FailOtherOpen(size_t i, const std::string& name) const {
    const OpenExpand& top = stack_.back();
    auto it = std::find_if(stack_.begin(), stack_.end(),
                           [&](const OpenExpand& o) { return o.expand->config().name == name; });
    if (it != stack_.end()) {
      Fail(recipe_, ops_[i],
           "gather '" + name + "' crosses expand '" + top.expand->config().name + "' at " +
               Where(ops_[top.idx]) + ", which is still open (expand '" + name + "' is at " +
               Where(ops_[it->idx]) + ")",
           "close the innermost expand first: pairs nest, they never cross");
    }
    const PlannedOperator* later = LaterExpand(ops_, i, name);
    Fail(recipe_, ops_[i],
         "gather '" + name + "' names no open expand; the innermost open one is '" +
             top.expand->config().name + "' at " + Where(ops_[top.idx]) +
             (later != nullptr
                  ? " (the expand '" + name + "' at " + Where(*later) + " comes after it)"
                  : ""),
         "a gather closes the innermost open expand and carries its name");
  }

  // The gather's into: modes fit how its expand splits.
  void CheckInto(const PlannedOperator& p, const std::string& name, const ops::ExpandConfig& ec,
                 const ops::GatherConfig& gc) const {
    if (gc.Has(ops::GatherInto::kField) && ec.by.mode != ops::SplitMode::kField) {
      Fail(recipe_, p,
           "gather '" + name + "': into: field needs by: field:KEY, but expand '" + name +
               "' splits by " + ops::SplitByName(ec.by),
           "use into: text for text modes");
    }
    if (gc.Has(ops::GatherInto::kText) && !IsTextMode(ec.by)) {
      Fail(recipe_, p,
           "gather '" + name + "': into: text needs a text mode, but expand '" + name +
               "' splits by " + ops::SplitByName(ec.by),
           "use into: field for field:KEY");
    }
  }

  const recipe::Recipe& recipe_;
  std::vector<PlannedOperator>& ops_;
  std::vector<LineageRegion>& regions_;
  std::vector<OpenExpand> stack_;        // innermost last
  std::map<std::string, size_t> names_;  // expand name -> its entry
};

// Sorts the regions by expand, links each to the innermost region around it,
// and gives each operator its innermost region.
void LinkRegions(Plan* plan) {
  std::vector<PlannedOperator>& ops = plan->operators;
  std::vector<LineageRegion>& regions = plan->regions;
  std::sort(regions.begin(), regions.end(), [](const LineageRegion& a, const LineageRegion& b) {
    return a.expand_idx < b.expand_idx;
  });
  for (size_t r = 0; r < regions.size(); ++r) {
    for (size_t q = 0; q < regions.size(); ++q) {
      if (q == r) continue;
      if (regions[q].expand_idx < regions[r].expand_idx &&
          regions[q].gather_idx > regions[r].gather_idx) {
        // The innermost enclosing region has the largest expand_idx.
        if (regions[r].parent < 0 ||
            regions[static_cast<size_t>(regions[r].parent)].expand_idx < regions[q].expand_idx) {
          regions[r].parent = static_cast<int>(q);
        }
      }
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    int innermost = -1;
    for (size_t r = 0; r < regions.size(); ++r) {
      if (regions[r].expand_idx < i && i < regions[r].gather_idx) innermost = static_cast<int>(r);
    }
    ops[i].region = innermost;
  }
}

// Reader batches: a model operator inside a region sees children, whose
// number per parent is unknown, so only operators at parent level size them.
void SizeReaderBatches(Plan* plan) {
  if (plan->regions.empty()) return;
  size_t rows = 0;
  for (const PlannedOperator& p : plan->operators) {
    if (p.region < 0 || !p.op->processes_rows_together()) rows = std::max(rows, p.batch_rows_wish);
  }
  plan->batch_rows = rows > 0 ? rows : 1000;
}

// Stats sources of region r's gather: a filter directly inside the region,
// or a nested gather's stats.
void CheckGatherStats(const recipe::Recipe& recipe, const Plan& plan, size_t r) {
  const std::vector<PlannedOperator>& ops = plan.operators;
  const LineageRegion& region = plan.regions[r];
  std::set<std::string> produced;
  for (size_t i = region.expand_idx + 1; i < region.gather_idx; ++i) {
    if (ops[i].region == static_cast<int>(r)) {
      if (const auto* f = dynamic_cast<const ops::Filter*>(ops[i].op.get())) {
        for (const std::string& k : f->stat_keys()) produced.insert(k);
      }
    }
  }
  for (const LineageRegion& inner : plan.regions) {
    if (inner.parent != static_cast<int>(r)) continue;
    for (const ops::GatherStat& s : inner.gather->stats) produced.insert(s.to);
  }
  for (const ops::GatherStat& s : region.gather->stats) {
    if (produced.count(s.from) == 0) {
      std::string known;
      for (const std::string& k : produced) known += (known.empty() ? "" : ", ") + k;
      Fail(recipe, ops[region.gather_idx],
           "gather '" + region.name + "': stats.from '" + s.from +
               "' is not a stat of any filter between expand '" + region.name + "' and it",
           known.empty() ? "add a filter that computes it inside the region"
                         : "stats produced there: " + known);
    }
  }
}

// What the children of one region carry (rules 4 and 5): the kept fields,
// the split field, their own stats and meta, and what the region's operators
// write. Checks the declared input_columns of each operator directly inside
// the region, then, when every one of them declares its output_columns, the
// gather's list sources.
class ChildFieldCheck {
 public:
  ChildFieldCheck(const recipe::Recipe& recipe, const Plan& plan, size_t r)
      : recipe_(recipe),
        ops_(plan.operators),
        regions_(plan.regions),
        r_(r),
        region_(plan.regions[r]),
        split_key_(IsTextMode(region_.expand->by) ? region_.expand->text_key
                                                  : region_.expand->by.field),
        kept_(region_.expand->keep_fields.begin(), region_.expand->keep_fields.end()) {
    kept_.insert(split_key_);
  }

  void Run() {
    for (size_t i = region_.expand_idx + 1; i < region_.gather_idx; ++i) {
      const PlannedOperator& p = ops_[i];
      if (p.region != static_cast<int>(r_)) continue;  // inside a nested region
      if (dynamic_cast<const ops::ExpandEntry*>(p.op.get()) != nullptr) continue;
      if (const auto* gather = dynamic_cast<const ops::GatherEntry*>(p.op.get())) {
        AddNestedGather(i, *gather);
        continue;
      }
      const recipe::OperatorSpec* spec = SpecOf(recipe_, p);
      if (spec == nullptr) {
        contracts_known_ = false;
        continue;
      }
      CheckInputColumns(p, *spec);
      AddOutputs(p, *spec);
    }
    const recipe::OperatorSpec* gather_spec = SpecOf(recipe_, ops_[region_.gather_idx]);
    if (!contracts_known_ || gather_spec == nullptr) return;
    CheckListSources(gather_spec->args);
  }

 private:
  // What a nested region's gather at entry i writes: its split field, its
  // lists and its stats.
  void AddNestedGather(size_t i, const ops::GatherEntry& gather) {
    for (const LineageRegion& inner : regions_) {
      if (inner.gather_idx != i) continue;
      produced_.push_back(IsTextMode(inner.expand->by) ? inner.expand->text_key
                                                       : inner.expand->by.field);
    }
    for (const ops::GatherList& l : gather.config().lists) produced_.push_back(l.to);
    for (const ops::GatherStat& st : gather.config().stats) {
      produced_.push_back(std::string(ops::kStatsKey) + "." + st.to);
    }
  }

  // Each declared input column is a field the children carry.
  void CheckInputColumns(const PlannedOperator& p, const recipe::OperatorSpec& spec) const {
    const auto in = DeclaredColumns(spec, "input_columns");
    if (!in) return;
    for (const Column& c : *in) {
      const std::string field = FieldOf(c.name);
      if (field.find('*') != std::string::npos || field == ops::kStatsKey ||
          field == ops::kMetaKey || kept_.count(field) > 0 ||
          std::any_of(produced_.begin(), produced_.end(),
                      [&](const std::string& o) { return WritesField(o, field); })) {
        continue;
      }
      recipe::ThrowAtPosition(
          recipe_.path, c.line, c.column,
          "operator '" + p.op->name() + "' inside region '" + region_.name +
              "': input_columns names '" + c.name + "', but child records do not carry '" + field +
              "'; add it to keep_fields",
          KeepHint() +
              "; a field an earlier operator of the region writes must be in its "
              "output_columns");
    }
  }

  // What the operator writes: its declared output columns and a filter's stats.
  void AddOutputs(const PlannedOperator& p, const recipe::OperatorSpec& spec) {
    const auto out = DeclaredColumns(spec, "output_columns");
    if (!out) {
      contracts_known_ = false;
    } else {
      for (const Column& c : *out) produced_.push_back(c.name);
    }
    if (const auto* f = dynamic_cast<const ops::Filter*>(p.op.get())) {
      for (const std::string& k : f->stat_keys()) {
        produced_.push_back(std::string(ops::kStatsKey) + "." + k);
      }
    }
  }

  // Each list.from of the gather is a field the children carry.
  void CheckListSources(const recipe::OperatorArgs& gather_args) const {
    const YAML::Node list_nodes = gather_args.Raw("list");
    size_t j = 0;
    for (const ops::GatherList& l : region_.gather->lists) {
      const size_t at = j++;
      const std::string field = FieldOf(l.from);
      if (kept_.count(field) > 0 || l.from == ops::kStatsKey || l.from == ops::kMetaKey ||
          std::any_of(produced_.begin(), produced_.end(),
                      [&](const std::string& o) { return Produces(o, l.from); })) {
        continue;
      }
      int line = gather_args.LineOf("list"), column = gather_args.ColumnOf("list");
      if (list_nodes.IsSequence() && at < list_nodes.size()) {
        const YAML::Node from = list_nodes[at]["from"];
        if (from && from.Mark().line >= 0 && from.Mark().column >= 0) {
          line = from.Mark().line + 1;
          column = from.Mark().column + 1;
        }
      }
      FailListSource(l, field, line, column);
    }
  }

  [[noreturn]] void FailListSource(const ops::GatherList& l, const std::string& field, int line,
                                   int column) const {
    std::string written;
    for (const std::string& o : std::set<std::string>(produced_.begin(), produced_.end())) {
      written += (written.empty() ? "" : ", ") + o;
    }
    recipe::ThrowAtPosition(recipe_.path, line, column,
                            "gather '" + region_.name + "': list.from '" + l.from +
                                "' is not produced inside region '" + region_.name +
                                "' and is not a kept field or the split field '" + split_key_ + "'",
                            "the region's operators write " +
                                (written.empty() ? "nothing" : written) + "; add '" + field +
                                "' to keep_fields of expand '" + region_.name + "' at " +
                                Where(ops_[region_.expand_idx]) +
                                ", or to output_columns of the operator that writes it");
  }

  std::string KeepHint() const {
    return "keep_fields of expand '" + region_.name + "' at " + Where(ops_[region_.expand_idx]) +
           " copies parent fields into every child";
  }

  const recipe::Recipe& recipe_;
  const std::vector<PlannedOperator>& ops_;
  const std::vector<LineageRegion>& regions_;
  const size_t r_;
  const LineageRegion& region_;
  const std::string split_key_;
  std::set<std::string> kept_;         // the kept fields and the split field
  std::vector<std::string> produced_;  // output columns of the region's entries so far
  bool contracts_known_ = true;        // every operator there declares output_columns
};

// Checkpoint taps are parent-level only: an operator checkpoint.op_names
// names must run outside the regions at least once.
void CheckCheckpointTaps(const recipe::Recipe& recipe, const Plan& plan) {
  const std::vector<PlannedOperator>& ops = plan.operators;
  const std::vector<std::string> manual = ManualTapNames(recipe);
  for (const std::string& name : manual) {
    size_t inside = 0, total = 0;
    const PlannedOperator* first_inside = nullptr;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].op->name() != name) continue;
      ++total;
      const bool in =
          ops[i].region >= 0 || dynamic_cast<const ops::ExpandEntry*>(ops[i].op.get()) != nullptr;
      if (in) {
        ++inside;
        if (first_inside == nullptr) first_inside = &ops[i];
      }
    }
    if (total > 0 && inside == total) {
      Fail(recipe, *first_inside,
           "checkpoint.op_names names '" + name +
               "', which runs only inside an expand/gather region, on children",
           "checkpoint taps are parent-level: name an operator outside the region, or the gather");
    }
    if (inside > 0) {
      Log(LogLevel::kWarn, "warning",
          "WARNING: " + recipe.path + ": checkpoint.op_names '" + name + "': its " +
              std::to_string(inside) +
              " occurrence(s) inside expand/gather regions are not tapped");
    }
  }
}

}  // namespace

bool InsideLineageRegion(const recipe::Recipe& recipe, size_t op_idx) {
  int open = 0;
  for (size_t i = 0; i < recipe.process.size() && i <= op_idx; ++i) {
    const std::string& name = recipe.process[i].name;
    if (name == ops::kExpandName) {
      ++open;
      if (i == op_idx) return true;  // its output is children
    } else if (name == ops::kGatherName) {
      open = std::max(0, open - 1);
    }
  }
  return open > 0;
}

std::string EnclosingRegionName(const recipe::Recipe& recipe, size_t op_idx) {
  std::vector<std::string> open;
  for (size_t i = 0; i < recipe.process.size() && i < op_idx; ++i) {
    const recipe::OperatorSpec& spec = recipe.process[i];
    if (spec.name == ops::kExpandName) {
      open.push_back(spec.args.GetString("name", ""));
    } else if (spec.name == ops::kGatherName && !open.empty()) {
      open.pop_back();
    }
  }
  return open.empty() ? "" : open.back();
}

void CompileRegions(const recipe::Recipe& recipe, Plan* plan) {
  EntryPairing(recipe, plan).Run();
  LinkRegions(plan);
  SizeReaderBatches(plan);
  for (size_t r = 0; r < plan->regions.size(); ++r) CheckGatherStats(recipe, *plan, r);
  for (size_t r = 0; r < plan->regions.size(); ++r) ChildFieldCheck(recipe, *plan, r).Run();
  CheckCheckpointTaps(recipe, *plan);
}

}  // namespace djshard::exec
