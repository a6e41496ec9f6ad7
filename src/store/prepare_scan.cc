#include "djshard/store/prepare_scan.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/io/disk.h"
#include "djshard/io/fd.h"
#include "djshard/io/input.h"
#include "djshard/io/json_fields.h"
#include "djshard/io/json_text.h"
#include "djshard/io/sha256.h"
#include "djshard/store/job.h"
#include "djshard/store/shard_source.h"
#include "src/store/normalize_pipeline.h"

namespace djshard::store {

using nlohmann::json;

namespace {

constexpr uint64_t kCheckBlockBytes = 256ull << 10;

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads a varint at *pos of `data`; false when the data ends inside one.
bool ReadVarint(std::string_view data, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; *pos < data.size() && shift < 64; shift += 7) {
    const auto byte = static_cast<uint8_t>(data[(*pos)++]);
    *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

Error ChangedDuringScan(const std::string& display_path) {
  return Error(display_path, 0, "input changed while it was being scanned",
               "prepare again once nothing writes to the input");
}

// The bytes of one scan task's file that its lines take, [begin, end), and,
// as they are read, the hashes of its bytes [hash_begin, hash_end).
class ScanTaskSource : public io::ByteSource {
 public:
  ScanTaskSource(const ScanPlan& plan, const ScanPlan::Task& task)
      : file_(plan.files.at(task.file)),
        check_block_bytes_(plan.check_block_bytes),
        hash_begin_(std::min(task.index * plan.task_bytes, file_.size_bytes)),
        hash_end_(std::min(hash_begin_ + plan.task_bytes, file_.size_bytes)) {
    fd_.reset(::open(file_.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd_.get() < 0) ThrowSystemError(file_.path, "cannot open");
    begin_ = hash_begin_ == 0 ? 0 : LineStartFrom(hash_begin_);
    pos_ = hash_begin_;
    if (begin_ >= hash_end_) {
      // A line that starts before this task runs past it: no line starts here.
      end_ = begin_;
      end_known_ = true;
    }
    ::posix_fadvise(fd_.get(), static_cast<off_t>(hash_begin_),
                    static_cast<off_t>(hash_end_ - hash_begin_), POSIX_FADV_SEQUENTIAL);
  }

  size_t Read(char* buf, size_t capacity) override {
    for (;;) {
      if (pos_ >= hash_end_ && end_known_ && pos_ >= end_) return 0;
      const size_t n = ReadAt(pos_, buf, capacity);
      if (n == 0) {
        if (pos_ < file_.size_bytes) throw ChangedDuringScan(file_.display_path);
        end_ = std::max(begin_, file_.size_bytes);
        end_known_ = true;
        return 0;
      }
      const uint64_t from = pos_, to = pos_ + n;
      HashRange(buf, from, to);
      if (!end_known_ && to >= hash_end_) {
        // The task's lines end at the first line start at or after hash_end_.
        const uint64_t search = std::max(from, hash_end_ - 1);
        const void* nl = std::memchr(buf + (search - from), '\n', to - search);
        if (nl != nullptr) {
          end_ = from + static_cast<uint64_t>(static_cast<const char*>(nl) - buf) + 1;
          end_known_ = true;
        }
      }
      pos_ = to;
      const uint64_t emit_from = std::max(from, begin_);
      const uint64_t emit_to = end_known_ ? std::min(to, end_) : to;
      if (emit_from >= emit_to) continue;
      if (emit_from > from) std::memmove(buf, buf + (emit_from - from), emit_to - emit_from);
      return static_cast<size_t>(emit_to - emit_from);
    }
  }

  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }
  // After the last Read (and, for a whole-file task, the reader's last chunk):
  // the SHA-256 of the hashed bytes and their check blocks.
  std::string BlockSha256() { return block_sha256_.HexDigest(); }
  // The same time, before BlockSha256: the hashed bytes' SHA-256 state.
  const io::Sha256& block_sha256() const { return block_sha256_; }
  // Whether the task hashes its whole file, from the first byte: then its
  // lines are the file's bytes, and ScanTaskReader hashes them chunk by chunk
  // (HashLines) so that each chunk can carry the state before it.
  bool hashes_whole_file() const { return hash_begin_ == 0 && hash_end_ == file_.size_bytes; }
  void HashLines(Chunk* c) {
    HashStoredChunk(block_sha256_, file_.size_bytes, &lines_hashed_, /*keep=*/true, c);
  }
  const std::string& CheckBlocks() const { return check_blocks_; }
  uint64_t check_block_count() const { return check_block_count_; }

 private:
  size_t ReadAt(uint64_t offset, char* buf, size_t capacity) {
    for (;;) {
      const ssize_t n = ::pread(fd_.get(), buf, capacity, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ThrowSystemError(file_.path, "cannot read");
      return static_cast<size_t>(n);
    }
  }

  // The first line start at or after `offset` (> 0): after the first '\n'
  // at or after offset - 1; the file's size when there is none.
  uint64_t LineStartFrom(uint64_t offset) {
    std::string buf(64 << 10, '\0');
    for (uint64_t at = offset - 1;;) {
      const size_t n = ReadAt(at, buf.data(), buf.size());
      if (n == 0) return file_.size_bytes;
      const void* nl = std::memchr(buf.data(), '\n', n);
      if (nl != nullptr)
        return at + static_cast<uint64_t>(static_cast<const char*>(nl) - buf.data()) + 1;
      at += n;
    }
  }

  // Hashes what of [from, to) lies in [hash_begin_, hash_end_).
  void HashRange(const char* buf, uint64_t from, uint64_t to) {
    uint64_t at = std::max(from, hashed_to_);
    const uint64_t stop = std::min(to, hash_end_);
    while (at < stop) {
      const uint64_t block_end = std::min(stop, (at / check_block_bytes_ + 1) * check_block_bytes_);
      const std::string_view bytes(buf + (at - from), block_end - at);
      if (!hashes_whole_file()) block_sha256_.Update(bytes);  // else ScanTaskReader does
      check_->Update(bytes);
      at = block_end;
      if (at % check_block_bytes_ == 0 || at == hash_end_) {
        check_blocks_ += check_->HexDigest();
        check_blocks_.push_back('\n');
        ++check_block_count_;
        check_ = std::make_unique<io::Xxh3>();
      }
    }
    hashed_to_ = std::max(hashed_to_, at);
  }

  const ScanPlan::File& file_;
  const uint64_t check_block_bytes_;
  const uint64_t hash_begin_, hash_end_;
  io::ScopedFd fd_;
  uint64_t begin_ = 0, end_ = 0;
  bool end_known_ = false;
  uint64_t pos_ = 0;  // the next byte to read
  uint64_t hashed_to_ = 0;
  uint64_t lines_hashed_ = 0;  // by HashLines
  io::Sha256 block_sha256_;
  std::unique_ptr<io::Xxh3> check_ = std::make_unique<io::Xxh3>();
  std::string check_blocks_;  // one line of hex per block
  uint64_t check_block_count_ = 0;
};

// The task's lines in chunks; row numbers count from the task's first line.
class ScanTaskReader : public ChunkReader {
 public:
  explicit ScanTaskReader(ScanTaskSource* source)
      : source_(source), chunker_(1, kChunkBytes, 0, [source](size_t) {
          return std::unique_ptr<io::ByteSource>(new BorrowedSource(source));
        }) {}

  bool Next(Chunk* c) override {
    if (!chunker_.Next(&c->lines)) return false;
    c->first_row = rows_;
    rows_ += c->lines.lines;
    c->raw_before.reset();
    if (source_->hashes_whole_file()) source_->HashLines(c);
    return true;
  }

 private:
  // The chunker owns its sources; this one forwards to the task's.
  class BorrowedSource : public io::ByteSource {
   public:
    explicit BorrowedSource(ScanTaskSource* s) : s_(s) {}
    size_t Read(char* buf, size_t capacity) override { return s_->Read(buf, capacity); }

   private:
    ScanTaskSource* s_;
  };

  ScanTaskSource* source_;
  io::LineChunker chunker_;
  uint64_t rows_ = 0;
};

// Each line's raw and normalized sizes, the normalized lines' SHA-256.
class ScanTaskSink : public ChunkSink {
 public:
  // `stream`: a digest that earlier tasks of the input updated, which this
  // one goes on with instead of its own. The digest follows the task's file
  // (FollowingDigest) when its lines are the whole file (`whole_file`) and
  // start the digest.
  ScanTaskSink(NormalizedStream* stream, bool whole_file)
      : stream_(stream), following_(stream != nullptr ? &stream->sha256 : &digest_) {
    following_.StartFile(whole_file && (stream == nullptr || stream->bytes == 0));
  }

  void Place(Chunk& c) override {
    const std::string& n = c.normalized;
    const char* raw = c.lines.data.data();
    following_.Add(c);
    bytes_ += n.size();
    rows_ += c.lines.lines;
    second_pass_ = std::max(second_pass_, c.second_pass);
    size_t npos = 0, rpos = 0;
    while (npos < n.size()) {
      const char* nl =
          static_cast<const char*>(std::memchr(n.data() + npos, '\n', n.size() - npos));
      const size_t norm = static_cast<size_t>(nl - n.data()) + 1 - npos;
      const char* rnl =
          static_cast<const char*>(std::memchr(raw + rpos, '\n', c.lines.size - rpos));
      const size_t line = static_cast<size_t>(rnl - raw) + 1 - rpos;
      Flush();
      last_[0] = line;
      last_[1] = norm;
      has_last_ = true;
      raw_bytes_ += line;
      npos += norm;
      rpos += line;
    }
  }
  void Written(Chunk&) override {}

  // Once the task's lines [begin, end) are read: the chunker ends a last line
  // without '\n' with one the file lacks. `raw`: the SHA-256 state of the
  // file's bytes.
  void Fill(uint64_t begin, uint64_t end, const io::Sha256& raw, ScanTaskResult* r) {
    if (has_last_ && raw_bytes_ == end - begin + 1) --last_[0];
    Flush();
    r->rows = rows_;
    r->normalized_bytes = bytes_;
    if (!r->failed()) following_.EndFile(&raw, end - begin);
    if (stream_ == nullptr) {
      r->normalized_sha256 = digest_.HexDigest();
    } else {
      stream_->bytes += following_.bytes();
    }
    r->normalization = SecondPassName(second_pass_);
  }
  const std::string& sizes() const { return sizes_; }

 private:
  void Flush() {
    if (!has_last_) return;
    AppendVarint(&sizes_, last_[0]);
    AppendVarint(&sizes_, last_[1]);
    has_last_ = false;
  }

  NormalizedStream* stream_;
  io::Sha256 digest_;
  FollowingDigest following_;  // into stream_'s digest or digest_
  uint64_t bytes_ = 0, rows_ = 0, raw_bytes_ = 0;
  SecondPass second_pass_ = SecondPass::kCopy;
  std::string sizes_;
  uint64_t last_[2] = {0, 0};  // the last line's sizes, not yet in sizes_
  bool has_last_ = false;
};

// Writes `bytes` to a new file at `path`, fsynced.
void WriteNewFile(const std::string& path, std::string_view bytes) {
  io::ScopedFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) ThrowSystemError(path, "cannot create");
  io::PwriteFully(fd.get(), bytes, 0, path);
  if (::fsync(fd.get()) != 0) ThrowSystemError(path, "cannot fsync");
}

}  // namespace

std::string ScanPlan::TaskId(size_t task) const {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "scan-%05zu", task);
  return buf;
}

std::string ScanPlan::ToJson() const {
  json j = {{"task_bytes", task_bytes}, {"check_block_bytes", check_block_bytes},
            {"media_keys", media_keys}, {"media_root", media_root},
            {"files", json::array()},   {"tasks", json::array()}};
  for (const File& f : files) {
    j["files"].push_back({{"path", f.path},
                          {"display_path", f.display_path},
                          {"relative_path", f.relative_path},
                          {"size_bytes", f.size_bytes},
                          {"mtime_ns", f.mtime_ns}});
  }
  for (const Task& t : tasks) j["tasks"].push_back({{"file", t.file}, {"index", t.index}});
  return j.dump(2) + "\n";
}

ScanPlan ScanPlan::FromJson(const std::string& text, const std::string& path) {
  ScanPlan plan;
  try {
    const json j = json::parse(text);
    plan.task_bytes = io::IntegerField<uint64_t>(j, "task_bytes");
    plan.check_block_bytes = io::IntegerField<uint64_t>(j, "check_block_bytes");
    plan.media_keys = j.at("media_keys").get<std::vector<std::string>>();
    plan.media_root = j.at("media_root").get<std::string>();
    for (const json& f : j.at("files")) {
      plan.files.push_back(
          {f.at("path").get<std::string>(), f.at("display_path").get<std::string>(),
           f.at("relative_path").get<std::string>(), io::IntegerField<uint64_t>(f, "size_bytes"),
           io::IntegerField<int64_t>(f, "mtime_ns")});
    }
    for (const json& t : j.at("tasks")) {
      plan.tasks.push_back(
          {io::IntegerField<size_t>(t, "file"), io::IntegerField<uint64_t>(t, "index")});
      if (plan.tasks.back().file >= plan.files.size())
        throw Error(path, 0, "scan task names no file");
    }
    if (plan.task_bytes == 0 || plan.check_block_bytes == 0 ||
        plan.task_bytes % plan.check_block_bytes != 0) {
      throw Error(path, 0,
                  "scan plan has task_bytes " + std::to_string(plan.task_bytes) +
                      " and check_block_bytes " + std::to_string(plan.check_block_bytes));
    }
  } catch (const json::exception& e) {
    throw Error(path, 0, std::string("scan plan is not valid: ") + e.what(),
                "the coordination directory was edited; start the run with a new run id");
  }
  return plan;
}

ScanPlan PlanScan(const std::vector<io::InputCandidate>& inputs,
                  const std::vector<std::string>& media_keys, const std::string& media_root,
                  uint64_t task_bytes) {
  if (task_bytes == 0 || task_bytes % kScanTaskUnitBytes != 0) {
    throw Error("scan task size " + std::to_string(task_bytes) + " bytes is not a multiple of " +
                    std::to_string(kScanTaskUnitBytes),
                "give a whole number of 64 KiB");
  }
  ScanPlan plan;
  plan.task_bytes = task_bytes;
  plan.check_block_bytes =
      task_bytes % kCheckBlockBytes == 0 ? kCheckBlockBytes : kScanTaskUnitBytes;
  plan.media_keys = media_keys;
  plan.media_root = media_root;
  for (const io::InputCandidate& in : inputs) {
    const FileStamp stamp = Stamp(in.path);
    plan.files.push_back({in.path, in.display_path, in.relative_path, stamp.size, stamp.mtime_ns});
    const uint64_t tasks = std::max<uint64_t>(1, (stamp.size + task_bytes - 1) / task_bytes);
    for (uint64_t k = 0; k < tasks; ++k) plan.tasks.push_back({plan.files.size() - 1, k});
  }
  return plan;
}

json ScanTaskResult::ToJson() const {
  json j = {{"task", task},
            {"begin", begin},
            {"end", end},
            {"rows", rows},
            {"normalized_bytes", normalized_bytes},
            {"normalized_sha256", normalized_sha256},
            {"block_sha256", block_sha256},
            {"normalization", normalization},
            {"size_bytes", size_bytes},
            {"mtime_ns", mtime_ns},
            {"check_blocks", check_blocks},
            {"data_file", data_file},
            {"data_bytes", data_bytes}};
  data_checksum.ToJson(j, "data_");
  if (failed()) {
    j["error"] = {{"file", error_file},
                  {"line", error_line},
                  {"message", error_message},
                  {"hint", error_hint},
                  {"code", error_code}};
  }
  return j;
}

ScanTaskResult ScanTaskResult::FromJson(const json& j) {
  ScanTaskResult r;
  r.task = io::IntegerField<uint64_t>(j, "task");
  r.begin = io::IntegerField<uint64_t>(j, "begin");
  r.end = io::IntegerField<uint64_t>(j, "end");
  r.rows = io::IntegerField<uint64_t>(j, "rows");
  r.normalized_bytes = io::IntegerField<uint64_t>(j, "normalized_bytes");
  r.normalized_sha256 = j.at("normalized_sha256").get<std::string>();
  r.block_sha256 = j.at("block_sha256").get<std::string>();
  r.normalization = j.at("normalization").get<std::string>();
  r.size_bytes = io::IntegerField<uint64_t>(j, "size_bytes");
  r.mtime_ns = io::IntegerField<int64_t>(j, "mtime_ns");
  r.check_blocks = io::IntegerField<uint64_t>(j, "check_blocks");
  r.data_file = j.at("data_file").get<std::string>();
  r.data_bytes = io::IntegerField<uint64_t>(j, "data_bytes");
  r.data_checksum = io::Checksum::FromJson(j, "data_");
  if (j.contains("error")) {
    const json& e = j.at("error");
    r.error_file = e.at("file").get<std::string>();
    r.error_line = io::IntegerField<uint64_t>(e, "line");
    r.error_code = io::IntegerField<int>(e, "code");
    r.error_message = e.at("message").get<std::string>();
    r.error_hint = e.at("hint").get<std::string>();
  }
  return r;
}

ScanTaskResult RunScanTask(const ScanPlan& plan, size_t task, int threads, const std::string& dir,
                           const std::string& tag, NormalizedStream* stream) {
  const ScanPlan::Task& t = plan.tasks.at(task);
  const ScanPlan::File& file = plan.files.at(t.file);
  const auto unchanged = [&file] {
    const FileStamp now = Stamp(file.path);
    if (now.size != file.size_bytes || now.mtime_ns != file.mtime_ns) {
      throw ChangedDuringScan(file.display_path);
    }
  };
  unchanged();
  ScanTaskSource source(plan, t);
  ScanTaskReader reader(&source);
  ScanTaskResult r;
  r.task = task;
  ScanTaskSink sink(stream, source.hashes_whole_file());
  const std::vector<io::InputCandidate> input{{file.path, file.display_path, file.relative_path}};
  const NormalizeRules rules{plan.media_keys, plan.media_root, {}};
  try {
    RunNormalizePipeline(input, rules, threads, reader, sink);
  } catch (const Error& e) {
    if (e.line() == 0) throw;
    r.error_file = e.file();
    r.error_line = e.line();
    r.error_code = e.code();
    r.error_message = e.message();
    r.error_hint = e.hint();
  }
  unchanged();
  r.begin = source.begin();
  r.end = source.end();
  sink.Fill(r.begin, r.end, source.block_sha256(), &r);
  r.block_sha256 = source.BlockSha256();
  r.size_bytes = file.size_bytes;
  r.mtime_ns = file.mtime_ns;
  r.check_blocks = source.check_block_count();
  CrashPoint("prepare_scan_task");
  std::string data = source.CheckBlocks();
  data += sink.sizes();
  r.data_file = plan.TaskId(task) + "." + tag + ".data";
  WriteNewFile(dir + "/" + r.data_file, data);
  r.data_bytes = data.size();
  io::Xxh3 check;
  check.Update(data);
  r.data_checksum = io::Checksum::Xxh3(check.HexDigest());
  return r;
}

namespace {

// The cut over the tasks' lines, as ShardSink and RangeSink make it.
class ScanCut {
 public:
  ScanCut(uint64_t rows, uint64_t bytes, uint64_t num_shards)
      : cutter_(rows, bytes, num_shards), shards_(num_shards) {}

