#include "src/job/lineage_journal.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/checksum.h"
#include "djshard/io/input.h"
#include "djshard/io/json_text.h"
#include "djshard/io/output.h"
#include "djshard/job/checkpoint.h"
#include "djshard/job/job_files.h"

namespace djshard::job {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* StateName(exec::JournalState s) {
  switch (s) {
    case exec::JournalState::kPresent:
      return "PRESENT";
    case exec::JournalState::kDropped:
      return "DROPPED";
    case exec::JournalState::kFailed:
      return "FAILED";
  }
  return "PRESENT";
}

std::string SegmentName(uint64_t segment) {
  std::string n = std::to_string(segment);
  if (n.size() < 5) n.insert(0, 5 - n.size(), '0');
  return "seg" + n;
}

// One journal line: {"row", "state", "record", "error", "child_errors"}, the
// record and the errors-file lines embedded as they are (raw bytes kept).
// The parent-level error is the last errors line of a FAILED parent; lines
// before it are its dropped children's.
std::string JournalLine(const exec::JournaledParent& p) {
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < p.errors.size();) {
    const size_t nl = p.errors.find('\n', at);
    const size_t end = nl == std::string::npos ? p.errors.size() : nl;
    if (end > at) lines.push_back(std::string_view(p.errors).substr(at, end - at));
    at = end + 1;
  }
  std::string_view error;
  if (p.state == exec::JournalState::kFailed && !lines.empty()) {
    error = lines.back();
    lines.pop_back();
  }
  std::string out =
      "{\"row\":" + std::to_string(p.row) + ",\"state\":\"" + StateName(p.state) + "\",\"record\":";
  out += p.state == exec::JournalState::kPresent ? std::string_view(p.record) : "null";
  out += ",\"error\":";
  out += error.empty() ? std::string_view("null") : error;
  out += ",\"child_errors\":[";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += ',';
    out += lines[i];
  }
  out += "]}\n";
  return out;
}

// A journal line back as a parent; false when it is not one.
bool ParseJournalLine(std::string_view line, exec::JournaledParent* p) {
  if (!json::accept(line)) return false;
  std::string_view row, state, record, error, child_errors;
  for (const io::JsonMember& m : io::SplitObject(line)) {
    if (m.key_literal == "\"row\"") row = m.value;
    if (m.key_literal == "\"state\"") state = m.value;
    if (m.key_literal == "\"record\"") record = m.value;
    if (m.key_literal == "\"error\"") error = m.value;
    if (m.key_literal == "\"child_errors\"") child_errors = m.value;
  }
  if (row.empty() || row.size() > 19 ||
      row.find_first_not_of("0123456789") != std::string_view::npos)
    return false;
  p->row = std::stoull(std::string(row));
  if (state == "\"PRESENT\"") {
    p->state = exec::JournalState::kPresent;
  } else if (state == "\"DROPPED\"") {
    p->state = exec::JournalState::kDropped;
  } else if (state == "\"FAILED\"") {
    p->state = exec::JournalState::kFailed;
  } else {
    return false;
  }
  if (p->state == exec::JournalState::kPresent && (record.empty() || record.front() != '{'))
    return false;
  p->record = p->state == exec::JournalState::kPresent ? std::string(record) : std::string();
  p->errors.clear();
  if (!child_errors.empty() && child_errors.front() == '[') {
    for (const std::string_view e : io::SplitArray(child_errors)) {
      p->errors.append(e);
      p->errors.push_back('\n');
    }
  }
  if (!error.empty() && error != "null") {
    p->errors.append(error);
    p->errors.push_back('\n');
  }
  return true;
}

