#include "djshard/exec/dedup_run.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>
#include <utility>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/io/fd.h"
#include "djshard/io/input.h"
#include "djshard/io/json_text.h"
#include "djshard/io/record.h"
#include "djshard/ops/dedup.h"

namespace djshard::exec {

namespace fs = std::filesystem;
using ops::dedup::DedupOperator;

namespace {

// Where an input row came from: an index into the run's file names and its
// 1-based line there.
struct Origin {
  uint64_t line = 0;
  uint32_t file = 0;
};

// The file names origins point into, shared by every stage of a run.
class OriginNames {
 public:
  explicit OriginNames(const std::vector<io::InputCandidate>& inputs) {
    for (const io::InputCandidate& in : inputs) Index(in.display_path);
  }
  uint32_t Index(const std::string& name) {
    auto [it, added] = index_.emplace(name, static_cast<uint32_t>(names_.size()));
    if (added) names_.push_back(name);
    return it->second;
  }
  const std::string& Name(uint32_t i) const { return names_[i]; }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> index_;
};

// The rows a stage reads: the lines of `files`, all of them or those listed.
// A row's position is its rank among the set's rows; that is the "global
// row" a deduplicator groups by (docs/dedup-stage.md), so the first row of a
// cluster is the first in input order.
struct RowSet {
  std::vector<io::InputCandidate> files;
  // The files are the run's inputs: a row's origin is its own file and line
  // (`origins` is filled by the first pass that reads them all).
  bool raw = true;
  std::vector<Origin> origins;  // per line of `files`, once known
  bool all = true;              // every line; else the lines `rows` lists
  std::vector<uint64_t> rows;   // ascending line indexes over `files`

  uint64_t SourceRow(uint64_t position) const { return all ? position : rows[position]; }
};

// Reads a RowSet as chunks of whole lines, numbered by position: a chunk's
// first_line is its first row's position + 1. Not thread-safe.
class RowReader {
 public:
  RowReader(RowSet& set, size_t chunk_bytes, size_t max_lines)
      : set_(set),
        chunk_bytes_(chunk_bytes),
        max_lines_(max_lines),
        chunker_(set.files.size(), chunk_bytes, max_lines,
                 [&set](size_t i) { return io::OpenInput(set.files[i].path); }),
        fill_origins_(set.raw && set.all && set.origins.empty()) {}

  bool Next(io::LineChunk* out) {
    const bool got = set_.all ? NextAll(out) : NextListed(out);
    if (!got) return false;
    out->first_line = positions_ + 1;
    positions_ += out->lines;
    return true;
  }
  uint64_t positions() const { return positions_; }
  uint64_t bytes() const { return bytes_; }

 private:
  bool NextAll(io::LineChunk* out) {
    if (!chunker_.Next(out)) return false;
    if (fill_origins_) {
      for (uint64_t k = 0; k < out->lines; ++k) {
        set_.origins.push_back({out->first_line + k, static_cast<uint32_t>(out->file)});
      }
    }
    bytes_ += out->size;
    return true;
  }

  bool NextListed(io::LineChunk* out) {
    out->data.clear();
    out->size = 0;
    out->lines = 0;
    while (next_listed_ < set_.rows.size() && out->size < chunk_bytes_ &&
           (max_lines_ == 0 || out->lines < max_lines_)) {
      if (in_pos_ >= in_.size) {
        if (!chunker_.Next(&in_)) break;
        in_pos_ = 0;
      }
      const char* base = in_.data.data();
      const char* nl =
          static_cast<const char*>(std::memchr(base + in_pos_, '\n', in_.size - in_pos_));
      const size_t end = static_cast<size_t>(nl - base) + 1;
      if (set_.rows[next_listed_] == in_row_) {
        if (out->lines == 0) out->file = in_.file;
        out->data.append(base + in_pos_, end - in_pos_);
        ++out->lines;
        ++next_listed_;
      }
      ++in_row_;
      in_pos_ = end;
    }
    if (out->lines == 0) return false;
    out->size = out->data.size();
    out->data.append(io::LineReader::kPadding, '\0');
    bytes_ += out->size;
    return true;
  }

