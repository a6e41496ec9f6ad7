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
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/io/fd.h"
#include "djshard/io/input.h"
#include "djshard/io/sha256.h"
#include "djshard/store/normalize.h"

namespace djshard::store {

namespace {

constexpr size_t kChunkBytes = 1 << 20;

// A run of whole lines of one input file, and what normalizing it gave.
struct Chunk {
  uint64_t seq = 0;
  size_t file = 0;
  uint64_t first_line = 1;  // 1-based line number of its first line in its file
  uint64_t first_row = 0;   // 0-based global row number of its first line
  std::string data;         // lines, each ending in '\n', then padding for the parser
  size_t size = 0;          // bytes of lines in data
  std::string normalized;   // the normalized lines, each ending in '\n'
  uint64_t rows = 0;
  std::exception_ptr error;  // the chunk's first bad line, or the reader's failure
};

struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

FileStamp Stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) ThrowSystemError(path, "cannot stat");
  return {static_cast<uint64_t>(st.st_size), MtimeNanos(st)};
}

void NormalizeChunk(RecordNormalizer& normalizer, const std::string& display_path, Chunk* c) {
  std::string line_out;
  c->normalized.clear();
  c->normalized.reserve(c->size + c->size / 16);
  const char* data = c->data.data();
  size_t pos = 0;
  uint64_t k = 0;
  while (pos < c->size) {
    const char* nl = static_cast<const char*>(std::memchr(data + pos, '\n', c->size - pos));
    const size_t end = static_cast<size_t>(nl - data);
    normalizer.Normalize(std::string_view(data + pos, end - pos), c->first_row + k, display_path,
                         c->first_line + k, &line_out);
    c->normalized.append(line_out);
    c->normalized.push_back('\n');
    ++k;
    pos = end + 1;
  }
  c->rows = k;
}

// Cuts each input file into chunks of whole lines. Runs on one thread.
class ChunkReader {
 public:
  explicit ChunkReader(const std::vector<io::InputCandidate>& inputs) : inputs_(inputs) {}

  // The next chunk, or false after the last one. Per-file stats go to *files
  // as each file ends.
  bool Next(Chunk* c, std::vector<InputFile>* files) {
    for (;;) {
      if (!source_) {
        if (file_ >= inputs_.size()) return false;
        const io::InputCandidate& in = inputs_[file_];
        before_ = Stamp(in.path);
        raw_hash_ = std::make_unique<io::Sha256>();
        source_ = io::OpenInput(in.path, raw_hash_.get());
        exhausted_ = false;
        carry_.clear();
        next_line_ = 1;
        file_rows_ = 0;
      }
      std::string& data = c->data;
      data.swap(carry_);
      carry_.clear();
      bool has_newline = data.find('\n') != std::string::npos;
      while (!exhausted_ && (data.size() < kChunkBytes || !has_newline)) {
        const size_t old = data.size();
        const size_t want = std::max(kChunkBytes, old + (64 << 10)) - old;
        data.resize(old + want);
        const size_t n = source_->Read(data.data() + old, want);
        data.resize(old + n);
        exhausted_ = (n == 0);
        has_newline = has_newline || std::memchr(data.data() + old, '\n', n) != nullptr;
      }
      // The file's last line may lack its '\n'.
      if (exhausted_ && !data.empty() && data.back() != '\n') data.push_back('\n');
      const size_t cut = exhausted_ ? data.size() : data.rfind('\n') + 1;
      carry_.assign(data, cut, std::string::npos);
      data.resize(cut);
      uint64_t lines = 0;
      for (const char* p = data.data();
           (p = static_cast<const char*>(std::memchr(p, '\n', data.data() + data.size() - p))) !=
           nullptr;
           ++p) {
        ++lines;
      }
      const size_t file = file_;
      if (exhausted_ && carry_.empty()) FinishFile(files, lines);
      if (data.empty()) continue;
      c->file = file;
      c->first_line = next_line_;
      c->first_row = next_row_;
      c->size = data.size();
      data.append(io::LineReader::kPadding, '\0');
      next_line_ += lines;
      next_row_ += lines;
      file_rows_ += lines;
      return true;
    }
  }

 private:
  void FinishFile(std::vector<InputFile>* files, uint64_t last_lines) {
    const io::InputCandidate& in = inputs_[file_];
    const FileStamp after = Stamp(in.path);
    if (after.size != before_.size || after.mtime_ns != before_.mtime_ns) {
      throw Error(in.display_path, 0, "input changed while it was being read",
                  "prepare again once the file is no longer being written");
    }
    files->push_back({in.path, in.relative_path, after.size, after.mtime_ns,
                      file_rows_ + last_lines, raw_hash_->HexDigest()});
    source_.reset();
    ++file_;
  }

  const std::vector<io::InputCandidate>& inputs_;
  size_t file_ = 0;
  std::unique_ptr<io::Sha256> raw_hash_;  // of the file's bytes as stored
  std::unique_ptr<io::ByteSource> source_;
  FileStamp before_;
  bool exhausted_ = false;
  std::string carry_;
  uint64_t next_line_ = 1, next_row_ = 0, file_rows_ = 0;
};

}  // namespace

