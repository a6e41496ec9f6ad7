#include "djshard/store/dedup_stage.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <set>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/threads.h"
#include "djshard/exec/dedup_rows.h"
#include "djshard/exec/dedup_run.h"
#include "djshard/io/checksum.h"
#include "djshard/io/fd.h"
#include "djshard/io/input.h"
#include "djshard/io/sha256.h"
#include "djshard/ops/dedup.h"
#include "djshard/store/records.h"
#include "djshard/store/shard_source.h"

namespace djshard::store {

namespace {

using ops::dedup::DedupConfig;
using ops::dedup::DedupOperator;
using ops::dedup::GroupKey;

// rows.u64: a row the deduplicator could not sign has this bit set.
constexpr uint64_t kUnsignedRow = uint64_t{1} << 63;
constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string StageName(size_t stage) { return "dedup" + std::to_string(stage); }

std::string SignTaskId(size_t stage, const std::string& shard_id) {
  return StageName(stage) + "-sign-" + shard_id;
}

std::string GroupTaskId(size_t stage, uint64_t range) {
  char digits[24];
  std::snprintf(digits, sizeof digits, "%04llu", static_cast<unsigned long long>(range));
  return StageName(stage) + "-group-" + digits;
}

std::string ComponentsTaskId(size_t stage) { return StageName(stage) + "-components"; }

// keys.idx: per key range, offset, bytes and keys (u64 each), then the
// range's xxh3_128 in hex.
constexpr size_t kIndexEntryBytes = 24 + 32;

void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}

void PutU32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 4);
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// The key range of a grouping key: a fixed mix of (part, bytes), so that
// every key of one group lands in the same range whatever the job's layout.
uint64_t KeyRange(const GroupKey& key, uint64_t ranges) {
  return ops::dedup::KeyHash(key.part, key.bytes) % ranges;
}

// A file of a task, written atomically and hashed as it is written.
class TaskFile {
 public:
  TaskFile(const std::string& dir, std::string name, io::Disk& disk)
      : name_(std::move(name)), writer_(dir + "/" + name_, /*overwrite=*/true, disk) {}

  void Append(std::string_view bytes) {
    writer_.Append(bytes);
    hash_.Update(bytes);
    bytes_ += bytes.size();
  }
  // Commits the file and records it in `files`. The worker makes every file
  // of `files` durable before it publishes the task's done record
  // (SyncTaskFiles), on its publishing thread, while the next task runs.
  void Commit(nlohmann::json& files, uint64_t rows) {
    writer_.Commit(/*durable=*/false);
    files[name_] = {{"bytes", bytes_}, {"rows", rows}, {"xxh3_128", hash_.HexDigest()}};
  }

 private:
  std::string name_;
  io::AtomicFileWriter writer_;
  io::Xxh3 hash_;
  uint64_t bytes_ = 0;
};

// The done record of task `id`, which must be published.
DoneRecord ReadDone(const JobDir& job, const std::string& id) {
  const std::string path = job.DonePath(id);
  if (!job.disk().Stat(path)) {
    throw Error(path, 0, "task " + id + " has no done record",
                "an earlier phase of the dedup stage is not finished; the job directory was "
                "changed");
  }
  DoneRecord done = DoneRecord::FromJson(job.disk().Read(path), path);
  if (!done.stage.is_object() || !done.stage.contains("files")) {
    throw Error(path, 0, "done record of " + id + " lists no stage files",
                "the record was not written by a dedup stage task");
  }
  return done;
}

// The attempt directory (absolute) that published `done`.
std::string AttemptDirOf(const JobDir& job, const DoneRecord& done) {
  const std::string rel = done.output_path.substr(0, done.output_path.rfind('/'));
  return job.InJob(rel);
}

// Throws unless `bytes` bytes hashing to `xxh3` are what the done record
// `done` lists for its file `name` at `path`.
void CheckTaskFile(const DoneRecord& done, const std::string& name, const std::string& path,
                   uint64_t bytes, const std::string& xxh3) {
  const nlohmann::json& entry = done.stage.at("files").at(name);
  if (bytes != entry.at("bytes").get<uint64_t>() ||
      xxh3 != entry.at("xxh3_128").get<std::string>()) {
    throw Error(path, 0, "file differs from the done record of " + done.shard_id,
                "the job directory was changed; `djshard retry` cannot repair this: prepare "
                "the job again");
  }
}

// File `name` of the task that published `done`, checked against the
// record's bytes and xxh3_128.
std::string ReadTaskFile(const JobDir& job, const DoneRecord& done, const std::string& name) {
  const std::string path = AttemptDirOf(job, done) + "/" + name;
  std::string bytes = job.disk().Read(path);
  io::Xxh3 hash;
  hash.Update(bytes);
  CheckTaskFile(done, name, path, bytes.size(), hash.HexDigest());
  return bytes;
}

// The same check, hashing the file in blocks (a rows.jsonl may be as large as
// its shard); returns its bytes.
uint64_t StreamTaskFile(const JobDir& job, const DoneRecord& done, const std::string& name) {
  const std::string path = AttemptDirOf(job, done) + "/" + name;
  const io::Checksum sum = io::ChecksumOfFile(path);
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(path, ec);
  CheckTaskFile(done, name, path, ec ? 0 : bytes, sum.hex);
  return bytes;
}

// `bytes` bytes of `path` from `offset`; fewer when the file ends first.
std::string ReadAt(const std::string& path, uint64_t offset, uint64_t bytes) {
  std::string out(bytes, '\0');
  io::ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) ThrowSystemError(path, "cannot open a dedup stage file");
  out.resize(io::PreadFully(fd.get(), out.data(), out.size(), offset, path));
  return out;
}

// An index of slices of a data file (keys.idx for keys.bin, duplicates.idx
// for duplicates.u64): per slice, kIndexEntryBytes: its offset, bytes and
// records (u64 each), then its xxh3_128 in hex. A reader takes one entry and
// its slice with two reads, whatever the number of slices, and checks the
// slice against the entry's hash.
void AppendIndexEntry(std::string* index, uint64_t offset, std::string_view slice,
                      uint64_t records) {
  io::Xxh3 hash;
  hash.Update(slice);
  PutU64(index, offset);
  PutU64(index, slice.size());
  PutU64(index, records);
  *index += hash.HexDigest();
}

