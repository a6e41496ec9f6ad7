#include "djshard/exec/executor.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <thread>
#include <utility>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/io/input.h"
#include "djshard/io/json_text.h"
#include "djshard/io/record.h"
#include "djshard/ops/lineage.h"
#include "src/exec/lineage_run.h"

namespace djshard::exec {

namespace {

// A run of whole lines of one input file, read in one piece, with padding
// after it for the JSON parser. Lines are split by the thread that runs it.
struct Batch {
  uint64_t seq = 0;
  uint64_t first_row = 0;  // its first line's row among the rows the run reads
  io::LineChunk chunk;
};

struct BatchResult {
  std::string output;
  std::string errors;
  std::vector<std::string> taps;  // rows after each tapped operator
  std::vector<uint64_t> tap_rows;
  std::vector<std::string> tap_origins;  // ExecOptions::tap_origin_sink
  std::vector<uint64_t> output_lines;    // ExecOptions::output_lines_sink
  SignedBatch signed_rows;               // ExecOptions::sign
  uint64_t rows_in = 0, rows_out = 0, bytes_in = 0, error_count = 0;
  std::vector<OperatorCounters> counters;
  std::vector<RegionCounters> regions;
};

// Per-thread scratch reused across batches.
struct Scratch {
  io::JsonLineParser parser;
  std::vector<std::string_view> lines;
  std::vector<io::Record> records;
  std::vector<ops::Sample> samples;
  RowLevel level;  // the batch's rows
  // The children of the regions at each depth (1..4), reused across batches.
  std::array<RowLevel, 5> child_levels;
  std::string text;
  // Operators that process rows together: the live rows and their outcomes.
  std::vector<ops::Sample*> live;
  std::vector<size_t> live_index;
  std::vector<ops::RowOutcome> outcomes;
  // ExecOptions::sign: this thread's signer and a batch's values to sign.
  std::unique_ptr<ops::dedup::Signer> signer;
  std::vector<ops::dedup::TextValue> sign_values;
};

void AppendError(std::string* out, const std::string& op, const std::string& message,
                 const std::string& file, uint64_t line, const std::string& type = {}) {
  nlohmann::json e = {{"op", op}, {"error", message}, {"file", file}, {"line", line}};
  if (!type.empty()) e["error_type"] = type;
  out->append(e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  out->push_back('\n');
}

// Throws when `stop_check` says the run must stop: the signal's error for
// SIGINT/SIGTERM, else a cancellation (a worker that lost its claim).
void StopIfAsked(const std::function<bool()>& stop_check) {
  if (!stop_check()) return;
  ThrowIfStopRequested();
  throw Error("the run was cancelled", "its claim was lost");
}

// When the first batch enters each operator and the last leaves it
// (ExecOptions::op_event): the last is known once the input has ended and as
// many batches left the operator as were read.
class OperatorEdges {
 public:
  OperatorEdges(const Plan& plan, const ExecOptions& options)
      : options_(options),
        entered_(plan.operators.size()),
        ended_(plan.operators.size(), false),
        left_(plan.operators.size(), 0),
        totals_(plan.operators.size()) {
    for (size_t i = 0; i < totals_.size(); ++i) totals_[i].name = plan.operators[i].op->name();
  }
  void Enter(size_t i) {
    if (entered_[i].load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mu_);
    StartLocked(i);
  }
  void Leave(size_t i, const OperatorCounters& batch) {
    std::lock_guard<std::mutex> lock(mu_);
    OperatorCounters& t = totals_[i];
    t.rows_in += batch.rows_in;
    t.rows_out += batch.rows_out;
    t.errors += batch.errors;
    t.seconds += batch.seconds;
    ++left_[i];
    EndLocked(i);
  }
  // The input ended after `batches` batches.
  void EndOfInput(uint64_t batches) {
    std::lock_guard<std::mutex> lock(mu_);
    batches_ = batches;
    const size_t end = std::min(options_.end_op, totals_.size());
    for (size_t i = options_.first_op; i < end; ++i) EndLocked(i);
  }

 private:
  void StartLocked(size_t i) {
    if (entered_[i].load(std::memory_order_relaxed)) return;
    options_.op_event(i, nullptr);
    entered_[i].store(true, std::memory_order_relaxed);
  }
  void EndLocked(size_t i) {
    if (ended_[i] || !batches_ || left_[i] != *batches_) return;
    StartLocked(i);  // no batch at all: the operator still starts and ends
    ended_[i] = true;
    options_.op_event(i, &totals_[i]);
  }

  const ExecOptions& options_;
  std::mutex mu_;
  std::vector<std::atomic<bool>> entered_;
  std::vector<bool> ended_;
  std::vector<uint64_t> left_;            // batches that left each operator
  std::vector<OperatorCounters> totals_;  // over the batches that left
  std::optional<uint64_t> batches_;       // set when the input has ended
};

struct ChildScope;
class BatchRun;
class Executor;

// A batch's live rows (its own, or children of its parents inside a region)
// for one model operator, handed to the operator's ready queue in canonical
// order (SPEC-lineage §4). Every
// field is guarded by the executor's mutex once submitted; the batch's thread
// waits, touching nothing of its batch, until `done`.
struct Submission {
  BatchRun* run = nullptr;
  RowLevel* level = nullptr;
  ChildScope* scope = nullptr;
  uint64_t seq = 0;          // the reader batch's sequence number
  std::vector<size_t> rows;  // rows of `level`, canonical order
  size_t next = 0;           // rows before it have left the queue
  size_t in_calls = 0;       // calls running with some of its rows
  bool last = true;          // the batch's last submission to this operator
  bool done = false;         // every row left the queue and its call's outcome is applied
  bool parked = false;       // the batch's thread waits for it without a CPU token
};

// Queues `sub` for operator op_idx of `executor` and returns once it is done;
// the caller holds a CPU token and not the executor's mutex.
void SubmitAndWait(Executor* executor, size_t op_idx, Submission* sub);

// Runs a batch's operators over its rows and, at each expand, over the
// children of its parents (SPEC-lineage): one call per operator per batch at
// every level, so that each operator's counters and events see each batch
// once, whatever the nesting.
class BatchRun {
 public:
  BatchRun(const Plan& plan, const io::LineChunk& chunk, uint64_t first_row,
           const std::string& file, Scratch& s, BatchResult* r,
           const std::function<bool()>& stop_check, const ExecOptions& options,
           OperatorEdges* edges, Executor* executor, uint64_t seq)
      : executor_(executor),
        seq_(seq),
        plan_(plan),
        chunk_(chunk),
        first_row_(first_row),
        file_(file),
        s_(s),
        r_(r),
        stop_check_(stop_check),
        options_(options),
        edges_(edges) {}

  // Runs operators [begin, end) over `level`; `scope` is null at the batch's
  // own rows, else the region whose children `level` holds.
  void RunOps(RowLevel& level, size_t begin, size_t end, ChildScope* scope);

  // Tees the surviving rows after operator i into its tap (batch rows only).
  void TapAfter(RowLevel& level, size_t i);

  // Applies the outcome of one model call of operator i to rows `ks` of
  // `level` (this batch's part of the call, canonical order). Called with the
  // executor's mutex held while the batch's thread waits.
  void ApplyCall(size_t i, RowLevel& level, ChildScope* scope, std::span<const size_t> ks,
                 std::span<const ops::RowOutcome> outcomes);
  OperatorCounters& counters(size_t i) { return r_->counters[i]; }

 private:
  class RegionRun;  // the steps of RunRegion

  void RunOne(RowLevel& level, size_t i, ChildScope* scope);
  size_t RunRegion(RowLevel& parents, size_t expand_idx, ChildScope* outer);
  // Row k failed at operator op_idx. Inside a region, the failure surfaced
  // at entry `at_idx` of the level (op_idx, or a nested region's gather):
  // rows [in_flight_lo, in_flight_hi] of the level were in the same call, and
  // rows before `done_before` have been through that entry already.
  void FailRow(RowLevel& level, ChildScope* scope, size_t k, size_t op_idx, const std::string& op,
               const std::string& message, const std::string& type, size_t in_flight_lo,
               size_t in_flight_hi, size_t done_before, size_t at_idx);
  // The JSON of a parent as it entered its region: the line as read for a
  // batch row, the child's line for a child.
  std::string_view RowJson(const RowLevel& level, size_t k, const ChildScope* scope) const;
  uint64_t LineOf(const RowLevel& level, size_t k) const {
    return chunk_.first_line + level.top_row[k];
  }
  // The file and line the errors file names for a row (ExecOptions::origin).
  const RowOrigin* OriginOf(const RowLevel& level, size_t k) const {
    return options_.origin ? options_.origin(LineOf(level, k)) : nullptr;
  }
  const std::string& WhereFile(const RowLevel& level, size_t k) const {
    const RowOrigin* o = OriginOf(level, k);
    return o != nullptr ? o->file : file_;
  }
  uint64_t WhereLine(const RowLevel& level, size_t k) const {
    const RowOrigin* o = OriginOf(level, k);
    return o != nullptr ? o->line : LineOf(level, k);
  }

  // Keeps the errors-file text a region wrote for batch row `top_row` from
  // `from` on: a top-level region writes its rows' errors in row order once it
  // is done, so that parents taken from a journal keep their place.
  void KeepRowErrors(uint64_t top_row, size_t from) {
    if (row_errors_.size() <= top_row) row_errors_.resize(s_.lines.size());
    row_errors_[top_row].append(r_->errors, from, std::string::npos);
    row_errors_bytes_ += r_->errors.size() - from;
  }

  Executor* const executor_;  // owns the ready queues
  const uint64_t seq_;
  const Plan& plan_;
  const io::LineChunk& chunk_;
  const uint64_t first_row_;
  // Per batch row: what the top-level region running now wrote to the errors
  // file for it, and those bytes in all.
  std::vector<std::string> row_errors_;
  size_t row_errors_bytes_ = 0;
  const std::string& file_;
  Scratch& s_;
  BatchResult* r_;
  const std::function<bool()>& stop_check_;
  const ExecOptions& options_;
  OperatorEdges* edges_;
  size_t next_tap_ = 0;
  // False while a region runs a group of parents other than the batch's last:
  // its operators are not done with the batch yet.
  bool may_leave_ = true;
};

// The children of one region's parents while its operators run.
struct ChildScope {
  const LineageRegion* region = nullptr;
  size_t region_idx = 0;
  RowLevel* parents = nullptr;
  ChildScope* parent_scope = nullptr;  // the scope of `parents` (null: batch rows)
  std::vector<ParentLineage>* lineage = nullptr;
};

std::string_view BatchRun::RowJson(const RowLevel& level, size_t k, const ChildScope* scope) const {
  if (scope == nullptr) return s_.lines[level.top_row[k]];
  return level.line(k);
}

void BatchRun::TapAfter(RowLevel& level, size_t i) {
  if (next_tap_ >= options_.taps.size() || options_.taps[next_tap_] != i) return;
  const size_t t = next_tap_++;
  std::string rows;
  std::string& out = options_.compress_taps ? rows : r_->taps[t];
  io::Record copy;
  for (size_t k = 0; k < level.samples.size(); ++k) {
    if (!level.alive[k]) continue;
    copy = *level.records_of[k];
    level.samples[k]->CommitTo(&copy, plan_.writes_stats);
    copy.Serialize(&out);
    out.push_back('\n');
    ++r_->tap_rows[t];
    if (options_.tap_origin_sink) {
      r_->tap_origins[t] += nlohmann::json::array({WhereFile(level, k), WhereLine(level, k)})
                                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      r_->tap_origins[t].push_back('\n');
    }
  }
  if (options_.compress_taps) io::AppendZstdFrame(rows, &r_->taps[t]);
}

void BatchRun::FailRow(RowLevel& level, ChildScope* scope, size_t k, size_t op_idx,
                       const std::string& op, const std::string& message, const std::string& type,
                       size_t in_flight_lo, size_t in_flight_hi, size_t done_before,
                       size_t at_idx) {
  const PlannedOperator& planned = plan_.operators[op_idx];
  if (!planned.skip_op_error) {
    std::string where;
    if (scope != nullptr) {
      where = " on child " + std::to_string(level.ordinal[k]) + " of region '" +
              scope->region->name + "'";
    }
    throw Error(WhereFile(level, k), WhereLine(level, k),
                "operator '" + op + "' failed" + where + ": " + message,
                "set skip_op_error: true to drop such records and keep going");
  }
  level.alive[k] = 0;
  if (scope == nullptr) {
    ++r_->error_count;
    AppendError(&r_->errors, op, message, WhereFile(level, k), WhereLine(level, k), type);
    return;
  }
  level.state[k] = ChildState::kFailed;
  const uint32_t p = level.parent[k];
  ParentLineage& pl = (*scope->lineage)[p];
  const ops::GatherConfig& gc = *scope->region->gather;
  const ParentFailure failure{op, op_idx, type.empty() ? "op_error" : type, message,
                              static_cast<int64_t>(level.ordinal[k])};
  if (gc.on_child_error == ops::OnChildError::kDropChild) {
    const std::string child(level.line(k));
    const size_t from = r_->errors.size();
    AppendLineageError(&r_->errors, *scope->region, pl, failure,
                       RowJson(*scope->parents, p, scope->parent_scope), WhereFile(level, k),
                       WhereLine(level, k), &child, options_.shard_id);
    KeepRowErrors(level.top_row[k], from);
    return;
  }
  if (pl.failed) return;
  pl.failed = true;
  pl.failure = failure;
  if (!gc.suppress_siblings) return;
  // Siblings not yet dispatched never run (SUPPRESSED); those in the same
  // call, and those already through the region's last entry, ran: their
  // results are discarded (late_discarded). Siblings through this entry
  // but waiting for a later one are not dispatched there: SUPPRESSED.
  const bool at_last = at_idx + 1 == scope->region->gather_idx;
  for (uint32_t c = pl.first; c < pl.first + pl.n; ++c) {
    if (c == k || !level.alive[c]) continue;
    level.alive[c] = 0;
    if ((c >= in_flight_lo && c <= in_flight_hi) || (at_last && c < done_before)) {
      level.state[c] = ChildState::kLateDiscarded;
      ++pl.late_discarded;
    } else {
      level.state[c] = ChildState::kSuppressed;
    }
  }
}

void BatchRun::RunOps(RowLevel& level, size_t begin, size_t end, ChildScope* scope) {
  for (size_t i = begin; i < end; ++i) {
    if (dynamic_cast<const ops::ExpandEntry*>(plan_.operators[i].op.get()) != nullptr) {
      i = RunRegion(level, i, scope);
    } else {
      RunOne(level, i, scope);
    }
    if (scope == nullptr) TapAfter(level, i);
  }
}

// One region over the rows of one level, step by step: parents the journal
// holds are set aside, the others go through the expand, the region's
// operators and the gather in groups (max_inflight_parents,
// max_inflight_children), then the journal's parents come back and the errors
// the region wrote are put in row order.
class BatchRun::RegionRun {
 public:
  RegionRun(BatchRun& run, RowLevel& parents, size_t expand_idx, ChildScope* outer)
      : run_(run),
        parents_(parents),
        expand_idx_(expand_idx),
        outer_(outer),
        top_(outer == nullptr),
        region_idx_(RegionIndex(run.plan_, expand_idx)),
        region_(run.plan_.regions[region_idx_]),
        counters_(run.r_->regions[region_idx_]),
        g_(region_.gather_idx),
        ce_(run.r_->counters[expand_idx]),
        cg_(run.r_->counters[g_]),
        children_(run.s_.child_levels[static_cast<size_t>(region_.depth)]),
        lineage_(parents.samples.size()),
        journal_(top_ && static_cast<bool>(run.options_.journal_sink)),
        batch_may_leave_(run.may_leave_) {
    scope_.region = &region_;
    scope_.region_idx = region_idx_;
    scope_.parents = &parents;
    scope_.parent_scope = outer;
    scope_.lineage = &lineage_;
  }

  // Runs the region; returns its gather's index.
  size_t Run() {
    HideJournaledParents();
    const size_t errors_at = run_.r_->errors.size();
    if (top_) {
      for (std::string& e : run_.row_errors_) e.clear();
      run_.row_errors_bytes_ = 0;
    }
    // Operators hear a batch leave once, after the last group.
    size_t begin = 0;
    do {
      const size_t end = Expand(begin);
      run_.RunOps(children_, expand_idx_ + 1, g_, &scope_);
      Gather(begin, end);
      begin = end;
    } while (begin < parents_.samples.size());
    RestoreJournaledParents();
    OrderErrors(errors_at);
    run_.may_leave_ = batch_may_leave_;
    return g_;
  }

 private:
  static size_t RegionIndex(const Plan& plan, size_t expand_idx) {
    size_t region_idx = 0;
    while (plan.regions[region_idx].expand_idx != expand_idx) ++region_idx;
    return region_idx;
  }

  // Durable lineage: at top level, parents whose result the journal holds
  // are not expanded; they are hidden from the region and restored after it.
  void HideJournaledParents() {
    if (!top_ || !run_.options_.journaled) return;
    from_journal_.assign(parents_.samples.size(), nullptr);
    for (size_t k = 0; k < parents_.samples.size(); ++k) {
      if (!parents_.alive[k]) continue;
      from_journal_[k] = run_.options_.journaled(region_idx_, run_.first_row_ + k);
      if (from_journal_[k] != nullptr) parents_.alive[k] = 0;
    }
  }

  // Expands the next group of parents, from `begin` on, into the child level;
  // returns the group's end.
  size_t Expand(size_t begin) {
    OperatorEdges* edges = run_.edges_;
    if (edges != nullptr) edges->Enter(expand_idx_);
    const double start = MonotonicSeconds();
    children_.ClearRows();
    const size_t end =
        ExpandRows(region_, expand_idx_, parents_, begin, &children_, &lineage_, &counters_);
    run_.may_leave_ = batch_may_leave_ && end >= parents_.samples.size();
    for (size_t k = begin; k < end; ++k) {
      if (!lineage_[k].expanded) continue;
      ++ce_.rows_in;
      if (lineage_[k].failed && !run_.plan_.operators[expand_idx_].skip_op_error) {
        throw Error(run_.WhereFile(parents_, k), run_.WhereLine(parents_, k),
                    "expand '" + region_.name + "' failed (" + lineage_[k].failure.error_type +
                        "): " + lineage_[k].failure.message,
                    "set skip_op_error: true to report such records and keep going");
      }
    }
    ce_.rows_out += children_.samples.size();
    ce_.seconds += MonotonicSeconds() - start;
    if (edges != nullptr && run_.may_leave_) edges->Leave(expand_idx_, ce_);
    return end;
  }

  // Gathers the group of parents [begin, end) from their children.
  void Gather(size_t begin, size_t end) {
    OperatorEdges* edges = run_.edges_;
    if (edges != nullptr) edges->Enter(g_);
    const double start = MonotonicSeconds();
    for (size_t c = 0; c < children_.samples.size(); ++c) cg_.rows_in += children_.alive[c] ? 1 : 0;
    const std::vector<GatherOutcome> outcomes =
        GatherRows(region_, parents_, begin, end, children_, lineage_, &counters_);
    for (size_t k = begin; k < end; ++k) {
      if (!lineage_[k].expanded) continue;
      // A child of an outer region whose sibling failed before it in this
      // loop is terminal already (late_discarded): its report is ignored.
      if (outer_ != nullptr && !parents_.alive[k]) continue;
      ApplyOutcome(k, outcomes[k], end);
      if (journal_) gathered_.push_back(JournalEntry(k, outcomes[k]));
    }
    if (journal_ && !gathered_.empty()) {
      run_.options_.journal_sink(region_idx_, gathered_);
      gathered_.clear();
    }
    cg_.seconds += MonotonicSeconds() - start;
    if (edges != nullptr && run_.may_leave_) edges->Leave(g_, cg_);
  }

  // What parent k's outcome at the gather does to it; `end` is its group's end.
  void ApplyOutcome(size_t k, GatherOutcome outcome, size_t end) {
    switch (outcome) {
      case GatherOutcome::kOut:
        ++cg_.rows_out;
        break;
      case GatherOutcome::kOriginal: {
        // The parent exactly as read, whatever ran on it before the expand.
        io::Record& record = *parents_.records_of[k];
        record.AssignView(run_.RowJson(parents_, k, outer_));
        parents_.samples[k]->Reset(&record);
        ++cg_.rows_out;
        break;
      }
      case GatherOutcome::kDropped:
        parents_.alive[k] = 0;
        if (outer_ != nullptr) parents_.state[k] = ChildState::kDropped;
        break;
      case GatherOutcome::kFailed:
        ++cg_.errors;
        ReportFailed(k, end);
        break;
    }
  }

  void ReportFailed(size_t k, size_t end) {
    const ParentFailure& f = lineage_[k].failure;
    if (outer_ != nullptr) {
      // A failed parent is a failed child of the region around it: the
      // outer region reports it (once, for its own parent).
      run_.FailRow(parents_, outer_, k, f.op_idx, f.op, f.message, f.error_type, k, k, end, g_);
      return;
    }
    // One errors line per failed input record, with its bytes as read.
    BatchResult* r = run_.r_;
    const size_t from = r->errors.size();
    AppendLineageError(&r->errors, region_, lineage_[k], f, run_.RowJson(parents_, k, outer_),
                       run_.WhereFile(parents_, k), run_.WhereLine(parents_, k), nullptr,
                       run_.options_.shard_id);
    run_.KeepRowErrors(parents_.top_row[k], from);
    parents_.alive[k] = 0;
    ++r->error_count;
  }

  // Parent k's result for the journal.
  JournaledParent JournalEntry(size_t k, GatherOutcome outcome) const {
    JournaledParent j;
    j.row = run_.first_row_ + k;
    if (outcome == GatherOutcome::kOut || outcome == GatherOutcome::kOriginal) {
      j.state = JournalState::kPresent;
      io::Record copy = *parents_.records_of[k];
      parents_.samples[k]->CommitTo(&copy, run_.plan_.writes_stats);
      copy.Serialize(&j.record);
    } else {
      j.state = outcome == GatherOutcome::kDropped ? JournalState::kDropped : JournalState::kFailed;
    }
    if (k < run_.row_errors_.size()) j.errors = run_.row_errors_[k];
    return j;
  }

  // Parents from the journal, as their gather made them in an earlier run.
  void RestoreJournaledParents() {
    for (size_t k = 0; k < from_journal_.size(); ++k) {
      const JournaledParent* j = from_journal_[k];
      if (j == nullptr) continue;
      ++counters_.parents_in;
      ++counters_.parents_from_journal;
      switch (j->state) {
        case JournalState::kPresent: {
          io::Record& record = *parents_.records_of[k];
          record.AssignView(j->record);
          parents_.samples[k]->Reset(&record);
          parents_.alive[k] = 1;
          ++counters_.parents_out;
          ++cg_.rows_out;
          break;
        }
        case JournalState::kDropped:
          ++counters_.parents_dropped;
          break;
        case JournalState::kFailed:
          ++counters_.parents_failed;
          ++cg_.errors;
          ++run_.r_->error_count;
          break;
      }
    }
  }

  // The errors the region wrote from `errors_at` on, and the journal's.
  void OrderErrors(size_t errors_at) {
    std::string& errors = run_.r_->errors;
    if (top_ && errors.size() - errors_at == run_.row_errors_bytes_) {
      // Every line the region wrote is some row's: they go in row order, each
      // row's as it wrote them (dropped children's, then the parent's).
      errors.resize(errors_at);
      for (size_t k = 0; k < parents_.samples.size(); ++k) {
        if (k < from_journal_.size() && from_journal_[k] != nullptr) {
          errors.append(from_journal_[k]->errors);
        } else if (k < run_.row_errors_.size()) {
          errors.append(run_.row_errors_[k]);
        }
      }
    } else {
      for (const JournaledParent* j : from_journal_) {
        if (j != nullptr) errors.append(j->errors);
      }
    }
  }

  BatchRun& run_;
  RowLevel& parents_;
  const size_t expand_idx_;
  ChildScope* const outer_;  // the scope of `parents_` (null: batch rows)
  const bool top_;
  const size_t region_idx_;
  const LineageRegion& region_;
  RegionCounters& counters_;
  const size_t g_;        // the gather's index
  OperatorCounters& ce_;  // the expand's counters
  OperatorCounters& cg_;  // the gather's counters
  RowLevel& children_;
  std::vector<ParentLineage> lineage_;  // one per row of `parents_`
  ChildScope scope_;
  // Top level: per parent, its result in the journal (null: none).
  std::vector<const JournaledParent*> from_journal_;
  const bool journal_;                     // gathered parents go to the journal
  std::vector<JournaledParent> gathered_;  // this group's, for the journal
  // The batch's may_leave_ when the region began, restored when it is done.
  const bool batch_may_leave_;
};

size_t BatchRun::RunRegion(RowLevel& parents, size_t expand_idx, ChildScope* outer) {
  return RegionRun(*this, parents, expand_idx, outer).Run();
}

// One model call of children. A call that raises an OpError is split in
// halves, down to single rows, to find the rows it fails on (SPEC-lineage
// §5), within `*budget` further calls; past the budget the rows left fail
// with isolation_budget. Other exceptions (a device that broke) fail the run.
void CallIsolating(const ops::Operator& op, std::span<ops::Sample* const> rows,
                   std::span<ops::RowOutcome> outcomes, size_t* budget, OperatorCounters* c) {
  try {
    ++c->calls;
    c->items += rows.size();
    op.ProcessRows(rows, outcomes);
    return;
  } catch (const ops::OpError& e) {
    if (rows.size() == 1) {
      outcomes[0].keep = false;
      outcomes[0].error = e.what();
      outcomes[0].error_type = e.type().empty() ? "op_error" : e.type();
      return;
    }
    const size_t half = rows.size() / 2;
    for (const auto& [first, count] : {std::pair<size_t, size_t>{0, half},
                                       std::pair<size_t, size_t>{half, rows.size() - half}}) {
      if (*budget == 0) {
        for (size_t j = first; j < first + count; ++j) {
          outcomes[j].keep = false;
          outcomes[j].error = "the call failed (" + std::string(e.what()) +
                              ") and max_isolation_calls ran out before this row was isolated";
          outcomes[j].error_type = "isolation_budget";
        }
        continue;
      }
      --*budget;
      for (size_t j = first; j < first + count; ++j) outcomes[j] = ops::RowOutcome{};
      CallIsolating(op, rows.subspan(first, count), outcomes.subspan(first, count), budget, c);
    }
  }
}

void BatchRun::RunOne(RowLevel& level, size_t i, ChildScope* scope) {
  const PlannedOperator& planned = plan_.operators[i];
  const ops::Operator& op = *planned.op;
  const bool is_filter = op.kind() == ops::OpKind::kFilter;
  OperatorCounters& c = r_->counters[i];
  if (edges_ != nullptr) edges_->Enter(i);
  const double start = MonotonicSeconds();
  const size_t n = level.samples.size();
  auto drop = [&](size_t k) {
    level.alive[k] = 0;
    if (scope != nullptr) level.state[k] = ChildState::kDropped;
  };
  if (op.processes_rows_together()) {
    if (stop_check_) StopIfAsked(stop_check_);
    // Rows go to the operator's ready queue, shared by every batch of the
    // run; the batch waits until each of them left it.
    Submission sub;
    sub.run = this;
    sub.level = &level;
    sub.scope = scope;
    sub.seq = seq_;
    sub.last = may_leave_;
    for (size_t k = 0; k < n; ++k) {
      if (level.alive[k]) sub.rows.push_back(k);
    }
    c.seconds += MonotonicSeconds() - start;
    SubmitAndWait(executor_, i, &sub);
    if (edges_ != nullptr && may_leave_) edges_->Leave(i, c);
    return;
  }
  for (size_t k = 0; k < n; ++k) {
    if (!level.alive[k]) continue;
    if (stop_check_ && (k & 15) == 0) StopIfAsked(stop_check_);
    ++c.rows_in;
    try {
      if (is_filter) {
        if (!static_cast<const ops::Filter&>(op).Process(*level.samples[k])) drop(k);
      } else {
        static_cast<const ops::Mapper&>(op).Map(*level.samples[k]);
      }
    } catch (const ops::OpError& e) {
      ++c.errors;
      FailRow(level, scope, k, i, op.name(), e.what(), e.type(), k, k, k, i);
      continue;
    } catch (const std::exception& e) {
      ++c.errors;
      FailRow(level, scope, k, i, op.name(), e.what(), "", k, k, k, i);
      continue;
    }
    if (level.alive[k]) ++c.rows_out;
  }
  c.seconds += MonotonicSeconds() - start;
  if (edges_ != nullptr && may_leave_) edges_->Leave(i, c);
}

void BatchRun::ApplyCall(size_t i, RowLevel& level, ChildScope* scope, std::span<const size_t> ks,
                         std::span<const ops::RowOutcome> outcomes) {
  const std::string& name = plan_.operators[i].op->name();
  OperatorCounters& c = r_->counters[i];
  const size_t lo = ks.front(), hi = ks.back();
  for (size_t j = 0; j < ks.size(); ++j) {
    const size_t k = ks[j];
    ++c.rows_in;
    if (!level.alive[k]) continue;  // discarded: its parent failed during this call
    if (!outcomes[j].error.empty()) {
      ++c.errors;
      FailRow(level, scope, k, i, name, outcomes[j].error, outcomes[j].error_type, lo, hi, lo, i);
      continue;
    }
    if (!outcomes[j].keep) {
      level.alive[k] = 0;
      if (scope != nullptr) level.state[k] = ChildState::kDropped;
    }
    if (level.alive[k]) ++c.rows_out;
  }
}

// Empties *r for a batch: no output yet, a tap per tapped operator, counters
// per operator and per region.
void ResetResult(const Plan& plan, const ExecOptions& options, BatchResult* r) {
  r->taps.resize(options.taps.size());
  r->tap_rows.assign(options.taps.size(), 0);
  for (std::string& t : r->taps) t.clear();
  r->tap_origins.resize(options.taps.size());
  for (std::string& t : r->tap_origins) t.clear();
  r->counters.assign(plan.operators.size(), OperatorCounters{});
  for (size_t i = 0; i < plan.operators.size(); ++i)
    r->counters[i].name = plan.operators[i].op->name();
  r->regions.assign(plan.regions.size(), RegionCounters{});
  for (size_t i = 0; i < plan.regions.size(); ++i) r->regions[i].name = plan.regions[i].name;
}

// Splits the batch into lines and parses each one into s.level's rows.
void ParseRows(const Plan& plan, const io::LineChunk& chunk, const std::string& file, Scratch& s) {
  s.lines.clear();
  size_t pos = 0;
  while (pos < chunk.size) {
    const char* nl =
        static_cast<const char*>(std::memchr(chunk.data.data() + pos, '\n', chunk.size - pos));
    const size_t end = static_cast<size_t>(nl - chunk.data.data());
    s.lines.push_back(std::string_view(chunk.data.data() + pos, end - pos));
    pos = end + 1;
  }
  const size_t n = s.lines.size();
  if (s.records.size() < n) s.records.resize(n);
  if (s.samples.size() < n) s.samples.resize(n, ops::Sample(nullptr));
  RowLevel& level = s.level;
  level.records_of.resize(n);
  level.samples.resize(n);
  level.alive.assign(n, 1);
  level.top_row.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const std::string_view line = s.lines[k];
    s.parser.ParseObject(line, file, chunk.first_line + k);
    s.records[k].AssignView(line);
    s.samples[k].Reset(&s.records[k]);
    // The parser has decoded the text already: hand it over instead of decoding twice.
    if (s.parser.GetString(plan.text_key, &s.text))
      s.samples[k].PreloadText(plan.text_key, std::move(s.text));
    level.records_of[k] = &s.records[k];
    level.samples[k] = &s.samples[k];
    level.top_row[k] = k;
  }
}

// Appends the surviving rows to r->output, one JSON line each.
// With `first_line` (not 0), each row's source line goes to r->output_lines.
void WriteRows(const Plan& plan, size_t chunk_size, uint64_t first_line, Scratch& s,
               BatchResult* r) {
  r->output.reserve(chunk_size + chunk_size / 8);
  r->output_lines.clear();
  for (size_t k = 0; k < s.lines.size(); ++k) {
    if (!s.level.alive[k]) continue;
    if (first_line != 0) r->output_lines.push_back(first_line + k);
    s.samples[k].Commit(plan.keep_stats && plan.writes_stats);
    if (!plan.keep_stats) {
      s.records[k].Remove(ops::kStatsKey);
      s.records[k].Remove(ops::kMetaKey);
    }
    s.records[k].Serialize(&r->output);
    r->output.push_back('\n');
    ++r->rows_out;
  }
}

// The value of top-level `key` of a sample, as the signature functions see it.
ops::dedup::TextValue SignedValue(ops::Sample& sample, const std::string& key) {
  const std::optional<std::string_view> raw = sample.Raw(key);
  // (not in the record but in the sample: an operator set the text)
  if (raw ? !raw->empty() && raw->front() == '"' : sample.Has(key)) {
    return ops::dedup::TextValue::String(sample.Text(key));
  }
  if (raw) return ops::dedup::TextValue::OfJson(*raw);
  ops::dedup::TextValue missing;
  missing.type = ops::dedup::TextValue::Type::kMissing;
  return missing;
}

// Signs the batch's surviving rows for ExecOptions::sign into r->signed_rows,
// kMany at a time as the sign tasks do.
void SignSurvivingRows(const ops::dedup::DedupConfig& config, Scratch& s, BatchResult* r) {
  const double t0 = MonotonicSeconds();
  if (!s.signer) s.signer = std::make_unique<ops::dedup::Signer>(config);
  s.sign_values.clear();
  for (size_t k = 0; k < s.lines.size(); ++k) {
    if (s.level.alive[k]) s.sign_values.push_back(SignedValue(s.samples[k], config.text_key));
  }
  SignedBatch& out = r->signed_rows;
  const size_t n = s.sign_values.size();
  out.signatures.resize(n);
  out.errors.assign(n, std::string());
  constexpr size_t kMany = 256;
  bool ok[kMany];
  for (size_t i = 0; i < n; i += kMany) {
    const size_t m = std::min(kMany, n - i);
    s.signer->SignMany(&s.sign_values[i], m, &out.signatures[i], ok, &out.errors[i]);
    for (size_t j = 0; j < m; ++j) {
      // errors: empty exactly for the signed rows
      std::string& error = out.errors[i + j];
      if (ok[j]) {
        error.clear();
      } else if (error.empty()) {
        error = "the deduplicator could not sign this row";
      }
    }
  }
  out.seconds = MonotonicSeconds() - t0;
}

// `stop_check`, when set, is asked before the batch and every few records:
// true stops the batch. `edges`, when set, hears each operator's batch enter
// and leave.
void ProcessBatch(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
                  const Batch& batch, Scratch& s, BatchResult* r,
                  const std::function<bool()>& stop_check, const ExecOptions& options,
                  OperatorEdges* edges, Executor* executor) {
  ResetResult(plan, options, r);
  if (stop_check) StopIfAsked(stop_check);
  const io::LineChunk& chunk = batch.chunk;
  const std::string& file = inputs[chunk.file].display_path;
  ParseRows(plan, chunk, file, s);
  const size_t n = s.lines.size();
  r->bytes_in = chunk.size;
  r->rows_in = n;
  BatchRun run(plan, chunk, batch.first_row, file, s, r, stop_check, options, edges, executor,
               batch.seq);
  run.RunOps(s.level, options.first_op, std::min(options.end_op, plan.operators.size()), nullptr);
  if (options.sign != nullptr) SignSurvivingRows(*options.sign, s, r);
  if (options.discard_output) {
    for (size_t k = 0; k < n; ++k) r->rows_out += s.level.alive[k] ? 1 : 0;
    return;
  }
  WriteRows(plan, chunk.size, options.output_lines_sink ? chunk.first_line : 0, s, r);
}

// Restores input order. Results arrive from any thread under their batch
// sequence number; the next one in order is written by one thread at a time
// and folded into the summary. Not thread-safe by itself: Add, TakeNext and
// Written run under the executor's mutex, Write outside it (TakeNext makes
// the caller the only writer until Written).
class OrderedWriter {
 public:
  OrderedWriter(io::OutputStream& output, io::OutputStream* errors, ExecSummary& summary,
                const ExecOptions& options, double start)
      : output_(output),
        errors_(errors),
        summary_(summary),
        options_(options),
        start_(start),
        last_progress_(start) {}

