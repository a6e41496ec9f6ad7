#include "djshard/store/merge.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/checksum.h"
#include "djshard/io/fd.h"
#include "djshard/io/input.h"
#include "djshard/io/json_text.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "djshard/store/dedup_stage.h"
#include "djshard/store/job_summary.h"
#include "djshard/store/records.h"
#include "djshard/store/shard_source.h"
#include "djshard/store/status.h"
#include "src/store/merge_outputs.h"

namespace djshard::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Path `rel`, named by the record at `record` as `field`, proven to stay
// inside the job directory; absolute. `hint`: how to repair a record that
// names a path outside it.
std::string InsideJob(const JobDir& job, const std::string& rel_path, const std::string& record,
                      const std::string& field, const std::string& hint) {
  const fs::path rel = fs::path(rel_path).lexically_normal();
  if (rel_path.empty() || rel.is_absolute() || *rel.begin() == "..") {
    throw Error(record, 0, field + " '" + rel_path + "' leaves the job directory", hint);
  }
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(job.InJob(rel.string()), ec);
  const fs::path real_job = fs::weakly_canonical(job.dir(), ec);
  const std::string r = real.string(), j = real_job.string() + "/";
  if (r.compare(0, j.size(), j) != 0) {
    throw Error(record, 0, field + " '" + rel_path + "' resolves outside the job",
                "a symbolic link points out of the job directory");
  }
  return job.InJob(rel.string());
}

}  // namespace

std::string OutputInsideJob(const JobDir& job, const DoneRecord& done, const std::string& record) {
  return InsideJob(job, done.output_path, record, "output_path",
                   "retry the shard; done records name files inside the job");
}

LinesRead ReadOutputLines(const std::string& path, io::ChecksumKind kind, bool deep,
                          const std::function<void(std::string_view)>& each) {
  return ReadOutputLines(io::OpenInput(path), path, kind, deep, each);
}

LinesRead ReadOutputLines(std::unique_ptr<io::ByteSource> source, const std::string& path,
                          io::ChecksumKind kind, bool deep,
                          const std::function<void(std::string_view)>& each) {
  io::ChecksumHasher hash(kind);
  LinesRead read;
  if (deep) {
    io::LineReader reader(std::move(source), path);
    io::JsonLineParser parser;
    std::string_view line;
    while (reader.Next(&line)) {
      parser.ParseObject(line, path, reader.line_number());
      // The view is followed by its '\n' in the reader's buffer, except on a
      // last line without one.
      const bool has_newline = reader.bytes_consumed() == read.bytes + line.size() + 1;
      const std::string_view bytes(line.data(), line.size() + (has_newline ? 1 : 0));
      hash.Update(bytes);
      if (each) each(bytes);
      read.bytes += bytes.size();
      ++read.rows;
    }
  } else {
    // One buffer a thread for every output it reads: a fresh one would fault
    // its pages in again for each shard.
    thread_local std::string buf;
    buf.resize(4 << 20);
    char last = '\n';
    for (size_t n; (n = source->Read(buf.data(), buf.size())) > 0;) {
      const std::string_view piece(buf.data(), n);
      hash.Update(piece);
      if (each) each(piece);
      read.bytes += n;
      read.rows += CountNewlines(piece);
      last = piece.back();
    }
    if (last != '\n') ++read.rows;  // a last line without its '\n'
  }
  read.checksum = hash.Finish();
  return read;
}

void ReadShardOutput(const JobDir& job, const DoneRecord& done, const std::string& record_path,
                     bool deep, const std::function<void(std::string_view)>& each) {
  std::string path, shown;  // shown: how --deep's errors name the lines
  std::unique_ptr<io::ByteSource> source;
  if (done.output_source.empty()) {
    path = shown = OutputInsideJob(job, done, record_path);
    source = io::OpenInput(path);
  } else {
    path = InsideJob(job, done.output_source.path, record_path, "output_source",
                     "the record was edited; prepare the job again");
    shown = path + " (the kept lines of " + done.shard_id + ")";
    source = io::OpenRanges(path, done.output_source.ranges, ChangedOutputHint(done, record_path));
  }
  const LinesRead read = ReadOutputLines(std::move(source), shown, done.checksum.kind, deep, each);
  CheckAgainstRecord(path, read, done, record_path);
}

