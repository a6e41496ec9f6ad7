#include "djshard/model/batcher.h"

#include <algorithm>
#include <cstring>

#include "djshard/model/device_model.h"

namespace djshard::model {

struct BucketBatcher::Call {
  size_t pending = 0;  // rows without outputs yet
  size_t queued = 0;   // rows still waiting in a queue
  std::exception_ptr error;
};

BucketBatcher::BucketBatcher(BatcherOptions options, BatchForward forward)
    : options_(options), forward_(std::move(forward)) {}

int BucketBatcher::BucketOf(int length, int max_tokens) {
  static constexpr int kBuckets[] = {16, 32, 64, 128, 256, 384, 512};
  int bucket = 0;
  for (int b : kBuckets) {
    if (length <= b) {
      bucket = b;
      break;
    }
  }
  if (bucket == 0) bucket = 512 + (length - 512 + 255) / 256 * 256;
  // Never wider than the model's positions allow.
  return std::max(std::min(bucket, max_tokens), length);
}

BatcherCounters BucketBatcher::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

std::vector<BucketBatcher::Entry> BucketBatcher::TakeLocked(int bucket) {
  std::deque<Entry>& q = queues_[bucket];
  const size_t n = std::min(q.size(), static_cast<size_t>(options_.batch_size));
  std::vector<Entry> taken(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(n));
  q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(n));
  for (Entry& e : taken) --e.call->queued;
  return taken;
}

void BucketBatcher::Execute(int bucket, std::span<Entry> entries, int batch) {
  const size_t seq = static_cast<size_t>(bucket);
  std::vector<int64_t> ids(static_cast<size_t>(batch) * seq, options_.pad_token_id);
  std::vector<int64_t> mask(static_cast<size_t>(batch) * seq, 0);
  std::vector<int64_t> pool(static_cast<size_t>(batch), 0);
  for (size_t r = 0; r < static_cast<size_t>(batch); ++r) {
    if (r < entries.size()) {
      const std::vector<int64_t>& row = *entries[r].row->ids;
      std::copy(row.begin(), row.end(), ids.begin() + static_cast<std::ptrdiff_t>(r * seq));
      std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(r * seq), row.size(), 1);
      pool[r] = entries[r].row->pool_index;
    } else {
      // A pad row: one token with mask 1 (an all-zero mask would give NaN).
      ids[r * seq] = options_.fill_token_id;
      mask[r * seq] = 1;
    }
  }
  std::vector<float> out(static_cast<size_t>(batch) * static_cast<size_t>(options_.out_dim));
  try {
    forward_(ids.data(), mask.data(), pool.data(), batch, bucket, out.data());
  } catch (const DeviceOutOfMemory&) {
    if (entries.size() == 1 && batch == 1) {
      entries[0].row->out_of_memory = true;
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.oom_splits;
    }
    const size_t half = (entries.size() + 1) / 2;
    Execute(bucket, entries.subspan(0, half), static_cast<int>(half));
    if (entries.size() > half) {
      Execute(bucket, entries.subspan(half), static_cast<int>(entries.size() - half));
    }
    return;
  }
  const size_t d = static_cast<size_t>(options_.out_dim);
  for (size_t r = 0; r < entries.size(); ++r) {
    std::memcpy(entries[r].row->out, out.data() + r * d, d * sizeof(float));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.batches;
  counters_.rows += entries.size();
  counters_.pad_rows += static_cast<uint64_t>(batch) - entries.size();
}

void BucketBatcher::Finish(std::vector<Entry>& entries, std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries) {
    --e.call->pending;
    if (error && !e.call->error) e.call->error = error;
  }
  cv_.notify_all();
}

void BucketBatcher::Run(std::span<ModelRow> rows) {
  if (options_.direct) {
    Call call;
    std::vector<Entry> entries;
    for (size_t start = 0; start < rows.size(); start += static_cast<size_t>(options_.batch_size)) {
      const size_t n = std::min(rows.size() - start, static_cast<size_t>(options_.batch_size));
      entries.clear();
      int width = 1;
      for (size_t r = start; r < start + n; ++r) {
        entries.push_back(Entry{&rows[r], &call});
        width = std::max(width, static_cast<int>(rows[r].ids->size()));
      }
      Execute(width, entries, static_cast<int>(n));
    }
    return;
  }
  Call call;
  std::unique_lock<std::mutex> lock(mu_);
  ++callers_;
  call.pending = rows.size();
  call.queued = rows.size();
  for (ModelRow& row : rows) {
    const int length = static_cast<int>(row.ids->size());
    queues_[BucketOf(length, options_.max_tokens)].push_back(Entry{&row, &call});
  }
  cv_.notify_all();
  auto deadline = std::chrono::steady_clock::now() + options_.max_batch_wait;
  while (call.pending > 0) {
    // A full bucket, whoever's rows it holds.
    int bucket = 0;
    for (auto& [b, q] : queues_) {
      if (q.size() >= static_cast<size_t>(options_.batch_size)) {
        bucket = b;
        break;
      }
    }
    // Else a partial bucket holding rows of this call, when waiting longer
    // cannot fill it.
    if (bucket == 0 && call.queued > 0 &&
        (callers_ == 1 || std::chrono::steady_clock::now() >= deadline)) {
      for (auto& [b, q] : queues_) {
        if (std::any_of(q.begin(), q.end(), [&](const Entry& e) { return e.call == &call; })) {
          bucket = b;
          break;
        }
      }
    }
    if (bucket == 0) {
      if (call.queued > 0) {
        cv_.wait_until(lock, deadline);
      } else {
        cv_.wait(lock);  // the rest of this call's rows run on other threads
      }
      continue;
    }
    std::vector<Entry> batch = TakeLocked(bucket);
    lock.unlock();
    std::exception_ptr error;
    try {
      Execute(bucket, batch, options_.batch_size);
    } catch (...) {
      error = std::current_exception();
    }
    Finish(batch, error);
    lock.lock();
    deadline = std::chrono::steady_clock::now() + options_.max_batch_wait;
  }
  --callers_;
  cv_.notify_all();
  if (call.error) std::rethrow_exception(call.error);
}

}  // namespace djshard::model
