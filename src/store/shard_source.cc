#include "djshard/store/shard_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "djshard/common/clock.h"
#include "djshard/common/text.h"
#include "djshard/io/fd.h"
#include "djshard/io/json_text.h"
#include "djshard/store/normalize.h"
#include "src/store/normalize_pass.h"

namespace djshard::store {

namespace {

constexpr size_t kReadBlock = 1 << 20;
constexpr uint64_t kBlockLine = 33;  // a check block's line in input_blocks.xxh3

// A reference shard's ranges, read in order and normalized line by line.
class ReferenceSource : public io::ByteSource {
 public:
  ReferenceSource(const JobPaths& job, const Manifest& m, const ShardEntry& shard,
                  io::ChecksumHasher* hash)
      : m_(m),
        shard_(shard),
        hash_(hash),
        job_(job),
        blocks_path_(job.InJob(kInputBlocksFile)),
        normalizer_(m.media_keys, m.media_root, m.index_keys) {}

  size_t Read(char* buf, size_t capacity) override {
    while (out_pos_ == out_.size()) {
      out_.clear();
      out_pos_ = 0;
      if (!Fill()) return 0;
    }
    const size_t n = std::min(capacity, out_.size() - out_pos_);
    std::memcpy(buf, out_.data() + out_pos_, n);
    if (hash_ != nullptr) hash_->Update(buf, n);
    out_pos_ += n;
    return n;
  }

 private:
  // Reads the next block of the current range and normalizes its whole lines
  // into out_; false once every range is read.
  bool Fill() {
    if (range_ == shard_.ranges.size()) return false;
    const ShardRange& r = shard_.ranges[range_];
    if (fd_.get() < 0) Open(r);
    if (m_.check_block_bytes > 0) {
      ReadChecked(r);
    } else {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(kReadBlock, r.length - done_));
      const size_t kept = raw_.size();
      raw_.resize(kept + want);
      PreadAll(r, raw_.data() + kept, want, r.offset + done_);
      range_hash_->Update(raw_.data() + kept, want);
      done_ += want;
    }
    size_t pos = 0;
    for (;;) {
      const char* nl =
          static_cast<const char*>(std::memchr(raw_.data() + pos, '\n', raw_.size() - pos));
      if (nl == nullptr) break;
      const size_t end = static_cast<size_t>(nl - raw_.data());
      Line(r, std::string_view(raw_.data() + pos, end - pos));
      pos = end + 1;
    }
    raw_.erase(0, pos);
    if (done_ == r.length) EndRange(r);
    return true;
  }