// Slice `entry` of file `data` of the task that published `done`, through
// its index file `index_name`.
std::string ReadIndexedSlice(const JobDir& job, const DoneRecord& done, const std::string& data,
                             const std::string& index_name, uint64_t entry,
                             const std::string& what) {
  const std::string dir = AttemptDirOf(job, done);
  const uint64_t index_bytes = done.stage.at("files").at(index_name).at("bytes").get<uint64_t>();
  const std::string path = dir + "/" + data;
  const auto changed = [&] {
    return Error(path, 0, what + " differs from the done record of " + done.shard_id,
                 "the job directory was changed; `djshard retry` cannot repair this: prepare "
                 "the job again");
  };
  if ((entry + 1) * kIndexEntryBytes > index_bytes) throw changed();
  const std::string e = ReadAt(dir + "/" + index_name, entry * kIndexEntryBytes, kIndexEntryBytes);
  if (e.size() != kIndexEntryBytes) throw changed();
  std::string slice = ReadAt(path, GetU64(e.data()), GetU64(e.data() + 8));
  io::Xxh3 hash;
  hash.Update(slice);
  if (slice.size() != GetU64(e.data() + 8) || hash.HexDigest() != std::string_view(e).substr(24))
    throw changed();
  return slice;
}

std::vector<uint64_t> ParseU64s(const std::string& bytes) {
  std::vector<uint64_t> out(bytes.size() / 8);
  for (size_t i = 0; i < out.size(); ++i) out[i] = GetU64(bytes.data() + 8 * i);
  return out;
}

// Union-find over a fixed set of rows (those that have an edge), kept as a
// sorted array and a parent index per row: 16 bytes a row. The smaller root
// always wins, so a component's root is its first row.
class RowForest {
 public:
  // `rows`: every row that Union will be given, in any order, repeats allowed.
  explicit RowForest(std::vector<uint64_t> rows) : rows_(std::move(rows)) {
    std::sort(rows_.begin(), rows_.end());
    rows_.erase(std::unique(rows_.begin(), rows_.end()), rows_.end());
    rows_.shrink_to_fit();
    parent_.resize(rows_.size());
    for (size_t i = 0; i < parent_.size(); ++i) parent_[i] = i;
  }
  void Union(uint64_t a, uint64_t b) {
    const size_t ra = Find(Index(a)), rb = Find(Index(b));
    if (ra == rb) return;
    // Indexes follow row order: the smaller index is the smaller row.
    if (ra < rb) {
      parent_[rb] = ra;
    } else {
      parent_[ra] = rb;
    }
  }
  // (row, root) of every row whose root is not itself, by row.
  std::vector<std::pair<uint64_t, uint64_t>> NonRoots() {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (size_t i = 0; i < rows_.size(); ++i) {
      const size_t root = Find(i);
      if (root != i) out.emplace_back(rows_[i], rows_[root]);
    }
    return out;
  }

 private:
  size_t Index(uint64_t row) const {
    return static_cast<size_t>(std::lower_bound(rows_.begin(), rows_.end(), row) - rows_.begin());
  }
  size_t Find(size_t i) {
    while (parent_[i] != i) {
      parent_[i] = parent_[parent_[i]];  // path halving
      i = parent_[i];
    }
    return i;
  }
  std::vector<uint64_t> rows_;
  std::vector<size_t> parent_;
};

// The rows that appear in `pairs` (row, root, row, root, ...), sorted and
// each once, merged into *rows (sorted, each once).
void MergeRows(const std::vector<uint64_t>& pairs, std::vector<uint64_t>* rows) {
  std::vector<uint64_t> mine = pairs;
  std::sort(mine.begin(), mine.end());
  mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  std::vector<uint64_t> merged;
  merged.reserve(rows->size() + mine.size());
  std::set_union(rows->begin(), rows->end(), mine.begin(), mine.end(), std::back_inserter(merged));
  rows->swap(merged);
}

// The rows a row task reads: the shard file (stage 1), else what the last
// stage kept of the rows its sign task wrote.
struct TaskInput {
  exec::RowSet set;
  std::vector<uint64_t> global;  // by position; empty: the shard's first row + position
  io::Checksum expected;         // of the file read
  uint64_t file_lines = 0;       // lines of the file read
  std::string file;              // its path, for messages
  std::string file_rel;          // an earlier task's file: its path in the job
  exec::ExecSummary carried;     // counters of the operators before
  bool output_form = false;      // the rows are written as the output writes them
};

// Adds an executor run of some of the recipe's operators to a task's summary,
// whose rows and bytes are the run's.
void AddRun(exec::ExecSummary& total, const exec::ExecSummary& run) {
  exec::AddCounters(total, run);
  total.rows_in = run.rows_in;
  total.bytes_in = run.bytes_in;
  total.rows_out = run.rows_out;
  total.bytes_out = run.bytes_out;
  total.model_devices = run.model_devices;
}

// Tap origins (one ["<file>", <line>] per row) as global rows.
void AppendOriginRows(std::string_view lines, uint64_t first_row, std::vector<uint64_t>* rows) {
  size_t pos = 0;
  while (pos < lines.size()) {
    size_t end = lines.find('\n', pos);
    if (end == std::string_view::npos) end = lines.size();
    const size_t comma = lines.rfind(',', end);
    uint64_t line = 0;
    for (size_t i = comma + 1; i < end; ++i) {
      if (lines[i] >= '0' && lines[i] <= '9') line = line * 10 + (lines[i] - '0');
    }
    rows->push_back(first_row + line - 1);
    pos = end + 1;
  }
}

// One row task's reading of its input through the executor: the reader
// (hashing what it reads), the executor's options for operators
// [first_op, end_op), and, for a sign task, the global row of every row it
// writes.
struct RowRun {
  RowRun(TaskInput input, uint64_t first, std::string shard_path)
      : in(std::move(input)),
        first_row(first),
        shard_file(std::move(shard_path)),
        hasher(in.expected.kind) {}

  void Configure(const TaskContext& c, size_t first, size_t end) {
    reader =
        std::make_unique<exec::RowReader>(in.set, c.exec.batch_bytes, c.plan->batch_rows, &hasher);
    o = c.exec;
    o.first_op = first;
    o.end_op = end;
    o.source = [this](io::LineChunk* chunk) { return reader->Next(chunk); };
    if (!in.set.all) {
      // Errors name a row by the shard file and its line there.
      o.origin = [this](uint64_t line) -> const exec::RowOrigin* {
        thread_local exec::RowOrigin origin;
        origin.file = shard_file;
        origin.line = in.global[line - 1] - first_row + 1;
        return &origin;
      };
    }
  }
  bool NoOperators() const { return o.first_op == o.end_op; }
  // The global row of a position of the input.
  uint64_t GlobalRow(uint64_t position) const {
    return in.set.all ? first_row + position : in.global[position];
  }

