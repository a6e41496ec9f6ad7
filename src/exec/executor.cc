#include "djshard/exec/executor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/io/input.h"
#include "djshard/io/json_text.h"
#include "djshard/io/record.h"

namespace djshard::exec {

namespace {

// A run of whole lines of one input file, read in one piece, with padding
// after it for the JSON parser. Lines are split by the thread that runs it.
struct Batch {
  uint64_t seq = 0;
  io::LineChunk chunk;
};

struct BatchResult {
  std::string output;
  std::string errors;
  std::vector<std::string> taps;  // rows after each tapped operator
  std::vector<uint64_t> tap_rows;
  uint64_t rows_in = 0, rows_out = 0, bytes_in = 0, error_count = 0;
  std::vector<OperatorCounters> counters;
};

// Per-thread scratch reused across batches.
struct Scratch {
  io::JsonLineParser parser;
  std::vector<std::string_view> lines;
  std::vector<io::Record> records;
  std::vector<ops::Sample> samples;
  std::vector<char> alive;
  std::string text;
  // Operators that process rows together: the live rows and their outcomes.
  std::vector<ops::Sample*> live;
  std::vector<size_t> live_index;
  std::vector<ops::RowOutcome> outcomes;
};

void AppendError(std::string* out, const std::string& op, const std::string& message,
                 const std::string& file, uint64_t line, const std::string& type = {}) {
  nlohmann::json e = {{"op", op}, {"error", message}, {"file", file}, {"line", line}};
  if (!type.empty()) e["error_type"] = type;
  out->append(e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  out->push_back('\n');
}

// Throws when `stop_check` says the run must stop: the signal's error for
// SIGINT/SIGTERM, else a cancellation (a worker that lost its claim).
void StopIfAsked(const std::function<bool()>& stop_check) {
  if (!stop_check()) return;
  ThrowIfStopRequested();
  throw Error("the run was cancelled", "its claim was lost");
}

// When the first batch enters each operator and the last leaves it
// (ExecOptions::op_event): the last is known once the input has ended and as
// many batches left the operator as were read.
class OperatorEdges {
 public:
  OperatorEdges(const Plan& plan, const ExecOptions& options)
      : options_(options),
        entered_(plan.operators.size()),
        ended_(plan.operators.size(), false),
        left_(plan.operators.size(), 0),
        totals_(plan.operators.size()) {
    for (size_t i = 0; i < totals_.size(); ++i) totals_[i].name = plan.operators[i].op->name();
  }
  void Enter(size_t i) {
    if (entered_[i].load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mu_);
    StartLocked(i);
  }
  void Leave(size_t i, const OperatorCounters& batch) {
    std::lock_guard<std::mutex> lock(mu_);
    OperatorCounters& t = totals_[i];
    t.rows_in += batch.rows_in;
    t.rows_out += batch.rows_out;
    t.errors += batch.errors;
    t.seconds += batch.seconds;
    ++left_[i];
    EndLocked(i);
  }
  // The input ended after `batches` batches.
  void EndOfInput(uint64_t batches) {
    std::lock_guard<std::mutex> lock(mu_);
    batches_ = batches;
    for (size_t i = options_.first_op; i < totals_.size(); ++i) EndLocked(i);
  }

 private:
  void StartLocked(size_t i) {
    if (entered_[i].load(std::memory_order_relaxed)) return;
    options_.op_event(i, nullptr);
    entered_[i].store(true, std::memory_order_relaxed);
  }
  void EndLocked(size_t i) {
    if (ended_[i] || !batches_ || left_[i] != *batches_) return;
    StartLocked(i);  // no batch at all: the operator still starts and ends
    ended_[i] = true;
    options_.op_event(i, &totals_[i]);
  }

  const ExecOptions& options_;
  std::mutex mu_;
  std::vector<std::atomic<bool>> entered_;
  std::vector<bool> ended_;
  std::vector<uint64_t> left_;            // batches that left each operator
  std::vector<OperatorCounters> totals_;  // over the batches that left
  std::optional<uint64_t> batches_;       // set when the input has ended
};

// `stop_check`, when set, is asked before the batch and every few records:
// true stops the batch. `edges`, when set, hears each operator's batch enter
// and leave.
void ProcessBatch(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
                  const Batch& batch, Scratch& s, BatchResult* r,
                  const std::function<bool()>& stop_check, const ExecOptions& options,
                  OperatorEdges* edges) {
  r->taps.resize(options.taps.size());
  r->tap_rows.assign(options.taps.size(), 0);
  for (std::string& t : r->taps) t.clear();
  size_t next_tap = 0;
  r->counters.resize(plan.operators.size());
  for (size_t i = 0; i < plan.operators.size(); ++i)
    r->counters[i].name = plan.operators[i].op->name();
  if (stop_check) StopIfAsked(stop_check);
  const io::LineChunk& chunk = batch.chunk;
  const std::string& file = inputs[chunk.file].display_path;
  // Split the batch into lines and parse each one.
  s.lines.clear();
  size_t pos = 0;
  while (pos < chunk.size) {
    const char* nl =
        static_cast<const char*>(std::memchr(chunk.data.data() + pos, '\n', chunk.size - pos));
    const size_t end = static_cast<size_t>(nl - chunk.data.data());
    s.lines.push_back(std::string_view(chunk.data.data() + pos, end - pos));
    pos = end + 1;
  }
  const size_t n = s.lines.size();
  if (s.records.size() < n) s.records.resize(n);
  if (s.samples.size() < n) s.samples.resize(n, ops::Sample(nullptr));
  s.alive.assign(n, 1);
  for (size_t k = 0; k < n; ++k) {
    const std::string_view line = s.lines[k];
    s.parser.ParseObject(line, file, chunk.first_line + k);
    s.records[k].AssignView(line);
    s.samples[k].Reset(&s.records[k]);
    // The parser has decoded the text already: hand it over instead of decoding twice.
    if (s.parser.GetString(plan.text_key, &s.text))
      s.samples[k].PreloadText(plan.text_key, std::move(s.text));
  }
  r->bytes_in = chunk.size;
  r->rows_in = n;
  // Tees the surviving rows after operator i into its tap, through a copy of
  // each record, so that the stream itself goes on unchanged.
  auto tap_after = [&](size_t i) {
    if (next_tap >= options.taps.size() || options.taps[next_tap] != i) return;
    const size_t t = next_tap++;
    std::string rows;
    std::string& out = options.compress_taps ? rows : r->taps[t];
    io::Record copy;
    for (size_t k = 0; k < n; ++k) {
      if (!s.alive[k]) continue;
      copy = s.records[k];
      s.samples[k].CommitTo(&copy, plan.has_filter);
      copy.Serialize(&out);
      out.push_back('\n');
      ++r->tap_rows[t];
    }
    if (options.compress_taps) io::AppendZstdFrame(rows, &r->taps[t]);
  };
  for (size_t i = options.first_op; i < plan.operators.size(); ++i) {
    const PlannedOperator& planned = plan.operators[i];
    const ops::Operator& op = *planned.op;
    const bool is_filter = op.kind() == ops::OpKind::kFilter;
    OperatorCounters& c = r->counters[i];
    if (edges != nullptr) edges->Enter(i);
    const double start = MonotonicSeconds();
    // A record error: drop the row and report it, or stop the run.
    auto fail_row = [&](size_t k, const std::string& message, const std::string& type) {
      const uint64_t line_no = chunk.first_line + k;
      if (!planned.skip_op_error) {
        throw Error(file, line_no, "operator '" + op.name() + "' failed: " + message,
                    "set skip_op_error: true to drop such records and keep going");
      }
      s.alive[k] = 0;
      ++c.errors;
      ++r->error_count;
      AppendError(&r->errors, op.name(), message, file, line_no, type);
    };
    if (op.processes_rows_together()) {
      if (stop_check) StopIfAsked(stop_check);
      s.live.clear();
      s.live_index.clear();
      for (size_t k = 0; k < n; ++k) {
        if (!s.alive[k]) continue;
        s.live.push_back(&s.samples[k]);
        s.live_index.push_back(k);
      }
      s.outcomes.assign(s.live.size(), ops::RowOutcome{});
      op.ProcessRows(s.live, s.outcomes);
      for (size_t j = 0; j < s.live.size(); ++j) {
        const size_t k = s.live_index[j];
        ++c.rows_in;
        if (!s.outcomes[j].error.empty()) {
          fail_row(k, s.outcomes[j].error, s.outcomes[j].error_type);
          continue;
        }
        if (!s.outcomes[j].keep) s.alive[k] = 0;
        if (s.alive[k]) ++c.rows_out;
      }
      c.seconds += MonotonicSeconds() - start;
      tap_after(i);
      if (edges != nullptr) edges->Leave(i, c);
      continue;
    }
    for (size_t k = 0; k < n; ++k) {
      if (!s.alive[k]) continue;
      if (stop_check && (k & 15) == 0) StopIfAsked(stop_check);
      ++c.rows_in;
      try {
        if (is_filter) {
          if (!static_cast<const ops::Filter&>(op).Process(s.samples[k])) s.alive[k] = 0;
        } else {
          static_cast<const ops::Mapper&>(op).Map(s.samples[k]);
        }
      } catch (const ops::OpError& e) {
        fail_row(k, e.what(), e.type());
        continue;
      } catch (const std::exception& e) {
        fail_row(k, e.what(), "");
        continue;
      }
      if (s.alive[k]) ++c.rows_out;
    }
    c.seconds += MonotonicSeconds() - start;
    tap_after(i);
    if (edges != nullptr) edges->Leave(i, c);
  }
  r->output.reserve(chunk.size + chunk.size / 8);
  for (size_t k = 0; k < n; ++k) {
    if (!s.alive[k]) continue;
    s.samples[k].Commit(plan.keep_stats && plan.has_filter);
    if (!plan.keep_stats) {
      s.records[k].Remove(ops::kStatsKey);
      s.records[k].Remove(ops::kMetaKey);
    }
    s.records[k].Serialize(&r->output);
    r->output.push_back('\n');
    ++r->rows_out;
  }
}

// Restores input order. Results arrive from any thread under their batch
// sequence number; the next one in order is written by one thread at a time
// and folded into the summary. Not thread-safe by itself: Add, TakeNext and
// Written run under the executor's mutex, Write outside it (TakeNext makes
// the caller the only writer until Written).
class OrderedWriter {
 public:
  OrderedWriter(io::OutputStream& output, io::OutputStream* errors, ExecSummary& summary,
                const ExecOptions& options, double start)
      : output_(output),
        errors_(errors),
        summary_(summary),
        options_(options),
        start_(start),
        last_progress_(start) {}

  void Add(uint64_t seq, BatchResult result) { pending_.emplace(seq, std::move(result)); }
  // Whether the next result in order is here and no one is writing.
  bool CanWrite() const { return !writing_ && pending_.count(next_) != 0; }
  // Takes the next result in order; the caller writes it.
  BatchResult TakeNext() {
    auto it = pending_.find(next_);
    BatchResult result = std::move(it->second);
    pending_.erase(it);
    writing_ = true;
    return result;
  }
  // Appends a taken result to the streams and counts it.
  void Write(const BatchResult& done) {
    output_.Append(done.output);
    if (options_.output_tee) {
      options_.output_tee(done.output, done.rows_out);
    }
    if (options_.tap_sink) {
      for (size_t t = 0; t < done.taps.size(); ++t) {
        options_.tap_sink(t, done.taps[t], done.tap_rows[t]);
      }
    }
    if (errors_ != nullptr && !done.errors.empty()) errors_->Append(done.errors);
    summary_.rows_in += done.rows_in;
    summary_.rows_out += done.rows_out;
    summary_.bytes_in += done.bytes_in;
    summary_.bytes_out += done.output.size();
    summary_.errors += done.error_count;
    for (size_t i = 0; i < done.counters.size(); ++i) {
      summary_.operators[i].rows_in += done.counters[i].rows_in;
      summary_.operators[i].rows_out += done.counters[i].rows_out;
      summary_.operators[i].errors += done.counters[i].errors;
      summary_.operators[i].seconds += done.counters[i].seconds;
    }
    const double now = MonotonicSeconds();
    if (options_.progress && now - last_progress_ >= 0.5) {
      last_progress_ = now;
      summary_.seconds = now - start_;
      options_.progress(summary_);
    }
  }
  // The taken result is written: the next one may go.
  void Written() {
    writing_ = false;
    ++next_;
  }
  // Results written so far.
  uint64_t written() const { return next_; }

 private:
  io::OutputStream& output_;
  io::OutputStream* errors_;
  ExecSummary& summary_;
  const ExecOptions& options_;
  const double start_;
  double last_progress_;
  std::map<uint64_t, BatchResult> pending_;
  uint64_t next_ = 0;
  bool writing_ = false;
};

}  // namespace

ExecSummary Execute(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
                    io::OutputStream& output, io::OutputStream* errors,
                    const ExecOptions& options) {
  const int threads = std::max(1, options.threads);
  const uint64_t max_in_flight = static_cast<uint64_t>(threads) * 2;
  const double start = MonotonicSeconds();

  io::LineChunker chunker(inputs.size(), options.batch_bytes, plan.batch_rows,
                          [&inputs](size_t i) { return io::OpenInput(inputs[i].path); });
  const std::function<bool(io::LineChunk*)> read_next =
      options.source ? options.source
                     : std::function<bool(io::LineChunk*)>(
                           [&chunker](io::LineChunk* c) { return chunker.Next(c); });
  uint64_t next_seq = 0;
  ExecSummary summary;
  summary.operators.resize(plan.operators.size());
  for (size_t i = 0; i < plan.operators.size(); ++i) {
    summary.operators[i].name = plan.operators[i].op->name();
  }

  // Every thread does every kind of work, one step at a time: write the next
  // result in input order, else read a batch and run it. Reading and writing
  // are each done by one thread at a time, so one thread runs the whole
  // pipeline alone and N threads keep N cores busy.
  std::mutex mu;
  std::condition_variable cv;  // a step became possible, or the run ended
  OrderedWriter writer(output, errors, summary, options, start);
  // Buffers go round (read -> processed -> written -> read again) instead of
  // being allocated for every batch: fresh memory costs page faults.
  std::vector<std::string> spare;
  auto take_spare = [&]() {
    std::string b;
    if (!spare.empty()) {
      b = std::move(spare.back());
      spare.pop_back();
    }
    b.clear();
    return b;
  };
  std::unique_ptr<OperatorEdges> edges;
  if (options.op_event) edges = std::make_unique<OperatorEdges>(plan, options);
  uint64_t read_count = 0;
  bool end_of_input = false, reading = false, failed = false;
  std::exception_ptr failure;

  const std::function<bool()> stop_check = [&options] {
    return StopRequested() || (options.cancel != nullptr && options.cancel->load());
  };
  auto run_steps = [&]() {
    Scratch scratch;
    std::unique_lock<std::mutex> lock(mu);
    try {
      for (;;) {
        if (failed) return;
        if (writer.CanWrite()) {
          BatchResult done = writer.TakeNext();
          lock.unlock();
          writer.Write(done);
          lock.lock();
          writer.Written();
          spare.push_back(std::move(done.output));
          cv.notify_all();
          continue;
        }
        // Read a batch and run it on this thread, where its bytes are
        // already in the cache; never more than max_in_flight batches ahead
        // of the writer, so memory stays bounded.
        if (!reading && !end_of_input && read_count - writer.written() < max_in_flight) {
          Batch batch;
          batch.chunk.data = take_spare();
          BatchResult result;
          result.output = take_spare();
          reading = true;
          lock.unlock();
          const bool got = read_next(&batch.chunk);
          if (got) batch.seq = next_seq++;
          lock.lock();
          reading = false;
          if (!got) {
            end_of_input = true;
            if (edges) edges->EndOfInput(read_count);
            spare.push_back(std::move(batch.chunk.data));
            spare.push_back(std::move(result.output));
            cv.notify_all();
            continue;
          }
          ++read_count;
          // Another thread may read the next batch meanwhile.
          cv.notify_all();
          lock.unlock();
          ProcessBatch(plan, inputs, batch, scratch, &result, stop_check, options, edges.get());
          lock.lock();
          writer.Add(batch.seq, std::move(result));
          spare.push_back(std::move(batch.chunk.data));
          cv.notify_all();
          continue;
        }
        if (end_of_input && writer.written() == read_count) return;
        cv.wait(lock);
      }
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      if (!failed) {
        failed = true;
        failure = std::current_exception();
      }
      cv.notify_all();
    }
  };

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(run_steps);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  summary.seconds = MonotonicSeconds() - start;
  return summary;
}

std::string SummaryJson(const ExecSummary& s, int threads) {
  nlohmann::json j;
  j["rows_in"] = s.rows_in;
  j["rows_out"] = s.rows_out;
  j["bytes_in"] = s.bytes_in;
  j["bytes_out"] = s.bytes_out;
  j["errors"] = s.errors;
  j["seconds"] = s.seconds;
  j["threads"] = threads;
  j["operators"] = nlohmann::json::array();
  for (const OperatorCounters& c : s.operators) j["operators"].push_back(OperatorCountersJson(c));
  return j.dump(2) + "\n";
}

nlohmann::json OperatorCountersJson(const OperatorCounters& c) {
  return {{"name", c.name},
          {"rows_in", c.rows_in},
          {"rows_out", c.rows_out},
          {"errors", c.errors},
          {"seconds", c.seconds}};
}

}  // namespace djshard::exec