  void Line(size_t file, uint64_t offset, uint64_t raw, uint64_t norm, uint64_t row,
            uint64_t line) {
    if (!open_) {
      if (opened_ == shards_.size()) throw Error("the scan results hold more rows than counted");
      shard_ = opened_++;
      open_ = true;
    }
    ShardEntry& s = shards_[shard_];
    if (s.ranges.empty() || s.ranges.back().file != file) {
      s.ranges.push_back({file, offset, 0, 0, row, line, {}});
    }
    s.ranges.back().length += raw;
    s.ranges.back().rows += 1;
    s.rows += 1;
    s.size_bytes += norm;
    if (cutter_.Add(norm)) open_ = false;
  }

  std::vector<ShardEntry> Finish() {
    if (opened_ != shards_.size()) throw Error("the scan results hold fewer rows than counted");
    return std::move(shards_);
  }

 private:
  ShardCutter cutter_;
  std::vector<ShardEntry> shards_;
  size_t opened_ = 0, shard_ = 0;
  bool open_ = false;
};

// A task's data file, checked against its result.
std::string ReadTaskData(const ScanTaskResult& r) {
  std::string data = io::ReadFile(r.data_file);
  io::Xxh3 check;
  check.Update(data);
  if (data.size() != r.data_bytes || io::Checksum::Xxh3(check.HexDigest()) != r.data_checksum) {
    throw Error(r.data_file, 0, "scan task data differs from its result (bytes or xxh3_128)",
                "the coordination directory was changed; start the run with a new run id");
  }
  return data;
}

// A task's data file, checked against its result, and its rows into the cut
// (the task's file is input file `file`, `file_rows` of its lines and `row`
// lines in all before it). Returns the task's check blocks.
std::string CutTask(const ScanTaskResult& r, size_t file, uint64_t file_rows, uint64_t row,
                    ScanCut& cut) {
  std::string data = ReadTaskData(r);
  const size_t blocks_bytes = static_cast<size_t>(r.check_blocks) * 33;
  if (data.size() < blocks_bytes) throw Error(r.data_file, 0, "scan task data is too short");
  size_t pos = blocks_bytes;
  uint64_t offset = r.begin;
  for (uint64_t k = 0; k < r.rows; ++k) {
    uint64_t raw = 0, norm = 0;
    if (!ReadVarint(data, &pos, &raw) || !ReadVarint(data, &pos, &norm)) {
      throw Error(r.data_file, 0, "scan task data ends inside its line sizes");
    }
    cut.Line(file, offset, raw, norm, row + k, file_rows + k + 1);
    offset += raw;
  }
  if (offset != r.end || pos != data.size()) {
    throw Error(r.data_file, 0, "scan task data does not cover the task's lines");
  }
  data.resize(blocks_bytes);
  return data;
}

// The tree hash: SHA-256 over each digest as hex and '\n'.
std::string TreeSha256(const std::vector<std::string>& digests) {
  io::Sha256 tree;
  for (const std::string& d : digests) {
    tree.Update(d);
    tree.Update("\n");
  }
  return tree.HexDigest();
}

}  // namespace

void CheckScanResults(const ScanPlan& plan, const std::vector<ScanTaskResult>& results) {
  if (results.size() > plan.tasks.size()) throw Error("scan results do not match the plan");
  std::vector<uint64_t> lines_before(plan.files.size(), 0);
  for (size_t i = 0; i < results.size(); ++i) {
    const ScanTaskResult& r = results[i];
    const ScanPlan::File& f = plan.files[plan.tasks[i].file];
    if (r.failed() && r.error_line > 0) {
      throw Error(f.display_path, lines_before[plan.tasks[i].file] + r.error_line, r.error_message,
                  r.error_hint, r.error_code);
    }
    if (r.failed()) throw Error(r.error_file, 0, r.error_message, r.error_hint, r.error_code);
    if (r.size_bytes != f.size_bytes || r.mtime_ns != f.mtime_ns) {
      throw ChangedDuringScan(f.display_path);
    }
    lines_before[plan.tasks[i].file] += r.rows;
  }
  if (results.size() != plan.tasks.size()) throw Error("scan results do not match the plan");
  for (const ScanPlan::File& f : plan.files) {
    const FileStamp now = Stamp(f.path);
    if (now.size != f.size_bytes || now.mtime_ns != f.mtime_ns) {
      throw ChangedDuringScan(f.display_path);
    }
  }
}

std::string FileTreeSha256(const std::string& path, uint64_t block_bytes) {
  if (block_bytes == 0) {
    throw Error(path, 0, "a tree hash needs a block size",
                "the manifest's prepare_scan is damaged");
  }
  io::ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) ThrowSystemError(path, "cannot open");
  std::vector<std::string> blocks;
  std::string buf(1 << 20, '\0');
  std::unique_ptr<io::Sha256> block;
  uint64_t in_block = 0;
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ThrowSystemError(path, "cannot read");
    if (n == 0) break;
    for (size_t at = 0; at < static_cast<size_t>(n);) {
      if (!block) block = std::make_unique<io::Sha256>();
      const size_t take = static_cast<size_t>(
          std::min<uint64_t>(block_bytes - in_block, static_cast<size_t>(n) - at));
      block->Update(buf.data() + at, take);
      at += take;
      in_block += take;
      if (in_block == block_bytes) {
        blocks.push_back(block->HexDigest());
        block.reset();
        in_block = 0;
      }
    }
  }
  if (block || blocks.empty()) {
    if (!block) block = std::make_unique<io::Sha256>();
    blocks.push_back(block->HexDigest());
  }
  return TreeSha256(blocks);
}

