#include "src/exec/lineage_run.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "djshard/io/json_text.h"
#include "djshard/ops/split.h"
#include "djshard/ops/text.h"

namespace djshard::exec {

namespace {

void AppendKey(std::string* out, std::string_view key) {
  io::AppendJsonString(out, key);
  out->push_back(':');
}

// Appends one child's line (already in the arena from `begin`) and lineage.
void AddChild(RowLevel* children, size_t begin, std::string_view text, uint32_t parent,
              uint32_t ordinal, uint64_t top_row) {
  children->spans.emplace_back(begin, children->arena.size() - begin);
  children->preload.push_back(text);
  children->alive.push_back(1);
  children->top_row.push_back(top_row);
  children->parent.push_back(parent);
  children->ordinal.push_back(ordinal);
  children->state.push_back(ChildState::kLive);
}

// Points a record and a sample of the pools at each child's line, once the
// arena holds them all (it does not move any more).
void Materialize(RowLevel* children, const std::string& text_key) {
  const size_t n = children->spans.size();
  if (children->record_pool.size() < n) children->record_pool.resize(n);
  if (children->sample_pool.size() < n) children->sample_pool.resize(n, ops::Sample(nullptr));
  children->records_of.resize(n);
  children->samples.resize(n);
  for (size_t k = 0; k < n; ++k) {
    io::Record& record = children->record_pool[k];
    record.AssignView(children->line(k));
    ops::Sample& sample = children->sample_pool[k];
    sample.Reset(&record);
    if (children->preload[k].data() != nullptr) {
      sample.PreloadText(text_key, std::string(children->preload[k]));
    }
    children->records_of[k] = &record;
    children->samples[k] = &sample;
  }
}

// "{" and the kept parent fields of a child, raw, each followed by ','.
std::string KeptFields(const ops::ExpandConfig& config, const io::Record& parent,
                       std::string_view split_key) {
  std::string out = "{";
  for (const std::string& key : config.keep_fields) {
    if (key == split_key) continue;
    const std::optional<std::string_view> raw = parent.Find(key);
    if (!raw) continue;
    AppendKey(&out, key);
    out.append(*raw);
    out.push_back(',');
  }
  return out;
}

// A numeric stat's value; false when `raw` is not a JSON number.
bool ParseNumber(std::string_view raw, double* value, bool* integral) {
  if (raw.empty()) return false;
  const char c = raw.front();
  if (!(c == '-' || (c >= '0' && c <= '9'))) return false;
  const std::string s(raw);
  char* end = nullptr;
  *value = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  *integral = s.find_first_of(".eE") == std::string::npos;
  return true;
}

std::string NumberJson(double v, bool integral) {
  if (integral && std::fabs(v) < 9e15) return std::to_string(static_cast<int64_t>(v));
  std::string out;
  ops::text::AppendPythonFloat(&out, v);
  return out;
}

// The stats of one gather entry over the PRESENT children; false and *error
// set when a child holds a non-numeric value.
bool GatherStat(const ops::GatherStat& stat, RowLevel& children, const ParentLineage& pl,
                std::string* raw_out, std::string* error) {
  double sum = 0, lo = 0, hi = 0;
  bool all_integral = true;
  uint64_t count = 0;
  for (uint32_t c = pl.first; c < pl.first + pl.n; ++c) {
    if (children.state[c] != ChildState::kLive) continue;
    const std::optional<std::string_view> raw = children.samples[c]->Stat(stat.from);
    if (!raw) continue;
    double v = 0;
    bool integral = false;
    if (!ParseNumber(*raw, &v, &integral)) {
      *error = "stat '" + stat.from + "' of child " + std::to_string(c - pl.first) +
               " is not a number (" + std::string(raw->substr(0, 40)) + ")";
      return false;
    }
    all_integral = all_integral && integral;
    lo = count == 0 ? v : std::min(lo, v);
    hi = count == 0 ? v : std::max(hi, v);
    sum += v;
    ++count;
  }
  raw_out->clear();
  switch (stat.op) {
    case ops::StatOp::kCount:
      *raw_out = std::to_string(count);
      break;
    case ops::StatOp::kSum:
      *raw_out = NumberJson(sum, all_integral);
      break;
    case ops::StatOp::kMean:
      if (count > 0) *raw_out = NumberJson(sum / static_cast<double>(count), false);
      break;
    case ops::StatOp::kMin:
      if (count > 0) *raw_out = NumberJson(lo, all_integral);
      break;
    case ops::StatOp::kMax:
      if (count > 0) *raw_out = NumberJson(hi, all_integral);
      break;
  }
  return true;
}

// Where a dotted path that was not found stops: the first part whose parent
// value is neither an object nor null (empty when the path is simply absent).
std::string NonObjectOnPath(const io::Record& record, std::string_view path, std::string* type) {
  size_t dot = path.find('.');
  std::optional<std::string_view> current = record.Find(path.substr(0, dot));
  while (current && dot != std::string_view::npos) {
    const std::string_view value = *current;
    if (value.empty() || value == "null") return "";
    if (value.front() != '{') {
      const char c = value.front();
      *type = c == '"'               ? "a string"
              : c == '['             ? "an array"
              : c == 't' || c == 'f' ? "a boolean"
                                     : "a number";
      return std::string(path.substr(0, dot));
    }
    const size_t next = path.find('.', dot + 1);
    const std::string_view part = path.substr(
        dot + 1, next == std::string_view::npos ? std::string_view::npos : next - dot - 1);
    current.reset();
    for (const io::JsonMember& m : io::SplitObject(value)) {
      if (io::UnescapeJsonString(m.key_literal) == part) {
        current = m.value;
        break;
      }
    }
    dot = next;
  }
  return "";
}

// One list entry over the children, as a JSON array: the value at `from` of
// each PRESENT child (null where absent; null for dropped children with
// keep_positions). False and *error set when a child's path goes through a
// value that is not an object (SPEC-lineage §5: gather_error).
bool GatherList(const ops::GatherList& l, RowLevel& children, const ParentLineage& pl,
                std::string* out, std::string* error) {
  std::string& list = *out;
  list = "[";
  bool first = true;
  for (uint32_t c = pl.first; c < pl.first + pl.n; ++c) {
    const bool live = children.state[c] == ChildState::kLive;
    if (!live && !l.keep_positions) continue;
    if (!first) list.push_back(',');
    first = false;
    if (!live) {
      list.append("null");
      continue;
    }
    children.samples[c]->Commit(true);
    const std::optional<std::string> value = children.samples[c]->Field(l.from);
    if (!value) {
      std::string type;
      const std::string blocked = NonObjectOnPath(*children.records_of[c], l.from, &type);
      if (!blocked.empty()) {
        *error = "list.from '" + l.from + "' of child " + std::to_string(c - pl.first) +
                 " goes through '" + blocked + "', which is " + type + ", not an object";
        return false;
      }
    }
    list.append(value ? *value : "null");
  }
  list.push_back(']');
  return true;
}

// Splits parents into children for one region, one parent at a time: the
// split key's array elements (field mode) or its text's pieces (text modes).
class ParentExpansion {
 public:
  ParentExpansion(const LineageRegion& region, size_t op_idx, RowLevel& parents, RowLevel* children)
      : config_(*region.expand),
        field_mode_(config_.by.mode == ops::SplitMode::kField),
        split_key_(field_mode_ ? config_.by.field : config_.text_key),
        max_children_(static_cast<size_t>(config_.max_children)),
        op_idx_(op_idx),
        parents_(parents),
        children_(children) {}