  RowSet& set_;
  const size_t chunk_bytes_, max_lines_;
  io::LineChunker chunker_;
  const bool fill_origins_;
  io::LineChunk in_;  // listed rows: the chunk being picked from
  size_t in_pos_ = 0;
  uint64_t in_row_ = 0;  // line index (over the files) of the line at in_pos_
  size_t next_listed_ = 0;
  uint64_t positions_ = 0;
  uint64_t bytes_ = 0;
};

// The value of `key` in a parsed line, as the signature functions see it.
ops::dedup::TextValue ValueOf(const io::JsonLineParser& parser, std::string_view line,
                              const std::string& key, std::string* text, io::Record* record) {
  using Type = ops::dedup::TextValue::Type;
  if (parser.GetString(key, text)) return ops::dedup::TextValue::String(*text);
  ops::dedup::TextValue v;
  if (!parser.Has(key)) {
    v.type = Type::kMissing;
    return v;
  }
  record->AssignView(line);
  const nlohmann::json t = nlohmann::json::parse(record->Find(key).value_or("null"));
  if (t.is_null()) v.type = Type::kNull;
  if (t.is_boolean()) v.type = Type::kBool, v.falsy = !t.get<bool>();
  if (t.is_number()) v.type = Type::kNumber, v.falsy = t.get<double>() == 0;
  if (t.is_array()) v.type = Type::kArray, v.length = t.size();
  if (t.is_object()) v.type = Type::kObject, v.length = t.size();
  return v;
}

struct RowError {
  uint64_t position;
  Origin origin;
  std::string message;
};

struct StageOutcome {
  std::vector<uint64_t> kept;  // positions, ascending
  OperatorCounters counters;
  uint64_t rows = 0, bytes = 0;  // rows and bytes read
};

// What one signing thread produced.
struct SignedPart {
  std::vector<ops::dedup::GroupKey> keys;
  std::vector<RowError> errors;
  double seconds = 0;
};

// Signs every row of `set` on `threads` threads (one Signer each, chunks
// handed out in order): each thread's keys and unsignable rows.
std::vector<SignedPart> SignRows(const ops::dedup::DedupConfig& config, RowSet& set,
                                 RowReader& reader, const OriginNames& names, int threads) {
  std::mutex mu;
  std::exception_ptr failure;
  std::vector<SignedPart> outs(static_cast<size_t>(std::max(1, threads)));
  auto work = [&](SignedPart& out) {
    ops::dedup::Signer signer(config);
    ops::dedup::Signature sig;
    io::JsonLineParser parser;
    io::Record record;
    io::LineChunk chunk;
    std::vector<Origin> origins;
    std::string text, error;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (failure || !reader.Next(&chunk)) return;
        const uint64_t first = chunk.first_line - 1;
        origins.resize(chunk.lines);
        for (uint64_t k = 0; k < chunk.lines; ++k) {
          origins[k] = set.origins[set.SourceRow(first + k)];
        }
      }
      ThrowIfStopRequested();
      const double t0 = MonotonicSeconds();
      size_t pos = 0;
      for (uint64_t k = 0; k < chunk.lines; ++k) {
        const char* nl =
            static_cast<const char*>(std::memchr(chunk.data.data() + pos, '\n', chunk.size - pos));
        const size_t end = static_cast<size_t>(nl - chunk.data.data());
        const std::string_view line(chunk.data.data() + pos, end - pos);
        pos = end + 1;
        parser.ParseObject(line, names.Name(origins[k].file), origins[k].line);
        const uint64_t position = chunk.first_line - 1 + k;
        if (signer.Sign(ValueOf(parser, line, config.text_key, &text, &record), &sig, &error)) {
          ops::dedup::AppendKeys(config, sig, position, &out.keys);
        } else {
          out.errors.push_back({position, origins[k], error});
        }
      }
      out.seconds += MonotonicSeconds() - t0;
    }
  };
  auto guarded = [&](SignedPart& out) {
    try {
      work(out);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < outs.size(); ++t) pool.emplace_back(guarded, std::ref(outs[t]));
  guarded(outs[0]);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  return outs;
}

// The rows that could not be signed, in row order: the run stops at the
// first without skip_op_error, else each is a line of the errors file.
// Returns which of the `n` rows were signed.
std::vector<bool> ReportUnsigned(const PlannedOperator& planned, std::vector<RowError> row_errors,
                                 uint64_t n, const OriginNames& names, io::OutputStream& errors) {
  const std::string& name = planned.op->name();
  std::sort(row_errors.begin(), row_errors.end(),
            [](const RowError& a, const RowError& b) { return a.position < b.position; });
  if (!row_errors.empty() && !planned.skip_op_error) {
    const RowError& e = row_errors.front();
    throw Error(names.Name(e.origin.file), e.origin.line,
                "operator '" + name + "' failed: " + e.message,
                "set skip_op_error: true to drop such records and keep going");
  }
  std::vector<bool> signed_rows(n, true);
  std::string lines;
  for (const RowError& e : row_errors) {
    signed_rows[e.position] = false;
    const nlohmann::json j = {{"op", name},
                              {"error", e.message},
                              {"file", names.Name(e.origin.file)},
                              {"line", e.origin.line}};
    lines += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    lines += '\n';
  }
  if (!lines.empty()) errors.Append(lines);
  return signed_rows;
}

// One deduplicator over `set`: signs every row on `threads` threads, groups
// the keys, keeps the first row of each component. A row that cannot be
// signed is dropped: reported in `errors` in row order, or, without
// skip_op_error, the run stops at it.
StageOutcome RunDedupStage(const PlannedOperator& planned, RowSet& set, const OriginNames& names,
                           io::OutputStream& errors, int threads, size_t chunk_bytes,
                           size_t max_lines) {
  const auto& op = static_cast<const DedupOperator&>(*planned.op);
  const ops::dedup::DedupConfig& config = op.config();
  RowReader reader(set, chunk_bytes, max_lines);
  std::vector<SignedPart> outs = SignRows(config, set, reader, names, threads);

  StageOutcome result;
  result.rows = reader.positions();
  result.bytes = reader.bytes();
  const uint64_t n = result.rows;
  std::vector<RowError> row_errors;
  std::vector<ops::dedup::GroupKey> keys = std::move(outs[0].keys);
  double seconds = 0;
  for (size_t t = 0; t < outs.size(); ++t) {
    if (t > 0) {
      keys.insert(keys.end(), std::make_move_iterator(outs[t].keys.begin()),
                  std::make_move_iterator(outs[t].keys.end()));
      outs[t].keys = {};
    }
    seconds += outs[t].seconds;
    row_errors.insert(row_errors.end(), std::make_move_iterator(outs[t].errors.begin()),
                      std::make_move_iterator(outs[t].errors.end()));
  }
  const size_t unsigned_rows = row_errors.size();
  const std::vector<bool> signed_rows =
      ReportUnsigned(planned, std::move(row_errors), n, names, errors);

  const double group_start = MonotonicSeconds();
  std::vector<ops::dedup::Edge> edges;
  ops::dedup::EmitEdges(config, &keys, &edges);
  keys = {};
  const std::vector<bool> kept = ops::dedup::KeepFirstOfComponents(n, signed_rows, edges);
  for (uint64_t r = 0; r < n; ++r) {
    if (kept[r]) result.kept.push_back(r);
  }
  result.counters.name = op.name();
  result.counters.rows_in = n;
  result.counters.rows_out = result.kept.size();
  result.counters.errors = unsigned_rows;
  result.counters.seconds = seconds + (MonotonicSeconds() - group_start);
  return result;
}

// Whether deduplicator `d` of `plan` reuses the hash field of an earlier one:
// Data-Juicer's document_deduplicator and document_simhash_deduplicator skip
// a record whose __dj__hash / __dj__simhash is set already, and leave the
// field for the exporter, so a second one groups by the first one's values.
// Returns the earlier deduplicator's index, or -1.
int ReusedHashField(const Plan& plan, const std::vector<size_t>& dedups, size_t d) {
  const std::string& name = plan.operators[d].op->name();
  if (name != "document_deduplicator" && name != "document_simhash_deduplicator") return -1;
  for (size_t e : dedups) {
    if (e >= d) break;
    if (plan.operators[e].op->name() == name) return static_cast<int>(e);
  }
  return -1;
}

void MergeCounters(ExecSummary& total, const ExecSummary& part) {
  for (size_t i = 0; i < part.operators.size(); ++i) total.operators[i].Add(part.operators[i]);
  AddRegionCounters(total, part);
  total.errors += part.errors;
}

// A spill file of one stage's rows, written in input order by the executor's
// tap sink (one thread at a time), with their origins.
class Spill {
 public:
  Spill(std::string path, OriginNames* names) : path_(std::move(path)), names_(names) {
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr) {
      throw Error(path_, 0, std::string("cannot create a spill file: ") + std::strerror(errno),
                  "the export's directory must be writable");
    }
  }
  ~Spill() {
    if (file_ != nullptr) std::fclose(file_);
  }
  void Write(std::string_view bytes) {
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
      throw Error(path_, 0, std::string("cannot write a spill file: ") + std::strerror(errno),
                  "free disk space: a deduplicator spills the rows reaching it");
    }
  }
  void AddOrigins(std::string_view lines) {
    size_t pos = 0;
    while (pos < lines.size()) {
      size_t end = lines.find('\n', pos);
      if (end == std::string_view::npos) end = lines.size();
      const nlohmann::json o = nlohmann::json::parse(lines.substr(pos, end - pos));
      origins_.push_back(
          {o.at(1).get<uint64_t>(), names_->Index(o.at(0).get_ref<const std::string&>())});
      pos = end + 1;
    }
  }
  // Closes the file: the rows after the stage, every one of them.
  RowSet Finish() {
    if (std::fclose(file_) != 0) {
      file_ = nullptr;
      throw Error(path_, 0, std::string("cannot write a spill file: ") + std::strerror(errno),
                  "free disk space: a deduplicator spills the rows reaching it");
    }
    file_ = nullptr;
    RowSet set;
    io::InputCandidate in;
    in.path = in.display_path = in.relative_path = path_;
    set.files.push_back(in);
    set.raw = false;
    set.origins = std::move(origins_);
    return set;
  }

 private:
  std::string path_;
  OriginNames* names_;
  std::FILE* file_ = nullptr;
  std::vector<Origin> origins_;
};