// Commit records of one journal: (segment number, path).
std::vector<std::pair<uint64_t, std::string>> SegmentRecords(const std::string& checkpoints,
                                                             const std::string& stem) {
  std::vector<std::pair<uint64_t, std::string>> out;
  const std::string prefix = stem + ".seg";
  const std::string suffix = ".commit.json";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpoints, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.emplace_back(std::stoull(digits), e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

GatherJournal::GatherJournal(JournalScope scope, io::Disk& disk, uint64_t first_segment,
                             uint64_t flush_parents, double flush_secs,
                             std::function<bool(const std::string&, const std::string&)> publish,
                             std::function<void(const json&)> committed)
    : scope_(std::move(scope)),
      disk_(disk),
      flush_parents_(std::max<uint64_t>(1, flush_parents)),
      flush_secs_(flush_secs),
      publish_(std::move(publish)),
      committed_(std::move(committed)),
      next_segment_(first_segment),
      last_seal_(MonotonicSeconds()) {
  thread_ = std::thread([this] { CommitLoop(); });
}

GatherJournal::~GatherJournal() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void GatherJournal::Add(std::vector<exec::JournaledParent>& parents) {
  std::unique_lock<std::mutex> lock(mu_);
  if (failure_) std::rethrow_exception(failure_);
  for (const exec::JournaledParent& p : parents) pending_.emplace_back(p.row, JournalLine(p));
  // Segments end where an Add ends (a group of parents that went through the
  // region together), so that a resumed run that skips journaled parents
  // rebuilds every other group, and its model calls, as this run did.
  if (pending_.size() >= flush_parents_ ||
      (!pending_.empty() && MonotonicSeconds() - last_seal_ >= flush_secs_)) {
    SealLocked(pending_.size());
  }
  cv_.notify_all();  // the commit thread times the seal of what is pending
  // Back-pressure: the region waits while the disk is behind.
  cv_.wait(lock, [this] { return queue_.size() <= kMaxQueued || failure_; });
  if (failure_) std::rethrow_exception(failure_);
}

void GatherJournal::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return (queue_.empty() && !committing_) || failure_; });
  if (failure_) std::rethrow_exception(failure_);
}

void GatherJournal::SealLocked(size_t count) {
  last_seal_ = MonotonicSeconds();
  Sealed sealed;
  sealed.segment = next_segment_++;
  sealed.rows = json::array();
  for (size_t i = 0; i < count; ++i) {
    sealed.lines += pending_[i].second;
    sealed.rows.push_back(pending_[i].first);
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(count));
  queue_.push_back(std::move(sealed));
  cv_.notify_all();
}

void GatherJournal::CommitLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Parents that wait flush_secs are sealed here, even while the region
    // is busy with a long group and adds nothing.
    const auto ready = [this] { return stop_ || (!queue_.empty() && !failure_); };
    if (pending_.empty() || failure_) {
      cv_.wait(lock, [&] { return ready() || (!pending_.empty() && !failure_); });
    } else {
      const auto due = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(
                               std::max(0.0, last_seal_ + flush_secs_ - MonotonicSeconds())));
      cv_.wait_until(lock, due, ready);
    }
    if (stop_) return;
    if (queue_.empty()) {
      if (!pending_.empty() && !failure_ && MonotonicSeconds() - last_seal_ >= flush_secs_) {
        SealLocked(pending_.size());
      } else {
        continue;
      }
    }
    Sealed sealed = std::move(queue_.front());
    queue_.pop_front();
    committing_ = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      Commit(sealed);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    committing_ = false;
    if (error && !failure_) failure_ = error;
    cv_.notify_all();
  }
}