  const std::string& split_key() const { return split_key_; }

  // Appends the children of parent row k to the child level; a parent that
  // cannot be split is marked failed in *pl and has none. Returns whether it
  // was split.
  bool Expand(size_t k, ParentLineage* pl) {
    // The children see the parent as the operators before the expand left it.
    parents_.samples[k]->Commit(false);
    const std::string head = KeptFields(config_, *parents_.records_of[k], split_key_);
    return field_mode_ ? SplitElements(k, head, pl) : SplitPieces(k, head, pl);
  }

 private:
  void Fail(ParentLineage* pl, const std::string& type, const std::string& message) const {
    pl->failed = true;
    pl->failure = {ops::kExpandName, op_idx_, type, message, -1};
  }

  // Field mode: one child per element of the split key's array.
  bool SplitElements(size_t k, const std::string& head, ParentLineage* pl) {
    const std::optional<std::string_view> raw = parents_.records_of[k]->Find(split_key_);
    if (!raw) {
      Fail(pl, "expand_error", "field '" + split_key_ + "' not found");
      return false;
    }
    if (raw->empty() || raw->front() != '[') {
      Fail(pl, "expand_error", "field '" + split_key_ + "' is not a JSON array");
      return false;
    }
    // Splitting stops at max_children + 1 elements (SPEC-lineage §3).
    const std::vector<std::string_view> items = io::SplitArray(*raw, max_children_ + 1);
    if (items.size() > max_children_) {
      Fail(pl, "expand_limit",
           "field '" + split_key_ + "' has more than max_children " +
               std::to_string(max_children_) + " elements");
      return false;
    }
    std::string& arena = children_->arena;
    pl->n = static_cast<uint32_t>(items.size());
    for (size_t j = 0; j < items.size(); ++j) {
      pl->elements.emplace_back(items[j]);
      const size_t line_begin = arena.size();
      arena.append(head);
      AppendKey(&arena, split_key_);
      arena.push_back('[');
      arena.append(items[j]);
      arena.append("]}");
      AddChild(children_, line_begin, {}, static_cast<uint32_t>(k), static_cast<uint32_t>(j),
               parents_.top_row[k]);
    }
    return true;
  }