  // rows.jsonl as the output would write the rows (nothing runs after the
  // deduplicator), with their global rows from the output's source lines.
  // Signs the rows reaching the deduplicator as the executor writes them,
  // into `signed_rows` (positions: their rank among those rows).
  void SignAsWritten(const DedupConfig& config) {
    o.sign = &config;
    o.signed_sink = [this, &config](exec::SignedBatch&& batch) {
      signed_rows.seconds += batch.seconds;
      for (size_t i = 0; i < batch.signatures.size(); ++i) {
        const bool signed_ok = batch.errors[i].empty();
        signed_rows.Add(config, batch.first + i, signed_ok, batch.signatures[i],
                        std::move(batch.errors[i]));
      }
    };
    signed_in_pass = true;
  }

  void WriteOutputForm(const TaskContext& c, const std::string& attempt_dir,
                       io::OutputStream& errors, exec::ExecSummary& summary,
                       nlohmann::json& files) {
    io::OutputStream rows_file(attempt_dir + "/rows.jsonl", /*overwrite=*/true, c.job->disk());
    rows_file.HashContent();
    o.output_lines_sink = [this](const std::vector<uint64_t>& lines) {
      for (uint64_t line : lines) rows.push_back(GlobalRow(line - 1));
    };
    AddRun(summary, exec::Execute(*c.plan, in.set.files, rows_file, &errors, o));
    rows_file.Commit(/*durable=*/false);  // as a TaskFile: SyncTaskFiles
    files["rows.jsonl"] = {{"bytes", rows_file.bytes_in()},
                           {"rows", rows.size()},
                           {"xxh3_128", rows_file.ContentXxh3()}};
  }

  // rows.jsonl as a tap after the operators before the deduplicator (their
  // __dj__stats__ and __dj__meta__ kept for the operators after it), or the
  // rows read as they are when there is no operator before it.
  void WriteTapForm(const TaskContext& c, const std::string& attempt_dir, io::OutputStream& output,
                    io::OutputStream& errors, exec::ExecSummary& summary, nlohmann::json& files) {
    TaskFile rows_file(attempt_dir, "rows.jsonl", c.job->disk());
    if (!NoOperators()) {
      o.discard_output = true;
      o.taps = {o.end_op - 1};
      o.compress_taps = false;
      o.tap_sink = [&rows_file](size_t, std::string_view bytes, uint64_t) {
        rows_file.Append(bytes);
      };
      o.tap_origin_sink = [this](size_t, std::string_view lines) {
        AppendOriginRows(lines, first_row, &rows);
      };
      AddRun(summary, exec::Execute(*c.plan, in.set.files, output, &errors, o));
    } else {
      io::LineChunk chunk;
      while (reader->Next(&chunk)) {
        rows_file.Append(std::string_view(chunk.data.data(), chunk.size));
        for (uint64_t k = 0; k < chunk.lines; ++k)
          rows.push_back(GlobalRow(chunk.first_line - 1 + k));
        summary.bytes_in += chunk.size;
      }
      summary.rows_in = reader->positions();
    }
    rows_file.Commit(files, rows.size());
  }

  TaskInput in;
  const uint64_t first_row;
  const std::string shard_file;
  io::ChecksumHasher hasher;
  std::unique_ptr<exec::RowReader> reader;
  exec::ExecOptions o;
  std::vector<uint64_t> rows;    // sign: the global row of every row reaching the deduplicator
  exec::SignedRows signed_rows;  // sign: their signatures, when signed as written
  bool signed_in_pass = false;
};

// Everything the tasks of one job share.
class StageJob {
 public:
  StageJob(const TaskContext& context) : c_(context), m_(context.job->manifest()) {
    uint64_t first = 0;
    for (const ShardEntry& s : m_.shards) {
      first_rows_.push_back(first);
      first += s.rows;
    }
  }

  TaskResult Run(const JobTask& task, const std::string& attempt_dir, io::OutputStream& output,
                 io::OutputStream& errors) {
    switch (task.kind) {
      case TaskKind::kSign:
      case TaskKind::kShard:
        return RowTask(task, attempt_dir, output, errors);
      case TaskKind::kGroup:
        return GroupTask(task, attempt_dir);
      case TaskKind::kComponents:
        return ComponentsTask(task, attempt_dir);
    }
    return {};
  }

 private:
  const DedupConfig& Config(size_t stage) const {
    const size_t op = m_.dedup_stages[stage - 1].op_index;
    return static_cast<const DedupOperator&>(*c_.plan->operators[op].op).config();
  }

  // How errors name a shard's rows: its file, or a reference shard's id.
  std::string ShardName(const ShardEntry& shard) const {
    return m_.shards_mode == ShardsMode::kReference ? shard.id : c_.job->InJob(shard.path);
  }

  TaskInput OpenInput(const JobTask& task, size_t shard_index, io::OutputStream& errors) {
    const ShardEntry& shard = m_.shards[shard_index];
    TaskInput in;
    in.set.raw = false;
    in.carried = exec::EmptySummary(*c_.plan);
    const size_t before = task.kind == TaskKind::kSign ? task.stage - 1 : task.stage;
    if (before == 0) {
      in.file = ShardName(shard);
      in.set.files.push_back({in.file, in.file, shard.path});
      in.set.open = [this, &shard](size_t, io::ChecksumHasher* hasher) {
        return OpenShard(*c_.job, m_, shard, hasher);
      };
      in.expected = shard.checksum;
      in.file_lines = shard.rows;
      return in;
    }
    const DoneRecord sign = ReadDone(*c_.job, SignTaskId(before, shard.id));
    // The shard's errors so far come first: merge reads the last task's.
    const std::string earlier_errors = JobPaths::AttemptErrorsPath(AttemptDirOf(*c_.job, sign));
    if (c_.job->disk().Stat(earlier_errors)) errors.AppendFile(earlier_errors);
    for (size_t i = 0; i < sign.op_stats.size() && i < in.carried.operators.size(); ++i) {
      in.carried.operators[i].Add(sign.op_stats[i]);
    }
    in.file_rel = sign.output_path.substr(0, sign.output_path.rfind('/')) + "/rows.jsonl";
    in.file = c_.job->InJob(in.file_rel);
    in.set.files.push_back({in.file, in.file, shard.path});
    const nlohmann::json& rows_file = sign.stage.at("files").at("rows.jsonl");
    in.expected = io::Checksum::Xxh3(rows_file.at("xxh3_128").get<std::string>());
    in.file_lines = rows_file.at("rows").get<uint64_t>();
    in.output_form = sign.stage.value("rows_form", "") == "output";
    const std::vector<uint64_t> rows = ParseU64s(ReadTaskFile(*c_.job, sign, "rows.u64"));
    std::vector<uint64_t> duplicates;
    if (m_.dedup_stages[before - 1].key_ranges > 0) {
      duplicates = ShardDuplicates(before, shard_index);
    }
    in.set.all = false;
    for (uint64_t i = 0; i < rows.size(); ++i) {
      if ((rows[i] & kUnsignedRow) != 0) continue;
      if (std::binary_search(duplicates.begin(), duplicates.end(), rows[i])) continue;
      in.set.rows.push_back(i);
      in.global.push_back(rows[i]);
    }
    exec::OperatorCounters& dedup = in.carried.operators[m_.dedup_stages[before - 1].op_index];
    dedup.rows_out += in.global.size();
    return in;
  }

