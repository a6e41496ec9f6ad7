#pragma once

#include <string>
#include <vector>

#include "djshard/exec/executor.h"
#include "djshard/exec/plan.h"
#include "djshard/io/discover.h"
#include "djshard/io/output.h"
#include "djshard/recipe/recipe.h"

namespace djshard::exec {

// The deduplicators of `plan` (ops::dedup::DedupOperator entries), ascending.
std::vector<size_t> DedupOperators(const Plan& plan);

// Whether deduplicator `d` of `plan` (`dedups`: DedupOperators(plan)) reuses
// the hash field of an earlier one: Data-Juicer's document_deduplicator and
// document_simhash_deduplicator skip a record whose __dj__hash / __dj__simhash
// is set already, and leave the field for the exporter, so a second one
// groups by the first one's values, and keeps every row the first one kept.
// Returns the earlier deduplicator's index, or -1.
int ReusedHashField(const Plan& plan, const std::vector<size_t>& dedups, size_t d);

// Refuses, at the recipe line, what `djshard run` cannot run exactly with
// deduplicators: a job-mode run (partitions, checkpoints), keep_hashes_in_res_ds
// true with an operator that leaves its hash field for the exporter, and a
// second document_simhash_deduplicator that would reuse an earlier one's
// __dj__simhash under other num_blocks / hamming_distance.
void CheckDedupRecipe(const recipe::Recipe& recipe, const Plan& plan, bool job_mode);

// Runs `plan`, which holds deduplicators, as Data-Juicer's single-process run
// does: the operators between two deduplicators run through Execute, and the
// rows reaching a deduplicator are written to a spill file under `spill_dir`
// (created and removed here); the deduplicator signs them on options.threads
// threads, keeps the first row of each duplicate cluster, and the next
// operators read the kept rows. Output and errors (each stage's in turn) do
// not depend on the thread count; neither stream is committed here.
ExecSummary ExecuteWithDedup(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
                             io::OutputStream& output, io::OutputStream& errors,
                             const ExecOptions& options, const std::string& spill_dir);

}  // namespace djshard::exec
