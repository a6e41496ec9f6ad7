#pragma once

// The executor layer (src/exec, djshard::exec): runs a compiled recipe over a
// stream of records.
//
// Owns: compiling a recipe into a plan against the operator registry
// (exec/plan.h) and checking that it may run shard by shard
// (exec/shard_safety.h); the executor here (stages, batches, threads, the
// ordered writer, per-operator and per-region counters, taps and journals as
// sinks the caller provides); lineage execution (expand/gather regions); the
// dedup pipeline of `djshard run` (exec/dedup_run.h).
// May use: ops, model, recipe, io, common. Knows nothing of job directories,
// checkpoints, preflight, claims or coordination.
// Offers: CompilePlan, Execute and ExecuteWithDedup, the counters and their JSON.
#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "djshard/exec/plan.h"
#include "djshard/io/discover.h"
#include "djshard/io/input.h"
#include "djshard/io/output.h"
#include "djshard/ops/dedup.h"

namespace djshard::exec {

struct OperatorCounters {
  std::string name;
  uint64_t rows_in = 0;
  uint64_t rows_out = 0;
  uint64_t errors = 0;
  double seconds = 0;  // summed over threads
  // Operators that process rows together: calls made and rows in them
  // (`batched`: such an operator, reported with its calls even when none).
  uint64_t calls = 0;
  uint64_t items = 0;
  bool batched = false;

  // Adds the counts of `o` (the same operator, other rows).
  void Add(const OperatorCounters& o);
};

// One expand/gather region's lineage counters (SPEC-lineage §5).
struct RegionCounters {
  std::string name;
  uint64_t parents_in = 0;
  uint64_t parents_out = 0;
  uint64_t parents_dropped = 0;
  uint64_t parents_failed = 0;
  uint64_t parents_from_journal = 0;  // taken from the region's committed journal, not expanded
  uint64_t children_expanded = 0;
  uint64_t children_present = 0;
  uint64_t children_dropped = 0;
  uint64_t children_failed = 0;
  uint64_t children_suppressed = 0;  // never dispatched: a sibling failed first
  uint64_t late_discarded = 0;       // dispatched before a sibling failed, result discarded

  void Add(const RegionCounters& other);
};

struct ExecSummary {
  uint64_t rows_in = 0;
  uint64_t rows_out = 0;
  uint64_t bytes_in = 0;   // input lines, newlines included
  uint64_t bytes_out = 0;  // output before compression
  uint64_t errors = 0;     // records dropped by operator errors
  double seconds = 0;
  std::vector<OperatorCounters> operators;
  std::vector<RegionCounters> regions;     // one per expand/gather pair, in plan order
  std::vector<std::string> model_devices;  // ModelDevices(plan)
};

// What a top-level expand/gather region made of one parent, as its gather
// journal keeps it (SPEC-lineage §6).
enum class JournalState : uint8_t { kPresent, kDropped, kFailed };
struct JournaledParent {
  uint64_t row = 0;  // the parent's row among the rows the run reads (0-based)
  JournalState state = JournalState::kPresent;
  std::string record;  // kPresent: the gathered parent, __dj__stats__/__dj__meta__ kept
  std::string errors;  // errors-file lines the region wrote for it, each ending in \n
};

// Where a row came from, as the errors file names it.
struct RowOrigin {
  std::string file;
  uint64_t line = 0;  // 1-based
};

// The deduplicator signatures of one batch's rows (ExecOptions::sign).
struct SignedBatch {
  uint64_t first = 0;  // the rank, among the rows the run writes, of the batch's first
  std::vector<ops::dedup::Signature> signatures;  // per row, in order
  std::vector<std::string> errors;                // per row: empty when it was signed
  double seconds = 0;                             // spent signing
};

struct ExecOptions {
  int threads = 1;
  // A batch closes at this many input bytes or plan.batch_rows rows. Smaller
  // batches keep a thread's working set closer to its caches (512 KB ran
  // demo with 2 threads 10% faster than 1 MB; bench/run_bench.sh).
  size_t batch_bytes = 512 << 10;
  // Called at most twice a second with the summary so far (rows, bytes, time).
  std::function<void(const ExecSummary&)> progress;
  // When set and true, the run stops with an Error (a worker that lost its
  // claim): each thread looks before it starts a batch and every 16 records
  // of each operator, so a cancel is seen within 16 records. SIGINT/SIGTERM
  // stop it the same way.
  const std::atomic<bool>* cancel = nullptr;
  // Set by workers: lineage errors-file lines give a record's source as
  // {"shard_id", "row"} (0-based row of the shard) instead of {"input_file", "line"}.
  std::string shard_id;