std::string ChangedOutputHint(const DoneRecord& done, const std::string& record_path) {
  // Output in an earlier task's file: retrying the shard would read it again.
  if (!done.output_source.empty()) {
    return "the file was changed after it was published; `djshard retry` cannot repair this: "
           "prepare the job again";
  }
  return "the file was changed after it was published; run 'djshard retry --shard-id " +
         done.shard_id + "' after removing " + record_path;
}

void CheckAgainstRecord(const std::string& path, const LinesRead& read, const DoneRecord& done,
                        const std::string& record_path) {
  if (read.rows == done.rows && read.bytes == done.size_bytes && read.checksum == done.checksum) {
    return;
  }
  throw Error(path, 0,
              "shard output does not match its done record (rows " + std::to_string(read.rows) +
                  " vs " + std::to_string(done.rows) + ", bytes " + std::to_string(read.bytes) +
                  " vs " + std::to_string(done.size_bytes) + ", " + read.checksum.Short() + " vs " +
                  done.checksum.hex.substr(0, 12) + ")",
              ChangedOutputHint(done, record_path));
}

void Count(const DoneRecord& done, VerifiedOutputs& total) {
  total.rows += done.rows;
  total.bytes += done.size_bytes;
  total.hosts.insert(done.hostname);
  total.shards_by_model_devices[done.model_devices].push_back(done.shard_id);
}

DoneRecord ReadShardDone(const JobDir& job, const ShardEntry& shard) {
  const std::string record_path = job.DonePath(shard.id);
  DoneRecord done = DoneRecord::FromJson(job.disk().Read(record_path), record_path);
  if (done.shard_id != shard.id) {
    throw Error(record_path, 0, "done record names shard '" + done.shard_id + "'",
                "the record was copied from another shard; retry this one");
  }
  return done;
}

namespace {

// Hashes the concatenated content and hands it to a sink on a second thread,
// so that validating the shard outputs and writing the merged file overlap.
class ContentPipe {
 public:
  explicit ContentPipe(const std::function<void(std::string_view)>& sink)
      : sink_(sink), thread_([this] { Drain(); }) {}
  ~ContentPipe() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void Append(std::string_view bytes) {
    chunk_.append(bytes);
    if (chunk_.size() >= kChunk) Push();
  }

  // Flushes, waits for the sink, and returns the content's sha256.
  std::string Finish() {
    Push();
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (failure_) std::rethrow_exception(failure_);
    return hash_.HexDigest();
  }

 private:
  static constexpr size_t kChunk = 1 << 20;
  static constexpr size_t kSpares = 4;

  void Push() {
    if (chunk_.empty()) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.size() < 4 || failure_; });
    queue_.push_back(std::move(chunk_));
    chunk_.clear();
    if (!spare_.empty()) {
      chunk_ = std::move(spare_.back());
      spare_.pop_back();
    }
    cv_.notify_all();
  }

  void Drain() {
    for (;;) {
      std::string chunk;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || closed_; });
        if (queue_.empty()) return;
        chunk = std::move(queue_.front());
        queue_.pop_front();
        cv_.notify_all();
      }
      try {
        hash_.Update(chunk);
        sink_(chunk);
        // Its memory serves again: a new string's pages would fault in again.
        chunk.clear();
        std::lock_guard<std::mutex> lock(mu_);
        if (spare_.size() < kSpares) spare_.push_back(std::move(chunk));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        failure_ = std::current_exception();
        queue_.clear();
        cv_.notify_all();
        return;
      }
    }
  }

  const std::function<void(std::string_view)>& sink_;
  io::Sha256 hash_;
  std::string chunk_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::vector<std::string> spare_;  // emptied chunks, their memory kept
  bool closed_ = false;
  std::exception_ptr failure_;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace

