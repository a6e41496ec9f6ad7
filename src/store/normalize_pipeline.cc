#include "src/store/normalize_pipeline.h"

#include <sys/stat.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "djshard/common/clock.h"
#include "djshard/common/signals.h"
#include "djshard/io/json_text.h"
#include "djshard/store/normalize.h"

namespace djshard::store {

namespace {

// Appends each line of `c`, normalized by `line_fn(line, k, &out)` (k: its
// index in the chunk), and a newline to c->normalized.
template <typename LineFn>
void ForEachLine(Chunk* c, LineFn line_fn) {
  std::string line_out;
  const io::LineChunk& in = c->lines;
  c->normalized.clear();
  c->normalized.reserve(in.size + in.size / 16);
  const char* data = in.data.data();
  size_t pos = 0;
  for (uint64_t k = 0; pos < in.size; ++k) {
    const char* nl = static_cast<const char*>(std::memchr(data + pos, '\n', in.size - pos));
    const size_t end = static_cast<size_t>(nl - data);
    line_fn(std::string_view(data + pos, end - pos), k, &line_out);
    c->normalized.append(line_out);
    c->normalized.push_back('\n');
    pos = end + 1;
  }
}

// Validates and normalizes every line; records what pass 2 will need to do.
void NormalizeChunk(RecordNormalizer& normalizer, const std::string& display_path, Chunk* c) {
  bool rebuilt = false;
  ForEachLine(c, [&](std::string_view line, uint64_t k, std::string* out) {
    rebuilt |=
        normalizer.Normalize(line, c->first_row + k, display_path, c->lines.first_line + k, out);
  });
  c->second_pass = SecondPass::kNormalize;
  if (!rebuilt) {
    const std::string_view stored = std::string_view(c->lines.data).substr(0, c->lines.size);
    c->second_pass = c->normalized == stored ? SecondPass::kCopy : SecondPass::kMinify;
  }
}

// Pass 2 for a file whose lines pass 1 found with nothing to add or rewrite:
// the stored lines (kCopy) or each one minified (kMinify), without a parse.
// A line changed since pass 1 changes the stream's hash, which pass 2 checks,
// or is no longer JSON that minifies.
void ReproduceChunk(SecondPass how, const std::string& display_path, Chunk* c) {
  if (how == SecondPass::kCopy) {
    c->normalized.assign(c->lines.data, 0, c->lines.size);
    return;
  }
  try {
    ForEachLine(
        c, [](std::string_view line, uint64_t, std::string* out) { io::MinifyJson(line, out); });
  } catch (const Error&) {
    throw ChangedBetweenPasses(display_path);
  }
}

// Reads the input (on the caller's thread), normalizes it on `threads`
// threads, hands the chunks to the sink in input order (on a placer thread)
// and writes their pieces on the normalizer threads. Run() rethrows the first
// failure in input order.
class NormalizePipeline {
 public:
  // `second_pass`, when given (pass 2), says per file which lines are
  // copied or minified rather than normalized again.
  NormalizePipeline(const std::vector<io::InputCandidate>& inputs, const NormalizeRules& rules,
                    int threads, ChunkReader& reader, ChunkSink& sink,
                    const std::vector<SecondPass>* second_pass = nullptr)
      : inputs_(inputs),
        rules_(rules),
        second_pass_(second_pass),
        threads_(std::max(1, threads)),
        max_in_flight_(static_cast<uint64_t>(threads_) * 2 + 2),
        reader_(reader),
        sink_(sink) {}

  void Run() {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads_; ++t) pool.emplace_back([this] { Normalize(); });
    std::thread placer([this] { Place(); });
    Read();
    placer.join();
    {
      // The normalizers end once every placed chunk is written, or at a stop.
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
    for (std::thread& t : pool) t.join();
    if (failure_) std::rethrow_exception(failure_);
  }

 private:
  // Under mu_.
  void Fail(std::exception_ptr error) {
    if (!failure_) failure_ = error;
    stop_ = true;
    cv_.notify_all();
  }

  // A normalizer thread: any chunk, any order; writing a placed chunk comes first.
  void Normalize() {
    RecordNormalizer normalizer(rules_.media_keys, rules_.media_root, rules_.index_keys);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      const auto all_placed = [&] { return end_of_input_ && placed_ == read_count_; };
      cv_.wait(lock, [&] { return !to_write_.empty() || !todo_.empty() || stop_ || all_placed(); });
      if (!to_write_.empty()) {
        std::unique_ptr<Chunk> c = std::move(to_write_.front());
        to_write_.pop_front();
        lock.unlock();
        std::exception_ptr error = Write(*c);
        lock.lock();
        if (error) Fail(error);
        ++written_;
        spare_.push_back(std::move(c));
        cv_.notify_all();
        continue;
      }
      if (todo_.empty()) return;  // stopped, or everything is placed and written
      Chunk* c = todo_.front();
      todo_.pop_front();
      lock.unlock();
      try {
        const SecondPass how =
            second_pass_ == nullptr ? SecondPass::kNormalize : second_pass_->at(c->lines.file);
        const std::string& display_path = inputs_[c->lines.file].display_path;
        if (how != SecondPass::kNormalize) {
          ReproduceChunk(how, display_path, c);
        } else {
          NormalizeChunk(normalizer, display_path, c);
        }
      } catch (...) {
        c->error = std::current_exception();
      }
      lock.lock();
      ready_.emplace(c->seq, std::move(owned_[c]));
      owned_.erase(c);
      cv_.notify_all();
    }
  }