  // When set, batches come from here instead of from the inputs (a partition
  // of them, or a checkpoint file); chunk.file indexes `inputs` for messages.
  std::function<bool(io::LineChunk*)> source;
  // Operators before this index are not run: the rows are the stream after
  // operator first_op - 1 (a checkpoint tap).
  size_t first_op = 0;
  // Operators at or after this index are not run (an alternating execution
  // group's phase): the output is the stream after operator end_op - 1.
  size_t end_op = SIZE_MAX;
  // The output is not written (nor serialized); rows are still counted and
  // taps still teed.
  bool discard_output = false;
  // When set, the errors file names a row read at 1-based `line` of the
  // source by what this returns (rows read from an execution group phase's
  // forced tap name the input row they came from); null: its own file and line.
  std::function<const RowOrigin*(uint64_t line)> origin;
  // When set, called with each tapped batch's row origins, as tap_sink is
  // with their bytes: one JSON line ["<file>", <line>] per row.
  std::function<void(size_t tap_index, std::string_view origins)> tap_origin_sink;
  // Operators (ascending, at or after first_op) after which the stream is
  // teed to tap_sink: each surviving row as the output would write it if the
  // recipe ended there, with __dj__stats__/__dj__meta__ kept.
  std::vector<size_t> taps;
  // Called by one thread at a time, in input order, with a batch's rows after
  // taps[tap_index] and how many they are.
  std::function<void(size_t tap_index, std::string_view bytes, uint64_t rows)> tap_sink;
  // Called by one thread at a time, in input order, with each batch's output
  // (the same bytes the output gets, never compressed).
  std::function<void(std::string_view bytes, uint64_t rows)> output_tee;
  // Called like output_tee with the 1-based source line (chunk numbering, as
  // `origin` takes it) of each row of the batch's output.
  std::function<void(const std::vector<uint64_t>& lines)> output_lines_sink;
  // When set, every row the run writes (or keeps, with discard_output) is
  // signed for this deduplicator by the thread that ran its batch (as
  // ops::dedup::Signer::SignMany signs it), and signed_sink hears each
  // batch's signatures, one call at a time, in input order.
  const ops::dedup::DedupConfig* sign = nullptr;
  std::function<void(SignedBatch&& batch)> signed_sink;
  // Tap bytes are each batch's rows as one zstd frame, compressed by the
  // thread that ran the batch (so compression runs on every thread).
  bool compress_taps = false;
  // When set, called once per operator at or after first_op with `done` null
  // when the first batch enters it, then with the operator's counters over
  // all batches (seconds: busy time summed over threads) when the last batch
  // leaves it. Called from any thread, one call at a time; an operator's
  // start always comes before its end. A run that fails ends no operator.
  std::function<void(size_t op_idx, const OperatorCounters* done)> op_event;
  // Durable lineage (SPEC-lineage §6), top-level regions only. `journaled`
  // gives a parent's known result by region and row (null: none): such a
  // parent is not expanded, its result is taken as if its gather made it.
  // The pointee must stay unchanged while the run lasts.
  std::function<const JournaledParent*(size_t region_idx, uint64_t row)> journaled;
  // Called from any thread with the parents a top-level region gathered
  // (not those `journaled` gave), in row order within a call.
  std::function<void(size_t region_idx, std::vector<JournaledParent>& parents)> journal_sink;
};

// Runs `plan` over the input files in order, as batches, on `threads` new
// threads (more when a region holds a model operator: a batch waiting for its
// children's model calls keeps its thread, but only `threads` run at once);
// the caller waits. Each thread writes the next result when it is
// ready, else reads a batch and runs the fused stage on it; reading and
// writing are done by one thread at a time, and results are written (output,
// and operator errors as one JSON line each) in input order, so the bytes
// never depend on the thread count.
// Memory is bounded by batch size x threads. A line that is not a JSON object
// is an Error naming its file and line; so is an operator error when the
// operator's skip_op_error is false. Neither stream is committed here.
ExecSummary Execute(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
                    io::OutputStream& output, io::OutputStream* errors, const ExecOptions& options);

// One operator's counters as the stats file and done records write them:
// {"name", "rows_in", "rows_out", "errors", "seconds"}.
nlohmann::json OperatorCountersJson(const OperatorCounters& counters);

// Adds the region counters of `part` to `total` (sized to part's regions on first use).
void AddRegionCounters(ExecSummary& total, const ExecSummary& part);

// A summary with a counter, named, for every operator and region of `plan`.
ExecSummary EmptySummary(const Plan& plan);

// Adds the operator and region counters and the errors of `part` (a run of
// some of `total`'s operators) to `total`.
void AddCounters(ExecSummary& total, const ExecSummary& part);

// The expand/gather pairs of `plan` for dag_execution_plan.json: one "expand"
// and one "gather" stage per region, with the region's op list.
nlohmann::json LineageStagesJson(const Plan& plan);

// The regions' counters as the stats file writes them: {"<name>": {...}}.
nlohmann::json RegionCountersJson(const std::vector<RegionCounters>& regions);

// The stats file of a run: per-operator rows in/out, seconds and errors, and
// the lineage regions' counters under "regions" when the recipe has any.
std::string SummaryJson(const ExecSummary& summary, int threads);

}  // namespace djshard::exec