  void PreadAll(const ShardRange& r, char* buf, size_t want, uint64_t offset) {
    size_t got = 0;
    while (got < want) {
      const ssize_t n = ::pread(fd_.get(), buf + got, want - got, static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ThrowSystemError(Path(r), "cannot read");
      if (n == 0) throw Changed(r, "it is shorter than when the job was prepared");
      got += static_cast<size_t>(n);
    }
  }

  // A job whose input is checked by blocks: reads the next run of whole check
  // blocks that holds the range's next bytes, checks each block against
  // input_blocks.xxh3, and keeps the range's bytes of them in raw_.
  void ReadChecked(const ShardRange& r) {
    const uint64_t block = m_.check_block_bytes;
    const uint64_t file_size = m_.input_files[r.file].size_bytes;
    const uint64_t from = r.offset + done_, range_end = r.offset + r.length;
    const uint64_t start = from - from % block;
    const uint64_t stop =
        std::min({start + kReadBlock, (range_end + block - 1) / block * block, file_size});
    blocks_buf_.resize(static_cast<size_t>(stop - start));
    PreadAll(r, blocks_buf_.data(), blocks_buf_.size(), start);
    const uint64_t first = m_.input_files[r.file].check_first_block + start / block;
    const uint64_t count = (stop - start + block - 1) / block;
    std::string expected(static_cast<size_t>(count * kBlockLine), '\0');
    if (blocks_fd_.get() < 0) {
      blocks_fd_.reset(::open(blocks_path_.c_str(), O_RDONLY | O_CLOEXEC));
      if (blocks_fd_.get() < 0) ThrowSystemError(blocks_path_, "cannot open");
    }
    for (size_t got = 0; got < expected.size();) {
      const ssize_t n = ::pread(blocks_fd_.get(), expected.data() + got, expected.size() - got,
                                static_cast<off_t>(first * kBlockLine + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ThrowSystemError(blocks_path_, "cannot read");
      if (n == 0) {
        throw Error(blocks_path_, 0, "the input's check blocks end early",
                    "the job directory was changed; prepare the job again");
      }
      got += static_cast<size_t>(n);
    }
    for (uint64_t k = 0; k < count; ++k) {
      const uint64_t at = start + k * block, len = std::min(block, stop - at);
      io::Xxh3 h;
      h.Update(blocks_buf_.data() + (at - start), static_cast<size_t>(len));
      if (expected.compare(static_cast<size_t>(k * kBlockLine), 32, h.HexDigest()) != 0) {
        // The job's own record of the blocks may be what changed.
        CheckInputBlocksFile(job_, m_);
        throw Changed(r, "its bytes " + std::to_string(at) + "-" + std::to_string(at + len - 1) +
                             " differ (xxh3_128 of its check block " + std::to_string(first + k) +
                             ")");
      }
    }
    const uint64_t take = std::min(stop, range_end) - from;
    raw_.append(blocks_buf_.data() + (from - start), static_cast<size_t>(take));
    done_ += take;
  }

  void Open(const ShardRange& r) {
    const InputFile& file = m_.input_files[r.file];
    fd_.reset(::open(file.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd_.get() < 0 && errno == ENOENT) throw Changed(r, "it no longer exists");
    if (fd_.get() < 0) ThrowSystemError(file.path, "cannot open");
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) ThrowSystemError(file.path, "cannot stat");
    if (static_cast<uint64_t>(st.st_size) != file.size_bytes) {
      throw Changed(r, "its size is " + std::to_string(st.st_size) + " bytes, prepare recorded " +
                           std::to_string(file.size_bytes));
    }
    ::posix_fadvise(fd_.get(), static_cast<off_t>(r.offset), static_cast<off_t>(r.length),
                    POSIX_FADV_SEQUENTIAL);
    how_ = SecondPassNamed(file.normalization, "manifest.json");
  }

  // The range's last line may lack its '\n' (the file's last line); then its
  // rows and raw hash are checked, and the next range begins.
  void EndRange(const ShardRange& r) {
    if (!raw_.empty()) Line(r, raw_);
    raw_.clear();
    if (lines_ != r.rows) {
      throw Changed(r, "lines " + std::to_string(r.first_line) + "-" +
                           std::to_string(r.first_line + r.rows - 1) + " are now " +
                           std::to_string(lines_) + " line(s)");
    }
    if (!r.checksum.empty() && io::Checksum::Xxh3(range_hash_->HexDigest()) != r.checksum) {
      throw Changed(r, "the bytes of lines " + std::to_string(r.first_line) + "-" +
                           std::to_string(r.first_line + r.rows - 1) + " differ (" +
                           r.checksum.field() + ")");
    }
    ++range_;
    done_ = 0;
    lines_ = 0;
    range_hash_ = std::make_unique<io::Xxh3>();
    const bool same_file = range_ < shard_.ranges.size() && shard_.ranges[range_].file == r.file;
    if (!same_file) fd_.reset();
  }

  // One raw line, as prepare's second pass normalizes it.
  void Line(const ShardRange& r, std::string_view line) {
    if (lines_ == r.rows) throw Changed(r, "it has more lines than when the job was prepared");
    try {
      if (how_ == SecondPass::kCopy) {
        out_.append(line);
      } else if (how_ == SecondPass::kMinify) {
        io::MinifyJson(line, &normalized_);
        out_.append(normalized_);
      } else {
        normalizer_.Normalize(line, r.first_row + lines_, Path(r), r.first_line + lines_,
                              &normalized_);
        out_.append(normalized_);
      }
    } catch (const InputChangedError&) {
      throw;
    } catch (const Error& e) {
      throw Changed(r, "line " + std::to_string(r.first_line + lines_) +
                           " is no longer the record prepare read (" + e.message() + ")");
    }
    out_.push_back('\n');
    ++lines_;
  }

  const std::string& Path(const ShardRange& r) const { return m_.input_files[r.file].path; }

  InputChangedError Changed(const ShardRange& r, const std::string& what) const {
    return InputChangedError(Path(r), 0, "input changed after prepare: " + what,
                             "restore the file as it was when the job was prepared, or prepare "
                             "a new job; shard " +
                                 shard_.id + " reads it");
  }

  const Manifest& m_;
  const ShardEntry& shard_;
  io::ChecksumHasher* hash_;
  const JobPaths& job_;
  const std::string blocks_path_;
  RecordNormalizer normalizer_;
  io::ScopedFd blocks_fd_;
  std::string blocks_buf_;
  io::ScopedFd fd_;
  SecondPass how_ = SecondPass::kNormalize;  // the open file's normalization
  size_t range_ = 0;
  uint64_t done_ = 0;   // raw bytes of the range read
  uint64_t lines_ = 0;  // lines of the range normalized
  std::unique_ptr<io::Xxh3> range_hash_ = std::make_unique<io::Xxh3>();
  std::string raw_;  // read, after the last whole line
  std::string out_;  // normalized, not yet returned from out_pos_
  size_t out_pos_ = 0;
  std::string normalized_;
};

std::string InputChangedPath(const JobPaths& job) { return job.StateDir() + "/input_changed.json"; }

}  // namespace

std::unique_ptr<io::ByteSource> OpenShard(const JobPaths& job, const Manifest& manifest,
                                          const ShardEntry& shard, io::ChecksumHasher* hash) {
  if (manifest.shards_mode != ShardsMode::kReference) {
    return io::OpenInput(job.InJob(shard.path), hash);
  }
  return std::make_unique<ReferenceSource>(job, manifest, shard, hash);
}

void CheckShardUnchanged(const JobPaths& job, const Manifest& manifest, const ShardEntry& shard) {
  if (manifest.shards_mode != ShardsMode::kReference) return;
  ReferenceSource source(job, manifest, shard, nullptr);
  std::vector<char> block(kReadBlock);
  while (source.Read(block.data(), block.size()) > 0) {
  }
}

void CheckInputBlocksFile(const JobPaths& job, const Manifest& manifest) {
  if (manifest.check_block_bytes == 0) return;
  const std::string path = job.InJob(kInputBlocksFile);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) ThrowSystemError(path, "cannot stat");
  const io::Checksum hash = io::ChecksumOfFile(path);
  if (static_cast<uint64_t>(st.st_size) != manifest.check_blocks_bytes ||
      hash != manifest.check_blocks_checksum) {
    throw Error(path, 0,
                "the input's check blocks differ from the manifest (" + std::to_string(st.st_size) +
                    " bytes, " + hash.Short() + "; recorded " +
                    std::to_string(manifest.check_blocks_bytes) + " bytes, " +
                    manifest.check_blocks_checksum.Short() + ")",
                "the job directory was changed; prepare the job again");
  }
}

void RecordInputChanged(const JobPaths& job, io::Disk& disk, const InputChangedRecord& record) {
  const nlohmann::json j = {{"file", record.file},
                            {"shard_id", record.shard_id},
                            {"message", record.message},
                            {"hostname", record.hostname},
                            {"detected_at", record.detected_at}};
  disk.PublishLink(InputChangedPath(job), j.dump(2) + "\n");
}

std::optional<InputChangedRecord> ReadInputChanged(const JobPaths& job, io::Disk& disk) {
  const std::string path = InputChangedPath(job);
  if (!disk.Stat(path)) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(disk.Read(path));
    return InputChangedRecord{j.at("file").get<std::string>(), j.at("shard_id").get<std::string>(),
                              j.at("message").get<std::string>(),
                              j.at("hostname").get<std::string>(),
                              j.at("detected_at").get<std::string>()};
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, 0, std::string("record is not valid: ") + e.what(),
                "the job directory was edited");
  }
}

Error InputChangedJobError(const InputChangedRecord& record, const std::string& job_dir) {
  return Error(record.file, 0,
               "the job failed: " + record.message + " (found by " + record.hostname + " in " +
                   record.shard_id + " at " + record.detected_at + ")",
               "restore the file as it was when the job was prepared and remove " + job_dir +
                   "/state/input_changed.json, or prepare a new job");
}

}  // namespace djshard::store