  // The duplicate rows of stage `stage` inside shard `shard_index`, ascending.
  std::vector<uint64_t> ShardDuplicates(size_t stage, size_t shard_index) {
    const DoneRecord done = ReadDone(*c_.job, ComponentsTaskId(stage));
    return ParseU64s(ReadIndexedSlice(*c_.job, done, "duplicates.u64", "duplicates.idx",
                                      shard_index,
                                      "the duplicates of " + m_.shards[shard_index].id));
  }

  // How a sign task writes the rows reaching its deduplicator: as the
  // output would write them when nothing runs after it (the shard's task then
  // copies the kept lines as they are), else as a tap, with __dj__stats__ and
  // __dj__meta__ kept for the operators after it.
  bool WritesOutputForm(const JobTask& task) const {
    return task.kind == TaskKind::kSign && task.stage == m_.dedup_stages.size() &&
           m_.dedup_stages.back().op_index + 1 == c_.plan->operators.size();
  }

  // A sign task or a shard's task of a job with dedup stages.
  TaskResult RowTask(const JobTask& task, const std::string& attempt_dir, io::OutputStream& output,
                     io::OutputStream& errors) {
    const ShardEntry& shard = m_.shards[task.shard];
    const bool sign = task.kind == TaskKind::kSign;
    const size_t before = sign ? task.stage - 1 : task.stage;
    // (shared: the kept lines are located after this returns)
    const auto run = std::make_shared<RowRun>(OpenInput(task, task.shard, errors),
                                              first_rows_[task.shard], ShardName(shard));
    run->Configure(c_, before == 0 ? 0 : m_.dedup_stages[before - 1].op_index + 1,
                   sign ? m_.dedup_stages[task.stage - 1].op_index : c_.plan->operators.size());
    TaskResult result;
    result.summary = run->in.carried;
    nlohmann::json files = nlohmann::json::object();
    std::string form = "tap";
    if (!sign && run->NoOperators() && run->in.output_form) {
      // Only the kept lines are left: the worker locates them when it
      // publishes the task (TaskResult::keep).
      result.keep = [run, shard](io::OutputStream& out, exec::ExecSummary& summary, bool sha256) {
        uint64_t lines = 0;
        KeptLines kept = KeepRows(*run, summary, sha256, &lines);
        CheckInput(run->in, run->hasher, lines, shard);
        if (kept.source.ranges.size() > kMaxSourceRanges) {
          const std::string changed = "the job directory was changed; prepare the job again";
          const std::unique_ptr<io::ByteSource> source =
              io::OpenRanges(run->in.file, std::move(kept.source.ranges), changed);
          io::Xxh3 copied;
          std::vector<char> block(1 << 20);
          for (size_t n; (n = source->Read(block.data(), block.size())) > 0;) {
            copied.Update(block.data(), n);
            out.Append(std::string_view(block.data(), n));
          }
          if (copied.HexDigest() != kept.xxh3_128) {
            throw Error(run->in.file, 0, "file changed while its kept lines were copied", changed);
          }
          kept = {};
        }
        return kept;
      };
      result.stage = {{"task", "shard"}, {"files", files}};
      return result;
    }
    if (!sign) {
      AddRun(result.summary, exec::Execute(*c_.plan, run->in.set.files, output, &errors, run->o));
    } else {
      // The rows are signed as the executor writes them (when it runs: a tap
      // form without operators copies the rows, which are signed after).
      const bool output_form = WritesOutputForm(task);
      if (m_.dedup_stages[task.stage - 1].key_ranges > 0 && (output_form || !run->NoOperators())) {
        run->SignAsWritten(Config(task.stage));
      }
      if (output_form) {
        form = "output";
        run->WriteOutputForm(c_, attempt_dir, errors, result.summary, files);
      } else {
        run->WriteTapForm(c_, attempt_dir, output, errors, result.summary, files);
      }
    }
    result.input_rows = run->reader->positions();
    CheckInput(run->in, run->hasher, run->reader->ReadToEnd(), shard);
    result.stage = {{"task", sign ? "sign" : "shard"}};
    if (sign) {
      result.stage["rows_form"] = form;
      SignTask(task, attempt_dir, shard, *run, files, result, errors);
    }
    result.stage["files"] = files;
    return result;
  }

