#pragma once

namespace djshard {

// Crash injection for black-box tests of the job protocol: when the
// environment variable DJSHARD_TEST_KILL_AT names `point`, the process kills
// itself with SIGKILL right there, as a node that loses power would stop.
// "point@N" kills at the N-th time the point is reached. Points: "before_claim",
// "after_claim", "after_output", "after_link"; run jobs: "tap_append" (a batch
// appended to a tap being written), "tap_data_published" (a tap's data file
// renamed, its commit record not yet linked), "tap_committed", "final_concat"
// (a committed final tap appended to the export) and "before_export_commit";
// workers also "heartbeat_write" (ownership verified, the lock not yet
// rewritten; dlc's coordinators too) and "record_staged" (a done or failed
// record written and fsynced, not yet linked); prepare "prepare_normalized"
// (the input validated and hashed, no shard written yet), "prepare_shard_cut" (a
// shard file written) and "prepare_staged" (the staging directory complete,
// not yet renamed into place); merge "merge_shard_copied" (a shard's output
// appended to the temporary output) and "merge_committed" (the output
// renamed into place, merge.json not yet written); dlc "finalize_merged"
// (merged, finalize-result.json not yet published); `run` with a
// deduplicator "dedup_spilled" (the rows reaching it spilled, not yet
// deduplicated); a dedup stage's task "dedup_task_written" (its files
// committed, its done record not yet published).
// DJSHARD_TEST_STOP_AT takes the same names and stops the process with
// SIGSTOP there instead, as a node that hangs would (SIGCONT resumes it).
void CrashPoint(const char* point);

}  // namespace djshard