ScannedInput CutScannedShards(const ScanPlan& plan, const std::vector<ScanTaskResult>& results,
                              uint64_t num_shards) {
  CheckScanResults(plan, results);
  ScannedInput out;
  for (const ScanTaskResult& r : results) {
    out.rows += r.rows;
    out.bytes += r.normalized_bytes;
  }
  ScanCut cut(out.rows, out.bytes, num_shards);
  std::vector<std::string> normalized_digests, file_blocks;
  SecondPass file_pass = SecondPass::kCopy;
  uint64_t row = 0, blocks = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const ScanTaskResult& r = results[i];
    const ScanPlan::Task& t = plan.tasks[i];
    const ScanPlan::File& f = plan.files[t.file];
    if (t.index == 0) {
      out.files.push_back({f.path, f.relative_path, f.size_bytes, f.mtime_ns, 0, "", "", "", 0});
      out.files.back().check_first_block = blocks;
      file_blocks.clear();
      file_pass = SecondPass::kCopy;
    }
    InputFile& file = out.files.back();
    out.check_blocks += CutTask(r, out.files.size() - 1, file.rows, row, cut);
    blocks += r.check_blocks;
    row += r.rows;
    file.rows += r.rows;
    file_blocks.push_back(r.block_sha256);
    file_pass = std::max(file_pass, SecondPassNamed(r.normalization, r.data_file));
    file.normalization = SecondPassName(file_pass);
    const bool last_of_file = i + 1 == results.size() || plan.tasks[i + 1].file != t.file;
    if (last_of_file) {
      if (file_blocks.size() == 1) {
        file.sha256 = file_blocks.front();
      } else {
        file.tree_sha256 = TreeSha256(file_blocks);
      }
    }
    normalized_digests.push_back(r.normalized_sha256);
  }
  out.shards = cut.Finish();
  if (normalized_digests.size() == 1) {
    out.normalized_sha256 = normalized_digests.front();
  } else {
    out.normalized_tree_sha256 = TreeSha256(normalized_digests);
  }
  return out;
}