  // The shard's task when nothing runs after the last deduplicator: the kept
  // lines, as the sign task wrote them in output form, located run by run in
  // each block read and hashed, every byte of the file hashed on the way
  // (`*lines`: the file's lines).
  static KeptLines KeepRows(RowRun& run, exec::ExecSummary& summary, bool sha256, uint64_t* lines) {
    const std::vector<uint64_t>& keep = run.in.set.rows;  // ascending line indexes
    const std::unique_ptr<io::ByteSource> source = io::OpenInput(run.in.file, &run.hasher);
    KeptLines kept;
    std::vector<std::pair<uint64_t, uint64_t>>& ranges = kept.source.ranges;
    io::Xxh3 xxh3;
    io::Sha256 sha;
    std::vector<char> block(1 << 20);
    uint64_t line = 0, offset = 0;  // the block's first byte in the file
    size_t next = 0;                // the next kept line, in `keep`
    const auto add = [&](size_t from, size_t to) {
      const std::string_view bytes(block.data() + from, to - from);
      xxh3.Update(bytes);
      if (sha256) sha.Update(bytes);
      if (!ranges.empty() && ranges.back().first + ranges.back().second == offset + from) {
        ranges.back().second += bytes.size();
      } else {
        ranges.emplace_back(offset + from, bytes.size());
      }
      summary.bytes_out += bytes.size();
    };
    for (size_t n; (n = source->Read(block.data(), block.size())) > 0; offset += n) {
      constexpr size_t kNone = SIZE_MAX;
      size_t pos = 0, run_start = kNone;
      while (pos < n) {
        const bool is_kept = next < keep.size() && keep[next] == line;
        if (is_kept && run_start == kNone) run_start = pos;
        if (!is_kept && run_start != kNone) {
          add(run_start, pos);
          run_start = kNone;
        }
        const void* nl = std::memchr(block.data() + pos, '\n', n - pos);
        if (nl == nullptr) break;  // the line goes on in the next block
        pos = static_cast<size_t>(static_cast<const char*>(nl) - block.data()) + 1;
        ++line;
        if (is_kept) ++next;
      }
      if (run_start != kNone) add(run_start, n);
      summary.bytes_in += n;
    }
    summary.rows_in = summary.rows_out = next;
    *lines = line;
    // No kept line: the empty output file is the output.
    if (!ranges.empty()) kept.source.path = run.in.file_rel;
    kept.xxh3_128 = xxh3.HexDigest();
    if (sha256) kept.sha256 = sha.HexDigest();
    return kept;
  }

  // The file a row task read must be the one its record describes: every
  // line, the same checksum.
  static void CheckInput(const TaskInput& in, io::ChecksumHasher& hasher, uint64_t lines,
                         const ShardEntry& shard) {
    // A job whose input is checked by blocks has no checksum of a shard's lines.
    const io::Checksum read = hasher.Finish();
    if (lines != in.file_lines || (!in.expected.empty() && read != in.expected)) {
      throw Error(in.file, 0,
                  "file differs from " +
                      std::string(in.set.all ? "the manifest" : "its done record") + " (rows or " +
                      in.expected.field() + ") of " + shard.id,
                  "the job directory was changed; prepare the job again");
    }
  }

  // The deduplicator's half of a sign task: signs the rows just written,
  // reports the unsigned ones, writes rows.u64 and the key files.
  void SignTask(const JobTask& task, const std::string& attempt_dir, const ShardEntry& shard,
                RowRun& run, nlohmann::json& files, TaskResult& result, io::OutputStream& errors) {
    const uint64_t first_row = run.first_row;
    std::vector<uint64_t>& rows = run.rows;
    const DedupStageEntry& entry = m_.dedup_stages[task.stage - 1];
    const exec::PlannedOperator& planned = c_.plan->operators[entry.op_index];
    const std::string shard_file = ShardName(shard);
    exec::OperatorCounters& counters = result.summary.operators[entry.op_index];
    counters.rows_in += rows.size();
    std::vector<GroupKey> keys;
    std::vector<std::pair<uint64_t, uint64_t>> simhashes;  // simhash: (position, simhash)
    if (entry.key_ranges > 0) {
      exec::SignedRows signed_rows;
      if (run.signed_in_pass) {
        signed_rows = std::move(run.signed_rows);
      } else {
        exec::RowSet set;
        const std::string path = attempt_dir + "/rows.jsonl";
        set.files.push_back({path, path, shard.path});
        set.raw = false;
        exec::RowReader reader(set, c_.exec.batch_bytes, c_.plan->batch_rows);
        const auto where = [&](uint64_t p) {
          return exec::RowOrigin{shard_file, rows[p] - first_row + 1};
        };
        signed_rows = exec::SignRows(Config(task.stage), reader, where, c_.threads);
      }
      counters.seconds += signed_rows.seconds;
      ReportUnsigned(planned, signed_rows.unsigned_rows, shard_file, first_row, rows, errors);
      counters.errors += signed_rows.unsigned_rows.size();
      result.summary.errors += signed_rows.unsigned_rows.size();
      keys = std::move(signed_rows.keys);
      simhashes = std::move(signed_rows.simhashes);
    }
    std::string row_bytes;
    row_bytes.reserve(rows.size() * 8);
    for (uint64_t r : rows) PutU64(&row_bytes, r);
    TaskFile rows_u64(attempt_dir, "rows.u64", c_.job->disk());
    rows_u64.Append(row_bytes);
    rows_u64.Commit(files, rows.size());
    std::vector<std::string> ranges(entry.key_ranges);
    std::vector<uint64_t> counts(entry.key_ranges, 0);
    if (Config(task.stage).kind == ops::dedup::Kind::kSimhash) {
      SimhashRowsByRange(Config(task.stage), simhashes, rows, &ranges, &counts);
    } else {
      for (const GroupKey& key : keys) {
        const uint64_t r = KeyRange(key, entry.key_ranges);
        std::string& out = ranges[r];
        PutU32(&out, key.part);
        PutU32(&out, static_cast<uint32_t>(key.bytes.size()));
        PutU64(&out, rows[key.row] & ~kUnsignedRow);
        PutU64(&out, key.simhash);
        out += key.bytes;
        ++counts[r];
      }
    }
    // One file of keys, the ranges one after the other, and its index: per
    // range its offset, bytes, keys and xxh3_128 (kIndexEntryBytes each).
    TaskFile key_file(attempt_dir, "keys.bin", c_.job->disk());
    std::string index;
    uint64_t offset = 0;
    for (uint64_t r = 0; r < entry.key_ranges; ++r) {
      key_file.Append(ranges[r]);
      AppendIndexEntry(&index, offset, ranges[r], counts[r]);
      offset += ranges[r].size();
      ranges[r] = {};
    }
    key_file.Commit(files, keys.size() + simhashes.size());
    TaskFile index_file(attempt_dir, "keys.idx", c_.job->disk());
    index_file.Append(index);
    index_file.Commit(files, entry.key_ranges);
    result.stage["rows"] = rows.size();
    result.stage["keys"] = keys.size() + simhashes.size();
  }