  void Add(uint64_t seq, BatchResult result) { pending_.emplace(seq, std::move(result)); }
  // Whether the next result in order is here and no one is writing.
  bool CanWrite() const { return !writing_ && pending_.count(next_) != 0; }
  // Takes the next result in order; the caller writes it.
  BatchResult TakeNext() {
    auto it = pending_.find(next_);
    BatchResult result = std::move(it->second);
    pending_.erase(it);
    writing_ = true;
    return result;
  }
  // Appends a taken result to the streams and counts it.
  void Write(BatchResult& done) {
    if (!options_.discard_output) output_.Append(done.output);
    if (options_.output_tee) {
      options_.output_tee(done.output, done.rows_out);
    }
    if (options_.output_lines_sink) options_.output_lines_sink(done.output_lines);
    if (options_.signed_sink) {
      SignedBatch batch = std::move(done.signed_rows);
      batch.first = summary_.rows_out;
      options_.signed_sink(std::move(batch));
    }
    if (options_.tap_sink) {
      for (size_t t = 0; t < done.taps.size(); ++t) {
        options_.tap_sink(t, done.taps[t], done.tap_rows[t]);
        if (options_.tap_origin_sink) options_.tap_origin_sink(t, done.tap_origins[t]);
      }
    }
    if (errors_ != nullptr && !done.errors.empty()) errors_->Append(done.errors);
    summary_.rows_in += done.rows_in;
    summary_.rows_out += done.rows_out;
    summary_.bytes_in += done.bytes_in;
    summary_.bytes_out += done.output.size();
    summary_.errors += done.error_count;
    for (size_t i = 0; i < done.counters.size(); ++i) summary_.operators[i].Add(done.counters[i]);
    for (size_t i = 0; i < done.regions.size(); ++i) summary_.regions[i].Add(done.regions[i]);
    const double now = MonotonicSeconds();
    if (options_.progress && now - last_progress_ >= 0.5) {
      last_progress_ = now;
      summary_.seconds = now - start_;
      options_.progress(summary_);
    }
  }
  // The taken result is written: the next one may go.
  void Written() {
    writing_ = false;
    ++next_;
  }
  // Results written so far.
  uint64_t written() const { return next_; }

