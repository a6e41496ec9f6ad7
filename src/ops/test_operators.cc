// Operators for black-box tests of the job protocol (slow shards). They are
// registered only when DJSHARD_ENABLE_TEST_OPERATORS=1.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <span>
#include <stdexcept>
#include <thread>

#include "djshard/common/signals.h"
#include "djshard/model/device_model.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

class TestSleepMapper : public Mapper {
 public:
  TestSleepMapper(const recipe::OperatorSpec& spec, const std::string& key) : Mapper(spec, key) {
    seconds_ = args().GetDouble("seconds", 1.0);
    fail_while_exists_ = args().GetString("fail_while_exists", "");
  }
  void Map(Sample&) const override {
    // A failure that goes away when a test removes the file: a shard that
    // fails deterministically until its cause is fixed.
    if (!fail_while_exists_.empty() && ::access(fail_while_exists_.c_str(), F_OK) == 0) {
      throw std::runtime_error("failing while " + fail_while_exists_ + " exists");
    }
    // Sleeps in slices, so that SIGINT/SIGTERM stop a slow record quickly.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds_);
    while (std::chrono::steady_clock::now() < until && !StopRequested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  double seconds_;
  std::string fail_while_exists_;
};

// FNV-1a of a text: the seed of the per-item test behaviours, so they never
// depend on thread timing.
uint64_t TextHash(std::string_view text, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Raises on every record whose text contains `marker`.
class TestPoisonMapper : public Mapper {
 public:
  TestPoisonMapper(const recipe::OperatorSpec& spec, const std::string& key) : Mapper(spec, key) {
    marker_ = args().GetString("marker", "POISON");
    if (marker_.empty()) args().Fail("marker", "must not be empty", "");
  }
  void Map(Sample& sample) const override {
    if (sample.Text(text_key()).find(marker_) != std::string::npos) {
      throw std::runtime_error("poisoned record (text contains '" + marker_ + "')");
    }
  }

 private:
  std::string marker_;
};

// Sleeps a pseudo-random 0..max_ms per record, seeded by `seed` and the text,
// so that completion order differs from input order.
class TestDelayMapper : public Mapper {
 public:
  TestDelayMapper(const recipe::OperatorSpec& spec, const std::string& key) : Mapper(spec, key) {
    seed_ = static_cast<uint64_t>(args().GetInt("seed", 0));
    max_ms_ = args().GetDouble("max_ms", 5.0);
    if (max_ms_ < 0) args().Fail("max_ms", "must be 0 or more", "");
  }
  void Map(Sample& sample) const override {
    const uint64_t h = TextHash(sample.Text(text_key()), seed_);
    const double ms = max_ms_ * static_cast<double>(h % 1000001) / 1000000.0;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  }

 private:
  uint64_t seed_ = 0;
  double max_ms_ = 5.0;
};

// Runs one row through an operator that processes rows together.
void MapAlone(const Operator& op, Sample& sample) {
  Sample* rows[] = {&sample};
  RowOutcome outcome;
  op.ProcessRows(rows, std::span<RowOutcome>(&outcome, 1));
  if (!outcome.error.empty()) throw std::runtime_error(outcome.error);
}

// A batched model stage with one replica: each call of up to batch_size rows
// holds the replica for call_overhead_us + item_us per row, sleeping (an
// accelerator's time, no CPU). Writes __dj__meta__.bench_score, a function of
// the row's text alone, and fails rows whose text contains fail_marker.
class BenchModelOp : public Mapper {
 public:
  BenchModelOp(const recipe::OperatorSpec& spec, const std::string& key) : Mapper(spec, key) {
    batch_size_ = static_cast<size_t>(std::max<int64_t>(1, args().GetInt("batch_size", 64)));
    call_overhead_us_ = args().GetDouble("call_overhead_us", 2000);
    item_us_ = args().GetDouble("item_us", 50);
    if (call_overhead_us_ < 0) args().Fail("call_overhead_us", "must be 0 or more", "");
    if (item_us_ < 0) args().Fail("item_us", "must be 0 or more", "");
    fail_marker_ = args().GetString("fail_marker", "");
    raise_marker_ = args().GetString("raise_marker", "");
    raise_type_ = args().GetString("raise_type", "");
  }
  bool processes_rows_together() const override { return true; }
  size_t preferred_batch_rows() const override { return batch_size_; }
  void Map(Sample& sample) const override { MapAlone(*this, sample); }
  void ProcessRows(std::span<Sample* const> rows, std::span<RowOutcome> outcomes) const override {
    for (size_t begin = 0; begin < rows.size(); begin += batch_size_) {
      const size_t end = std::min(rows.size(), begin + batch_size_);
      for (size_t i = begin; i < end && !raise_marker_.empty(); ++i) {
        if (rows[i]->Text(text_key()).find(raise_marker_) != std::string::npos) {
          throw OpError("model call raised on a batch holding '" + raise_marker_ + "'",
                        raise_type_);
        }
      }
      {
        std::lock_guard<std::mutex> replica(replica_);
        const double us = call_overhead_us_ + item_us_ * static_cast<double>(end - begin);
        std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(us));
      }
      for (size_t i = begin; i < end; ++i) {
        const std::string& text = rows[i]->Text(text_key());
        if (!fail_marker_.empty() && text.find(fail_marker_) != std::string::npos) {
          outcomes[i].error = "model op failed on a row containing '" + fail_marker_ + "'";
          continue;
        }
        rows[i]->SetMeta("bench_score", std::to_string(TextHash(text, 7) % 1000));
      }
    }
  }

 private:
  size_t batch_size_ = 64;
  double call_overhead_us_ = 2000;
  double item_us_ = 50;
  std::string fail_marker_;
  std::string raise_marker_;
  std::string raise_type_;
  mutable std::mutex replica_;  // one replica: calls take turns
};

// W2 of the lineage benchmark: a real model stage, a TorchScript package
// (bench/lineage_bench.sh builds a 3 x Linear(1024) MLP) on the CPU with one
// replica. Each row's `features` inputs are derived from its text's hash; the
// package's first output becomes __dj__meta__.bench_score. A row's result
// depends on the row alone (the CPU runs a TorchScript row by itself).
class BenchTorchOp : public Mapper {
 public:
  BenchTorchOp(const recipe::OperatorSpec& spec, const std::string& key) : Mapper(spec, key) {
    batch_size_ = static_cast<size_t>(std::max<int64_t>(1, args().GetInt("batch_size", 64)));
    features_ = args().GetInt("features", 1024);
    if (features_ < 1) args().Fail("features", "must be 1 or more", "");
    const std::string dir = args().GetString("model", "");
    if (dir.empty()) args().Fail("model", "is required", "a TorchScript package directory");
    try {
      model_ = model::DeviceModel::Get(dir, "cpu", model::ComputeDType::kFloat32);
    } catch (const Error& e) {
      args().Fail("model", e.what(), "bench/lineage_bench.sh builds the package");
    }
  }
  bool processes_rows_together() const override { return true; }
  size_t preferred_batch_rows() const override { return batch_size_; }
  void Map(Sample& sample) const override { MapAlone(*this, sample); }
  void ProcessRows(std::span<Sample* const> rows, std::span<RowOutcome>) const override {
    const size_t dim = static_cast<size_t>(features_);
    const size_t out_dim = static_cast<size_t>(model_->config().out_dim);
    for (size_t begin = 0; begin < rows.size(); begin += batch_size_) {
      const size_t n = std::min(rows.size(), begin + batch_size_) - begin;
      std::vector<int64_t> ids(n * dim), mask(n * dim, 1);
      for (size_t r = 0; r < n; ++r) {
        uint64_t x = TextHash(rows[begin + r]->Text(text_key()), 7);
        for (size_t k = 0; k < dim; ++k) {  // splitmix64
          x += 0x9e3779b97f4a7c15ULL;
          uint64_t z = x;
          z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
          z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
          ids[r * dim + k] = static_cast<int64_t>((z ^ (z >> 31)) % 65536);
        }
      }
      std::vector<float> out(n * out_dim);
      {
        std::lock_guard<std::mutex> replica(replica_);
        model_->Forward(ids.data(), mask.data(), nullptr, static_cast<int64_t>(n),
                        static_cast<int64_t>(dim), out.data());
      }
      for (size_t r = 0; r < n; ++r) {
        char score[32];
        std::snprintf(score, sizeof score, "%.6g", static_cast<double>(out[r * out_dim]));
        rows[begin + r]->SetMeta("bench_score", score);
      }
    }
  }

 private:
  size_t batch_size_ = 64;
  int64_t features_ = 1024;
  std::shared_ptr<const model::DeviceModel> model_;
  mutable std::mutex replica_;  // one replica: calls take turns
};

}  // namespace

std::unique_ptr<Operator> MakeBenchTorchOp(const recipe::OperatorSpec& spec,
                                           const std::string& text_key) {
  return std::make_unique<BenchTorchOp>(spec, text_key);
}

std::unique_ptr<Operator> MakeTestSleepMapper(const recipe::OperatorSpec& spec,
                                              const std::string& text_key) {
  return std::make_unique<TestSleepMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeTestPoisonMapper(const recipe::OperatorSpec& spec,
                                               const std::string& text_key) {
  return std::make_unique<TestPoisonMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeTestDelayMapper(const recipe::OperatorSpec& spec,
                                              const std::string& text_key) {
  return std::make_unique<TestDelayMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakeBenchModelOp(const recipe::OperatorSpec& spec,
                                           const std::string& text_key) {
  return std::make_unique<BenchModelOp>(spec, text_key);
}

const std::vector<BuiltinOperator>& TestOperators() {
  static const std::vector<BuiltinOperator> ops = {
      {"djshard_test_sleep_mapper",
       MakeTestSleepMapper,
       "Test only: sleeps `seconds` per record",
       {{"seconds", "1.0", "seconds to sleep per record"},
        {"fail_while_exists", "''", "fails every record while this file exists"}}},
      {"djshard_test_poison_mapper",
       MakeTestPoisonMapper,
       "Test only: raises on a record whose text contains `marker`",
       {{"marker", "POISON", "the text that makes the operator raise"}}},
      {"djshard_test_delay_mapper",
       MakeTestDelayMapper,
       "Test only: sleeps a pseudo-random 0..max_ms per record (seeded by seed and the text)",
       {{"seed", "0", "seed of the per-record delay"},
        {"max_ms", "5.0", "the longest delay in milliseconds"}}},
      {"djshard_bench_model_op",
       MakeBenchModelOp,
       "Test and benchmark only: a batched model stage with one replica; each call of up to "
       "batch_size rows sleeps call_overhead_us + item_us per row while holding the replica, "
       "and writes __dj__meta__.bench_score",
       {{"call_overhead_us", "2000", "microseconds per call"},
        {"item_us", "50", "microseconds per row of a call"},
        {"fail_marker", "''", "rows whose text contains it fail (empty: none)"},
        {"raise_marker", "''", "a whole call raises when one of its rows contains it"},
        {"raise_type", "''", "the error type of that raise (e.g. oom)"}}},
      {"djshard_bench_torch_op",
       MakeBenchTorchOp,
       "Benchmark only: a TorchScript package on the CPU as one replica (W2 of the lineage "
       "benchmark); each row's `features` inputs come from its text's hash, and the first "
       "output is written as __dj__meta__.bench_score",
       {{"model", "''", "the TorchScript package directory (required)"},
        {"features", "1024", "inputs per row"}}},
  };
  return ops;
}

const std::vector<CatalogueEntry>& TestOperatorCatalogue() {
  static const std::vector<CatalogueEntry> entries = {
      {"djshard_test_sleep_mapper", OpKind::kMapper, "cpu"},
      {"djshard_test_poison_mapper", OpKind::kMapper, "cpu"},
      {"djshard_test_delay_mapper", OpKind::kMapper, "cpu"},
      {"djshard_bench_model_op", OpKind::kMapper, "cpu"},
      {"djshard_bench_torch_op", OpKind::kMapper, "cpu"},
  };
  return entries;
}

}  // namespace djshard::ops
