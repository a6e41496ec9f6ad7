#pragma once

// The gather journal of one top-level expand/gather region in one partition
// (SPEC-lineage §6): parents are appended as their gather makes them, sealed
// into attempt-owned segments and committed like checkpoint taps
// (SPEC-checkpoints §5), so that a resumed partition expands only the parents
// no committed segment holds.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "djshard/exec/executor.h"
#include "djshard/io/checksum.h"
#include "djshard/io/disk.h"

namespace djshard::job {

// What every segment of one journal names and where it lives.
struct JournalScope {
  std::string checkpoints;  // the partition set's checkpoint directory
  std::string stem;         // RunJobPaths::JournalStem
  std::string region;
  uint64_t partition = 0;
  size_t gather_idx = 0;
  std::string job_id;
  nlohmann::json shard_id;        // null for `run`
  std::string token;              // the run's or attempt's token
  std::string region_ops_sha256;  // OpsPrefixSha256 through the gather
  // The partition's stream the region read, by which rows are numbered: the
  // committed tap it resumed from (its checksum) or the partition input (its hash).
  io::Checksum input_tap;
  std::string engine_version;
};

// Appends parents to segments and commits each sealed segment. Sealed
// segments are written and committed in order by the journal's own thread,
// so that their fsyncs overlap the region's work (at most kMaxQueued wait;
// Add blocks beyond). Thread-safe.
class GatherJournal {
 public:
  // `publish(path, record)` links a commit record first-writer-wins (true:
  // linked) and throws when the caller may publish no more (a lost claim);
  // `committed(fields)` is called after each commit (for the event).
  GatherJournal(JournalScope scope, io::Disk& disk, uint64_t first_segment, uint64_t flush_parents,
                double flush_secs,
                std::function<bool(const std::string&, const std::string&)> publish,
                std::function<void(const nlohmann::json&)> committed);
  // Stops the thread: sealed segments not yet committed are left out.
  ~GatherJournal();
  GatherJournal(const GatherJournal&) = delete;
  GatherJournal& operator=(const GatherJournal&) = delete;

  // Adds gathered parents; seals a segment of flush_parents parents as often
  // as they fill one, and all pending ones once flush_secs passed since the
  // last seal. Throws what an earlier commit threw.
  void Add(std::vector<exec::JournaledParent>& parents);

  // Waits until every sealed segment is committed (parents not sealed stay
  // out); throws what a commit threw.
  void Flush();

  static constexpr size_t kMaxQueued = 4;

 private:
  struct Sealed {
    uint64_t segment = 0;
    std::string lines;
    nlohmann::json rows;
  };
  void SealLocked(size_t count);
  void Commit(const Sealed& sealed);
  void CommitLoop();

  const JournalScope scope_;
  io::Disk& disk_;
  const uint64_t flush_parents_;
  const double flush_secs_;
  const std::function<bool(const std::string&, const std::string&)> publish_;
  const std::function<void(const nlohmann::json&)> committed_;
  std::mutex mu_;
  std::condition_variable cv_;                             // the queue or the state changed
  std::vector<std::pair<uint64_t, std::string>> pending_;  // (row, journal line)
  std::deque<Sealed> queue_;                               // sealed, not yet committed
  bool committing_ = false;                                // the thread holds one from queue_
  bool stop_ = false;
  std::exception_ptr failure_;  // the first commit's error
  uint64_t next_segment_;
  double last_seal_;  // MonotonicSeconds
  std::thread thread_;
};

// The committed segments of a journal, verified.
struct LoadedJournal {
  std::unordered_map<uint64_t, exec::JournaledParent> parents;  // by row
  uint64_t next_segment = 0;  // the first segment number no record uses
};

// Reads every commit record of `scope`'s journal and verifies it (region,
// partition, region_ops_sha256, input_tap_xxh3_128, the data file's size,
// xxh3_128, rows and count). A record that fails is handed to `reject(path,
// record, why)` and its parents are left out (recomputed); `loaded(fields)`
// is called for each segment used.
LoadedJournal LoadJournal(const JournalScope& scope,
                          const std::function<void(const std::string&, const nlohmann::json&,
                                                   const std::string&)>& reject,
                          const std::function<void(const nlohmann::json&)>& loaded);

// Removes every file of the journal `stem` in `checkpoints` (commit records
// first, then data of any attempt): a later parent-level tap committed.
void DeleteJournal(const std::string& checkpoints, const std::string& stem, io::Disk& disk);

// Whether `name` is a data file (or its temporary file) of the journal `stem`.
bool IsJournalData(const std::string& name, const std::string& stem);

}  // namespace djshard::job
