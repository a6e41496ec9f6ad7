#include "src/store/normalize_pass.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/io/checksum.h"
#include "djshard/io/fd.h"
#include "djshard/io/input.h"
#include "djshard/io/sha256.h"
#include "djshard/store/normalize.h"
#include "src/store/normalize_pipeline.h"

namespace djshard::store {

namespace {

// Reads the inputs as chunks of whole lines and checks that no file changed
// while it was read. Pass 1 (`first` null) hashes each file's stored bytes and
// records it in `files`; pass 2 checks each file against pass 1's `first`.
// Runs on one thread.
class InputReader : public ChunkReader {
 public:
  InputReader(const std::vector<io::InputCandidate>& inputs, std::vector<InputFile>* files,
              const std::vector<InputFile>* first)
      : inputs_(inputs),
        files_(files),
        first_(first),
        read_(inputs.size()),
        chunker_(
            inputs.size(), kChunkBytes, 0, [this](size_t i) { return Open(i); },
            [this](size_t i, uint64_t lines) { Close(i, lines); }) {}

  // The next chunk, or false after the last one.
  bool Next(Chunk* c) override {
    const bool more = chunker_.Next(&c->lines);
    if (more) {
      c->first_row = next_row_;
      next_row_ += c->lines.lines;
      c->raw_before.reset();
      ReadFile& f = read_[c->lines.file];
      if (first_ == nullptr && f.sha) HashStoredChunk(*f.sha, f.size, &f.hashed, f.kept, c);
    }
    // The files the chunker finished: each of their chunks is hashed now.
    for (const Closed& done : closed_) Record(done);
    closed_.clear();
    return more;
  }

  // Pass 1: whether file `i`'s chunks carry the state of its stored bytes
  // before them (for a FollowingDigest): it is not compressed and no earlier
  // uncompressed file had a byte. Known once its first chunk is out.
  bool Kept(size_t i) const { return read_[i].kept; }
  // Pass 1, a kept file: the SHA-256 state of its stored bytes, once the
  // chunker moved past it.
  const io::Sha256* RawState(size_t i) const { return read_[i].state.get(); }
  // Pass 1: file `i`'s stored bytes, once the chunker opened it.
  uint64_t StoredBytes(size_t i) const { return read_[i].size; }

 private:
  struct Closed {
    size_t file;
    uint64_t lines;
    FileStamp stamp;
  };

  std::unique_ptr<io::ByteSource> Open(size_t i) {
    before_ = Stamp(inputs_[i].path);
    if (first_ != nullptr) return io::OpenInput(inputs_[i].path);
    ReadFile& f = read_[i];
    f.size = before_.size;
    if (io::IsCompressedInput(inputs_[i].path)) {
      // Its stored bytes are not its lines: hashed as read.
      f.compressed = std::make_unique<io::ChecksumHasher>(io::ChecksumKind::kSha256);
      return io::OpenInput(inputs_[i].path, f.compressed.get());
    }
    // Its lines are its bytes, hashed chunk by chunk; the first file with any
    // keeps the states.
    f.sha = std::make_unique<io::Sha256>();
    f.kept = !had_bytes_;
    had_bytes_ = had_bytes_ || before_.size > 0;
    return io::OpenInput(inputs_[i].path);
  }

  void Close(size_t i, uint64_t lines) {
    const io::InputCandidate& in = inputs_[i];
    const FileStamp after = Stamp(in.path);
    if (after.size != before_.size || after.mtime_ns != before_.mtime_ns) {
      throw Error(in.display_path, 0, "input changed while it was being read",
                  "prepare again once the file is no longer being written");
    }
    if (first_ != nullptr) {
      const InputFile& was = (*first_)[i];
      if (was.size_bytes != after.size || was.mtime_ns != after.mtime_ns || was.rows != lines) {
        throw ChangedBetweenPasses(in.display_path);
      }
      return;
    }
    // Its last chunk may not be hashed yet: Next records it.
    closed_.push_back({i, lines, after});
  }

  // Pass 1: a file whose every chunk is hashed.
  void Record(const Closed& done) {
    const io::InputCandidate& in = inputs_[done.file];
    ReadFile& f = read_[done.file];
    std::string sha256;
    if (f.compressed) {
      sha256 = f.compressed->Finish().hex;
      f.compressed.reset();
    } else {
      if (f.kept) {
        f.state = std::make_unique<io::Sha256>();
        f.state->CopyFrom(*f.sha);
      }
      sha256 = f.sha->HexDigest();
      f.sha.reset();
    }
    files_->push_back({in.path, in.relative_path, done.stamp.size, done.stamp.mtime_ns, done.lines,
                       sha256, "", "", 0});
  }

