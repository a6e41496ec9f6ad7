#pragma once
// The dedup stage of an elastic job (docs/dedup-stage.md): a recipe with
// deduplicators runs as tasks that workers claim like shards, with the same
// locks, leases, attempts, done records, retries and takeovers. For the k-th
// deduplicator (stage k, 1-based):
//
//   dedup<k>-sign-<shard>   runs the operators before it over the shard's rows
//                           (the shard file, or what stage k-1 kept of them),
//                           writes the rows reaching it (rows.jsonl), their
//                           global rows (rows.u64) and their grouping keys,
//                           cut into the stage's key ranges (keys-<r>.bin)
//   dedup<k>-group-<r>      once every sign task is done: the keys of range r
//                           from every shard, sorted into key groups, linked
//                           into a forest of duplicate rows (forest.u64)
//   dedup<k>-components     once every group task is done: the forests
//                           unioned; the rows that are not the first of their
//                           component (duplicates.u64)
//
// then the shard's own task (its plain id) reads what the last stage kept and
// runs the operators after the last deduplicator; its done record is what
// merge reads, as in a job without deduplicators. Row ids are global input
// rows (the shard's first row in manifest order + its line), so the kept set
// does not depend on shards, nodes, threads or retries.
//
// Each task's files are listed in its done record's "stage" object with their
// bytes and xxh3_128, and checked as they are read.

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/exec/executor.h"
#include "djshard/exec/plan.h"
#include "djshard/io/output.h"
#include "djshard/store/job.h"
#include "djshard/store/manifest.h"
#include "djshard/store/records.h"

namespace djshard::store {

enum class TaskKind { kSign, kGroup, kComponents, kShard };

// One claimable unit of a job.
struct JobTask {
  std::string id;
  TaskKind kind = TaskKind::kShard;
  size_t stage = 0;    // 1-based dedup stage; kShard: the number of stages
  size_t shard = 0;    // kSign, kShard: index into the manifest's shards
  uint64_t range = 0;  // kGroup: the key range
  // Tasks of one phase may run at once; a phase is claimed once every task
  // of the phases before it is done.
  size_t phase = 0;
};

// Every task of the job in claim order: per stage its sign tasks, group
// tasks and components task, then the shards. A job without deduplicators:
// its shards, all in phase 0.
std::vector<JobTask> JobTasks(const Manifest& manifest);

// How many key ranges a stage over `total_bytes` of input in `num_shards`
// shards gets: about one per 256 MiB of input, at least min(4, shards), at
// most 4096. Fixed at prepare time (the manifest records it).
uint64_t DedupKeyRanges(uint64_t total_bytes, uint64_t num_shards);

// The recipe's deduplicators as the manifest records them; `plan` is the
// recipe compiled with its deduplicators.
std::vector<DedupStageEntry> DedupStages(const exec::Plan& plan, uint64_t total_bytes,
                                         uint64_t num_shards);

// Throws Error (exit 2) when `plan`'s deduplicators are not the ones the
// manifest's stages record.
void CheckDedupStages(const Manifest& manifest, const exec::Plan& plan,
                      const std::string& recipe_path);

// What one task needs from its worker.
struct TaskContext {
  const JobDir* job = nullptr;
  const exec::Plan* plan = nullptr;
  int threads = 1;
  // The worker's executor options (threads, cancel, op events, shard id);
  // the task sets its source, operator range and sinks.
  exec::ExecOptions exec;
};

// What a shard's task publishes when its rows are lines kept from its sign
// task's rows.jsonl: those lines as ranges of that file (the done record's
// output_source), with their XXH3-128 and, when asked, their SHA-256. When
// the lines fall in more than kMaxSourceRanges ranges, they are copied into
// the task's output instead, and `source` is empty.
struct KeptLines {
  OutputSource source;
  std::string xxh3_128;
  std::string sha256;
};
inline constexpr size_t kMaxSourceRanges = 4096;

struct TaskResult {
  exec::ExecSummary summary;  // op counters of every operator up to this task's
  nlohmann::json stage;       // the done record's "stage" object
  uint64_t input_rows = 0;    // rows the task read
  // A shard's task with nothing to run after the last deduplicator leaves its
  // output to this, which the worker calls while it publishes the task: the
  // kept lines of the sign task's rows.jsonl, located there (every byte of the
  // file checked on the way), their rows and bytes added to `summary`.
  std::function<KeptLines(io::OutputStream& output, exec::ExecSummary& summary, bool sha256)> keep;
};

// Runs `task` in the attempt directory `attempt_dir` (absolute). A kShard
// task writes its rows to `output`; every task writes the errors of the rows
// it dropped to `errors`. Throws Error on any failure, and when a file of an
// earlier task differs from its done record.
TaskResult RunTask(const TaskContext& context, const JobTask& task, const std::string& attempt_dir,
                   io::OutputStream& output, io::OutputStream& errors);

// The files a task wrote (its TaskResult::stage "files") are renamed into the
// attempt directory without an fsync; this fsyncs each. The caller then
// fsyncs the directory (committing the task's output does) before it
// publishes the done record that names them.
void SyncTaskFiles(const std::string& attempt_dir, const nlohmann::json& stage);

// What `djshard verify` found of the dedup stages' files.
struct StageFilesCheck {
  uint64_t tasks = 0;    // published stage tasks
  uint64_t files = 0;    // files checked: bytes and xxh3_128 as their done records say
  uint64_t bytes = 0;    // their bytes
  uint64_t removed = 0;  // files `djshard gc` removed once every shard was done
};

// Checks every file a published stage task lists. A missing file is an
// Error unless every shard of the job is done (then gc may have removed it).
StageFilesCheck VerifyStageFiles(const JobDir& job);

// The dedup stages' files that nothing will read again: those of attempts
// that did not publish (failed, lost, stale, interrupted or superseded), and,
// once every shard of the job is done, all of them but the rows.jsonl files
// that shard outputs are ranges of (done records and attempt.json files stay
// too). Absolute paths; none of a running attempt.
std::vector<std::string> StageGarbage(const JobDir& job);

}  // namespace djshard::store
