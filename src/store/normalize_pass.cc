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
  uint64_t offset = 0;     // of its normalized bytes in the stream, once known
  uint64_t first_row = 0;  // 0-based global row number of its first line
  io::LineChunk lines;
  std::string normalized;    // the normalized lines, each ending in '\n'
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
  const io::LineChunk& in = c->lines;
  c->normalized.clear();
  c->normalized.reserve(in.size + in.size / 16);
  const char* data = in.data.data();
  size_t pos = 0;
  for (uint64_t k = 0; pos < in.size; ++k) {
    const char* nl = static_cast<const char*>(std::memchr(data + pos, '\n', in.size - pos));
    const size_t end = static_cast<size_t>(nl - data);
    normalizer.Normalize(std::string_view(data + pos, end - pos), c->first_row + k, display_path,
                         in.first_line + k, &line_out);
    c->normalized.append(line_out);
    c->normalized.push_back('\n');
    pos = end + 1;
  }
}

// Reads the inputs as chunks of whole lines, hashing each file's stored bytes
// and checking that it did not change while it was read. Runs on one thread.
class InputReader {
 public:
  InputReader(const std::vector<io::InputCandidate>& inputs, std::vector<InputFile>* files)
      : inputs_(inputs),
        files_(files),
        chunker_(
            inputs.size(), kChunkBytes, 0, [this](size_t i) { return Open(i); },
            [this](size_t i, uint64_t lines) { Close(i, lines); }) {}

  // The next chunk, or false after the last one.
  bool Next(Chunk* c) {
    if (!chunker_.Next(&c->lines)) return false;
    c->first_row = next_row_;
    next_row_ += c->lines.lines;
    return true;
  }

 private:
  std::unique_ptr<io::ByteSource> Open(size_t i) {
    before_ = Stamp(inputs_[i].path);
    raw_hash_ = std::make_unique<io::Sha256>();
    return io::OpenInput(inputs_[i].path, raw_hash_.get());
  }
  void Close(size_t i, uint64_t lines) {
    const io::InputCandidate& in = inputs_[i];
    const FileStamp after = Stamp(in.path);
    if (after.size != before_.size || after.mtime_ns != before_.mtime_ns) {
      throw Error(in.display_path, 0, "input changed while it was being read",
                  "prepare again once the file is no longer being written");
    }
    files_->push_back(
        {in.path, in.relative_path, after.size, after.mtime_ns, lines, raw_hash_->HexDigest()});
  }

  const std::vector<io::InputCandidate>& inputs_;
  std::vector<InputFile>* files_;
  FileStamp before_;
  std::unique_ptr<io::Sha256> raw_hash_;  // of the file's bytes as stored
  uint64_t next_row_ = 0;
  io::LineChunker chunker_;  // last: its callbacks use the members above
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
  std::deque<std::unique_ptr<Chunk>> to_write;       // placed in the stream, to be written
  std::vector<std::unique_ptr<Chunk>> spare;
  // Chunks read, placed in the stream (in order) and written (in any order).
  uint64_t read_count = 0, placed = 0, written = 0;
  uint64_t stream_end = 0;
  bool end_of_input = false, stop = false;
  std::exception_ptr failure;  // the first failure in input order
  const uint64_t max_in_flight = static_cast<uint64_t>(threads) * 2 + 2;

  // Normalizers: any chunk, any order; writing a placed chunk comes first.
  std::map<Chunk*, std::unique_ptr<Chunk>> owned;  // chunks being normalized, by address
  auto normalize = [&]() {
    RecordNormalizer normalizer(rules.media_keys, rules.media_root, rules.index_keys);
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      const auto all_placed = [&] { return end_of_input && placed == read_count; };
      cv.wait(lock, [&] { return !to_write.empty() || !todo.empty() || stop || all_placed(); });
      if (!to_write.empty()) {
        std::unique_ptr<Chunk> c = std::move(to_write.front());
        to_write.pop_front();
        lock.unlock();
        std::exception_ptr error;
        try {
          io::PwriteFully(out.get(), c->normalized, c->offset, out_path);
        } catch (...) {
          error = std::current_exception();
        }
        lock.lock();
        if (error && !failure) {
          failure = error;
          stop = true;
        }
        ++written;
        spare.push_back(std::move(c));
        cv.notify_all();
        continue;
      }
      if (todo.empty()) return;  // stopped, or everything is placed and written
      Chunk* c = todo.front();
      todo.pop_front();
      lock.unlock();
      try {
        NormalizeChunk(normalizer, inputs[c->lines.file].display_path, c);
      } catch (...) {
        c->error = std::current_exception();
      }
      lock.lock();
      ready.emplace(c->seq, std::move(owned[c]));
      owned.erase(c);
      cv.notify_all();
    }
  };
  // The placer: chunks in input order into the digest, each given its offset
  // in the stream; a normalizer then writes it there.
  auto place = [&]() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] {
        return ready.count(placed) != 0 || stop || (end_of_input && placed == read_count);
      });
      if (stop || ready.count(placed) == 0) return;
      std::unique_ptr<Chunk> c = std::move(ready[placed]);
      ready.erase(placed);
      if (c->error) {
        if (!failure) failure = c->error;
        stop = true;
        cv.notify_all();
        return;
      }
      c->offset = stream_end;
      stream_end += c->normalized.size();
      lock.unlock();
      digest.Update(c->normalized);
      result.rows += c->lines.lines;
      result.bytes += c->normalized.size();
      lock.lock();
      ++placed;
      to_write.push_back(std::move(c));
      cv.notify_all();
    }
  };

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(normalize);
  std::thread placer(place);

  // The reader, on this thread.
  InputReader reader(inputs, &result.files);
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
      got = reader.Next(c.get());
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
  placer.join();
  {
    // The normalizers end once every placed chunk is written, or at a stop.
    std::lock_guard<std::mutex> lock(mu);
    cv.notify_all();
  }
  for (std::thread& t : pool) t.join();
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
        CrashPoint("prepare_shard_cut");
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