 private:
  io::OutputStream& output_;
  io::OutputStream* errors_;
  ExecSummary& summary_;
  const ExecOptions& options_;
  const double start_;
  double last_progress_;
  std::map<uint64_t, BatchResult> pending_;
  uint64_t next_ = 0;
  bool writing_ = false;
};

// The operators a ready queue serves: model operators inside a region.
std::vector<size_t> QueuedOperators(const Plan& plan) {
  std::vector<size_t> out;
  for (size_t i = 0; i < plan.operators.size(); ++i) {
    if (plan.operators[i].op->processes_rows_together()) out.push_back(i);
  }
  return out;
}

// Thrown in a thread that notices another thread failed the run.
struct RunFailed {};

// Full calls' worth of rows a ready queue holds before reading stops (twice
// its calls at once, if more).
constexpr size_t kQueuedCalls = 4;

// One model operator's FIFO ready queue (SPEC-lineage §4). Batches hand their
// rows over in reader-batch order, whatever order their threads reach the
// operator in (a later batch's submission waits in `pending`), so the queue
// holds every batch's rows in canonical order; calls take `take_rows` of them
// from the head. Inside a region one call runs at a time, so that a failure
// suppresses the siblings still queued before the next call takes them; at
// parent level (no siblings) up to `max_calls` run at once, one per executor
// thread (on the CPU each thread runs a replica), and their outcomes are
// applied in the order the calls took their rows.
struct ReadyQueue {
  size_t op_idx = 0;
  size_t take_rows = 64;  // rows per call
  int max_calls = 1;      // calls at once
  int calling = 0;        // calls running
  uint64_t taken = 0;     // calls that took rows
  uint64_t applied = 0;   // calls whose outcomes are applied
  std::deque<Submission*> subs;
  size_t alive = 0;                         // queued rows still alive, not yet dispatched
  uint64_t turn = 0;                        // the batch whose rows enter next
  std::set<uint64_t> closed;                // later batches that will submit nothing more
  std::map<uint64_t, Submission*> pending;  // later batches' submissions, waiting for their turn
};

// Every thread does every kind of work, one step at a time: write the next
// result in input order, run a model call that a ready queue can make, else
// read a batch and run it. Reading and writing are each done by one thread at
// a time. A batch whose children wait in a ready queue keeps its thread; so
// that later batches can still be read and fill the queue, the executor has
// more threads than `threads`, but only `threads` of them hold a CPU token
// (run anything) at a time. When no thread can do anything else, the ready
// queue of the lowest operator is flushed with a partial call: at the end of
// the input, or when every thread waits.
class Executor {
 public:
  Executor(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
           io::OutputStream& output, io::OutputStream* errors, const ExecOptions& options)
      : plan_(plan),
        inputs_(inputs),
        options_(options),
        threads_(std::max(1, options.threads)),
        start_(MonotonicSeconds()),
        chunker_(inputs.size(), options.batch_bytes, plan.batch_rows,
                 [&inputs](size_t i) { return io::OpenInput(inputs[i].path); }),
        writer_(output, errors, summary_, options, start_) {
    read_next_ = options.source ? options.source
                                : std::function<bool(io::LineChunk*)>(
                                      [this](io::LineChunk* c) { return chunker_.Next(c); });
    summary_.model_devices = ModelDevices(plan);
    summary_.operators.resize(plan.operators.size());
    for (size_t i = 0; i < plan.operators.size(); ++i) {
      summary_.operators[i].name = plan.operators[i].op->name();
      summary_.operators[i].batched = plan.operators[i].op->processes_rows_together();
    }
    summary_.regions.resize(plan.regions.size());
    for (size_t i = 0; i < plan.regions.size(); ++i)
      summary_.regions[i].name = plan.regions[i].name;
    queue_of_.assign(plan.operators.size(), nullptr);
    const std::vector<size_t> queued = QueuedOperators(plan);
    queues_.resize(queued.size());
    for (size_t q = 0; q < queued.size(); ++q) {
      const PlannedOperator& planned = plan.operators[queued[q]];
      queues_[q].op_idx = queued[q];
      queues_[q].take_rows = planned.call_rows;
      if (planned.region < 0) {
        // A parent-level operator takes what it asks its reader batches to
        // hold (on a GPU several calls' worth, so that its length buckets fill).
        queues_[q].take_rows = std::max(planned.call_rows, planned.op->preferred_batch_rows());
        queues_[q].max_calls = threads_;
      }
      queue_of_[queued[q]] = &queues_[q];
    }
    // Waiting batches hold threads: a few more than run at once, so that the
    // next batches can be read while earlier ones wait for a full call.
    pool_size_ = queues_.empty() ? threads_ : 2 * threads_ + 2;
    max_in_flight_ = queues_.empty() ? static_cast<uint64_t>(threads_) * 2
                                     : static_cast<uint64_t>(pool_size_ + threads_);
    if (options.op_event) edges_ = std::make_unique<OperatorEdges>(plan, options);
    stop_check_ = [&options] {
      return StopRequested() || (options.cancel != nullptr && options.cancel->load());
    };
  }