std::string ShardWritePlan::ToJson() const {
  json j = {{"blocks_dir", blocks_dir}, {"manifest", manifest}, {"tasks", json::array()}};
  for (const auto& [first, end] : tasks) j["tasks"].push_back({first, end});
  return j.dump(2) + "\n";
}

ShardWritePlan ShardWritePlan::FromJson(const std::string& text, const std::string& path) {
  ShardWritePlan plan;
  try {
    const json j = json::parse(text);
    plan.blocks_dir = j.at("blocks_dir").get<std::string>();
    plan.manifest = j.at("manifest").get<std::string>();
    for (const json& t : j.at("tasks")) {
      plan.tasks.emplace_back(t.at(0).get<size_t>(), t.at(1).get<size_t>());
    }
  } catch (const json::exception& e) {
    throw Error(path, 0, std::string("shard write plan is not valid: ") + e.what(),
                "the coordination directory was edited; start the run with a new run id");
  }
  return plan;
}

std::vector<std::pair<size_t, size_t>> PlanShardWrites(const std::vector<ShardEntry>& shards,
                                                       uint64_t task_bytes) {
  std::vector<std::pair<size_t, size_t>> tasks;
  uint64_t bytes = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    bytes += shards[i].size_bytes;
    if (bytes >= task_bytes || i + 1 == shards.size()) {
      tasks.emplace_back(tasks.empty() ? 0 : tasks.back().second, i + 1);
      bytes = 0;
    }
  }
  return tasks;
}