  // Pass 1, per file: the SHA-256 of its bytes as stored.
  struct ReadFile {
    std::unique_ptr<io::ChecksumHasher> compressed;  // a compressed file's, as read
    std::unique_ptr<io::Sha256> sha;                 // else, chunk by chunk
    bool kept = false;  // its chunks carry raw_before, and state is kept
    uint64_t size = 0, hashed = 0;
    std::unique_ptr<io::Sha256> state;  // kept: the bytes' state at the end
  };

  const std::vector<io::InputCandidate>& inputs_;
  std::vector<InputFile>* files_;
  const std::vector<InputFile>* first_;
  FileStamp before_;
  std::vector<ReadFile> read_;
  std::vector<Closed> closed_;  // closed by the chunker, not yet recorded
  bool had_bytes_ = false;      // an earlier file had a byte
  uint64_t next_row_ = 0;
  io::LineChunker chunker_;  // last: its callbacks use the members above
};

// Pass 1: totals and hashes, nothing written.
class ScanSink : public ChunkSink {
 public:
  ScanSink(const InputReader& reader, NormalizedInput* out) : reader_(reader), out_(out) {}
  void Place(Chunk& c) override {
    if (file_ != c.lines.file) {
      EndFile();
      file_ = c.lines.file;
      digest_.StartFile(reader_.Kept(file_));
    }
    digest_.Add(c);
    check_.Update(c.normalized);
    out_->rows += c.lines.lines;
    out_->bytes += c.normalized.size();
    SecondPass& file = out_->second_pass[c.lines.file];
    file = std::max(file, c.second_pass);
  }
  void Written(Chunk&) override {}
  void Finish() {
    EndFile();
    out_->digest = sha256_.HexDigest();
    out_->check = check_.HexDigest();
  }

 private:
  // After the last chunk of file_, which the reader has closed.
  void EndFile() {
    if (file_ == kNoFile) return;
    digest_.EndFile(reader_.RawState(file_), reader_.StoredBytes(file_));
  }

  static constexpr size_t kNoFile = SIZE_MAX;
  const InputReader& reader_;
  NormalizedInput* out_;
  size_t file_ = kNoFile;
  io::Sha256 sha256_;
  FollowingDigest digest_{&sha256_};
  io::Xxh3 check_;
};

// Pass 2: the cut, each shard's pieces and checksum.
class ShardSink : public ChunkSink {
 public:
  ShardSink(const NormalizedInput& scanned, const std::vector<std::string>& paths)
      : scanned_(scanned),
        paths_(paths),
        cutter_(scanned.rows, scanned.bytes, paths.size()),
        out_(paths.size()) {}

  void Place(Chunk& c) override {
    const std::string& n = c.normalized;
    check_.Update(n);
    rows_ += c.lines.lines;
    bytes_ += n.size();
    if (rows_ > scanned_.rows || bytes_ > scanned_.bytes) {
      throw ChangedBetweenPasses("the input's rows");
    }
    size_t pos = 0, piece_start = 0;
    while (pos < n.size()) {
      if (!file_) Open();
      const char* nl = static_cast<const char*>(std::memchr(n.data() + pos, '\n', n.size() - pos));
      const size_t row_end = static_cast<size_t>(nl - n.data()) + 1;
      const bool closes = cutter_.Add(row_end - pos);
      ++out_[shard_].rows;
      pos = row_end;
      if (closes) {
        AddPiece(c, piece_start, pos);
        piece_start = pos;
        CloseCurrent();
      }
    }
    if (piece_start < pos) AddPiece(c, piece_start, pos);
  }

  void Written(Chunk& c) override {
    for (const Piece& p : c.pieces) {
      bool last = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        last = --p.file->pending == 0 && p.file->complete;
      }
      if (last) SyncAndClose(*p.file);
    }
  }

  // After the pipeline: every shard cut and written, as pass 1 counted.
  std::vector<ShardWritten> Finish() {
    if (file_) CloseCurrent();
    if (rows_ != scanned_.rows || bytes_ != scanned_.bytes || opened_ != paths_.size() ||
        check_.HexDigest() != scanned_.check) {
      throw ChangedBetweenPasses("the input's rows");
    }
    return out_;
  }