void MergeErrorFiles(const JobDir& job, const std::string& path, io::Disk& disk) {
  std::unique_ptr<io::OutputStream> out;
  std::vector<char> buf(1 << 20);
  for (const ShardEntry& shard : job.manifest().shards) {
    const std::string record_path = job.DonePath(shard.id);
    const DoneRecord done = DoneRecord::FromJson(job.disk().Read(record_path), record_path);
    const std::string errors =
        (fs::path(OutputInsideJob(job, done, record_path)).parent_path() / "errors.jsonl").string();
    std::error_code ec;
    if (!fs::exists(errors, ec) || fs::file_size(errors, ec) == 0) continue;
    if (!out) out = std::make_unique<io::OutputStream>(path, /*overwrite=*/true, disk);
    const std::unique_ptr<io::ByteSource> source = io::OpenInput(errors);
    for (size_t n; (n = source->Read(buf.data(), buf.size())) > 0;) {
      out->Append(std::string_view(buf.data(), n));
    }
  }
  if (out) out->Commit();
}

VerifiedOutputs StreamVerifiedOutputs(const JobDir& job,
                                      const std::function<void(std::string_view)>& sink,
                                      bool deep) {
  VerifiedOutputs total;
  ContentPipe content(sink);
  for (const ShardEntry& shard : job.manifest().shards) {
    const std::string record_path = job.DonePath(shard.id);
    const DoneRecord done = ReadShardDone(job, shard);
    ReadShardOutput(job, done, record_path, deep,
                    [&](std::string_view bytes) { content.Append(bytes); });
    Count(done, total);
    CrashPoint("merge_shard_copied");
  }
  total.sha256 = content.Finish();
  return total;
}

MergeOutcome OutcomeOf(const JobDir& job, const std::string& output, const VerifiedOutputs& v,
                       OutputLayout layout) {
  MergeOutcome o;
  o.output_path = output;
  o.rows = v.rows;
  o.bytes = v.bytes;
  o.sha256 = v.sha256;
  o.num_shards = job.manifest().shards.size();
  o.nodes = v.hosts.size();
  o.model_devices_warning = MixedModelDevicesWarning(v.shards_by_model_devices);
  o.layout = layout;
  return o;
}

namespace {

constexpr char kPartsManifest[] = "_manifest.json";

std::string PartName(const ShardEntry& shard) { return shard.id + ".jsonl"; }

}  // namespace

std::string CheckedOutput(const JobDir& job, const MergeRequest& request, OutputLayout layout) {
  const std::string fallback = job.DefaultMergedOutput(layout);
  fs::path normal =
      fs::absolute(request.output.empty() ? fallback : request.output).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();  // "out/" is "out"
  const std::string output = normal.string();
  std::error_code ec;
  // Through symbolic links too: the output must not replace a file the job's
  // verification relies on.
  const std::string real_output = fs::weakly_canonical(output, ec).string();
  const std::string real_job = fs::weakly_canonical(job.dir(), ec).string();
  if (job.IsJobFile(output) || JobPaths(real_job).IsJobFile(real_output) ||
      real_output == real_job) {
    throw Error(output, 0, "the output would replace a file of the job itself",
                "choose an --output outside the job's shards/, attempts/ and state/");
  }
  const fs::file_status existing = fs::symlink_status(output, ec);
  if (!request.overwrite && fs::exists(existing)) {
    throw Error(output, 0, "output already exists", "pass --overwrite to replace it");
  }
  // --overwrite replaces a merged output, never another directory.
  if (fs::is_directory(existing) &&
      (layout != OutputLayout::kParts || !fs::exists(output + "/" + kPartsManifest, ec))) {
    throw Error(output, 0, "output is a directory that is not a parts output of a merge",
                "choose another --output: --overwrite replaces only a merged file or parts");
  }
  fs::create_directories(fs::path(output).parent_path(), ec);
  return output;
}