  ExecSummary Run() {
    std::vector<std::thread> pool;
    // A thread is idle from before it starts until it first holds a token.
    free_idle_ = pool_size_;
    for (int t = 0; t < pool_size_; ++t) pool.emplace_back([this] { RunThread(); });
    for (std::thread& t : pool) t.join();
    if (failure_) std::rethrow_exception(failure_);
    summary_.seconds = MonotonicSeconds() - start_;
    return summary_;
  }

  // See SubmitAndWait.
  void Submit(size_t op_idx, Submission* sub) {
    std::unique_lock<std::mutex> lock(mu_);
    // Once the run failed, no thread touches a queue again: their
    // submissions may be gone with the stacks of the threads that failed.
    if (failed_) throw RunFailed{};
    ReadyQueue& q = *queue_of_[op_idx];
    if (sub->seq == q.turn) {
      Enqueue(q, sub);
      Advance(q);
    } else {
      q.pending.emplace(sub->seq, sub);
    }
    cv_.notify_all();
    while (!sub->done) {
      if (failed_) throw RunFailed{};
      if (TryWrite(lock) || TryCall(lock, false)) continue;
      if (Quiet() && TryCall(lock, true)) continue;
      sub->parked = true;
      Sleep(lock);
      if (sub->parked) {
        sub->parked = false;
        if (sub->done) --ready_;
      }
    }
  }