 private:
  void Open() {
    if (opened_ == paths_.size()) throw ChangedBetweenPasses("the input's rows");
    shard_ = opened_++;
    file_ = std::make_shared<ShardFile>();
    file_->path = paths_[shard_];
    file_->fd.reset(::open(file_->path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (file_->fd.get() < 0) ThrowSystemError(file_->path, "cannot create");
    hash_ = std::make_unique<io::Xxh3>();
  }

  void AddPiece(Chunk& c, size_t begin, size_t end) {
    const std::string_view bytes = std::string_view(c.normalized).substr(begin, end - begin);
    hash_->Update(bytes);
    c.pieces.push_back({file_, out_[shard_].bytes, begin, bytes.size()});
    out_[shard_].bytes += bytes.size();
    std::lock_guard<std::mutex> lock(mu_);
    ++file_->pending;
  }

  void CloseCurrent() {
    out_[shard_].checksum = io::Checksum::Xxh3(hash_->HexDigest());
    bool idle = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      file_->complete = true;
      idle = file_->pending == 0;
    }
    if (idle) SyncAndClose(*file_);
    file_.reset();
  }

  static void SyncAndClose(ShardFile& f) {
    if (::fsync(f.fd.get()) != 0) ThrowSystemError(f.path, "cannot fsync");
    f.fd.reset();
    CrashPoint("prepare_shard_cut");
  }

  const NormalizedInput& scanned_;
  const std::vector<std::string>& paths_;
  ShardCutter cutter_;
  std::vector<ShardWritten> out_;
  io::Xxh3 check_;
  uint64_t rows_ = 0, bytes_ = 0;
  size_t opened_ = 0, shard_ = 0;
  std::shared_ptr<ShardFile> file_;  // the shard being cut
  std::unique_ptr<io::Xxh3> hash_;   // of its bytes, in order
  std::mutex mu_;                    // ShardFile::pending and complete
};

// Pass 2 of reference shards: the cut, each shard's ranges of the raw input
// and its normalized totals; nothing is written.
class RangeSink : public ChunkSink {
 public:
  RangeSink(const NormalizedInput& scanned, uint64_t num_shards)
      : scanned_(scanned),
        cutter_(scanned.rows, scanned.bytes, num_shards),
        offsets_(scanned.files.size(), 0),
        out_(num_shards) {}

  // Walks the chunk's raw and normalized lines side by side (one normalized
  // line per raw line). A shard's range of a file stays open across chunks
  // until the shard closes or the next file begins.
  void Place(Chunk& c) override {
    const std::string& n = c.normalized;
    const char* raw = c.lines.data.data();
    const size_t file = c.lines.file;
    const uint64_t file_size = scanned_.files.at(file).size_bytes;
    check_.Update(n);
    size_t npos = 0, rpos = 0, run_n = 0, run_r = 0;  // the run not yet hashed starts at run_*
    const auto hash_run = [&] {
      if (range_hash_) {
        shard_hash_->Update(std::string_view(n).substr(run_n, npos - run_n));
        range_hash_->Update(raw + run_r, rpos - run_r);
      }
      run_n = npos;
      run_r = rpos;
    };
    for (uint64_t k = 0; npos < n.size(); ++k) {
      if (!shard_open_) OpenShard();
      if (!range_hash_ || range_file_ != file) {
        hash_run();
        OpenRange(file, c.first_row + k, c.lines.first_line + k);
      }
      const char* nl =
          static_cast<const char*>(std::memchr(n.data() + npos, '\n', n.size() - npos));
      const size_t row_bytes = static_cast<size_t>(nl - n.data()) + 1 - npos;
      const char* rnl =
          static_cast<const char*>(std::memchr(raw + rpos, '\n', c.lines.size - rpos));
      // The chunker ends a last line without '\n' with one the file lacks.
      const uint64_t raw_bytes =
          std::min<uint64_t>(static_cast<size_t>(rnl - raw) + 1 - rpos, file_size - offsets_[file]);
      offsets_[file] += raw_bytes;
      npos += row_bytes;
      rpos += raw_bytes;
      rows_ += 1;
      bytes_ += row_bytes;
      if (rows_ > scanned_.rows || bytes_ > scanned_.bytes) {
        throw ChangedBetweenPasses("the input's rows");
      }
      ShardWritten& shard = out_[shard_];
      shard.rows += 1;
      shard.bytes += row_bytes;
      shard.ranges.back().rows += 1;
      shard.ranges.back().length += raw_bytes;
      if (cutter_.Add(row_bytes)) {
        hash_run();
        CloseShard();
      }
    }
    if (shard_open_) hash_run();
  }
  void Written(Chunk&) override {}