json RunShardWriteTask(const ShardWritePlan& plan, size_t task, const std::string& dir,
                       const std::string& tag, const std::function<bool()>& owned) {
  json result = {{"task", task}, {"shards", json::array()}};
  // The tasks read the check blocks where a reference job's workers do.
  const JobPaths blocks(plan.blocks_dir);
  const Manifest m = Manifest::FromJson(plan.manifest, plan.blocks_dir);
  const auto [first, end] = plan.tasks.at(task);
  for (size_t i = first; i < end; ++i) {
    const ShardEntry& shard = m.shards.at(i);
    const std::string file = shard.id + "." + tag + ".jsonl";
    const std::string path = dir + "/" + file;
    io::ScopedFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) ThrowSystemError(path, "cannot create");
    io::ChecksumHasher hash;
    uint64_t bytes = 0;
    try {
      const std::unique_ptr<io::ByteSource> source = OpenShard(blocks, m, shard, &hash);
      std::string buf(1 << 20, '\0');
      for (size_t n; (n = source->Read(buf.data(), buf.size())) > 0; bytes += n) {
        // A writer whose claim was taken over writes nothing more.
        if (!owned()) throw Error(path, 0, "lost the claim of this write task");
        io::PwriteFully(fd.get(), std::string_view(buf.data(), n), bytes, path);
      }
      if (::fsync(fd.get()) != 0) ThrowSystemError(path, "cannot fsync");
    } catch (...) {
      ::unlink(path.c_str());
      throw;
    }
    CrashPoint("prepare_shard_cut");
    json entry = {{"id", shard.id}, {"file", file}, {"rows", shard.rows}, {"size_bytes", bytes}};
    hash.Finish().ToJson(entry);
    result["shards"].push_back(std::move(entry));
  }
  return result;
}

}  // namespace djshard::store