namespace {

// Places one shard's published output into the staged parts directory: a
// hard link when the filesystem allows it (no data moves; its size is
// checked against the record), else a copy checked as it is made (always for
// an output in ranges of another file). Returns its _manifest.json entry.
json PlacePart(const JobDir& job, const ShardEntry& shard, const std::string& staging,
               io::Disk& disk, VerifiedOutputs& total) {
  const std::string record_path = job.DonePath(shard.id);
  const DoneRecord done = ReadShardDone(job, shard);
  const std::string output = OutputInsideJob(job, done, record_path);
  const std::string part = staging + "/" + PartName(shard);
  std::string sha256 = done.output_sha256;
  const bool linked = done.output_source.empty() && ::link(output.c_str(), part.c_str()) == 0;
  if (linked) {
    struct stat st {};
    if (::stat(part.c_str(), &st) != 0) ThrowSystemError(part, "cannot stat");
    if (static_cast<uint64_t>(st.st_size) != done.size_bytes) {
      throw Error(output, 0,
                  "shard output has " + std::to_string(st.st_size) + " bytes, its done record " +
                      std::to_string(done.size_bytes),
                  ChangedOutputHint(done, record_path));
    }
    if (sha256.empty()) {
      // A job not prepared for the parts layout: its SHA-256 costs a read.
      io::Sha256 hash;
      const LinesRead read = ReadOutputLines(part, done.checksum.kind, false,
                                             [&](std::string_view b) { hash.Update(b); });
      CheckAgainstRecord(output, read, done, record_path);
      sha256 = hash.HexDigest();
    }
  } else if (!done.output_source.empty() || errno == EXDEV || errno == EPERM || errno == EMLINK ||
             errno == ENOTSUP || errno == EOPNOTSUPP || errno == ENOSYS) {
    io::OutputStream copy(part, /*overwrite=*/false, disk);
    copy.HashContent(/*sha256=*/true);
    ReadShardOutput(job, done, record_path, false, [&](std::string_view b) { copy.Append(b); });
    copy.Commit();
    sha256 = copy.ContentSha256();
  } else {
    ThrowSystemError(part, "cannot link " + output + " to");
  }
  Count(done, total);
  CrashPoint("merge_shard_copied");
  json entry = {{"file", PartName(shard)},
                {"shard_id", shard.id},
                {"rows", done.rows},
                {"bytes", done.size_bytes},
                {"sha256", sha256}};
  done.checksum.ToJson(entry);
  return entry;
}

// Renames the staged directory to `output`. An old output is swapped with it
// in one rename (RENAME_EXCHANGE) and removed afterwards; where the
// filesystem cannot swap, the old one is moved aside first and moved back if
// the second rename fails, so that a failure leaves it in place.
void PublishStaged(io::StagingDir& staging, const std::string& output, io::Disk& disk) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(output, ec))) {
    disk.Rename(staging.path(), output);
  } else if (::renameat2(AT_FDCWD, staging.path().c_str(), AT_FDCWD, output.c_str(),
                         RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
      ThrowSystemError(output, "cannot replace with " + staging.path());
    }
    const std::string old = output + ".tmp.old." + RandomHex(12);
    disk.Rename(output, old);
    try {
      disk.Rename(staging.path(), output);
    } catch (const Error&) {
      disk.Rename(old, output);
      throw;
    }
    io::RemoveTreeQuietly(old);
  }
  // After a swap the staged path holds the old output, which goes with it.
  if (!fs::exists(fs::symlink_status(staging.path(), ec))) staging.MarkPublished();
  disk.SyncDir(fs::path(output).parent_path().string());
}

