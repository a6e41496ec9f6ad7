#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/io/disk.h"

namespace djshard::job {

// The paths of a `run` job directory (SPEC-checkpoints §1). `checkpoints` is
// <dir>/checkpoints unless checkpoint.dir puts them elsewhere.
struct RunJobPaths {
  std::string dir;
  std::string checkpoints;
  std::string Summary() const { return dir + "/job_summary.json"; }
  std::string Plan() const { return dir + "/dag_execution_plan.json"; }
  std::string Heartbeat() const { return dir + "/heartbeat"; }
  std::string Metadata() const { return dir + "/metadata"; }
  std::string Checkpoints() const { return checkpoints; }
  std::string PartitioningInfo() const { return Checkpoints() + "/partitioning_info.json"; }
  // checkpoint_op_OOOO_partition_PPPPP (in Checkpoints()), to which the data
  // and commit suffixes are added.
  static std::string TapStem(size_t op_idx, uint64_t partition, uint64_t num_partitions);
  // lineage_<region>_partition_PPPPP (in Checkpoints()): a region's gather
  // journal in one partition, to which ".<token>.segNNNNN.jsonl.zst" (data)
  // and ".segNNNNN.commit.json" (commit record) are added (SPEC-lineage §6).
  static std::string JournalStem(const std::string& region, uint64_t partition,
                                 uint64_t num_partitions);
};

// The tag of the temporary files this process writes for job `job_id`'s
// export and errors file: "<export>.tmp.run-<job_id>@<host>@<pid>.<random>",
// by which a resume or gc finds the ones a killed run left.
std::string ExportTempTag(const std::string& job_id);

// Removes the temporary files of job `job_id`'s export `export_path` and of
// its errors file whose writer is dead: a process of this host that no longer
// exists or, with `other_hosts_ended`, any process of another host (the
// caller knows the job's runs there ended). Returns their paths.
std::vector<std::string> RemoveExportLeftovers(const std::string& export_path,
                                               const std::string& job_id, bool other_hosts_ended,
                                               io::Disk& disk, bool dry_run = false);

// events_<ts>.jsonl of one process: one whole line per write(2), appended.
class EventLog {
 public:
  // `path` empty: events are dropped (event_logging.enabled: false).
  EventLog(std::string path, std::string job_id);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  // Adds event_id, event_type, timestamp, job_id, hostname, pid, thread_id
  // to `fields` (null fields are left out) and appends the line.
  void Emit(const std::string& type, nlohmann::json fields = nlohmann::json::object());

 private:
  std::string path_, job_id_, hostname_;
  int fd_ = -1;
  std::mutex mu_;
  uint64_t seq_ = 0;
};

}  // namespace djshard::job