void GatherJournal::Commit(const Sealed& sealed) {
  const uint64_t segment = sealed.segment;
  std::string stored;
  io::AppendZstdFrame(sealed.lines, &stored);
  const std::string rel =
      scope_.stem + "." + scope_.token + "." + SegmentName(segment) + ".jsonl.zst";
  const std::string data = scope_.checkpoints + "/" + rel;
  // Data first (temp, fsync, rename), then the commit record: only a commit
  // record makes a segment exist (SPEC-checkpoints §5).
  disk_.WriteAtomic(data, stored);
  io::Xxh3 hash;
  hash.Update(stored);
  const io::Checksum sum = io::Checksum::Xxh3(hash.HexDigest());
  const uint64_t count = sealed.rows.size();
  json record = {{"schema_version", 1},
                 {"job_id", scope_.job_id},
                 {"shard_id", scope_.shard_id},
                 {"region", scope_.region},
                 {"partition_id", scope_.partition},
                 {"gather_idx", scope_.gather_idx},
                 {"segment", segment},
                 {"rows", sealed.rows},
                 {"count", count},
                 {"data_path", rel},
                 {"compression", "zstd"},
                 {"size_bytes", stored.size()},
                 {"region_ops_sha256", scope_.region_ops_sha256},
                 {"attempt_token", scope_.token},
                 {"created_at", FormatUtcIso8601Micros(NowNanos())},
                 {"hostname", HostName()},
                 {"pid", ::getpid()},
                 {"engine", {{"version", scope_.engine_version}}}};
  sum.ToJson(record);
  scope_.input_tap.ToJson(record, "input_tap_");
  const std::string commit =
      scope_.checkpoints + "/" + scope_.stem + "." + SegmentName(segment) + ".commit.json";
  bool linked = false;
  try {
    linked = publish_(commit, record.dump(2) + "\n");
  } catch (...) {
    // Garbage unless the link happened before the failure (a directory
    // fsync, say): then the commit names it.
    json standing;
    try {
      standing = json::parse(io::ReadFile(commit), nullptr, false);
    } catch (const Error&) {
      // no commit record
    }
    if (!standing.is_object() || standing.value("data_path", json()) != json(rel)) {
      disk_.Unlink(data);
    }
    throw;
  }
  if (!linked) {
    // Another attempt committed this segment number: its parents stand, ours
    // are in this run's output all the same.
    disk_.Unlink(data);
    return;
  }
  json fields = {{"partition_id", scope_.partition},
                 {"op_idx", scope_.gather_idx},
                 {"checkpoint_path", rel},
                 {"output_rows", count},
                 {"metadata", {{"region", scope_.region}, {"segment", segment}}}};
  AddCheckpointChecksum(fields, record);
  committed_(fields);
  CrashPoint("lineage_segment_committed");
}

namespace {

// Every field of a segment commit record that LoadJournal reads, with its
// type: an edited record is rejected, never the resume.
bool IsTypedSegmentRecord(const json& record) {
  return record.is_object() && record.contains("rows") && record["rows"].is_array() &&
         record.value("data_path", json()).is_string() &&
         record.value("size_bytes", json()).is_number_unsigned() &&
         record.value("count", json()).is_number_unsigned() &&
         !io::Checksum::FromJsonOrEmpty(record).empty() &&
         record.value("region", json()).is_string() &&
         record.value("region_ops_sha256", json()).is_string() &&
         !io::Checksum::FromJsonOrEmpty(record, "input_tap_").empty() &&
         record.value("engine", json()).is_object() &&
         record["engine"].value("version", json()).is_string();
}

// Why the commit record of `segment` is not one of `scope`'s journal; empty
// when it is.
std::string SegmentRecordMismatch(const JournalScope& scope, uint64_t segment, const json& record) {
  if (!IsTypedSegmentRecord(record)) return "not a journal commit record";
  if (record.value("region", "") != scope.region ||
      record.value("partition_id", json()) != json(scope.partition) ||
      record.value("segment", json()) != json(segment)) {
    return "made for another region, partition or segment";
  }
  if (record.value("region_ops_sha256", "") != scope.region_ops_sha256) {
    return "its operators differ from the recipe's (region_ops_sha256)";
  }
  if (io::Checksum::FromJsonOrEmpty(record, "input_tap_") != scope.input_tap) {
    return "made from another region input (input_tap_xxh3_128)";
  }
  if (record.value("engine", json::object()).value("version", "") != scope.engine_version) {
    return "made by another djshard version";
  }
  return "";
}

// The journal lines of a segment's data file `rel` into `parents`; why they
// are not journal entries, or empty.
std::string ParseSegmentLines(const std::string& text, const std::string& rel,
                              std::vector<exec::JournaledParent>* parents) {
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    exec::JournaledParent p;
    if (!ParseJournalLine(std::string_view(text).substr(at, end - at), &p)) {
      return rel + ": line " + std::to_string(parents->size() + 1) + " is not a journal entry";
    }
    parents->push_back(std::move(p));
    at = end + 1;
  }
  return "";
}