  // A simhash's keys are its bits under the block permutations: a row goes
  // to each range that one of its keys falls in, once, as (row, simhash), and
  // the group task derives the keys again (about 16 bytes per row and range
  // instead of 32 per key).
  static void SimhashRowsByRange(const DedupConfig& config,
                                 const std::vector<std::pair<uint64_t, uint64_t>>& simhashes,
                                 const std::vector<uint64_t>& rows,
                                 std::vector<std::string>* ranges, std::vector<uint64_t>* counts) {
    const std::vector<uint64_t>& masks =
        ops::dedup::SimhashKeyMasks(config.num_blocks, config.hamming_distance);
    std::vector<uint64_t> hit;
    for (const auto& [position, simhash] : simhashes) {
      hit.clear();
      for (size_t p = 0; p < masks.size(); ++p) {
        const uint64_t v = simhash & masks[p];
        hit.push_back(
            ops::dedup::KeyHash(static_cast<uint32_t>(p),
                                std::string_view(reinterpret_cast<const char*>(&v), sizeof v)) %
            ranges->size());
      }
      std::sort(hit.begin(), hit.end());
      hit.erase(std::unique(hit.begin(), hit.end()), hit.end());
      for (uint64_t r : hit) {
        PutU64(&(*ranges)[r], rows[position] & ~kUnsignedRow);
        PutU64(&(*ranges)[r], simhash);
        ++(*counts)[r];
      }
    }
  }

  // Rows the deduplicator could not sign: marked in `rows`, reported in the
  // errors file, or the task fails at the first without skip_op_error.
  static void ReportUnsigned(const exec::PlannedOperator& planned,
                             const std::vector<exec::UnsignedRow>& unsigned_rows,
                             const std::string& shard_file, uint64_t first_row,
                             std::vector<uint64_t>& rows, io::OutputStream& errors) {
    const std::string& name = planned.op->name();
    std::string lines;
    for (const exec::UnsignedRow& e : unsigned_rows) {
      const uint64_t line = rows[e.position] - first_row + 1;
      if (!planned.skip_op_error) {
        throw Error(shard_file, line, "operator '" + name + "' failed: " + e.message,
                    "set skip_op_error: true to drop such records and keep going");
      }
      rows[e.position] |= kUnsignedRow;
      const nlohmann::json j = {
          {"op", name}, {"error", e.message}, {"file", shard_file}, {"line", line}};
      lines += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      lines += '\n';
    }
    if (!lines.empty()) errors.Append(lines);
  }

  // A grouping key without its bytes copied: a simhash key keeps the simhash
  // (its bytes are the simhash under the part's mask), another points into
  // the buffer it was read from.
  struct KeyRef {
    uint64_t hash;  // ops::dedup::KeyHash(part, bytes)
    uint64_t row;
    uint64_t simhash;
    const char* bytes;  // null for a simhash key
    uint32_t part;
    uint32_t length;
  };

  // The simhash keys in range `range` of the (row, simhash) records in `bytes`.
  static void SimhashRefs(const DedupConfig& config, const std::string& bytes, uint64_t range,
                          uint64_t ranges, std::vector<KeyRef>* refs) {
    const std::vector<uint64_t>& masks =
        ops::dedup::SimhashKeyMasks(config.num_blocks, config.hamming_distance);
    for (size_t pos = 0; pos + 16 <= bytes.size(); pos += 16) {
      const uint64_t row = GetU64(bytes.data() + pos), simhash = GetU64(bytes.data() + pos + 8);
      for (size_t p = 0; p < masks.size(); ++p) {
        const uint64_t v = simhash & masks[p];
        const uint64_t h =
            ops::dedup::KeyHash(static_cast<uint32_t>(p),
                                std::string_view(reinterpret_cast<const char*>(&v), sizeof v));
        if (h % ranges != range) continue;
        refs->push_back({h, row, simhash, nullptr, static_cast<uint32_t>(p), sizeof v});
      }
    }
  }

  // The keys of the (part, length, row, simhash, bytes) records in `bytes`.
  static void KeyRefs(const std::string& bytes, std::vector<KeyRef>* refs) {
    size_t pos = 0;
    while (pos + 24 <= bytes.size()) {
      const uint32_t part = GetU32(bytes.data() + pos), length = GetU32(bytes.data() + pos + 4);
      const char* data = bytes.data() + pos + 24;
      refs->push_back({ops::dedup::KeyHash(part, std::string_view(data, length)),
                       GetU64(bytes.data() + pos + 8), GetU64(bytes.data() + pos + 16), data, part,
                       length});
      pos += 24 + length;
    }
  }

  // The keys that may share a group with another: those whose (part, hash)
  // another key has too (a key group's keys all have its hash). Most keys
  // are alone in theirs; only the others become GroupKeys.
  static std::vector<GroupKey> CandidateKeys(const DedupConfig& config, std::vector<KeyRef> refs) {
    std::sort(refs.begin(), refs.end(), [](const KeyRef& a, const KeyRef& b) {
      return a.part != b.part ? a.part < b.part : a.hash < b.hash;
    });
    const std::vector<uint64_t>* masks =
        config.kind == ops::dedup::Kind::kSimhash
            ? &ops::dedup::SimhashKeyMasks(config.num_blocks, config.hamming_distance)
            : nullptr;
    std::vector<GroupKey> keys;
    for (size_t i = 0; i < refs.size();) {
      size_t j = i + 1;
      while (j < refs.size() && refs[j].part == refs[i].part && refs[j].hash == refs[i].hash) ++j;
      for (size_t t = i; j - i > 1 && t < j; ++t) {
        GroupKey key;
        key.part = refs[t].part;
        key.row = refs[t].row;
        key.simhash = refs[t].simhash;
        if (masks != nullptr) {
          const uint64_t v = refs[t].simhash & (*masks)[refs[t].part];
          key.bytes.assign(reinterpret_cast<const char*>(&v), sizeof v);
        } else {
          key.bytes.assign(refs[t].bytes, refs[t].length);
        }
        keys.push_back(std::move(key));
      }
      i = j;
    }
    return keys;
  }

  // Range `range` of a sign task's keys.bin, checked against its keys.idx
  // entry (itself checked against the done record).
  std::string ReadKeyRange(const DoneRecord& sign, uint64_t range) {
    return ReadIndexedSlice(*c_.job, sign, "keys.bin", "keys.idx", range,
                            "key range " + std::to_string(range));
  }