  // Text modes: one child per piece of the split key's text.
  bool SplitPieces(size_t k, const std::string& head, ParentLineage* pl) {
    const std::string* text = nullptr;
    try {
      text = &parents_.samples[k]->Text(split_key_);
    } catch (const ops::OpError& e) {
      Fail(pl, "expand_error", e.what());
      return false;
    }
    ops::SplitText(*text, config_.by, max_children_, &split_);
    if (split_.over_limit) {
      Fail(pl, "expand_limit",
           "field '" + split_key_ + "' splits by " + ops::SplitByName(config_.by) +
               " into more than max_children " + std::to_string(max_children_) + " pieces");
      return false;
    }
    std::string& arena = children_->arena;
    pl->n = static_cast<uint32_t>(split_.pieces.size());
    pl->prefix.assign(split_.prefix);
    for (size_t j = 0; j < split_.pieces.size(); ++j) {
      pl->seps.emplace_back(split_.pieces[j].sep);
      const size_t line_begin = arena.size();
      arena.append(head);
      AppendKey(&arena, split_key_);
      io::AppendJsonString(&arena, split_.pieces[j].text);
      arena.push_back('}');
      // A non-null view marks a text to preload, an empty piece's too.
      const std::string_view piece = split_.pieces[j].text.data() != nullptr
                                         ? split_.pieces[j].text
                                         : std::string_view(text->data(), 0);
      AddChild(children_, line_begin, piece, static_cast<uint32_t>(k), static_cast<uint32_t>(j),
               parents_.top_row[k]);
    }
    return true;
  }

  const ops::ExpandConfig& config_;
  const bool field_mode_;
  const std::string& split_key_;
  const size_t max_children_;
  const size_t op_idx_;  // the expand entry
  RowLevel& parents_;
  RowLevel* children_;
  ops::TextSplit split_;  // text modes: the pieces of the parent being split
};

// Rebuilds parents from their children at one region's gather, one parent at
// a time: the children's terminal states, whether the parent survives, its
// stats and lists, and its split key joined back from the PRESENT children.
class ParentGather {
 public:
  ParentGather(const LineageRegion& region, RowLevel& children, RegionCounters* counters)
      : region_(region),
        gc_(*region.gather),
        field_mode_(region.expand->by.mode == ops::SplitMode::kField),
        split_key_(field_mode_ ? region.expand->by.field : region.expand->text_key),
        children_(children),
        counters_(counters) {}

  // What becomes of an expanded parent; a kFailed parent's failure is in *pl.
  GatherOutcome Gather(ops::Sample& parent, io::Record& record, ParentLineage* pl) {
    const uint32_t present = SettleChildren(pl);
    if (pl->failed) return GatherOutcome::kFailed;
    if (pl->n == 0) {
      if (gc_.on_empty == ops::OnEmpty::kDrop) return GatherOutcome::kDropped;
      if (gc_.on_empty == ops::OnEmpty::kKeepOriginal) return GatherOutcome::kOriginal;
    } else if (present < static_cast<uint64_t>(gc_.min_present) ||
               // The fraction itself, as SPEC-lineage states it: a product
               // (0.28 * 25 = 7.000000000000001) would drop a parent at the bound.
               static_cast<double>(present) / static_cast<double>(pl->n) < gc_.min_present_ratio) {
      return GatherOutcome::kDropped;
    }
    // Stats first: a gather_error fails the parent before anything changes.
    std::vector<std::pair<std::string, std::string>> stats;
    const bool stats_gathered = GatherStats(pl, &stats);
    // Lists too: a path through a non-object fails the parent unchanged.
    std::vector<std::string> lists;
    const bool lists_gathered = GatherLists(pl, &lists);
    if (!stats_gathered || !lists_gathered) return GatherOutcome::kFailed;
    const bool into_text = gc_.Has(ops::GatherInto::kText) || (gc_.into.empty() && !field_mode_);
    const bool into_field = gc_.Has(ops::GatherInto::kField) || (gc_.into.empty() && field_mode_);
    if (into_text) JoinText(parent, *pl);
    if (into_field) JoinElements(record, *pl, present);
    for (size_t j = 0; j < gc_.lists.size(); ++j) record.Set(gc_.lists[j].to, std::move(lists[j]));
    for (auto& [key, value] : stats) parent.SetStat(key, std::move(value));
    return GatherOutcome::kOut;
  }

