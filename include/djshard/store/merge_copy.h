#pragma once
// A file-layout merge split into copy tasks that any dlc instance claims
// (SPEC-elastic-sharding "Distributed merge"): the coordinator preallocates
// the merged file under a temporary name and plans its parts (each shard's
// published output at its offset); each task copies its run of parts into
// the file with pwrite, checking each against its done record (rows, bytes,
// xxh3_128) and hashing its SHA-256 while it copies, and fsyncs; the
// coordinator then renames the file into place and records each part's
// SHA-256 and their tree hash (the SHA-256 of the parts' digests, each as 64
// lowercase hex digits and '\n', in order). The plain SHA-256 of the whole
// file, one serial read, only when asked.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/io/disk.h"
#include "djshard/store/job.h"
#include "djshard/store/merge.h"

namespace djshard::store {

struct MergeCopyPlan {
  struct Part {
    size_t shard = 0;  // index into the manifest's shards
    uint64_t offset = 0, bytes = 0;
  };
  std::string output;  // absolute
  std::string temp;    // the preallocated file the tasks write
  // Its inode: a plan (and the tasks' results) holds for that file only, so a
  // coordinator that takes over after the file was renamed into place plans
  // a new one.
  uint64_t temp_inode = 0;
  uint64_t bytes = 0;
  std::vector<Part> parts;
  std::vector<std::pair<size_t, size_t>> tasks;  // parts [first, end)

  std::string ToJson() const;
  static MergeCopyPlan FromJson(const std::string& text, const std::string& path);
};

// Whether `request` can be merged by copy tasks: the file layout, and an
// output that is not compressed.
bool CanMergeByCopyTasks(const JobDir& job, const MergeRequest& request);

// The coordinator: checks the output as Merge does, plans tasks of about
// `task_bytes` of output each (whole parts; smaller where that makes
// `min_tasks`, so that every instance gets a share) and creates the temporary file
// (<output>.tmp.<tag>) at its full size, or sizes the one a coordinator it
// took over from left (the same plan: its tasks' results stand).
MergeCopyPlan PlanMergeCopy(const JobDir& job, const MergeRequest& request, uint64_t task_bytes,
                            size_t min_tasks, const std::string& tag, io::Disk& disk);

// Any instance: copies task `task`'s parts into the temporary file and
// fsyncs it, checking `owned` (its claim is still its own) before each write:
// a copier that lost its claim stops there. Every copier of the plan writes
// the same bytes at the same offsets, so a write already under way puts back
// what is there. Its result: each part's shard id and SHA-256, or the Error
// that stopped it ("error").
nlohmann::json RunMergeCopyTask(const JobDir& job, const MergeCopyPlan& plan, size_t task,
                                const std::function<bool()>& owned);

// The coordinator, once every task has a result (in task order): the first
// failure is an Error; else the file is renamed into place and merge.json
// written, with the whole file's SHA-256 when `whole_sha256`.
MergeOutcome FinishMergeCopy(const JobDir& job, const MergeCopyPlan& plan,
                             const std::vector<nlohmann::json>& results, bool whole_sha256,
                             io::Disk& disk);

}  // namespace djshard::store