// The parts layout: a staged directory of parts and _manifest.json, published
// by PublishStaged.
VerifiedOutputs WriteParts(const JobDir& job, const std::string& output, io::Disk& disk) {
  io::StagingDir staging(output + ".tmp." + RandomHex(12));
  if (::mkdir(staging.path().c_str(), 0755) != 0) ThrowSystemError(staging.path(), "cannot create");
  VerifiedOutputs v;
  json parts = json::array();
  for (const ShardEntry& shard : job.manifest().shards) {
    parts.push_back(PlacePart(job, shard, staging.path(), disk, v));
  }
  MergeErrorFiles(job, staging.path() + "/_errors.jsonl", disk);
  const json manifest = {{"job_id", job.manifest().job_id},
                         {"layout", "parts"},
                         {"merged_at", FormatUtcIso8601(NowNanos())},
                         {"rows", v.rows},
                         {"bytes", v.bytes},
                         {"num_parts", parts.size()},
                         {"parts", parts}};
  disk.WriteAtomic(staging.path() + "/" + kPartsManifest, manifest.dump(2) + "\n");
  disk.SyncDir(staging.path());
  PublishStaged(staging, output, disk);
  return v;
}

// Re-reads every part of a parts-layout output: its _manifest.json must list
// the job's shards in order, and each part must match its shard's done record
// (rows, bytes, xxh3_128) and its listed SHA-256. `deep` also parses each line.
VerifiedOutputs VerifyParts(const JobDir& job, const std::string& dir, bool deep) {
  const std::string manifest_path = dir + "/" + kPartsManifest;
  struct Listed {
    std::string file, shard_id, sha256;
    uint64_t rows, bytes;
    io::Checksum checksum;
  };
  std::vector<Listed> listed;
  try {
    const json manifest = json::parse(io::ReadFile(manifest_path));
    for (const json& p : manifest.at("parts")) {
      listed.push_back({p.at("file").get<std::string>(), p.at("shard_id").get<std::string>(),
                        p.at("sha256").get<std::string>(), p.at("rows").get<uint64_t>(),
                        p.at("bytes").get<uint64_t>(), io::Checksum::FromJson(p)});
    }
  } catch (const json::exception& e) {
    throw Error(manifest_path, 0, std::string("parts manifest is not valid: ") + e.what(),
                "merge again with --overwrite");
  }
  const std::vector<ShardEntry>& shards = job.manifest().shards;
  if (listed.size() != shards.size()) {
    throw Error(manifest_path, 0,
                "lists " + std::to_string(listed.size()) + " part(s), the job has " +
                    std::to_string(shards.size()) + " shards",
                "merge again with --overwrite");
  }
  VerifiedOutputs v;
  for (size_t i = 0; i < shards.size(); ++i) {
    const ShardEntry& shard = shards[i];
    const Listed& entry = listed[i];
    const DoneRecord done = ReadShardDone(job, shard);
    if (entry.shard_id != shard.id || entry.file != PartName(shard) || entry.rows != done.rows ||
        entry.bytes != done.size_bytes || entry.checksum != done.checksum) {
      throw Error(
          manifest_path, 0,
          "part " + std::to_string(i) + " is not " + PartName(shard) + " as its done record has it",
          "merge again with --overwrite");
    }
    const std::string part = dir + "/" + PartName(shard);
    io::Sha256 hash;
    const LinesRead read = ReadOutputLines(part, done.checksum.kind, deep,
                                           [&](std::string_view b) { hash.Update(b); });
    CheckAgainstRecord(part, read, done, job.DonePath(shard.id));
    if (hash.HexDigest() != entry.sha256) {
      throw Error(part, 0, "part differs from the sha256 " + std::string(kPartsManifest) + " lists",
                  "merge again with --overwrite");
    }
    Count(done, v);
  }
  return v;
}

}  // namespace