  // After the pipeline: every shard cut, as pass 1 counted.
  std::vector<ShardWritten> Finish() {
    if (shard_open_) CloseShard();
    if (rows_ != scanned_.rows || bytes_ != scanned_.bytes || opened_ != out_.size() ||
        check_.HexDigest() != scanned_.check) {
      throw ChangedBetweenPasses("the input's rows");
    }
    return std::move(out_);
  }

 private:
  void OpenShard() {
    if (opened_ == out_.size()) throw ChangedBetweenPasses("the input's rows");
    shard_ = opened_++;
    shard_open_ = true;
    shard_hash_ = std::make_unique<io::Xxh3>();
  }

  void OpenRange(size_t file, uint64_t first_row, uint64_t first_line) {
    CloseRange();
    out_[shard_].ranges.push_back({file, offsets_[file], 0, 0, first_row, first_line, {}});
    range_hash_ = std::make_unique<io::Xxh3>();
    range_file_ = file;
  }

  void CloseRange() {
    if (!range_hash_) return;
    out_[shard_].ranges.back().checksum = io::Checksum::Xxh3(range_hash_->HexDigest());
    range_hash_.reset();
  }

  void CloseShard() {
    CloseRange();
    out_[shard_].checksum = io::Checksum::Xxh3(shard_hash_->HexDigest());
    shard_open_ = false;
  }

  const NormalizedInput& scanned_;
  ShardCutter cutter_;
  std::vector<uint64_t> offsets_;  // per input file: raw bytes placed so far
  std::vector<ShardWritten> out_;
  io::Xxh3 check_;
  uint64_t rows_ = 0, bytes_ = 0;
  size_t opened_ = 0, shard_ = 0;
  bool shard_open_ = false;
  std::unique_ptr<io::Xxh3> shard_hash_;  // of the open shard's normalized lines
  std::unique_ptr<io::Xxh3> range_hash_;  // of the open range's raw bytes (null: none open)
  size_t range_file_ = 0;
};

}  // namespace

const char* SecondPassName(SecondPass how) {
  switch (how) {
    case SecondPass::kCopy:
      return "copy";
    case SecondPass::kMinify:
      return "minify";
    case SecondPass::kNormalize:
      break;
  }
  return "normalize";
}

SecondPass SecondPassNamed(const std::string& name, const std::string& manifest) {
  for (const SecondPass how : {SecondPass::kCopy, SecondPass::kMinify, SecondPass::kNormalize}) {
    if (name == SecondPassName(how)) return how;
  }
  throw Error(manifest, 0, "input file normalization '" + name + "' is not known",
              "prepare the job again with this djshard");
}

NormalizedInput ScanNormalized(const std::vector<io::InputCandidate>& inputs,
                               const NormalizeRules& rules, int threads) {
  NormalizedInput result;
  result.second_pass.assign(inputs.size(), SecondPass::kCopy);
  InputReader reader(inputs, &result.files, nullptr);
  ScanSink sink(reader, &result);
  RunNormalizePipeline(inputs, rules, threads, reader, sink);
  sink.Finish();
  return result;
}

std::vector<ShardWritten> WriteNormalizedShards(const std::vector<io::InputCandidate>& inputs,
                                                const NormalizeRules& rules, int threads,
                                                const NormalizedInput& scanned,
                                                const std::vector<std::string>& shard_paths) {
  InputReader reader(inputs, nullptr, &scanned.files);
  ShardSink sink(scanned, shard_paths);
  RunNormalizePipeline(inputs, rules, threads, reader, sink, &scanned.second_pass);
  return sink.Finish();
}

std::vector<ShardWritten> CutReferenceShards(const std::vector<io::InputCandidate>& inputs,
                                             const NormalizeRules& rules, int threads,
                                             const NormalizedInput& scanned, uint64_t num_shards) {
  InputReader reader(inputs, nullptr, &scanned.files);
  RangeSink sink(scanned, num_shards);
  RunNormalizePipeline(inputs, rules, threads, reader, sink, &scanned.second_pass);
  return sink.Finish();
}

}  // namespace djshard::store