  // The keys of one range from every shard, grouped; the duplicate links
  // among them reduced to a forest.
  TaskResult GroupTask(const JobTask& task, const std::string& attempt_dir) {
    const DedupConfig& config = Config(task.stage);
    const uint64_t ranges = m_.dedup_stages[task.stage - 1].key_ranges;
    // On every thread: thread t reads the ranges of shards t, t + n, ...; its
    // references go to bucket part % n, and bucket b is grouped by thread b (a
    // key group never spans two parts).
    const size_t n = static_cast<size_t>(std::max(1, c_.threads));
    std::vector<std::string> buffers(m_.shards.size());  // what references point into
    std::vector<std::vector<std::vector<KeyRef>>> refs(n, std::vector<std::vector<KeyRef>>(n));
    RunOnThreads(n, [&](size_t t) {
      std::vector<KeyRef> read;
      for (size_t i = t; i < m_.shards.size(); i += n) {
        const DoneRecord sign = ReadDone(*c_.job, SignTaskId(task.stage, m_.shards[i].id));
        buffers[i] = ReadKeyRange(sign, task.range);
        read.clear();
        if (config.kind == ops::dedup::Kind::kSimhash) {
          SimhashRefs(config, buffers[i], task.range, ranges, &read);
        } else {
          KeyRefs(buffers[i], &read);
        }
        for (const KeyRef& r : read) refs[t][r.part % n].push_back(r);
      }
    });
    std::vector<std::vector<ops::dedup::Edge>> bucket_edges(n);
    std::vector<uint64_t> bucket_keys(n, 0);
    RunOnThreads(n, [&](size_t b) {
      std::vector<KeyRef> bucket;
      for (size_t t = 0; t < n; ++t) {
        bucket.insert(bucket.end(), refs[t][b].begin(), refs[t][b].end());
        refs[t][b] = {};
      }
      bucket_keys[b] = bucket.size();
      std::vector<GroupKey> keys = CandidateKeys(config, std::move(bucket));
      ops::dedup::EmitEdges(config, &keys, &bucket_edges[b]);
    });
    uint64_t key_count = 0;
    std::vector<ops::dedup::Edge> edges;
    for (size_t b = 0; b < n; ++b) {
      key_count += bucket_keys[b];
      edges.insert(edges.end(), bucket_edges[b].begin(), bucket_edges[b].end());
    }
    std::vector<uint64_t> rows;
    rows.reserve(edges.size() * 2);
    for (const ops::dedup::Edge& e : edges) rows.insert(rows.end(), {e.a, e.b});
    RowForest forest(std::move(rows));
    for (const ops::dedup::Edge& e : edges) forest.Union(e.a, e.b);
    const auto links = forest.NonRoots();
    std::string bytes;
    bytes.reserve(links.size() * 16);
    for (const auto& [row, root] : links) {
      PutU64(&bytes, row);
      PutU64(&bytes, root);
    }
    return OneFileResult(attempt_dir, "forest.u64", bytes, links.size(),
                         {{"task", "group"}, {"keys", key_count}, {"edges", edges.size()}});
  }

  // Every range's forest unioned: the rows that are not the first of their
  // duplicate cluster.
  TaskResult ComponentsTask(const JobTask& task, const std::string& attempt_dir) {
    // Two passes over the forests, so that only one is in memory at a time
    // beside the rows: which rows there are, then their unions.
    const uint64_t ranges = m_.dedup_stages[task.stage - 1].key_ranges;
    std::vector<DoneRecord> groups;
    std::vector<uint64_t> rows;
    for (uint64_t r = 0; r < ranges; ++r) {
      groups.push_back(ReadDone(*c_.job, GroupTaskId(task.stage, r)));
      MergeRows(ParseU64s(ReadTaskFile(*c_.job, groups.back(), "forest.u64")), &rows);
    }
    RowForest forest(std::move(rows));
    for (const DoneRecord& group : groups) {
      const std::vector<uint64_t> pairs = ParseU64s(ReadTaskFile(*c_.job, group, "forest.u64"));
      for (size_t i = 0; i + 1 < pairs.size(); i += 2) forest.Union(pairs[i], pairs[i + 1]);
    }
    const auto duplicates = forest.NonRoots();
    // One slice of the sorted rows per shard, and the index of the slices.
    std::string bytes, index;
    bytes.reserve(duplicates.size() * 8);
    size_t next = 0;
    for (size_t i = 0; i < m_.shards.size(); ++i) {
      const uint64_t end_row = first_rows_[i] + m_.shards[i].rows;
      const size_t at = bytes.size();
      uint64_t count = 0;
      for (; next < duplicates.size() && duplicates[next].first < end_row; ++next, ++count) {
        PutU64(&bytes, duplicates[next].first);
      }
      AppendIndexEntry(&index, at, std::string_view(bytes).substr(at), count);
    }
    TaskResult result = OneFileResult(attempt_dir, "duplicates.u64", bytes, duplicates.size(),
                                      {{"task", "components"}, {"duplicates", duplicates.size()}});
    TaskFile index_file(attempt_dir, "duplicates.idx", c_.job->disk());
    index_file.Append(index);
    index_file.Commit(result.stage["files"], m_.shards.size());
    return result;
  }

  // The result of a task that writes one file, `name`, holding `bytes`
  // (`rows` records): the file committed and listed in `stage`.
  TaskResult OneFileResult(const std::string& attempt_dir, const std::string& name,
                           const std::string& bytes, uint64_t rows, nlohmann::json stage) const {
    nlohmann::json files = nlohmann::json::object();
    TaskFile file(attempt_dir, name, c_.job->disk());
    file.Append(bytes);
    file.Commit(files, rows);
    TaskResult result;
    result.summary = exec::EmptySummary(*c_.plan);
    stage["files"] = std::move(files);
    result.stage = std::move(stage);
    return result;
  }

  const TaskContext& c_;
  const Manifest& m_;
  std::vector<uint64_t> first_rows_;  // global row of each shard's first row
};

}  // namespace

std::vector<JobTask> JobTasks(const Manifest& manifest) {
  std::vector<JobTask> tasks;
  size_t phase = 0;
  const size_t stages = manifest.dedup_stages.size();
  for (size_t k = 1; k <= stages; ++k) {
    for (size_t i = 0; i < manifest.shards.size(); ++i) {
      tasks.push_back({SignTaskId(k, manifest.shards[i].id), TaskKind::kSign, k, i, 0, phase});
    }
    ++phase;
    const uint64_t ranges = manifest.dedup_stages[k - 1].key_ranges;
    if (ranges == 0) continue;
    for (uint64_t r = 0; r < ranges; ++r) {
      tasks.push_back({GroupTaskId(k, r), TaskKind::kGroup, k, 0, r, phase});
    }
    ++phase;
    tasks.push_back({ComponentsTaskId(k), TaskKind::kComponents, k, 0, 0, phase});
    ++phase;
  }
  for (size_t i = 0; i < manifest.shards.size(); ++i) {
    tasks.push_back({manifest.shards[i].id, TaskKind::kShard, stages, i, 0, phase});
  }
  return tasks;
}