 private:
  void RunThread() {
    Scratch scratch;
    std::unique_lock<std::mutex> lock(mu_);
    try {
      TakeToken(lock);
      --free_idle_;
      for (;;) {
        if (failed_) return;
        if (end_of_input_ && writer_.written() == read_count_) {
          --active_;
          token_cv_.notify_one();
          cv_.notify_all();
          return;
        }
        if (TryWrite(lock) || TryCall(lock, false) || TryRead(lock, scratch)) continue;
        if (Quiet() && TryCall(lock, true)) continue;
        ++free_idle_;
        Sleep(lock);
        --free_idle_;
      }
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      if (!failed_) {
        failed_ = true;
        failure_ = std::current_exception();
      }
      cv_.notify_all();
      token_cv_.notify_all();
    }
  }

  // Gives the CPU token back, waits for a change, and takes a token again.
  // Handing a token back wakes one thread that waits for a token, not every
  // thread: idle threads would otherwise wake each other without end.
  void Sleep(std::unique_lock<std::mutex>& lock) {
    --active_;
    token_cv_.notify_one();
    cv_.wait(lock);
    TakeToken(lock);
  }

  void TakeToken(std::unique_lock<std::mutex>& lock) {
    while (active_ >= threads_ && !failed_) token_cv_.wait(lock);
    ++active_;
  }

