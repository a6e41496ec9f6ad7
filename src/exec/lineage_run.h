#pragma once

// Running one expand/gather region over the rows of a batch (SPEC-lineage §3,
// §5): splitting parents into children, the lineage of each parent (its
// children's terminal states and first failure), and rebuilding parents from
// their children by ordinal. The executor runs the operators between.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "djshard/exec/executor.h"
#include "djshard/exec/plan.h"
#include "djshard/io/record.h"
#include "djshard/ops/sample.h"

namespace djshard::exec {

// A child's state once the region's operators have run. Rows still live at
// the gather are PRESENT.
enum class ChildState : uint8_t { kLive, kDropped, kFailed, kSuppressed, kLateDiscarded };

// Rows that run through the same operators: a batch's records, or the
// children of one region's parents, in canonical order (parent, ordinal).
struct RowLevel {
  std::vector<io::Record*> records_of;  // each row's record
  std::vector<ops::Sample*> samples;
  std::vector<char> alive;
  std::vector<uint64_t> top_row;  // the batch row each row descends from
  // Children only.
  std::vector<uint32_t> parent;  // index into the level above
  std::vector<uint32_t> ordinal;
  std::vector<ChildState> state;
  std::string arena;                             // every child's JSON line, back to back
  std::vector<std::pair<size_t, size_t>> spans;  // each child's line in the arena
  std::vector<std::string_view> preload;         // text modes: each child's decoded text
  // Records and samples are kept from batch to batch (with their memory) and
  // reused: a batch's children cost no allocation once the pools are warm.
  std::vector<io::Record> record_pool;
  std::vector<ops::Sample> sample_pool;

  std::string_view line(size_t k) const { return {arena.data() + spans[k].first, spans[k].second}; }
  // Forgets the rows, keeping the pools.
  void ClearRows();
};

// Why a parent failed: the first failure among its children, or its expansion.
struct ParentFailure {
  std::string op;
  size_t op_idx = 0;
  std::string error_type;  // op_error, oom, expand_error, expand_limit, gather_error, ...
  std::string message;
  int64_t child_ordinal = -1;  // -1: not a child's failure
};

// One parent's lineage while its region runs.
struct ParentLineage {
  bool expanded = false;              // alive when the region began
  uint32_t first = 0;                 // its first child's index in the child level
  uint32_t n = 0;                     // children expanded
  std::string prefix;                 // text modes: leading whitespace kept with the parent
  std::vector<std::string> seps;      // text modes: each child's separator
  std::vector<std::string> elements;  // field mode: each original element, raw
  bool failed = false;
  ParentFailure failure;
  uint32_t suppressed = 0;      // siblings never dispatched after a failure
  uint32_t late_discarded = 0;  // siblings that finished after their parent failed
  uint32_t completed = 0;       // children that ran to a drop or to the region's end
};

// What a parent became at the gather.
// kOriginal: written as the parent was read (on_empty: keep_original).
enum class GatherOutcome { kOut, kDropped, kFailed, kOriginal };

// Splits live rows of `parents` from `begin` on into children (appended to
// *children) for `region` (expand entry at op_idx), until the group holds
// max_inflight_parents parents or max_inflight_children children (at least
// one parent); returns the end of the group. *lineage has one entry per row of
// `parents`. A row that cannot be split (missing field, not an array, more
// than max_children pieces) is marked failed in its lineage; it has no children.
size_t ExpandRows(const LineageRegion& region, size_t op_idx, RowLevel& parents, size_t begin,
                  RowLevel* children, std::vector<ParentLineage>* lineage,
                  RegionCounters* counters);

// Rebuilds each expanded parent from its children (SPEC-lineage §1 gather)
// and returns what became of it; a kFailed parent's failure is in its lineage
// (a gather_error is recorded there too). Leaves parents' alive flags alone.
// Only rows [begin, end) of `parents` are gathered; outcomes are indexed by row.
std::vector<GatherOutcome> GatherRows(const LineageRegion& region, RowLevel& parents, size_t begin,
                                      size_t end, RowLevel& children,
                                      std::vector<ParentLineage>& lineage,
                                      RegionCounters* counters);

// Appends to *out one errors-file line of a failed parent (level "parent")
// or, with `child` set, of a dropped failing child (level "child"),
// SPEC-lineage §5. The records go in as read, without a copy in between.
void AppendLineageError(std::string* out, const LineageRegion& region, const ParentLineage& lineage,
                        const ParentFailure& failure, std::string_view parent_json,
                        const std::string& input_file, uint64_t input_line,
                        const std::string* child_json, const std::string& shard_id);

}  // namespace djshard::exec
