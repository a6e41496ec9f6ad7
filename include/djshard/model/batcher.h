#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace djshard::model {

// One row for a model: its token ids (special tokens included), the position
// CLIP pools it at, and where its outputs go.
struct ModelRow {
  const std::vector<int64_t>* ids = nullptr;
  int64_t pool_index = 0;
  float* out = nullptr;        // out_dim floats
  bool out_of_memory = false;  // set when even a batch of this row alone ran out of device memory
};

// Runs a model over a padded batch: ids and mask are batch x seq, row-major.
// Throws djshard::model::DeviceOutOfMemory when the device runs out of memory.
using BatchForward =
    std::function<void(const int64_t* ids, const int64_t* mask, const int64_t* pool_index,
                       int64_t batch, int64_t seq, float* out)>;

struct BatcherOptions {
  int batch_size = 64;
  int out_dim = 1;
  int max_tokens = 512;       // the longest row accepted
  int64_t pad_token_id = 0;   // fills padded positions (mask 0)
  int64_t fill_token_id = 0;  // the one token (mask 1) of a pad row
  std::chrono::milliseconds max_batch_wait{5};
  // Run each call's rows at once in the calling thread, in batches of up to
  // batch_size rows as wide as their longest row, without pad rows or queues:
  // for a device whose results do not depend on batch shape (the CPU path
  // packs rows without padding).
  bool direct = false;
};

struct BatcherCounters {
  uint64_t batches = 0;
  uint64_t rows = 0;
  uint64_t pad_rows = 0;
  uint64_t oom_splits = 0;
};

// Shape-stable batching (SPEC-models §6): each row's length is rounded up to
// a bucket (16, 32, 64, 128, 256, 384, 512, then steps of 256), each bucket
// is a FIFO queue shared by every thread that calls Run, and every model call
// has shape batch_size x bucket, short batches filled with pad rows. A row's
// result then depends only on the row, whatever its batch mates, the thread
// count or when a partial bucket is flushed. Thread-safe.
class BucketBatcher {
 public:
  BucketBatcher(BatcherOptions options, BatchForward forward);

  // Runs every row of `rows` and returns when all have outputs; rows of
  // concurrent calls share batches. A thread whose rows wait in a partial
  // bucket flushes it at once when it is the only caller, else after
  // max_batch_wait. Rethrows the error of a failed batch that held one of
  // these rows. A batch that runs out of device memory is split in halves
  // (counted in oom_splits); a single row that still does not fit gets
  // out_of_memory set.
  void Run(std::span<ModelRow> rows);

  // The bucket of a row of `length` tokens (length <= max_tokens).
  static int BucketOf(int length, int max_tokens);

  BatcherCounters counters() const;

 private:
  struct Call;
  struct Entry {
    ModelRow* row;
    Call* call;
  };
  // Takes up to batch_size entries from the front of `bucket` (mu_ held).
  std::vector<Entry> TakeLocked(int bucket);
  // Runs `entries` as batches of shape batch x bucket (mu_ not held).
  void Execute(int bucket, std::span<Entry> entries, int batch);
  void Finish(std::vector<Entry>& entries, std::exception_ptr error);

  BatcherOptions options_;
  BatchForward forward_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, std::deque<Entry>> queues_;
  int callers_ = 0;
  BatcherCounters counters_;
};

}  // namespace djshard::model
