#pragma once

#include <optional>
#include <string>
#include <vector>

#include "djshard/job/stop_request.h"

namespace djshard::store {

// The job `djshard stop` acts on (SPEC-checkpoints §9).
struct StopTarget {
  enum class Kind { kElastic, kRun };
  Kind kind = Kind::kElastic;
  std::string dir;  // absolute, normalized
  std::string job_id;
  // Where --clear moves the request: state/history (elastic), metadata (run).
  std::string HistoryDir() const;
};

// JOB is a job directory (manifest.json: elastic; job_summary.json: a `run`
// job), else the id of a run job under `work_dir`. Throws Error (exit 2).
StopTarget ResolveStopTarget(const std::string& job, const std::string& work_dir);

// What RequestStop did.
struct StopOutcome {
  bool published = false;      // this call published stop_request.json
  bool forced = false;         // this call published stop_request.force.json
  bool finished = false;       // the job had completed: nothing was published
  job::StopRequest request;    // the request in effect
  std::vector<int> signalled;  // local processes sent SIGUSR1 (--force)
};

// Publishes the stop request by link() (an existing one stays: a graceful
// request twice changes nothing); `force` adds stop_request.force.json and
// signals the job's live processes on this host. An elastic job's summary
// becomes "stopped". A completed job is left alone (`finished`).
StopOutcome RequestStop(const StopTarget& target, bool force, const std::string& reason,
                        double grace_secs, io::Disk& disk);

// Moves the request into the history directory so the job may go on.
// False when there was none.
bool ClearStop(const StopTarget& target);

// The live processes of the job, one description each: claims younger than
// the lease (elastic) or a `run` whose summary says running with a fresh
// heartbeat. Empty once the job has stopped everywhere.
std::vector<std::string> LiveHolders(const StopTarget& target);

// PIDs of djshard processes of the job on this host, each checked by
// /proc/<pid>/cmdline (a djshard binary naming the job) and never this one.
std::vector<int> LocalJobProcesses(const StopTarget& target);

}  // namespace djshard::store