NormalizedInput NormalizeInput(const std::vector<io::InputCandidate>& inputs,
                               const NormalizeRules& rules, const std::string& out_path,
                               int threads) {
  threads = std::max(1, threads);
  const io::ScopedFd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (out.get() < 0) ThrowSystemError(out_path, "cannot create");

  NormalizedInput result;
  io::Sha256 digest;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Chunk*> todo;                           // read, waiting for a normalizer
  std::map<uint64_t, std::unique_ptr<Chunk>> ready;  // normalized (or failed), by seq
  std::vector<std::unique_ptr<Chunk>> spare;
  uint64_t read_count = 0, written = 0;
  bool end_of_input = false, stop = false;
  std::exception_ptr failure;  // the first failure in input order
  const uint64_t max_in_flight = static_cast<uint64_t>(threads) * 2 + 2;

  // Normalizers: any chunk, any order.
  std::map<Chunk*, std::unique_ptr<Chunk>> owned;  // chunks in flight, by address
  auto normalize = [&]() {
    RecordNormalizer normalizer(rules.media_keys, rules.media_root, rules.index_keys);
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return !todo.empty() || stop || end_of_input; });
      if (todo.empty()) {
        if (stop || end_of_input) return;
        continue;
      }
      Chunk* c = todo.front();
      todo.pop_front();
      lock.unlock();
      try {
        NormalizeChunk(normalizer, inputs[c->file].display_path, c);
      } catch (...) {
        c->error = std::current_exception();
      }
      lock.lock();
      ready.emplace(c->seq, std::move(owned[c]));
      owned.erase(c);
      cv.notify_all();
    }
  };
  // The writer: chunks in input order, into the file and the digest.
  auto write = [&]() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] {
        return ready.count(written) != 0 || stop || (end_of_input && written == read_count);
      });
      if (ready.count(written) == 0) return;
      std::unique_ptr<Chunk> c = std::move(ready[written]);
      ready.erase(written);
      lock.unlock();
      std::exception_ptr error = c->error;
      if (!error) {
        try {
          io::WriteFully(out.get(), c->normalized, out_path);
          digest.Update(c->normalized);
          result.rows += c->rows;
          result.bytes += c->normalized.size();
        } catch (...) {
          error = std::current_exception();
        }
      }
      lock.lock();
      if (error) {
        failure = error;
        stop = true;
        cv.notify_all();
        return;
      }
      ++written;
      spare.push_back(std::move(c));
      cv.notify_all();
    }
  };

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(normalize);
  std::thread writer(write);

  // The reader, on this thread.
  ChunkReader reader(inputs);
  for (;;) {
    std::unique_ptr<Chunk> c;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stop || read_count - written < max_in_flight; });
      if (stop) break;
      if (!spare.empty()) {
        c = std::move(spare.back());
        spare.pop_back();
      }
    }
    if (!c) c = std::make_unique<Chunk>();
    bool got = false;
    std::exception_ptr error;
    try {
      ThrowIfStopRequested();
      got = reader.Next(c.get(), &result.files);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!got && !error) {
      end_of_input = true;
      cv.notify_all();
      break;
    }
    c->seq = read_count++;
    if (error) {
      // Reported in input order, after any bad line read before it.
      c->error = error;
      ready.emplace(c->seq, std::move(c));
      end_of_input = true;
      cv.notify_all();
      break;
    }
    Chunk* raw = c.get();
    owned.emplace(raw, std::move(c));
    todo.push_back(raw);
    cv.notify_all();
  }
  for (std::thread& t : pool) t.join();
  writer.join();
  if (failure) std::rethrow_exception(failure);
  result.digest = digest.HexDigest();
  return result;
}

std::vector<ShardRange> CutNormalized(const std::string& path, uint64_t rows, uint64_t bytes,
                                      uint64_t num_shards) {
  const io::ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) ThrowSystemError(path, "cannot open");
  ShardCutter cutter(rows, bytes, num_shards);
  std::vector<ShardRange> ranges(1);
  uint64_t offset = 0, row_start = 0;
  io::ReadChunks(fd.get(), path, 4 << 20, [&](std::string_view block) {
    const char* p = block.data();
    const char* end = p + block.size();
    while (const char* nl = static_cast<const char*>(std::memchr(p, '\n', end - p))) {
      const uint64_t row_end = offset + static_cast<uint64_t>(nl - block.data()) + 1;
      ShardRange& r = ranges.back();
      ++r.rows;
      r.bytes += row_end - row_start;
      const bool closes = cutter.Add(row_end - row_start);
      row_start = row_end;
      if (closes) ranges.push_back({row_end, 0, 0});
      p = nl + 1;
    }
    offset += block.size();
  });
  if (offset != bytes || ranges.size() != num_shards) {
    throw Error(path, 0, "normalized input changed while it was being cut",
                "prepare again; nothing else may write into the staging directory");
  }
  return ranges;
}

std::vector<std::string> WriteShards(const std::string& path, const std::vector<ShardRange>& ranges,
                                     const std::vector<std::string>& shard_paths, int threads) {
  std::vector<std::string> sha(ranges.size());
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr failure;
  auto copy = [&]() {
    std::string buf(1 << 20, '\0');
    try {
      const io::ScopedFd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (in.get() < 0) ThrowSystemError(path, "cannot open");
      for (size_t i = next++; i < ranges.size(); i = next++) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (failure) return;
        }
        const ShardRange& r = ranges[i];
        const std::string& to = shard_paths[i];
        const io::ScopedFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
        if (out.get() < 0) ThrowSystemError(to, "cannot create");
        io::Sha256 hash;
        for (uint64_t done = 0; done < r.bytes;) {
          const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), r.bytes - done));
          const ssize_t n =
              ::pread(in.get(), buf.data(), want, static_cast<off_t>(r.offset + done));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) ThrowSystemError(path, "cannot read");
          const std::string_view piece(buf.data(), static_cast<size_t>(n));
          hash.Update(piece);
          io::WriteFully(out.get(), piece, to);
          done += static_cast<uint64_t>(n);
        }
        if (::fsync(out.get()) != 0) ThrowSystemError(to, "cannot fsync");
        sha[i] = hash.HexDigest();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(ranges.size())));
  for (int t = 0; t < n; ++t) pool.emplace_back(copy);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  return sha;
}

}  // namespace djshard::store