  // A batch may be read: not more than max_in_flight_ ahead of the writer,
  // and no ready queue already holds kQueuedCalls full calls (more children
  // read now would only wait there, adding latency and memory; a queue that
  // full can always make a call, so this never forces a partial one).
  bool CanRead() const {
    if (reading_ || end_of_input_ || read_count_ - writer_.written() >= max_in_flight_) {
      return false;
    }
    for (const ReadyQueue& q : queues_) {
      const size_t calls = std::max<size_t>(kQueuedCalls, 2 * static_cast<size_t>(q.max_calls));
      if (q.alive >= calls * q.take_rows) return false;
    }
    return true;
  }

  // No other thread holds a token or is about to take one with work to do:
  // only a partial call can move the run on.
  // A call that waits to apply its outcomes can still free batches.
  bool Quiet() const {
    return active_ == 1 && ready_ == 0 && apply_waiters_ == 0 && !(CanRead() && free_idle_ > 0);
  }

  // Writes the next result in input order, if it is here.
  bool TryWrite(std::unique_lock<std::mutex>& lock) {
    if (!writer_.CanWrite()) return false;
    BatchResult done = writer_.TakeNext();
    lock.unlock();
    writer_.Write(done);
    lock.lock();
    writer_.Written();
    spare_.push_back(std::move(done.output));
    cv_.notify_all();
    return true;
  }

