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
#include "djshard/exec/dedup_rows.h"
#include "djshard/io/fd.h"
#include "djshard/io/input.h"
#include "djshard/io/json_text.h"
#include "djshard/io/record.h"
#include "djshard/ops/dedup.h"

namespace djshard::exec {

namespace fs = std::filesystem;
using ops::dedup::DedupOperator;

namespace {

struct StageOutcome {
  std::vector<uint64_t> kept;  // positions, ascending
  OperatorCounters counters;
  uint64_t rows = 0, bytes = 0;  // rows and bytes read
};

// The rows that could not be signed, in row order: the run stops at the
// first without skip_op_error, else each is a line of the errors file.
// Returns which of the `n` rows were signed.
std::vector<bool> ReportUnsigned(const PlannedOperator& planned,
                                 const std::vector<UnsignedRow>& row_errors, uint64_t n,
                                 const RowSet& set, const OriginNames& names,
                                 io::OutputStream& errors) {
  const std::string& name = planned.op->name();
  if (!row_errors.empty() && !planned.skip_op_error) {
    const UnsignedRow& e = row_errors.front();
    const LineOrigin& origin = set.origins[set.SourceRow(e.position)];
    throw Error(names.Name(origin.file), origin.line,
                "operator '" + name + "' failed: " + e.message,
                "set skip_op_error: true to drop such records and keep going");
  }
  std::vector<bool> signed_rows(n, true);
  std::string lines;
  for (const UnsignedRow& e : row_errors) {
    signed_rows[e.position] = false;
    const LineOrigin& origin = set.origins[set.SourceRow(e.position)];
    const nlohmann::json j = {{"op", name},
                              {"error", e.message},
                              {"file", names.Name(origin.file)},
                              {"line", origin.line}};
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
  const auto where = [&set, &names](uint64_t position) {
    const LineOrigin& origin = set.origins[set.SourceRow(position)];
    return RowOrigin{names.Name(origin.file), origin.line};
  };
  SignedRows signed_rows_out = SignRows(config, reader, where, threads);

  StageOutcome result;
  result.rows = reader.positions();
  result.bytes = reader.bytes();
  const uint64_t n = result.rows;
  std::vector<ops::dedup::GroupKey> keys = std::move(signed_rows_out.keys);
  const size_t unsigned_rows = signed_rows_out.unsigned_rows.size();
  const std::vector<bool> signed_rows =
      ReportUnsigned(planned, signed_rows_out.unsigned_rows, n, set, names, errors);
  const double seconds = signed_rows_out.seconds;

  const double group_start = MonotonicSeconds();
  std::vector<ops::dedup::Edge> edges;
  if (config.kind == ops::dedup::Kind::kSimhash) {
    ops::dedup::EmitSimhashEdges(config, signed_rows_out.simhashes, &edges);
    signed_rows_out.simhashes = {};
  } else {
    ops::dedup::EmitEdges(config, &keys, &edges);
    keys = {};
  }
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
  std::vector<LineOrigin> origins_;
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

int ReusedHashField(const Plan& plan, const std::vector<size_t>& dedups, size_t d) {
  const std::string& name = plan.operators[d].op->name();
  if (name != "document_deduplicator" && name != "document_simhash_deduplicator") return -1;
  for (size_t e : dedups) {
    if (e >= d) break;
    if (plan.operators[e].op->name() == name) return static_cast<int>(e);
  }
  return -1;
}

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
        const LineOrigin& from = set_.origins[set_.SourceRow(line - 1)];
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
    AddCounters(total_, s);
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