  // Writes a placed chunk's pieces; returns the failure, if any.
  std::exception_ptr Write(Chunk& c) {
    std::exception_ptr error;
    try {
      for (const Piece& p : c.pieces) {
        io::PwriteFully(p.file->fd.get(), std::string_view(c.normalized).substr(p.begin, p.size),
                        p.offset, p.file->path);
      }
      sink_.Written(c);
    } catch (...) {
      error = std::current_exception();
    }
    c.pieces.clear();
    return error;
  }

  // The placer thread: chunks in input order to the sink, then to a writer.
  void Place() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] {
        return ready_.count(placed_) != 0 || stop_ || (end_of_input_ && placed_ == read_count_);
      });
      if (stop_ || ready_.count(placed_) == 0) return;
      std::unique_ptr<Chunk> c = std::move(ready_[placed_]);
      ready_.erase(placed_);
      if (c->error) return Fail(c->error);
      lock.unlock();
      std::exception_ptr error;
      try {
        sink_.Place(*c);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error) return Fail(error);
      ++placed_;
      if (c->pieces.empty()) {
        ++written_;
        spare_.push_back(std::move(c));
      } else {
        to_write_.push_back(std::move(c));
      }
      cv_.notify_all();
    }
  }

  // The reader, on the caller's thread, at most max_in_flight_ chunks ahead.
  void Read() {
    for (;;) {
      std::unique_ptr<Chunk> c;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || read_count_ - written_ < max_in_flight_; });
        if (stop_) return;
        if (!spare_.empty()) {
          c = std::move(spare_.back());
          spare_.pop_back();
        }
      }
      if (!c) c = std::make_unique<Chunk>();
      bool got = false;
      std::exception_ptr error;
      try {
        ThrowIfStopRequested();
        got = reader_.Next(c.get());
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (!got || error) end_of_input_ = true;
      cv_.notify_all();
      if (!got && !error) return;
      c->seq = read_count_++;
      if (error) {
        // Reported in input order, after any bad line read before it.
        c->error = error;
        ready_.emplace(c->seq, std::move(c));
        return;
      }
      Chunk* raw = c.get();
      owned_.emplace(raw, std::move(c));
      todo_.push_back(raw);
    }
  }

  const std::vector<io::InputCandidate>& inputs_;
  const NormalizeRules& rules_;
  const std::vector<SecondPass>* second_pass_;
  const int threads_;
  const uint64_t max_in_flight_;
  ChunkReader& reader_;
  ChunkSink& sink_;

  std::mutex mu_;  // everything below
  std::condition_variable cv_;
  std::deque<Chunk*> todo_;                           // read, waiting for a normalizer
  std::map<Chunk*, std::unique_ptr<Chunk>> owned_;    // chunks being normalized, by address
  std::map<uint64_t, std::unique_ptr<Chunk>> ready_;  // normalized (or failed), by seq
  std::deque<std::unique_ptr<Chunk>> to_write_;       // placed, to be written
  std::vector<std::unique_ptr<Chunk>> spare_;
  // Chunks read, placed (in order) and done with (in any order).
  uint64_t read_count_ = 0, placed_ = 0, written_ = 0;
  bool end_of_input_ = false, stop_ = false;
  std::exception_ptr failure_;  // the first failure in input order
};

}  // namespace

void FollowingDigest::StartFile(bool kept) {
  following_ = kept && bytes() == 0;
  followed_ = 0;
}

void FollowingDigest::Add(const Chunk& c) {
  if (following_ && c.second_pass == SecondPass::kCopy) {
    followed_ += c.normalized.size();
    return;
  }
  if (following_) {
    // The bytes followed are the file's bytes before this chunk.
    if (c.raw_before == nullptr) throw std::logic_error("a followed chunk has no raw state");
    following_ = false;
    sha_->CopyFrom(*c.raw_before);
    bytes_ += followed_;
    followed_ = 0;
  }
  sha_->Update(c.normalized);
  bytes_ += c.normalized.size();
}

void FollowingDigest::EndFile(const io::Sha256* raw, uint64_t size) {
  if (!following_) return;
  if (raw == nullptr || (followed_ != size && followed_ != size + 1)) {
    throw std::logic_error("a followed file ends without its raw state");
  }
  following_ = false;
  sha_->CopyFrom(*raw);
  if (followed_ == size + 1) sha_->Update("\n", 1);
  bytes_ += followed_;
  followed_ = 0;
}

void HashStoredChunk(io::Sha256& file_sha, uint64_t size, uint64_t* hashed, bool keep, Chunk* c) {
  c->raw_before.reset();
  if (keep) {
    auto before = std::make_shared<io::Sha256>();
    before->CopyFrom(file_sha);
    c->raw_before = std::move(before);
  }
  const size_t n = static_cast<size_t>(std::min<uint64_t>(c->lines.size, size - *hashed));
  file_sha.Update(c->lines.data.data(), n);
  *hashed += n;
}

FileStamp Stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) ThrowSystemError(path, "cannot stat");
  return {static_cast<uint64_t>(st.st_size), MtimeNanos(st)};
}

Error ChangedBetweenPasses(const std::string& what) {
  return Error(what, 0, "input changed between passes",
               "prepare again once nothing writes to the input");
}

void RunNormalizePipeline(const std::vector<io::InputCandidate>& inputs,
                          const NormalizeRules& rules, int threads, ChunkReader& reader,
                          ChunkSink& sink, const std::vector<SecondPass>* second_pass) {
  NormalizePipeline(inputs, rules, threads, reader, sink, second_pass).Run();
}

}  // namespace djshard::store