MergeOutcome Merge(const JobDir& job, const MergeRequest& request, io::Disk& disk) {
  RequireComplete(job, "merge");
  const OutputLayout layout = request.layout.value_or(job.manifest().output_layout);
  const std::string output = CheckedOutput(job, request, layout);
  VerifiedOutputs v;
  if (layout == OutputLayout::kParts) {
    v = WriteParts(job, output, disk);
  } else {
    io::OutputStream writer(output, request.overwrite, disk);
    v = StreamVerifiedOutputs(
        job, [&](std::string_view bytes) { writer.Append(bytes); }, /*deep=*/false);
    writer.Commit();
  }
  CrashPoint("merge_committed");
  // Records the shards' operators dropped, with why (SPEC-lineage §5).
  if (layout == OutputLayout::kFile) MergeErrorFiles(job, io::ErrorsFileOf(output), disk);

  const MergeOutcome outcome = OutcomeOf(job, output, v, layout);
  json merge = {{"job_id", job.manifest().job_id},
                {"merged_at", FormatUtcIso8601(NowNanos())},
                {"output_path", output},
                {"layout", layout == OutputLayout::kParts ? "parts" : "file"},
                {"rows", v.rows},
                {"num_shards", outcome.num_shards}};
  if (layout == OutputLayout::kFile) merge["sha256"] = v.sha256;
  RecordMerge(job, merge, disk);
  return outcome;
}

void RecordMerge(const JobDir& job, const nlohmann::json& merge, io::Disk& disk) {
  disk.WriteAtomic(job.MergeRecordPath(), merge.dump(2) + "\n");
  try {
    WriteJobSummary(job, SummaryUpdate{SummaryStatus::kCompleted, {}, false, ""});
  } catch (const Error&) {
    // The summary is for people; the merge is done.
  }
}

namespace {
// Re-reads each part of a merge by copy tasks at its offset: its SHA-256 and
// the tree hash must be what merge.json records.
void CheckMergedParts(const std::string& output, const nlohmann::json& merge_record,
                      const std::string& merge_path, const MergeOutcome& expected);
}  // namespace

MergeOutcome Verify(const JobDir& job, const VerifyRequest& request) {
  RequireComplete(job, "verify");
  std::string output = request.output;
  std::optional<json> merge_record;
  const std::string merge_path = job.MergeRecordPath();
  std::error_code ec;
  if (fs::exists(merge_path, ec)) {
    try {
      merge_record = json::parse(job.disk().Read(merge_path));
    } catch (const json::exception& e) {
      throw Error(merge_path, 0, std::string("merge.json is not valid: ") + e.what(),
                  "merge again with --overwrite");
    }
  }
  if (output.empty()) {
    const std::string fallback = job.DefaultMergedOutput(job.manifest().output_layout);
    output = merge_record ? merge_record->value("output_path", fallback) : fallback;
  }
  output = fs::absolute(output).lexically_normal().string();

  const double started = MonotonicSeconds();
  const OutputLayout layout =
      fs::is_directory(output, ec) ? OutputLayout::kParts : OutputLayout::kFile;
  const VerifiedOutputs v = layout == OutputLayout::kParts
                                ? VerifyParts(job, output, request.deep)
                                : StreamVerifiedOutputs(
                                      job, [](std::string_view) {}, request.deep);
  if (v.hosts.size() < request.expect_nodes) {
    throw Error(job.dir(), 0,
                "shards were completed by " + std::to_string(v.hosts.size()) +
                    " distinct node(s), expected at least " + std::to_string(request.expect_nodes),
                "some nodes did not take part; check their logs");
  }
  MergeOutcome expected = OutcomeOf(job, output, v, layout);
  // A merge by copy tasks records each part's SHA-256 and their tree hash,
  // and the whole file's only when asked: one read checks them all.
  const bool by_parts = layout == OutputLayout::kFile && merge_record &&
                        merge_record->value("output_path", "") == output &&
                        merge_record->contains("parts");
  if (by_parts) {
    CheckMergedParts(output, *merge_record, merge_path, expected);
  } else if (layout == OutputLayout::kFile) {
    CheckMergedOutput(expected);
  }
  CheckInputBlocksFile(job, job.manifest());
  const StageFilesCheck stage = VerifyStageFiles(job);
  expected.stage_files = stage.files;
  expected.stage_files_removed = stage.removed;
  expected.seconds = MonotonicSeconds() - started;
  if (layout == OutputLayout::kFile && merge_record &&
      merge_record->value("output_path", "") == output) {
    if (merge_record->contains("sha256") && merge_record->value("sha256", "") != v.sha256) {
      throw Error(merge_path, 0, "merge.json records another sha256 for " + output,
                  "merge again with --overwrite");
    }
  }
  return expected;
}