  // Counts a parent's outcome.
  void Count(GatherOutcome outcome) const {
    switch (outcome) {
      case GatherOutcome::kOut:
      case GatherOutcome::kOriginal:
        ++counters_->parents_out;
        break;
      case GatherOutcome::kDropped:
        ++counters_->parents_dropped;
        break;
      case GatherOutcome::kFailed:
        ++counters_->parents_failed;
        break;
    }
  }

 private:
  // Terminal states: live children are PRESENT, unless their parent failed.
  // Counts each child's state and returns the PRESENT ones.
  uint32_t SettleChildren(ParentLineage* pl) const {
    uint32_t present = 0;
    for (uint32_t c = pl->first; c < pl->first + pl->n; ++c) {
      ChildState& st = children_.state[c];
      if (st == ChildState::kLive && pl->failed) {
        st = ChildState::kLateDiscarded;
        ++pl->late_discarded;
      }
      switch (st) {
        case ChildState::kLive:
          ++present;
          ++counters_->children_present;
          break;
        case ChildState::kDropped:
          ++counters_->children_dropped;
          break;
        case ChildState::kFailed:
          ++counters_->children_failed;
          break;
        case ChildState::kSuppressed:
          ++counters_->children_suppressed;
          break;
        case ChildState::kLateDiscarded:
          // Dispatched before its parent failed, its result discarded:
          // counted in late_discarded below.
          break;
      }
    }
    counters_->late_discarded += pl->late_discarded;
    pl->suppressed = pl->completed = 0;
    for (uint32_t c = pl->first; c < pl->first + pl->n; ++c) {
      const ChildState st = children_.state[c];
      if (st == ChildState::kSuppressed) ++pl->suppressed;
      if (st == ChildState::kDropped || st == ChildState::kLateDiscarded) ++pl->completed;
    }
    return present;
  }

  void FailGather(ParentLineage* pl, const std::string& error) const {
    pl->failed = true;
    pl->failure = {ops::kGatherName, region_.gather_idx, "gather_error", error, -1};
  }

  // The gather's stats, each as a (to, raw JSON) pair where it has a value;
  // false when one of them fails the parent.
  bool GatherStats(ParentLineage* pl, std::vector<std::pair<std::string, std::string>>* stats) {
    for (const ops::GatherStat& s : gc_.stats) {
      std::string error;
      if (!GatherStat(s, children_, *pl, &raw_, &error)) {
        FailGather(pl, error);
        return false;
      }
      if (!raw_.empty()) stats->emplace_back(s.to, raw_);
    }
    return true;
  }

  // The gather's lists, as JSON arrays; false when one of them fails the parent.
  bool GatherLists(ParentLineage* pl, std::vector<std::string>* lists) const {
    for (const ops::GatherList& l : gc_.lists) {
      std::string list, error;
      if (!GatherList(l, children_, *pl, &list, &error)) {
        FailGather(pl, error);
        return false;
      }
      lists->push_back(std::move(list));
    }
    return true;
  }

  // Text modes: the PRESENT children's texts, joined by their separators
  // (or the gather's separator) after the parent's prefix.
  void JoinText(ops::Sample& parent, const ParentLineage& pl) const {
    std::string text = pl.prefix;
    uint32_t last_present = pl.n;
    for (uint32_t c = pl.first; c < pl.first + pl.n; ++c) {
      if (children_.state[c] == ChildState::kLive) last_present = c;
    }
    bool first = true;
    for (uint32_t c = pl.first; c < pl.first + pl.n; ++c) {
      if (children_.state[c] != ChildState::kLive) continue;
      if (gc_.separator && !first) text.append(*gc_.separator);
      first = false;
      text.append(children_.samples[c]->Text(split_key_));
      if (!gc_.separator) text.append(c == last_present ? pl.seps.back() : pl.seps[c - pl.first]);
    }
    // An unchanged text keeps the record's original bytes.
    if (text != parent.Text(split_key_)) parent.SetText(split_key_, std::move(text));
  }

