#pragma once

// Reading a job's shards (SPEC-elastic-sharding "Reference shards"): a shard
// file in the job dir, or a reference shard's ranges of the input files,
// normalized as prepare normalized them while they are read.

#include <memory>
#include <optional>
#include <string>

#include "djshard/common/error.h"
#include "djshard/io/checksum.h"
#include "djshard/io/disk.h"
#include "djshard/io/input.h"
#include "djshard/store/job.h"
#include "djshard/store/manifest.h"

namespace djshard::store {

// An input file of a reference job changed after prepare: the job's fault,
// not the shard's, so it burns no retry and ends the job.
class InputChangedError : public Error {
 public:
  using Error::Error;
};

// Opens shard `shard` of `job` for reading its normalized lines, each ending
// in '\n'. `hash`, when given, sees exactly those bytes: it ends as the
// shard's checksum in the manifest. A reference shard checks each range's
// size, rows and raw xxh3_128 as it reads it (or, in a job whose input is
// checked by blocks, the xxh3_128 of each check block it reads: the range
// widened to whole blocks), and throws InputChangedError naming the input
// file when one differs.
std::unique_ptr<io::ByteSource> OpenShard(const JobPaths& job, const Manifest& manifest,
                                          const ShardEntry& shard,
                                          io::ChecksumHasher* hash = nullptr);

// For an attempt of a reference shard that failed: reads the shard's ranges
// again and throws InputChangedError if one differs from the manifest, so
// that a line broken by an edit of a file copied as it is (which the
// executor, not the range check, met first) fails the job, not the shard.
void CheckShardUnchanged(const JobPaths& job, const Manifest& manifest, const ShardEntry& shard);

// A job whose input is checked by blocks: throws Error (the job directory's
// fault, not the input's) unless input_blocks.xxh3 has the size and xxh3_128
// the manifest records. Reads the whole file: `verify` calls it, and a reader
// before it blames a mismatched block on the input.
void CheckInputBlocksFile(const JobPaths& job, const Manifest& manifest);

// The record that a reference job's input changed: `state/input_changed.json`,
// written once by the worker that found it (the first one wins). Every
// worker, `status` and `dlc` then end the job with exit 2 and its message.
struct InputChangedRecord {
  std::string file;      // the input file
  std::string shard_id;  // the shard whose range showed it
  std::string message;   // the error, as the worker printed it
  std::string hostname;
  std::string detected_at;
};

// Publishes the record (first writer wins: an existing one stays).
void RecordInputChanged(const JobPaths& job, io::Disk& disk, const InputChangedRecord& record);
// The record, if the job has one.
std::optional<InputChangedRecord> ReadInputChanged(const JobPaths& job, io::Disk& disk);
// The error the record stands for: the input file, its message and the remedy.
Error InputChangedJobError(const InputChangedRecord& record, const std::string& job_dir);

}  // namespace djshard::store