uint64_t DedupKeyRanges(uint64_t total_bytes, uint64_t num_shards) {
  const uint64_t by_size = (total_bytes + 256 * kMiB - 1) / (256 * kMiB);
  return std::min<uint64_t>(4096, std::max<uint64_t>(by_size, std::min<uint64_t>(4, num_shards)));
}

std::vector<DedupStageEntry> DedupStages(const exec::Plan& plan, uint64_t total_bytes,
                                         uint64_t num_shards) {
  const std::vector<size_t> dedups = exec::DedupOperators(plan);
  std::vector<DedupStageEntry> out;
  for (size_t d : dedups) {
    const bool reuses = exec::ReusedHashField(plan, dedups, d) >= 0;
    out.push_back(
        {plan.operators[d].op->name(), d, reuses ? 0 : DedupKeyRanges(total_bytes, num_shards)});
  }
  return out;
}

void CheckDedupStages(const Manifest& manifest, const exec::Plan& plan,
                      const std::string& recipe_path) {
  const std::vector<size_t> dedups = exec::DedupOperators(plan);
  bool same = dedups.size() == manifest.dedup_stages.size();
  for (size_t k = 0; same && k < dedups.size(); ++k) {
    same = manifest.dedup_stages[k].op_index == dedups[k] &&
           manifest.dedup_stages[k].op == plan.operators[dedups[k]].op->name();
  }
  if (!same) {
    throw Error(recipe_path, 0,
                "the recipe's deduplicators are not the dedup stages the manifest records",
                "the job was prepared by another djshard, or edited; prepare it again");
  }
}

namespace {

// Whether `name` is a file a stage task writes into its attempt directory.
bool IsStageFile(const std::string& name) {
  return name == "rows.jsonl" || name == "rows.u64" || name == "keys.bin" || name == "keys.idx" ||
         name == "forest.u64" || name == "duplicates.u64" || name == "duplicates.idx";
}

bool EveryShardDone(const JobDir& job, const ShardScan& scan) {
  for (const ShardEntry& s : job.manifest().shards) {
    if (!scan.done.count(s.id)) return false;
  }
  return true;
}

// Once every shard is done (*complete), the files their outputs are ranges
// of (DoneRecord::output_source), as absolute paths. An unreadable shard
// record clears *complete: what published tasks wrote is then kept.
std::set<std::string> OutputSources(const JobDir& job, bool* complete) {
  std::set<std::string> sources;
  for (const ShardEntry& shard : job.manifest().shards) {
    if (!*complete) break;
    const std::string path = job.DonePath(shard.id);
    try {
      const DoneRecord done = DoneRecord::FromJson(job.disk().Read(path), path);
      if (!done.output_source.empty()) sources.insert(job.InJob(done.output_source.path));
    } catch (const Error&) {
      *complete = false;
    }
  }
  return sources;
}

}  // namespace

StageFilesCheck VerifyStageFiles(const JobDir& job) {
  StageFilesCheck check;
  const ShardScan scan = job.Scan();
  bool complete = EveryShardDone(job, scan);
  const std::set<std::string> sources = OutputSources(job, &complete);
  for (const JobTask& task : JobTasks(job.manifest())) {
    if (task.kind == TaskKind::kShard || !scan.done.count(task.id)) continue;
    const DoneRecord done = ReadDone(job, task.id);
    ++check.tasks;
    for (const auto& [name, entry] : done.stage.at("files").items()) {
      const std::string path = AttemptDirOf(job, done) + "/" + name;
      // A file a shard's output is in is never gc's to remove.
      if (complete && !sources.count(path) && !job.disk().Stat(path)) {
        ++check.removed;
        continue;
      }
      check.bytes += StreamTaskFile(job, done, name);
      ++check.files;
    }
  }
  return check;
}

std::vector<std::string> StageGarbage(const JobDir& job) {
  std::vector<std::string> out;
  const ShardScan scan = job.Scan();
  bool complete = EveryShardDone(job, scan);
  // The files that shard outputs are ranges of stay with them.
  const std::set<std::string> sources = OutputSources(job, &complete);
  for (const JobTask& task : JobTasks(job.manifest())) {
    if (task.kind == TaskKind::kShard) continue;
    std::string published;
    if (scan.done.count(task.id)) {
      try {
        published = AttemptDirOf(job, ReadDone(job, task.id));
      } catch (const Error&) {
        continue;  // an unreadable record: leave its files for verify to report
      }
    }
    std::error_code ec;
    for (const auto& attempt : std::filesystem::directory_iterator(job.AttemptsDir(task.id), ec)) {
      const std::string dir = attempt.path().string();
      if (!complete) {
        if (dir == published) continue;
        const std::string record = JobPaths::AttemptRecordPath(dir);
        try {
          const AttemptStatus status =
              AttemptRecord::FromJson(job.disk().Read(record), record).status;
          if (status == AttemptStatus::kRunning || status == AttemptStatus::kDone) continue;
        } catch (const Error&) {
          continue;  // being written: maybe a live attempt
        }
      }
      for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
        if (IsStageFile(file.path().filename().string()) && !sources.count(file.path().string())) {
          out.push_back(file.path().string());
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void SyncTaskFiles(const std::string& attempt_dir, const nlohmann::json& stage) {
  const auto files = stage.find("files");
  if (files == stage.end()) return;
  for (const auto& [name, record] : files->items()) {
    const std::string path = attempt_dir + "/" + name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) ThrowSystemError(path, "cannot open to fsync");
    const int rc = ::fsync(fd);
    const int saved = errno;
    ::close(fd);
    if (rc != 0) {
      errno = saved;
      ThrowSystemError(path, "cannot fsync");
    }
  }
}

TaskResult RunTask(const TaskContext& context, const JobTask& task, const std::string& attempt_dir,
                   io::OutputStream& output, io::OutputStream& errors) {
  TaskResult result = StageJob(context).Run(task, attempt_dir, output, errors);
  if (task.kind != TaskKind::kShard) CrashPoint("dedup_task_written");
  return result;
}

}  // namespace djshard::store