  // Field mode: the PRESENT children's elements, in order, as the split key's array.
  void JoinElements(io::Record& record, const ParentLineage& pl, uint32_t present) const {
    std::string list = "[";
    bool unchanged = present == pl.n;
    for (uint32_t c = pl.first; c < pl.first + pl.n; ++c) {
      if (children_.state[c] != ChildState::kLive) continue;
      const std::optional<std::string_view> value = children_.records_of[c]->Find(split_key_);
      std::vector<std::string_view> items;
      if (value && !value->empty() && value->front() == '[') items = io::SplitArray(*value);
      for (std::string_view item : items) {
        if (list.size() > 1) list.push_back(',');
        list.append(item);
      }
      unchanged = unchanged && items.size() == 1 && items[0] == pl.elements[c - pl.first];
    }
    list.push_back(']');
    if (!unchanged) record.Set(split_key_, std::move(list));
  }

  const LineageRegion& region_;
  const ops::GatherConfig& gc_;
  const bool field_mode_;
  const std::string& split_key_;
  RowLevel& children_;
  RegionCounters* counters_;
  std::string raw_;  // one stat's value, reused
};

}  // namespace

void RowLevel::ClearRows() {
  records_of.clear();
  samples.clear();
  alive.clear();
  top_row.clear();
  parent.clear();
  ordinal.clear();
  state.clear();
  arena.clear();
  spans.clear();
  preload.clear();
}

size_t ExpandRows(const LineageRegion& region, size_t op_idx, RowLevel& parents, size_t begin,
                  RowLevel* children, std::vector<ParentLineage>* lineage,
                  RegionCounters* counters) {
  const ops::ExpandConfig& config = *region.expand;
  const size_t max_parents = static_cast<size_t>(config.max_inflight_parents);
  const size_t max_inflight = static_cast<size_t>(config.max_inflight_children);
  ParentExpansion expansion(region, op_idx, parents, children);
  size_t group = 0;
  size_t k = begin;
  for (; k < parents.samples.size(); ++k) {
    if (!parents.alive[k]) continue;
    if (group > 0 && (group >= max_parents || children->spans.size() >= max_inflight)) break;
    ++group;
    ParentLineage& pl = (*lineage)[k];
    pl.expanded = true;
    pl.first = static_cast<uint32_t>(children->spans.size());
    ++counters->parents_in;
    if (expansion.Expand(k, &pl)) counters->children_expanded += pl.n;
  }
  Materialize(children, expansion.split_key());
  return k;
}

std::vector<GatherOutcome> GatherRows(const LineageRegion& region, RowLevel& parents, size_t begin,
                                      size_t end, RowLevel& children,
                                      std::vector<ParentLineage>& lineage,
                                      RegionCounters* counters) {
  std::vector<GatherOutcome> out(parents.samples.size(), GatherOutcome::kDropped);
  ParentGather gather(region, children, counters);
  for (size_t k = begin; k < end; ++k) {
    ParentLineage& pl = lineage[k];
    if (!pl.expanded) continue;
    out[k] = gather.Gather(*parents.samples[k], *parents.records_of[k], &pl);
    gather.Count(out[k]);
  }
  return out;
}

void AppendLineageError(std::string* out, const LineageRegion& region, const ParentLineage& lineage,
                        const ParentFailure& failure, std::string_view parent_json,
                        const std::string& input_file, uint64_t input_line,
                        const std::string* child_json, const std::string& shard_id) {
  using nlohmann::ordered_json;
  ordered_json e;
  e["op"] = failure.op;
  e["op_idx"] = failure.op_idx;
  e["region"] = region.name;
  e["error_type"] = failure.error_type;
  e["message"] = failure.message;
  e["child_ordinal"] =
      failure.child_ordinal >= 0 ? ordered_json(failure.child_ordinal) : ordered_json(nullptr);
  e["children_total"] = lineage.n;
  e["children_completed"] = lineage.completed;
  e["children_suppressed"] = lineage.suppressed;
  e["level"] = child_json != nullptr ? "child" : "parent";
  if (shard_id.empty()) {
    e["source"] = {{"input_file", input_file}, {"line", input_line}};
  } else {
    e["source"] = {{"shard_id", shard_id}, {"row", input_line - 1}};
  }
  std::string head = e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // The records go in as read: raw JSON, not re-serialized.
  head.pop_back();
  out->append(head);
  out->append(",\"record\":");
  out->append(parent_json);
  if (child_json != nullptr) {
    out->append(",\"child_record\":");
    out->append(*child_json);
  }
  out->append("}\n");
}

}  // namespace djshard::exec