// Removes the spill directory however the run ends.
// The run's spill directory, `<dir>/.<export>.dedup-<pid>`: created with a
// `lock` file that the run holds a flock on while it lives, and removed when
// the run ends. A killed run cannot remove its own; the next run beside the
// same export removes every sibling whose lock no process holds (the kernel
// drops a dead process's flocks). A sibling without a lock file is left: it
// may be a run that has made its directory and not yet its lock.
class SpillDir {
 public:
  explicit SpillDir(std::string path) : path_(std::move(path)) {
    RemoveAbandonedSiblings();
    std::error_code ec;
    fs::create_directories(path_, ec);
    if (ec) {
      throw Error(path_, 0, "cannot create the deduplicators' spill directory: " + ec.message(),
                  "the export's directory must be writable");
    }
    lock_.reset(::open((path_ + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (lock_.get() < 0 || ::flock(lock_.get(), LOCK_EX | LOCK_NB) != 0) {
      ThrowSystemError(path_ + "/lock", "cannot lock the deduplicators' spill directory");
    }
  }
  ~SpillDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  SpillDir(const SpillDir&) = delete;
  SpillDir& operator=(const SpillDir&) = delete;

 private:
  void RemoveAbandonedSiblings() const {
    const fs::path own(path_);
    const std::string name = own.filename().string();
    const std::string prefix = name.substr(0, name.rfind('-') + 1);  // ".<export>.dedup-"
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(own.parent_path(), ec)) {
      const std::string sibling = e.path().filename().string();
      if (sibling == name || sibling.rfind(prefix, 0) != 0) continue;
      io::ScopedFd lock(::open((e.path() / "lock").c_str(), O_RDWR | O_CLOEXEC));
      if (lock.get() < 0 || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;
      fs::remove_all(e.path(), ec);
    }
  }

  std::string path_;
  io::ScopedFd lock_;
};

}  // namespace

std::vector<size_t> DedupOperators(const Plan& plan) {
  std::vector<size_t> out;
  for (size_t i = 0; i < plan.operators.size(); ++i) {
    if (dynamic_cast<const DedupOperator*>(plan.operators[i].op.get()) != nullptr) {
      out.push_back(i);
    }
  }
  return out;
}

void CheckDedupRecipe(const recipe::Recipe& recipe, const Plan& plan, bool job_mode) {
  const std::vector<size_t> dedups = DedupOperators(plan);
  if (dedups.empty()) return;
  const recipe::OperatorSpec& first = recipe.process.at(dedups.front());
  if (job_mode) {
    throw Error(recipe.path, first.line,
                "operator '" + first.name +
                    "' cannot run in a job with partitions or checkpoints: a deduplicator needs "
                    "every row at once, and job mode runs partitions on their own",
                "run the recipe without its partition:/checkpoint: sections and without "
                "--job_id, --work-dir, --resume or dotted overrides");
  }
  const YAML::Node keep = recipe.root["keep_hashes_in_res_ds"];
  if (keep && keep.IsScalar() && (keep.Scalar() == "true" || keep.Scalar() == "True")) {
    for (size_t d : dedups) {
      const std::string& name = plan.operators[d].op->name();
      if (name != "document_deduplicator" && name != "document_simhash_deduplicator") continue;
      throw Error(recipe.path, static_cast<uint64_t>(keep.Mark().line) + 1,
                  "keep_hashes_in_res_ds: true would keep the hash field of '" + name +
                      "' in the output; djshard does not write hash fields",
                  "set keep_hashes_in_res_ds: false (Data-Juicer's default)");
    }
  }
  for (size_t d : dedups) {
    const int e = ReusedHashField(plan, dedups, d);
    if (e < 0 || plan.operators[d].op->name() != "document_simhash_deduplicator") continue;
    const auto& mine = static_cast<const DedupOperator&>(*plan.operators[d].op).config();
    const auto& theirs =
        static_cast<const DedupOperator&>(*plan.operators[static_cast<size_t>(e)].op).config();
    if (mine.num_blocks == theirs.num_blocks && mine.hamming_distance == theirs.hamming_distance) {
      continue;
    }
    throw Error(recipe.path, plan.operators[d].line,
                "operator 'document_simhash_deduplicator' would group by the __dj__simhash of "
                "the one at line " +
                    std::to_string(plan.operators[static_cast<size_t>(e)].line) +
                    " (Data-Juicer keeps that field) with other num_blocks or hamming_distance; "
                    "djshard does not reproduce that",
                "give both the same num_blocks and hamming_distance, or keep one of them");
  }
}

namespace {

// A summary with a counter for every operator and region of `plan`.
ExecSummary EmptySummary(const Plan& plan) {
  ExecSummary total;
  total.model_devices = ModelDevices(plan);
  total.operators.resize(plan.operators.size());
  for (size_t i = 0; i < plan.operators.size(); ++i) {
    total.operators[i].name = plan.operators[i].op->name();
    total.operators[i].batched = plan.operators[i].op->processes_rows_together();
  }
  total.regions.resize(plan.regions.size());
  for (size_t i = 0; i < plan.regions.size(); ++i) total.regions[i].name = plan.regions[i].name;
  return total;
}

// A recipe cut at its deduplicators: the operators between two of them run
// as one executor phase over the rows kept so far, spilled for the next.
class DedupPipeline {
 public:
  DedupPipeline(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
                io::OutputStream& output, io::OutputStream& errors, const ExecOptions& options,
                const std::string& spill_dir)
      : plan_(plan),
        output_(output),
        errors_(errors),
        options_(options),
        spill_dir_(spill_dir),
        names_(inputs),
        total_(EmptySummary(plan)) {
    set_.files = inputs;
  }

  ExecSummary Run() {
    const std::vector<size_t> dedups = DedupOperators(plan_);
    const SpillDir spills(spill_dir_);
    std::error_code ec;
    size_t cursor = 0;
    for (size_t k = 0; k < dedups.size(); ++k) {
      const size_t d = dedups[k];
      if (d > cursor) {
        Spill spill((fs::path(spill_dir_) / ("rows-" + std::to_string(k) + ".jsonl")).string(),
                    &names_);
        Phase(cursor, d, &spill);
        const std::string old = set_.raw ? std::string() : set_.files.front().path;
        set_ = spill.Finish();
        CrashPoint("dedup_spilled");
        if (!old.empty()) fs::remove(old, ec);
      }
      Deduplicate(dedups, d);
      cursor = d + 1;
    }
    const ExecSummary last = Phase(cursor, plan_.operators.size(), nullptr);
    total_.rows_out = last.rows_out;
    total_.bytes_out = last.bytes_out;
    total_.seconds = MonotonicSeconds() - start_;
    return total_;
  }

 private:
  // Runs operators [first_op, end_op) over the rows kept so far; spilling
  // their output when `spill`, else into the output.
  ExecSummary Phase(size_t first_op, size_t end_op, Spill* spill) {
    ExecOptions o = options_;
    o.first_op = first_op;
    o.end_op = end_op;
    if (counted_input_ && options_.progress) {
      o.progress = [this](const ExecSummary& s) {
        ExecSummary view = s;
        view.rows_in = total_.rows_in;
        view.bytes_in = total_.bytes_in;
        view.seconds = MonotonicSeconds() - start_;
        options_.progress(view);
      };
    }
    if (!(set_.raw && set_.all)) {
      reader_ = std::make_unique<RowReader>(set_, options_.batch_bytes, plan_.batch_rows);
      o.source = [this](io::LineChunk* c) { return reader_->Next(c); };
      o.origin = [this](uint64_t line) -> const RowOrigin* {
        thread_local RowOrigin origin;
        const Origin& from = set_.origins[set_.SourceRow(line - 1)];
        origin.file = names_.Name(from.file);
        origin.line = from.line;
        return &origin;
      };
    }
    if (spill != nullptr) {
      o.discard_output = true;
      o.taps = {end_op - 1};
      o.compress_taps = false;
      o.tap_sink = [spill](size_t, std::string_view bytes, uint64_t) { spill->Write(bytes); };
      o.tap_origin_sink = [spill](size_t, std::string_view lines) { spill->AddOrigins(lines); };
    }
    const ExecSummary s = Execute(plan_, set_.files, output_, &errors_, o);
    MergeCounters(total_, s);
    CountInput(s.rows_in, s.bytes_in);
    return s;
  }

  // The deduplicator at `d`: the rows it keeps become the set.
  void Deduplicate(const std::vector<size_t>& dedups, size_t d) {
    OperatorCounters& c = total_.operators[d];
    if (ReusedHashField(plan_, dedups, d) >= 0) {
      // Every row reaching it has the hash of the earlier one, whose kept
      // rows are pairwise no duplicates under the same relation: all stay.
      const uint64_t n = set_.all ? set_.origins.size() : set_.rows.size();
      c.rows_in += n;
      c.rows_out += n;
      return;
    }
    const StageOutcome stage =
        RunDedupStage(plan_.operators[d], set_, names_, errors_, options_.threads,
                      options_.batch_bytes, plan_.batch_rows);
    c.rows_in += stage.counters.rows_in;
    c.rows_out += stage.counters.rows_out;
    c.errors += stage.counters.errors;
    c.seconds += stage.counters.seconds;
    total_.errors += stage.counters.errors;
    CountInput(stage.rows, stage.bytes);
    std::vector<uint64_t> rows;
    rows.reserve(stage.kept.size());
    for (uint64_t p : stage.kept) rows.push_back(set_.SourceRow(p));
    set_.rows = std::move(rows);
    set_.all = false;
  }

  // The job's input is what the first stage read.
  void CountInput(uint64_t rows, uint64_t bytes) {
    if (counted_input_) return;
    total_.rows_in = rows;
    total_.bytes_in = bytes;
    counted_input_ = true;
  }

  const Plan& plan_;
  io::OutputStream& output_;
  io::OutputStream& errors_;
  const ExecOptions& options_;
  const std::string spill_dir_;
  const double start_ = MonotonicSeconds();
  OriginNames names_;
  RowSet set_;
  ExecSummary total_;
  bool counted_input_ = false;
  std::unique_ptr<RowReader> reader_;
};

}  // namespace

ExecSummary ExecuteWithDedup(const Plan& plan, const std::vector<io::InputCandidate>& inputs,
                             io::OutputStream& output, io::OutputStream& errors,
                             const ExecOptions& options, const std::string& spill_dir) {
  return DedupPipeline(plan, inputs, output, errors, options, spill_dir).Run();
}

}  // namespace djshard::exec