  std::string TakeSpare() {
    std::string b;
    if (!spare_.empty()) {
      b = std::move(spare_.back());
      spare_.pop_back();
    }
    b.clear();
    return b;
  }

  // Reads a batch and runs it on this thread, where its bytes are already in
  // the cache; never more than max_in_flight_ batches ahead of the writer, so
  // memory stays bounded.
  bool TryRead(std::unique_lock<std::mutex>& lock, Scratch& scratch) {
    if (!CanRead()) return false;
    Batch batch;
    batch.chunk.data = TakeSpare();
    BatchResult result;
    result.output = TakeSpare();
    reading_ = true;
    lock.unlock();
    const bool got = read_next_(&batch.chunk);
    if (got) {
      batch.seq = next_seq_++;
      batch.first_row = rows_read_;
      rows_read_ += batch.chunk.lines;
    }
    lock.lock();
    reading_ = false;
    if (!got) {
      end_of_input_ = true;
      if (edges_) edges_->EndOfInput(read_count_);
      spare_.push_back(std::move(batch.chunk.data));
      spare_.push_back(std::move(result.output));
      cv_.notify_all();
      return true;
    }
    ++read_count_;
    // Another thread may read the next batch meanwhile.
    cv_.notify_all();
    lock.unlock();
    try {
      ProcessBatch(plan_, inputs_, batch, scratch, &result, stop_check_, options_, edges_.get(),
                   this);
    } catch (...) {
      lock.lock();
      if (!failed_) {
        failed_ = true;
        failure_ = std::current_exception();
      }
      cv_.notify_all();
      token_cv_.notify_all();
      // Calls still running may hold this batch's rows (its records and
      // samples): they must end before its memory goes.
      while (calls_in_flight_ > 0) cv_.wait(lock);
      throw;
    }
    lock.lock();
    if (failed_) throw RunFailed{};
    CloseBatch(batch.seq);
    writer_.Add(batch.seq, std::move(result));
    spare_.push_back(std::move(batch.chunk.data));
    cv_.notify_all();
    return true;
  }

  void Complete(Submission* sub) {
    sub->done = true;
    if (sub->parked) ++ready_;
    cv_.notify_all();
  }

  // Puts the rows of `sub`, whose batch's turn it is, at the queue's tail.
  void Enqueue(ReadyQueue& q, Submission* sub) {
    if (sub->rows.empty()) {
      Complete(sub);
    } else {
      q.subs.push_back(sub);
      q.alive += sub->rows.size();
    }
    if (sub->last) ++q.turn;
  }

  // Lets in the submissions of the batches whose turn came.
  void Advance(ReadyQueue& q) {
    for (;;) {
      auto closed = q.closed.find(q.turn);
      if (closed != q.closed.end()) {
        q.closed.erase(closed);
        ++q.turn;
        continue;
      }
      auto next = q.pending.find(q.turn);
      if (next == q.pending.end()) return;
      Submission* sub = next->second;
      q.pending.erase(next);
      Enqueue(q, sub);
      if (!sub->last) return;
    }
  }

  // Batch `seq` is done: it submits nothing more to any queue.
  void CloseBatch(uint64_t seq) {
    for (ReadyQueue& q : queues_) {
      if (seq < q.turn) continue;
      q.closed.insert(seq);
      Advance(q);
    }
  }

  size_t AliveFrom(const Submission& sub) const {
    size_t n = 0;
    for (size_t j = sub.next; j < sub.rows.size(); ++j) n += sub.level->alive[sub.rows[j]] ? 1 : 0;
    return n;
  }

  // Runs the next call of the lowest queue that can make one: a full one
  // (take_rows rows; single_parent: the head parent's rows, up to that), or
  // a partial one when no more rows can come before the batch at the tail
  // submits again, or when `force`.
  bool TryCall(std::unique_lock<std::mutex>& lock, bool force) {
    if (failed_) return false;
    for (ReadyQueue& q : queues_) {
      if (q.calling >= q.max_calls || q.alive == 0) continue;
      const PlannedOperator& planned = plan_.operators[q.op_idx];
      const bool ready =
          planned.single_parent || q.alive >= q.take_rows || !q.subs.back()->last || force;
      if (!ready) continue;
      RunCall(lock, q, planned);
      return true;
    }
    return false;
  }

  void RunCall(std::unique_lock<std::mutex>& lock, ReadyQueue& q, const PlannedOperator& planned) {
    // Take the rows from the head.
    std::vector<ops::Sample*> rows;
    std::vector<size_t> ks;
    std::vector<CallPart> parts;
    for (Submission* sub : q.subs) {
      if (rows.size() >= q.take_rows) break;
      const RowLevel& level = *sub->level;
      if (planned.single_parent && !rows.empty()) break;  // one parent, one submission
      const size_t begin = rows.size();
      while (sub->next < sub->rows.size() && rows.size() < q.take_rows) {
        const size_t k = sub->rows[sub->next];
        if (!level.alive[k]) {
          ++sub->next;
          continue;
        }
        if (planned.single_parent && rows.size() > begin &&
            level.parent[k] != level.parent[ks[begin]])
          break;
        rows.push_back(level.samples[k]);
        ks.push_back(k);
        ++sub->next;
        --q.alive;
      }
      if (rows.size() > begin) {
        parts.push_back({sub, begin, rows.size()});
        ++sub->in_calls;
      }
    }
    const uint64_t turn = q.taken++;
    ++q.calling;
    ++calls_in_flight_;
    try {
      FinishCall(lock, q, planned, rows, ks, parts, turn);
    } catch (...) {
      // The run fails: nothing touches a queue again, and batch threads
      // wait for calls_in_flight_ to reach 0 before their rows' memory goes.
      if (!lock.owns_lock()) lock.lock();
      --q.calling;
      --calls_in_flight_;
      if (!failed_) {
        failed_ = true;
        failure_ = std::current_exception();
      }
      cv_.notify_all();
      token_cv_.notify_all();
      throw;
    }
    --q.calling;
    --calls_in_flight_;
    cv_.notify_all();
  }

  struct CallPart {
    Submission* sub;
    size_t begin, end;  // in the call's rows
  };

  // Makes the call RunCall prepared (the mutex released meanwhile) and
  // applies its outcomes once every earlier call of the queue applied its own.
  void FinishCall(std::unique_lock<std::mutex>& lock, ReadyQueue& q, const PlannedOperator& planned,
                  std::vector<ops::Sample*>& rows, const std::vector<size_t>& ks,
                  const std::vector<CallPart>& parts, uint64_t turn) {
    lock.unlock();
    if (stop_check_) StopIfAsked(stop_check_);
    std::vector<ops::RowOutcome> outcomes(rows.size());
    OperatorCounters call;
    const double start = MonotonicSeconds();
    if (!rows.empty()) {
      size_t budget = planned.max_isolation_calls;
      CallIsolating(*planned.op, rows, outcomes, &budget, &call);
    }
    call.seconds = MonotonicSeconds() - start;
    lock.lock();
    // Outcomes are applied in the order the calls took their rows.
    while (q.applied != turn) {
      if (failed_) throw RunFailed{};
      ++apply_waiters_;
      Sleep(lock);
      --apply_waiters_;
    }
    if (failed_) throw RunFailed{};
    // Outcomes go to each row's batch, in queue order; a failure suppresses
    // its siblings still in the queue before the next call is taken.
    for (const CallPart& part : parts) {
      Submission& sub = *part.sub;
      const size_t before = AliveFrom(sub);
      sub.run->ApplyCall(
          q.op_idx, *sub.level, sub.scope,
          std::span<const size_t>(ks.data() + part.begin, part.end - part.begin),
          std::span<const ops::RowOutcome>(outcomes.data() + part.begin, part.end - part.begin));
      q.alive -= before - AliveFrom(sub);
      --sub.in_calls;
    }
    if (!parts.empty()) {
      OperatorCounters& c = parts.front().sub->run->counters(q.op_idx);
      c.calls += call.calls;
      c.items += call.items;
      c.seconds += call.seconds;
    }
    while (!q.subs.empty()) {
      Submission* sub = q.subs.front();
      while (sub->next < sub->rows.size() && !sub->level->alive[sub->rows[sub->next]]) ++sub->next;
      if (sub->next < sub->rows.size() || sub->in_calls > 0) break;
      q.subs.pop_front();
      Complete(sub);
    }
    ++q.applied;
  }