namespace {
void CheckMergedParts(const std::string& output, const nlohmann::json& merge_record,
                      const std::string& merge_path, const MergeOutcome& expected) {
  const auto differs = [&](const std::string& what) {
    return Error(output, 0, "merged output differs from " + what + " merge.json records",
                 "merge again with --overwrite");
  };
  try {
    const io::ScopedFd fd(::open(output.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) ThrowSystemError(output, "cannot open");
    io::Sha256 tree, whole;
    uint64_t rows = 0, total = 0;
    std::string buf(4 << 20, '\0');
    for (const json& part : merge_record.at("parts")) {
      io::Sha256 sha256;
      const uint64_t offset = part.at("offset").get<uint64_t>();
      const uint64_t bytes = part.at("bytes").get<uint64_t>();
      if (offset != total) throw differs("the offsets");
      total += bytes;
      for (uint64_t done = 0; done < bytes;) {
        const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), bytes - done));
        const ssize_t n = ::pread(fd.get(), buf.data(), want, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) ThrowSystemError(output, "cannot read");
        if (n == 0) throw differs("the size");
        const std::string_view piece(buf.data(), static_cast<size_t>(n));
        sha256.Update(piece);
        whole.Update(piece);
        rows += CountNewlines(piece);
        done += static_cast<uint64_t>(n);
      }
      const std::string digest = sha256.HexDigest();
      if (digest != part.at("sha256").get<std::string>()) {
        throw differs("the sha256 of part " + part.at("shard_id").get<std::string>() + " that");
      }
      tree.Update(digest + "\n");
    }
    if (tree.HexDigest() != merge_record.at("tree_sha256").get<std::string>()) {
      throw differs("the tree_sha256");
    }
    // The parts hold exactly the shard outputs: nothing after them.
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) ThrowSystemError(output, "cannot stat");
    if (static_cast<uint64_t>(st.st_size) != total) {
      throw Error(output, 0,
                  "merged output has " + std::to_string(st.st_size) + " bytes, its parts " +
                      std::to_string(total),
                  "merge again with --overwrite");
    }
    if (total != expected.bytes || rows != expected.rows || whole.HexDigest() != expected.sha256) {
      throw Error(output, 0,
                  "merged output differs from the shard outputs (" + std::to_string(rows) +
                      " rows vs " + std::to_string(expected.rows) + ")",
                  "merge again with --overwrite");
    }
  } catch (const json::exception& e) {
    throw Error(merge_path, 0, std::string("merge.json parts are not valid: ") + e.what(),
                "merge again with --overwrite");
  }
}
}  // namespace

void CheckMergedOutput(const MergeOutcome& expected) {
  const std::string& output = expected.output_path;
  std::error_code ec;
  if (!fs::exists(output, ec)) {
    throw Error(output, 0, "merged output does not exist", "run 'djshard merge' first");
  }
  // The content (decompressed for a .gz or .zst output) must be the verified
  // shard outputs byte for byte: the same rows, bytes and sha256. Equal bytes
  // are equally valid JSON, so the lines need no second parse.
  const LinesRead read = ReadOutputLines(output, io::ChecksumKind::kSha256, false, {});
  if (read.rows != expected.rows || read.bytes != expected.bytes ||
      read.checksum.hex != expected.sha256) {
    throw Error(output, 0,
                "merged output differs from the shard outputs (" + std::to_string(read.rows) +
                    " rows vs " + std::to_string(expected.rows) + ")",
                "merge again with --overwrite");
  }
}

std::string PassLine(const MergeOutcome& o) {
  return "PASS: " + std::to_string(o.num_shards) + " shards were completed by " +
         std::to_string(o.nodes) + " node(s); merged " + std::to_string(o.rows) + " rows into " +
         o.output_path +
         (o.layout == OutputLayout::kParts ? " as " + std::to_string(o.num_shards) + " parts"
                                           : std::string());
}

}  // namespace djshard::store