// Reads the data file a typed commit `record` of `scope` names into
// `parents`: its size, its checksum, its lines, and whether its parents are
// the record's rows and count. Returns why not, or empty.
std::string ReadSegmentParents(const JournalScope& scope, const json& record,
                               std::vector<exec::JournaledParent>* parents) {
  const std::string rel = record.value("data_path", "");
  const std::string data = scope.checkpoints + "/" + rel;
  if (rel.empty() || rel.find('/') != std::string::npos || !fs::exists(data)) {
    return rel + ": missing";
  }
  if (fs::file_size(data) != record.value("size_bytes", uint64_t{0})) {
    return rel + ": size " + std::to_string(fs::file_size(data)) + ", the commit says " +
           std::to_string(record.value("size_bytes", uint64_t{0}));
  }
  // One read: the stored bytes hashed, the lines decoded and parsed.
  const io::Checksum want = io::Checksum::FromJsonOrEmpty(record);
  io::ChecksumHasher stored(want.kind);
  std::string text;
  try {
    std::unique_ptr<io::ByteSource> in = io::OpenInput(data, &stored);
    std::vector<char> buf(1 << 16);
    for (size_t n; (n = in->Read(buf.data(), buf.size())) > 0;) text.append(buf.data(), n);
  } catch (const Error& e) {
    return rel + ": unreadable: " + e.what();
  }
  if (stored.Finish() != want) return rel + ": " + want.field() + " differs";
  if (std::string why = ParseSegmentLines(text, rel, parents); !why.empty()) return why;
  json rows = json::array();
  for (const exec::JournaledParent& p : *parents) rows.push_back(p.row);
  if (parents->size() != record.value("count", uint64_t{0}) || rows != record["rows"]) {
    return rel + ": its parents differ from the commit's rows and count";
  }
  return "";
}

}  // namespace

LoadedJournal LoadJournal(
    const JournalScope& scope,
    const std::function<void(const std::string&, const json&, const std::string&)>& reject,
    const std::function<void(const json&)>& loaded) {
  LoadedJournal out;
  for (const auto& [segment, path] : SegmentRecords(scope.checkpoints, scope.stem)) {
    out.next_segment = std::max(out.next_segment, segment + 1);
    const json record = json::parse(io::ReadFile(path), nullptr, false);
    std::vector<exec::JournaledParent> parents;
    std::string why = SegmentRecordMismatch(scope, segment, record);
    if (why.empty()) why = ReadSegmentParents(scope, record, &parents);
    if (!why.empty()) {
      reject(path, record, why);
      continue;
    }
    for (exec::JournaledParent& p : parents) {
      const uint64_t row = p.row;
      out.parents.emplace(row, std::move(p));
    }
    json fields = {{"partition_id", scope.partition},
                   {"op_idx", scope.gather_idx},
                   {"checkpoint_path", record.value("data_path", "")},
                   {"output_rows", record.value("count", uint64_t{0})},
                   {"metadata",
                    {{"region", scope.region},
                     {"segment", segment},
                     {"origin_attempt_token", record.value("attempt_token", json())}}}};
    AddCheckpointChecksum(fields, record);
    loaded(fields);
  }
  return out;
}

bool IsJournalData(const std::string& name, const std::string& stem) {
  // <stem>.<token>.segNNNNN.jsonl.zst, or a temporary file of one: the
  // token is hex, so another region's stem (region names may hold dots)
  // never matches.
  if (name.size() <= stem.size() + 1 || name.compare(0, stem.size(), stem) != 0 ||
      name[stem.size()] != '.') {
    return false;
  }
  const size_t token = stem.size() + 1;
  const size_t dot = name.find('.', token);
  if (dot == std::string::npos || dot == token ||
      name.find_first_not_of("0123456789abcdef", token) != dot) {
    return false;
  }
  return name.compare(dot, 4, ".seg") == 0;
}

void DeleteJournal(const std::string& checkpoints, const std::string& stem, io::Disk& disk) {
  for (const auto& [segment, path] : SegmentRecords(checkpoints, stem)) disk.Unlink(path);
  std::error_code ec;
  std::vector<std::string> data;
  for (const auto& e : fs::directory_iterator(checkpoints, ec)) {
    const std::string name = e.path().filename().string();
    if (IsJournalData(name, stem)) data.push_back(e.path().string());
  }
  for (const std::string& path : data) disk.Unlink(path);
}

}  // namespace djshard::job