  const Plan& plan_;
  const std::vector<io::InputCandidate>& inputs_;
  const ExecOptions& options_;
  const int threads_;  // threads that run at once (CPU tokens)
  const double start_;
  io::LineChunker chunker_;
  std::function<bool(io::LineChunk*)> read_next_;
  std::function<bool()> stop_check_;
  std::unique_ptr<OperatorEdges> edges_;
  ExecSummary summary_;
  int pool_size_ = 1;
  uint64_t max_in_flight_ = 2;
  uint64_t next_seq_ = 0;
  uint64_t rows_read_ = 0;  // by the reading thread only

  std::mutex mu_;                     // guards everything below, and submitted batches' rows
  std::condition_variable cv_;        // a step became possible, or the run ended
  std::condition_variable token_cv_;  // a CPU token was handed back
  OrderedWriter writer_;
  // Buffers go round (read -> processed -> written -> read again) instead of
  // being allocated for every batch: fresh memory costs page faults.
  std::vector<std::string> spare_;
  std::vector<ReadyQueue> queues_;     // by operator index
  std::vector<ReadyQueue*> queue_of_;  // per operator, null for most
  int active_ = 0;                     // threads holding a CPU token
  int ready_ = 0;                      // waiting batches whose submission is done
  int free_idle_ = 0;                  // threads without a batch, waiting
  int apply_waiters_ = 0;              // calls waiting for an earlier call to apply
  int calls_in_flight_ = 0;            // model calls taken and not yet applied
  uint64_t read_count_ = 0;
  bool end_of_input_ = false, reading_ = false, failed_ = false;
  std::exception_ptr failure_;
};

void SubmitAndWait(Executor* executor, size_t op_idx, Submission* sub) {
  executor->Submit(op_idx, sub);
}

}  // namespace

ExecSummary Execute(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
                    io::OutputStream& output, io::OutputStream* errors,
                    const ExecOptions& options) {
  Executor executor(plan, inputs, output, errors, options);
  return executor.Run();
}

std::string SummaryJson(const ExecSummary& s, int threads) {
  nlohmann::json j;
  j["rows_in"] = s.rows_in;
  j["rows_out"] = s.rows_out;
  j["bytes_in"] = s.bytes_in;
  j["bytes_out"] = s.bytes_out;
  j["errors"] = s.errors;
  j["seconds"] = s.seconds;
  j["threads"] = threads;
  j["operators"] = nlohmann::json::array();
  for (const OperatorCounters& c : s.operators) j["operators"].push_back(OperatorCountersJson(c));
  if (!s.regions.empty()) j["regions"] = RegionCountersJson(s.regions);
  if (!s.model_devices.empty()) j["model_devices"] = s.model_devices;
  return j.dump(2) + "\n";
}

nlohmann::json OperatorCountersJson(const OperatorCounters& c) {
  nlohmann::json j = {{"name", c.name},
                      {"rows_in", c.rows_in},
                      {"rows_out", c.rows_out},
                      {"errors", c.errors},
                      {"seconds", c.seconds}};
  if (c.batched || c.calls > 0) {
    j["calls"] = c.calls;
    j["items"] = c.items;
    j["mean_batch_fill"] =
        c.calls > 0 ? static_cast<double>(c.items) / static_cast<double>(c.calls) : 0.0;
  }
  return j;
}

void OperatorCounters::Add(const OperatorCounters& o) {
  rows_in += o.rows_in;
  rows_out += o.rows_out;
  errors += o.errors;
  seconds += o.seconds;
  calls += o.calls;
  items += o.items;
}

void RegionCounters::Add(const RegionCounters& o) {
  parents_in += o.parents_in;
  parents_out += o.parents_out;
  parents_dropped += o.parents_dropped;
  parents_failed += o.parents_failed;
  parents_from_journal += o.parents_from_journal;
  children_expanded += o.children_expanded;
  children_present += o.children_present;
  children_dropped += o.children_dropped;
  children_failed += o.children_failed;
  children_suppressed += o.children_suppressed;
  late_discarded += o.late_discarded;
}

ExecSummary EmptySummary(const Plan& plan) {
  ExecSummary total;
  total.model_devices = ModelDevices(plan);
  total.operators.resize(plan.operators.size());
  for (size_t i = 0; i < plan.operators.size(); ++i) {
    total.operators[i].name = plan.operators[i].op->name();
    total.operators[i].batched = plan.operators[i].op->processes_rows_together();
  }
  total.regions.resize(plan.regions.size());
  for (size_t i = 0; i < plan.regions.size(); ++i) total.regions[i].name = plan.regions[i].name;
  return total;
}

void AddCounters(ExecSummary& total, const ExecSummary& part) {
  for (size_t i = 0; i < part.operators.size() && i < total.operators.size(); ++i) {
    total.operators[i].Add(part.operators[i]);
  }
  AddRegionCounters(total, part);
  total.errors += part.errors;
}

void AddRegionCounters(ExecSummary& total, const ExecSummary& part) {
  if (total.regions.size() < part.regions.size()) total.regions.resize(part.regions.size());
  for (size_t i = 0; i < part.regions.size(); ++i) {
    total.regions[i].name = part.regions[i].name;
    total.regions[i].Add(part.regions[i]);
  }
}

nlohmann::json LineageStagesJson(const Plan& plan) {
  nlohmann::json stages = nlohmann::json::array();
  for (const LineageRegion& r : plan.regions) {
    nlohmann::json ops = nlohmann::json::array();
    for (size_t i = r.expand_idx + 1; i < r.gather_idx; ++i) ops.push_back(i);
    const nlohmann::json parent =
        r.parent >= 0 ? nlohmann::json(plan.regions[static_cast<size_t>(r.parent)].name)
                      : nlohmann::json(nullptr);
    stages.push_back({{"kind", "expand"},
                      {"region", r.name},
                      {"op_idx", r.expand_idx},
                      {"by", ops::SplitByName(r.expand->by)},
                      {"region_op_idxs", ops},
                      {"depth", r.depth},
                      {"parent_region", parent}});
    stages.push_back({{"kind", "gather"},
                      {"region", r.name},
                      {"op_idx", r.gather_idx},
                      {"region_op_idxs", ops},
                      {"depth", r.depth},
                      {"parent_region", parent}});
  }
  return stages;
}

nlohmann::json RegionCountersJson(const std::vector<RegionCounters>& regions) {
  nlohmann::json j = nlohmann::json::object();
  for (const RegionCounters& r : regions) {
    j[r.name] = {{"parents_in", r.parents_in},
                 {"parents_out", r.parents_out},
                 {"parents_dropped", r.parents_dropped},
                 {"parents_failed", r.parents_failed},
                 {"parents_from_journal", r.parents_from_journal},
                 {"children_expanded", r.children_expanded},
                 {"children_present", r.children_present},
                 {"children_dropped", r.children_dropped},
                 {"children_failed", r.children_failed},
                 {"children_suppressed", r.children_suppressed},
                 {"late_discarded", r.late_discarded}};
  }
  return j;
}

}  // namespace djshard::exec
