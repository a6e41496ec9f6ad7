#pragma once
// What merge's ways of writing the output share (merge.cc, merge_copy.cc):
// reading and checking the shards' published outputs against their done
// records.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "djshard/io/checksum.h"
#include "djshard/io/disk.h"
#include "djshard/io/input.h"
#include "djshard/store/job.h"
#include "djshard/store/merge.h"
#include "djshard/store/records.h"

namespace djshard::store {

// The done record's output path, proven to stay inside the job directory.
std::string OutputInsideJob(const JobDir& job, const DoneRecord& done, const std::string& record);

// What reading a shard output found.
struct LinesRead {
  uint64_t rows = 0;
  uint64_t bytes = 0;     // newlines included
  io::Checksum checksum;  // of exactly those bytes
};

// Reads `source` (whose bytes come from `path`), hashing it with `kind`,
// counting its lines and handing its bytes in order to `each`. The worker's
// writer produced those lines and the checksum proves them unchanged, so they
// are not parsed again unless `deep`: then every line must be a JSON object
// (Error with file and line otherwise).
LinesRead ReadOutputLines(std::unique_ptr<io::ByteSource> source, const std::string& path,
                          io::ChecksumKind kind, bool deep,
                          const std::function<void(std::string_view)>& each);
// The same for the file `path` (decompressing .gz/.zst).
LinesRead ReadOutputLines(const std::string& path, io::ChecksumKind kind, bool deep,
                          const std::function<void(std::string_view)>& each);

// Reads the shard output that `done` (read from `record_path`) publishes:
// its output file, or the ranges of another file of the job that its
// output_source names. Hands the bytes to `each` and throws unless they are
// what the record says (CheckAgainstRecord).
void ReadShardOutput(const JobDir& job, const DoneRecord& done, const std::string& record_path,
                     bool deep, const std::function<void(std::string_view)>& each);

// The hint of an error about a published output that changed: retry the
// shard, or, for an output in another task's file, prepare the job again.
std::string ChangedOutputHint(const DoneRecord& done, const std::string& record_path);

// Throws unless what reading `path` found is what its done record says.
void CheckAgainstRecord(const std::string& path, const LinesRead& read, const DoneRecord& done,
                        const std::string& record_path);

// Adds a verified shard output to the totals.
void Count(const DoneRecord& done, VerifiedOutputs& total);

// The shard's done record, checked to name the shard.
DoneRecord ReadShardDone(const JobDir& job, const ShardEntry& shard);

// Concatenates the errors files of the shards' published attempts, in shard
// order, into `path`; writes nothing when every one is empty or absent.
void MergeErrorFiles(const JobDir& job, const std::string& path, io::Disk& disk);

// The outcome of a merge that verified `v` into `output`.
MergeOutcome OutcomeOf(const JobDir& job, const std::string& output, const VerifiedOutputs& v,
                       OutputLayout layout);

// The merged output's absolute path, refused when it would replace a file of
// the job or, without --overwrite, an existing one.
std::string CheckedOutput(const JobDir& job, const MergeRequest& request, OutputLayout layout);

// Writes merge.json and marks the job's summary completed.
void RecordMerge(const JobDir& job, const nlohmann::json& merge, io::Disk& disk);

}  // namespace djshard::store
