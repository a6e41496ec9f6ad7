// Partitions of a partition set through the executor, with checkpoint taps
// and commits (SPEC-checkpoints §3-7): shared by `djshard run` jobs and
// workers.
#include "djshard/job/partition_runner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "djshard/common/build_info.h"
#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/checksum.h"
#include "djshard/io/input.h"
#include "djshard/job/job_files.h"
#include "src/job/lineage_journal.h"

namespace djshard::job {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Appends a whole file's decoded bytes to `out`.
void AppendFile(const std::string& path, io::OutputStream& out) {
  std::unique_ptr<io::ByteSource> in = io::OpenInput(path);
  std::vector<char> buf(1 << 20);
  for (size_t n; (n = in->Read(buf.data(), buf.size())) > 0;) {
    out.Append(std::string_view(buf.data(), n));
  }
}

// Rows of a file (decoded); `stored`, when given, hashes its stored bytes.
uint64_t CountLines(const std::string& path, io::ChecksumHasher* stored = nullptr) {
  std::unique_ptr<io::ByteSource> in = io::OpenInput(path, stored);
  std::vector<char> buf(1 << 20);
  uint64_t lines = 0;
  char last = '\n';
  for (size_t n; (n = in->Read(buf.data(), buf.size())) > 0;) {
    lines += CountNewlines(std::string_view(buf.data(), n));
    last = buf[n - 1];
  }
  return lines + (last != '\n' ? 1 : 0);
}

// A partition's counters through operator op_idx, as a commit keeps them:
// the operators' and those of the lineage regions that end by op_idx; with
// `exact`, the records dropped by errors too (they are the partition's
// through op_idx only at its final tap and at a phase's forced tap).
json CountersJson(const exec::Plan& plan, const exec::ExecSummary& s, size_t op_idx,
                  uint64_t rows_in, uint64_t bytes_in, bool exact) {
  json ops = json::array();
  for (size_t i = 0; i <= op_idx && i < s.operators.size(); ++i) {
    ops.push_back(exec::OperatorCountersJson(s.operators[i]));
  }
  std::vector<exec::RegionCounters> regions;
  for (size_t r = 0; r < plan.regions.size() && r < s.regions.size(); ++r) {
    if (plan.regions[r].gather_idx <= op_idx) regions.push_back(s.regions[r]);
  }
  json out = {{"rows_in", rows_in},
              {"bytes_in", bytes_in},
              {"operators", ops},
              {"regions", exec::RegionCountersJson(regions)}};
  if (exact) out["errors"] = s.errors;
  return out;
}

// Counters stored in a commit, back as a summary (operators through op_idx,
// the regions it kept).
exec::ExecSummary CountersFrom(const exec::Plan& plan, const json& commit, size_t num_ops) {
  exec::ExecSummary s;
  s.operators.resize(num_ops);
  const json c = commit.value("counters", json::object());
  s.errors = c.value("errors", uint64_t{0});
  s.regions.resize(plan.regions.size());
  const json regions = c.value("regions", json::object());
  for (size_t r = 0; r < plan.regions.size(); ++r) {
    exec::RegionCounters& rc = s.regions[r];
    rc.name = plan.regions[r].name;
    if (!regions.is_object() || !regions.contains(rc.name)) continue;
    const json& j = regions[rc.name];
    auto get = [&j](const char* key) { return j.value(key, uint64_t{0}); };
    rc.parents_in = get("parents_in");
    rc.parents_out = get("parents_out");
    rc.parents_dropped = get("parents_dropped");
    rc.parents_failed = get("parents_failed");
    rc.parents_from_journal = get("parents_from_journal");
    rc.children_expanded = get("children_expanded");
    rc.children_present = get("children_present");
    rc.children_dropped = get("children_dropped");
    rc.children_failed = get("children_failed");
    rc.children_suppressed = get("children_suppressed");
    rc.late_discarded = get("late_discarded");
  }
  const json ops = c.value("operators", json::array());
  for (size_t i = 0; i < ops.size() && i < num_ops; ++i) {
    s.operators[i].rows_in = ops[i].value("rows_in", uint64_t{0});
    s.operators[i].rows_out = ops[i].value("rows_out", uint64_t{0});
    s.operators[i].errors = ops[i].value("errors", uint64_t{0});
    s.operators[i].seconds = ops[i].value("seconds", 0.0);
    s.operators[i].calls = ops[i].value("calls", uint64_t{0});
    s.operators[i].items = ops[i].value("items", uint64_t{0});
  }
  return s;
}

// One tap file being written for one partition.
struct OpenTap {
  size_t op_idx = 0;
  std::string rel_path;                          // relative to the checkpoint dir
  bool compressed = false;                       // zstd frames, else rows
  std::unique_ptr<io::AtomicFileWriter> stream;  // stored bytes (an intermediate tap)
  std::unique_ptr<io::Xxh3> hash;                // of the stored bytes, as they are appended
  std::unique_ptr<io::OutputStream> final_rows;  // the final tap: the partition's output
  uint64_t rows = 0;
};

// A partition's committed output: its final tap and its operator errors.
struct FinalTap {
  std::string data;    // absolute
  std::string errors;  // absolute; empty when none were kept
};

}  // namespace

PartitionSet PartitionInput(const JobSettings& st, const recipe::Recipe& recipe,
                            const std::vector<io::InputCandidate>& inputs,
                            const std::string& input_name, std::optional<uint64_t> known_rows,
                            const InputHashes& hashes) {
  if (known_rows && st.mode == PartitionMode::kManual) {
    PartitionSet set;
    set.mode = "manual";
    set.total_rows = *known_rows;
    if (st.num_of_partitions > *known_rows) {
      throw Error("num_of_partitions (" + std::to_string(st.num_of_partitions) +
                      ") exceeds the rows of " + input_name + " (" + std::to_string(*known_rows) +
                      ")",
                  "lower partition.num_of_partitions");
    }
    set.bounds = ExactBounds(*known_rows, st.num_of_partitions);
    uint64_t rows = 0;
    set.digests = HashPartitions(inputs, set.bounds, &rows, hashes, &set.input);
    if (rows != *known_rows) {
      throw Error(input_name, 0,
                  "has " + std::to_string(rows) + " rows, not " + std::to_string(*known_rows));
    }
    for (const PartitionDigest& d : set.digests) set.total_bytes += d.size_bytes;
    return set;
  }
  const InputScan scan = ScanInput(inputs, recipe);
  PartitionSet set;
  set.total_rows = scan.rows;
  set.total_bytes = scan.bytes;
  uint64_t parts = 0;
  if (st.mode == PartitionMode::kManual) {
    set.mode = "manual";
    parts = st.num_of_partitions;
    if (parts > scan.rows) {
      throw Error("num_of_partitions (" + std::to_string(parts) + ") exceeds the rows of " +
                      input_name + " (" + std::to_string(scan.rows) + ")",
                  "lower partition.num_of_partitions");
    }
  } else {
    set.mode = "auto";
    const double mean = scan.sample_rows == 0 ? 0
                                              : static_cast<double>(scan.sample_bytes) /
                                                    static_cast<double>(scan.sample_rows);
    parts = AutoPartitionCount(
        scan.rows,
        AutoRowsPerPartition(scan.modality, mean, st.target_size_mb, st.max_size_mb, st.size));
  }
  set.bounds = ExactBounds(scan.rows, parts);
  uint64_t rows = 0;
  set.digests = HashPartitions(inputs, set.bounds, &rows, hashes, &set.input);
  if (rows != scan.rows) {
    throw Error(input_name, 0, "the input changed while it was partitioned",
                "run again once nothing writes to it");
  }
  return set;
}

json PartitioningInfoJson(const PartitionSet& set, const std::string& job_id, const json& shard_id,
                          const std::string& token) {
  json parts = json::array();
  for (size_t i = 0; i < set.bounds.size(); ++i) {
    json part = {{"partition_id", i},
                 {"start_row", set.bounds[i].start},
                 {"end_row", set.bounds[i].end},
                 {"rows", set.bounds[i].rows()},
                 {"size_bytes", set.digests[i].size_bytes}};
    set.digests[i].checksum.ToJson(part);
    parts.push_back(std::move(part));
  }
  json info = {
      {"schema_version", 1},
      {"job_id", job_id},
      {"shard_id", shard_id},
      {"mode", set.mode},
      {"num_partitions", set.bounds.size()},
      {"total_rows", set.total_rows},
      {"total_bytes", set.total_bytes},
      {"hash_algorithm", kPartitionHashAlgorithm},
      {"created_at", FormatUtcIso8601(NowNanos())},
      {"created_by", {{"hostname", HostName()}, {"pid", ::getpid()}, {"attempt_token", token}}},
      {"partitions", parts}};
  set.input.ToJson(info, "input_");
  return info;
}

PartitionSet ParsePartitioningInfo(const json& info,
                                   const std::function<void(const std::string&)>& bad) {
  if (!info.is_object()) bad("not a JSON object");
  PartitionSet set;
  try {
    if (info.value("hash_algorithm", "") != kPartitionHashAlgorithm) bad("unknown hash_algorithm");
    set.mode = info.at("mode").get<std::string>();
    set.total_rows = info.at("total_rows").get<uint64_t>();
    set.total_bytes = info.at("total_bytes").get<uint64_t>();
    set.input = io::Checksum::FromJson(info, "input_");
    const json& parts = info.at("partitions");
    if (info.at("num_partitions").get<uint64_t>() != parts.size()) {
      bad("num_partitions differs from the partitions listed");
    }
    uint64_t next = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const json& p = parts[i];
      const uint64_t start = p.at("start_row").get<uint64_t>();
      const uint64_t end = p.at("end_row").get<uint64_t>();
      if (p.at("partition_id").get<uint64_t>() != i) bad("partition ids are not 0..P-1");
      if (start != next)
        bad("partition " + std::to_string(i) + " does not start where the last ends");
      if (end <= start) bad("partition " + std::to_string(i) + " is empty");
      if (p.at("rows").get<uint64_t>() != end - start) {
        bad("partition " + std::to_string(i) + ": rows != end_row - start_row");
      }
      set.bounds.push_back({start, end});
      set.digests.push_back({p.at("size_bytes").get<uint64_t>(), io::Checksum::FromJson(p)});
      next = end;
    }
    if (next != set.total_rows) bad("the last partition does not end at total_rows");
  } catch (const json::exception& e) {
    bad(e.what());
  }
  return set;
}

bool SameBounds(const PartitionSet& a, const PartitionSet& b) {
  if (a.bounds.size() != b.bounds.size() || a.total_rows != b.total_rows) return false;
  for (size_t i = 0; i < a.bounds.size(); ++i) {
    if (a.bounds[i].start != b.bounds[i].start || a.bounds[i].end != b.bounds[i].end ||
        a.digests[i].checksum != b.digests[i].checksum) {
      return false;
    }
  }
  return true;
}

std::map<uint64_t, std::vector<Commit>> ListCommits(
    const std::string& dir, const std::function<void(const std::string&)>& unreadable) {
  std::map<uint64_t, std::vector<Commit>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint_op_", 0) != 0 || name.size() < 12 ||
        name.compare(name.size() - 12, 12, ".commit.json") != 0) {
      continue;
    }
    Commit c;
    c.record_path = e.path().string();
    c.record = json::parse(io::ReadFile(c.record_path), nullptr, false);
    if (!c.record.is_object() || !c.record.contains("partition_id") ||
        !c.record.contains("op_idx") || !c.record["partition_id"].is_number_unsigned() ||
        !c.record["op_idx"].is_number_unsigned()) {
      if (unreadable) {
        unreadable(c.record_path);
        continue;
      }
      throw Error(c.record_path, 0, "commit record is not valid JSON with partition_id and op_idx");
    }
    c.partition = c.record["partition_id"].get<uint64_t>();
    c.op_idx = c.record["op_idx"].get<size_t>();
    out[c.partition].push_back(std::move(c));
  }
  for (auto& [p, commits] : out) {
    std::sort(commits.begin(), commits.end(),
              [](const Commit& a, const Commit& b) { return a.op_idx > b.op_idx; });
  }
  return out;
}

std::optional<CommitProblem> VerifyCommitFiles(const Commit& c, const std::string& checkpoints,
                                               const PartitionSet& set) {
  const std::string rel = c.record.value("data_path", "");
  const std::string data = checkpoints + "/" + rel;
  struct stat st {};
  if (rel.empty() || ::stat(data.c_str(), &st) != 0) return CommitProblem{rel, "missing"};
  if (static_cast<uint64_t>(st.st_size) != c.record.value("size_bytes", uint64_t{0})) {
    return CommitProblem{rel, "size " + std::to_string(st.st_size) + ", the commit says " +
                                  std::to_string(c.record.value("size_bytes", uint64_t{0}))};
  }
  // One read: the stored bytes hashed, the decoded rows counted.
  const io::Checksum want = io::Checksum::FromJsonOrEmpty(c.record);
  io::ChecksumHasher stored(want.kind);
  uint64_t lines = 0;
  try {
    lines = CountLines(data, &stored);
  } catch (const Error& e) {
    return CommitProblem{rel, std::string("unreadable: ") + e.what()};
  }
  if (stored.Finish() != want) return CommitProblem{rel, want.field() + " differs"};
  if (lines != c.record.value("rows", uint64_t{0})) return CommitProblem{rel, "row count differs"};
  if (c.partition >= set.digests.size() ||
      io::Checksum::FromJsonOrEmpty(c.record, "input_partition_") !=
          set.digests[c.partition].checksum) {
    return CommitProblem{rel, "made from other input rows"};
  }
  // A side file (origins, errors) is present with the checksum recorded.
  auto side_file_changed = [&](const char* prefix) {
    const std::string path = checkpoints + "/" + c.record.value(std::string(prefix) + "path", "");
    const io::Checksum recorded = io::Checksum::FromJsonOrEmpty(c.record, prefix);
    return ::stat(path.c_str(), &st) != 0 || recorded.empty() ||
           io::ChecksumOfFile(path, recorded.kind) != recorded;
  };
  for (const char* prefix : {"origins_", "errors_"}) {
    const std::string side = c.record.value(std::string(prefix) + "path", "");
    if (!side.empty() && side_file_changed(prefix))
      return CommitProblem{side, "missing or changed"};
  }
  return std::nullopt;
}

size_t ErrorsThroughOp(const json& commit, size_t last_op) {
  const json e = commit.is_object() ? commit.value("errors_through_op", json()) : json();
  return e.is_number_unsigned() ? std::min(e.get<size_t>(), last_op) : last_op;
}

void AddCounters(exec::ExecSummary& total, const exec::ExecSummary& part, size_t first_op) {
  total.rows_out += part.rows_out;
  total.bytes_out += part.bytes_out;
  total.errors += part.errors;
  for (size_t i = first_op; i < part.operators.size() && i < total.operators.size(); ++i) {
    total.operators[i].Add(part.operators[i]);
  }
  exec::AddRegionCounters(total, part);
}

json ExecutionPlanJson(const exec::Plan& plan, const std::string& job_id,
                       const std::string& config_sha, const std::vector<size_t>& taps,
                       const JobSettings& st, const json& partitioning) {
  json ops = json::array(), edges = json::array(), idxs = json::array();
  for (size_t i = 0; i < plan.operators.size(); ++i) {
    const bool tap = std::find(taps.begin(), taps.end(), i) != taps.end();
    ops.push_back(
        {{"op_idx", i},
         {"name", plan.operators[i].op->name()},
         {"kind", plan.operators[i].op->kind() == ops::OpKind::kFilter ? "filter" : "mapper"},
         {"accelerator", "cpu"},
         {"input_columns", nullptr},
         {"output_columns", nullptr},
         {"stage_id", 0},
         {"checkpoint_after", tap}});
    idxs.push_back(i);
    if (i > 0) edges.push_back({i - 1, i});
  }
  return {{"schema_version", 1},
          {"job_id", job_id},
          {"config_sha256", config_sha},
          {"ops", ops},
          {"stages",
           {{{"stage_id", 0},
             {"kind", "cpu_fused"},
             {"op_idxs", idxs},
             {"batch_size", plan.batch_rows},
             {"replicas", 1},
             {"devices", json::array({"cpu"})}}}},
          {"lineage_stages", exec::LineageStagesJson(plan)},
          {"edges", edges},
          {"partitioning", partitioning},
          {"checkpoint", {{"strategy", TapStrategyName(st.strategy)}, {"taps", taps}}},
          {"execution_groups", nullptr},
          {"probe", {{"enabled", false}, {"cache_keys", json::array()}}}};
}

PartitionRunner::PartitionRunner(PartitionRunConfig config) : c_(std::move(config)) {
  const size_t num_ops = c_.plan->operators.size();
  total_.model_devices = exec::ModelDevices(*c_.plan);
  total_.operators.resize(num_ops);
  for (size_t i = 0; i < num_ops; ++i) {
    total_.operators[i].name = c_.plan->operators[i].op->name();
    total_.operators[i].batched = c_.plan->operators[i].op->processes_rows_together();
  }
  if (!c_.publish_commit) {
    c_.publish_commit = [this](const std::string& path, const std::string& record) {
      return c_.disk->PublishLink(path, record, c_.checkpoints);
    };
  }
}

namespace {

std::string JournalStem(const PartitionRunConfig& c, size_t region, uint64_t p) {
  return RunJobPaths::JournalStem(c.plan->regions[region].name, p, c.set->bounds.size());
}

// keep: latest: the taps of partition p before op_idx go, record first,
// then data (found by name: other partitions' files are not this one's),
// with their own errors and origins files unless the tap kept names them.
void DropOlderTaps(const PartitionRunConfig& c, uint64_t p, size_t op_idx,
                   const std::string& kept_errors, const std::string& kept_origins) {
  io::Disk& disk = *c.disk;
  for (size_t older = 0; older < op_idx; ++older) {
    const std::string record_path =
        c.checkpoints + "/" + RunJobPaths::TapStem(older, p, c.set->bounds.size()) + ".commit.json";
    struct stat rst {};
    if (::stat(record_path.c_str(), &rst) != 0) continue;
    const json old = json::parse(io::ReadFile(record_path), nullptr, false);
    disk.Unlink(record_path);
    if (old.is_object() && old.value("data_path", json()).is_string()) {
      disk.Unlink(c.checkpoints + "/" + old["data_path"].get<std::string>());
    }
    for (const char* key : {"errors_path", "origins_path"}) {
      const std::string rel = old.is_object() ? old.value(key, "") : "";
      if (!rel.empty() && rel != kept_errors && rel != kept_origins &&
          disk.Stat(c.checkpoints + "/" + rel)) {
        disk.Unlink(c.checkpoints + "/" + rel);
      }
    }
  }
}

// Records dropped by errors before the tap a partition resumed from (its
// counters, `earlier`): kept by final and phase taps; else, outside lineage
// regions, the operators' own counts.
uint64_t ErrorsBefore(const exec::Plan& plan, const json& commit, const exec::ExecSummary& earlier,
                      size_t first_op) {
  if (commit.value("counters", json::object()).contains("errors")) return earlier.errors;
  uint64_t errors = 0;
  if (plan.regions.empty()) {
    for (size_t i = 0; i < first_op; ++i) errors += earlier.operators[i].errors;
  }
  return errors;
}

}  // namespace

// What the partitions of one Run share: the pass's bounds, the input read
// once in order (each partition in its turn), and the export's copier.
struct PartitionRunner::Pass {
  Pass(const PartitionRunConfig& c, io::OutputStream& output, io::OutputStream& errors);
  Pass(const Pass&) = delete;
  Pass& operator=(const Pass&) = delete;

  // Waits for partition p's turn to read the input; throws when another
  // partition failed.
  void TakeTurn(uint64_t p);
  // Hands the input to partition p + 1.
  void PassTurn(uint64_t p);
  // In p's turn: `rows` of the input that a later partition skips.
  void SkipRows(uint64_t p, uint64_t rows);
  // Appends a partition's final tap and errors to the export.
  void AppendFinal(const FinalTap& done);
  // Partition p's final tap is committed: it, and the partitions after it
  // that are ready, are copied into the export in partition order.
  void FinalReady(uint64_t p, const FinalTap& done);

  io::OutputStream& output;
  io::OutputStream& errors;
  std::function<void(const std::string&, const json&, const std::string&)> reject;
  exec::ExecOptions base;
  io::LineChunker input;
  size_t last_op = 0;
  // An execution group's phase ends at run_end with a forced tap; only the
  // pass that runs to the last operator completes (and counts) a partition.
  size_t run_end = 0;
  bool intermediate = false;
  uint64_t first_p = 0, end_p = 0;
  // With checkpointing, each partition's output is its final tap; a plain
  // export is assembled from them at the end (so the output is written once
  // before that copy), a compressed one is written as the partitions finish.
  bool assemble = false;
  // Partitions in flight at once: each runs the executor on its own threads
  // and writes its own final tap, so order matters only for the export,
  // assembled at the end. A compressed export (or no final taps) is written
  // as partitions finish, one at a time.
  uint64_t in_flight = 1;
  // The input is read once, in order: a partition reads its rows when every
  // earlier one has read its own (its turn), so partitions overlap where
  // one drains and the next fills.
  std::mutex mu;  // guards the counters, the summary, the turn and the assembly
  std::condition_variable turn_cv;
  uint64_t turn = 0;
  bool aborted = false;
  // The export grows while partitions run: the partition whose final tap
  // completes the next run of consecutive partitions copies them in (one
  // copier at a time, in partition order), so at the end only the last
  // partitions are left to copy.
  std::vector<std::optional<FinalTap>> finals;
  uint64_t next_final = 0;
  bool copying = false;
  // Rows of partitions that need no input, skipped only when a later
  // partition reads (a job resumed whole from final taps reads nothing).
  // Touched by the partition whose turn it is only.
  uint64_t rows_to_skip = 0;
};

PartitionRunner::Pass::Pass(const PartitionRunConfig& c, io::OutputStream& output_stream,
                            io::OutputStream& errors_stream)
    : output(output_stream),
      errors(errors_stream),
      input(c.inputs.size(), base.batch_bytes, c.plan->batch_rows,
            [&inputs = c.inputs](size_t i) { return io::OpenInput(inputs[i].path); }) {
  base.threads = c.threads;
  base.cancel = c.cancel;
  const size_t num_ops = c.plan->operators.size();
  const uint64_t num_partitions = c.set->bounds.size();
  last_op = num_ops == 0 ? 0 : num_ops - 1;
  run_end = c.phase_end_op ? std::min(*c.phase_end_op, last_op) : last_op;
  intermediate = run_end < last_op;
  first_p = std::min<uint64_t>(c.first_partition, num_partitions);
  end_p = std::max(first_p, std::min<uint64_t>(c.end_partition, num_partitions));
  assemble = c.assemble;
  in_flight =
      std::min<uint64_t>(assemble ? c.settings.max_concurrent_partitions : 1, end_p - first_p);
  turn = first_p;
  finals.resize(num_partitions);
  next_final = first_p;
  for (uint64_t p = 0; p < first_p; ++p) rows_to_skip += c.set->bounds[p].rows();  // other passes'
}

void PartitionRunner::Pass::TakeTurn(uint64_t p) {
  std::unique_lock<std::mutex> lock(mu);
  turn_cv.wait(lock, [&] { return turn == p || aborted; });
  if (aborted) throw Error("partition " + std::to_string(p) + " stopped: another failed");
}

void PartitionRunner::Pass::PassTurn(uint64_t p) {
  std::lock_guard<std::mutex> lock(mu);
  turn = p + 1;
  turn_cv.notify_all();
}

void PartitionRunner::Pass::SkipRows(uint64_t p, uint64_t rows) {
  TakeTurn(p);
  rows_to_skip += rows;
  PassTurn(p);
}

void PartitionRunner::Pass::AppendFinal(const FinalTap& done) {
  // The export of a single partition is its final tap: a link, where the
  // filesystem makes one, instead of a copy.
  if (finals.size() != 1 || !output.LinkFile(done.data)) output.AppendFile(done.data);
  if (!done.errors.empty()) AppendFile(done.errors, errors);
  CrashPoint("final_concat");
}

void PartitionRunner::Pass::FinalReady(uint64_t p, const FinalTap& done) {
  {
    std::lock_guard<std::mutex> lock(mu);
    finals[p] = done;
    if (copying) return;  // the copier takes it in order
    copying = true;
  }
  for (;;) {
    FinalTap next;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (next_final == finals.size() || !finals[next_final] || aborted) {
        copying = false;
        return;
      }
      next = *finals[next_final];
    }
    try {
      AppendFinal(next);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      copying = false;
      throw;
    }
    std::lock_guard<std::mutex> lock(mu);
    ++next_final;
  }
}

// One partition's run through the executor, from its start point to its
// commits. It stays where it is made: the executor's callbacks point into it.
struct PartitionRunner::Partition {
  Partition(uint64_t partition, const PartitionBounds& bounds, const StartPoint& start_point,
            double started, uint64_t input_bytes)
      : p(partition), b(bounds), from(start_point), start(started), bytes(input_bytes) {}
  Partition(const Partition&) = delete;
  Partition& operator=(const Partition&) = delete;

  const uint64_t p;
  const PartitionBounds& b;
  const StartPoint& from;
  const double start;    // MonotonicSeconds when it began
  const uint64_t bytes;  // of its input rows
  // The rows: this partition of the input, or the committed tap it resumes from.
  std::vector<io::InputCandidate> exec_inputs;
  std::unique_ptr<io::LineChunker> tap_reader;
  exec::ExecOptions options;
  std::vector<LoadedJournal> loaded;                     // per region
  std::vector<std::unique_ptr<GatherJournal>> journals;  // per region; null where none
  std::vector<OpenTap> open;                             // earliest operator first
  // A phase's forced tap: where each of its rows came from.
  std::unique_ptr<io::AtomicFileWriter> origins;
  io::Xxh3 origins_hash;  // of its bytes, as they are appended
  std::string origins_rel;
  std::vector<exec::RowOrigin> from_origins;  // of the tap it resumes from, by line
  io::OutputStream* final_rows = nullptr;
  std::vector<double> op_started;                 // per operator
  std::unique_ptr<io::OutputStream> part_errors;  // written by this run
  std::string errors_rel;                         // the errors file its commits name
  io::Checksum errors_sum;
  // The errors file is the one committed with the tap it resumes from.
  bool committed_errors = false;
  bool has_errors = false;  // its commits name an errors file
  exec::ExecSummary part;   // the executor's counters
  io::Checksum origins_sum;
  exec::ExecSummary cumulative;  // from the recipe's first operator, as commits keep them
};

void PartitionRunner::Run(io::OutputStream& output, io::OutputStream& errors) {
  Pass pass(c_, output, errors);
  pass.reject = c_.reject_commit;
  if (!pass.reject) {
    pass.reject = [this](const std::string& record_path, const json& record,
                         const std::string& why) { RejectIntoDirectory(record_path, record, why); };
  }
  if (pass.in_flight <= 1) {
    for (uint64_t p = pass.first_p; p < pass.end_p; ++p) {
      if (c_.before_partition) c_.before_partition();
      RunPartition(pass, p);
    }
  } else {
    RunInFlight(pass);
  }
  if (pass.assemble && !pass.intermediate && pass.next_final != pass.end_p) {
    // Every final tap is ready here; the last copier has taken them all
    // unless the partitions ran one at a time.
    throw Error("internal: the export lacks partition " + std::to_string(pass.next_final));
  }
  total_.bytes_out = output.bytes_in();
}

void PartitionRunner::Emit(const std::string& type, json fields) const {
  for (const auto& [k, v] : c_.event_fields.items()) fields[k] = v;
  c_.events->Emit(type, std::move(fields));
}

void PartitionRunner::RejectIntoDirectory(const std::string& record_path, const json& record,
                                          const std::string& why) const {
  io::Disk& disk = *c_.disk;
  const std::string rejected = c_.checkpoints + "/rejected";
  const std::string name = fs::path(record_path).filename().string();
  disk.MakeDirs(rejected);
  disk.Rename(record_path, rejected + "/" + name + "." + c_.token);
  const std::string rel = record.is_object() ? record.value("data_path", "") : "";
  if (!rel.empty() && rel.find('/') == std::string::npos && disk.Stat(c_.checkpoints + "/" + rel)) {
    disk.Rename(c_.checkpoints + "/" + rel, rejected + "/" + rel);
  }
  json fields = {
      {"error_message", why},
      {"metadata", {{"commit", name}, {"moved_to", "rejected/" + name + "." + c_.token}}}};
  if (record.is_object()) {
    fields["partition_id"] = record.value("partition_id", json());
    fields["checkpoint_path"] = record.value("data_path", json());
    AddCheckpointChecksum(fields, record);
  }
  Emit("checkpoint_rejected", fields);
}

void PartitionRunner::RunInFlight(Pass& pass) {
  // Partitions are taken in order. The first error stops the others
  // (those waiting for their turn at once); a stop request only keeps
  // new partitions from starting, so those in flight finish and commit.
  std::atomic<uint64_t> next{pass.first_p};
  std::exception_ptr failure;
  bool no_more = false;
  std::vector<std::thread> runners;
  for (uint64_t k = 0; k < pass.in_flight; ++k) {
    runners.emplace_back([&] {
      for (uint64_t p; (p = next++) < pass.end_p;) {
        try {
          if (c_.before_partition) c_.before_partition();
        } catch (...) {
          std::lock_guard<std::mutex> lock(pass.mu);
          if (!failure) failure = std::current_exception();
          no_more = true;
          return;
        }
        try {
          RunPartition(pass, p);
        } catch (...) {
          std::lock_guard<std::mutex> lock(pass.mu);
          if (!failure) failure = std::current_exception();
          pass.aborted = true;
          pass.turn_cv.notify_all();
          return;
        }
        std::lock_guard<std::mutex> lock(pass.mu);
        if (pass.aborted || no_more) return;
      }
    });
  }
  for (std::thread& t : runners) t.join();
  if (failure) std::rethrow_exception(failure);
}

// A partition of the pass: skipped when an earlier pass took it past this
// phase, taken whole from its final tap when it finished, else run through
// the executor from its start point with its taps, which are then committed.
void PartitionRunner::RunPartition(Pass& pass, uint64_t p) {
  const PartitionBounds& b = c_.set->bounds[p];
  const StartPoint& from = c_.starts[p];
  const double p_start = MonotonicSeconds();
  const uint64_t p_bytes = c_.set->digests[p].size_bytes;
  if (pass.intermediate && from.resumed && from.op_idx >= pass.run_end) {
    pass.SkipRows(p, b.rows());  // past this phase already: a later pass goes on
    return;
  }
  if (!pass.intermediate) {
    std::lock_guard<std::mutex> lock(pass.mu);
    total_.rows_in += b.rows();
    total_.bytes_in += p_bytes;
  }
  if (from.resumed && from.op_idx == pass.last_op) {
    ResumeFinished(pass, p);
    return;
  }
  Partition w(p, b, from, p_start, p_bytes);
  ReadRows(pass, w);
  if (!from.continued) Emit("partition_start", {{"partition_id", p}, {"input_rows", b.rows()}});
  w.options.end_op = pass.run_end + 1;
  w.options.discard_output = pass.intermediate;  // the forced tap holds the rows
  OpenJournals(pass, w);
  OpenTaps(pass, w);
  OpenOrigins(pass, w);
  HookExecutor(pass, w);
  OpenErrors(pass, w);
  RunExecutor(pass, w);
  CountPartition(pass, w);
  for (size_t i = 0; i < w.open.size(); ++i) CommitTap(pass, w, i);
  FinishPartition(pass, w);
}

// A finished partition: its final tap is the output, concatenated, and its
// counters are the commit's.
void PartitionRunner::ResumeFinished(Pass& pass, uint64_t p) {
  const PartitionBounds& b = c_.set->bounds[p];
  const StartPoint& from = c_.starts[p];
  // Journal files left by a run that died right after that commit go.
  for (size_t r = 0; r < c_.plan->regions.size(); ++r) {
    if (c_.plan->regions[r].parent < 0) {
      DeleteJournal(c_.checkpoints, JournalStem(c_, r, p), *c_.disk);
    }
  }
  pass.SkipRows(p, b.rows());
  Emit("partition_resume", {{"partition_id", p}, {"op_idx", from.op_idx}});
  // A run killed between the final tap's commit and the removal of the
  // earlier taps left them: they go now.
  if (!c_.settings.keep_all) {
    DropOlderTaps(c_, p, from.op_idx, from.commit.value("errors_path", ""),
                  from.commit.value("origins_path", ""));
  }
  FinalTap done{from.data_path, ""};
  // The partition's operator errors, as its run wrote them.
  if (const std::string rel = from.commit.value("errors_path", ""); !rel.empty()) {
    done.errors = c_.checkpoints + "/" + rel;
  }
  if (pass.assemble) {
    pass.FinalReady(p, done);
  } else {
    pass.AppendFinal(done);
  }
  json loaded = {{"partition_id", p},
                 {"op_idx", from.op_idx},
                 {"checkpoint_path", from.commit.value("data_path", "")}};
  AddCheckpointChecksum(loaded, from.commit);
  Emit("checkpoint_load", loaded);
  exec::ExecSummary part = CountersFrom(*c_.plan, from.commit, c_.plan->operators.size());
  part.rows_out = from.commit.value("rows", uint64_t{0});
  {
    std::lock_guard<std::mutex> lock(pass.mu);
    AddCounters(total_, part, 0);
    ++resumed_;
    ++completed_;
  }
  Emit("partition_complete", {{"partition_id", p},
                              {"status", "resumed"},
                              {"input_rows", b.rows()},
                              {"output_rows", part.rows_out}});
}

// Where the partition's rows come from: the committed tap it resumes from
// (its input rows skipped in its turn), or its rows of the input, read in its
// turn after those that partitions before it skipped.
void PartitionRunner::ReadRows(Pass& pass, Partition& w) {
  const StartPoint& from = w.from;
  w.exec_inputs = c_.inputs;
  w.options = pass.base;
  if (!from.resumed) {
    w.options.source = [&pass, &b = w.b, p = w.p, reading = false,
                        done = false](io::LineChunk* c) mutable {
      if (done) return false;
      if (!reading) {
        pass.TakeTurn(p);
        if (pass.rows_to_skip > 0) pass.input.SkipLines(pass.rows_to_skip);
        pass.rows_to_skip = 0;
        pass.input.LimitLines(b.rows());
        reading = true;
      }
      if (pass.input.Next(c)) return true;
      done = true;
      pass.PassTurn(p);
      return false;
    };
    return;
  }
  pass.SkipRows(w.p, w.b.rows());
  w.exec_inputs = {{from.data_path, from.data_path, from.commit.value("data_path", "")}};
  w.tap_reader = std::make_unique<io::LineChunker>(
      1, pass.base.batch_bytes, c_.plan->batch_rows,
      [&inputs = w.exec_inputs](size_t) { return io::OpenInput(inputs[0].path); });
  w.options.source = [&reader = w.tap_reader](io::LineChunk* c) { return reader->Next(c); };
  w.options.first_op = from.op_idx + 1;
  if (!from.continued) {
    Emit("partition_resume", {{"partition_id", w.p}, {"op_idx", from.op_idx}});
    json loaded = {{"partition_id", w.p},
                   {"op_idx", from.op_idx},
                   {"checkpoint_path", from.commit.value("data_path", "")}};
    AddCheckpointChecksum(loaded, from.commit);
    Emit("checkpoint_load", loaded);
  }
}

// Durable lineage (SPEC-lineage §6), with checkpointing on: per top-level
// region that runs in this pass, the journal segments an earlier run
// committed (verified; their parents are taken instead of expanded again)
// and a journal of this run's. Rows are numbered in the partition's stream
// from its start point, which no commit moved since (taps commit when the
// partition ends).
void PartitionRunner::OpenJournals(Pass& pass, Partition& w) {
  const exec::Plan& plan = *c_.plan;
  w.loaded.resize(plan.regions.size());
  w.journals.resize(plan.regions.size());
  bool journaling = false;
  for (size_t r = 0; r < plan.regions.size() && !c_.taps.empty(); ++r) {
    const exec::LineageRegion& region = plan.regions[r];
    if (region.parent >= 0 || region.expand_idx < w.options.first_op) continue;
    if (region.gather_idx > pass.run_end) continue;  // a later phase's
    JournalScope scope;
    scope.checkpoints = c_.checkpoints;
    scope.stem = JournalStem(c_, r, w.p);
    scope.region = region.name;
    scope.partition = w.p;
    scope.gather_idx = region.gather_idx;
    scope.job_id = c_.job_id;
    scope.shard_id = c_.shard_id;
    scope.token = c_.token;
    scope.region_ops_sha256 = OpsPrefixSha256(c_.root, region.gather_idx);
    scope.input_tap = w.from.resumed ? io::Checksum::FromJsonOrEmpty(w.from.commit)
                                     : c_.set->digests[w.p].checksum;
    scope.engine_version = version();
    w.loaded[r] = LoadJournal(scope, pass.reject,
                              [this](const json& fields) { Emit("lineage_load", fields); });
    w.journals[r] = std::make_unique<GatherJournal>(
        scope, *c_.disk, w.loaded[r].next_segment,
        static_cast<uint64_t>(region.gather->journal_flush_parents),
        region.gather->journal_flush_secs, c_.publish_commit,
        [this](const json& fields) { Emit("lineage_commit", fields); });
    journaling = true;
  }
  if (journaling) {
    w.options.journaled = [&loaded = w.loaded](size_t r,
                                               uint64_t row) -> const exec::JournaledParent* {
      const auto it = loaded[r].parents.find(row);
      return it == loaded[r].parents.end() ? nullptr : &it->second;
    };
    w.options.journal_sink = [&journals = w.journals](size_t r,
                                                      std::vector<exec::JournaledParent>& parents) {
      if (journals[r]) journals[r]->Add(parents);
    };
  }
}

// The tap files of the operators this pass runs (and a phase's forced tap),
// teed from the executor.
void PartitionRunner::OpenTaps(Pass& pass, Partition& w) {
  std::vector<size_t> run_taps;
  for (const size_t t : c_.taps) {
    if (t >= w.options.first_op && t <= pass.run_end) run_taps.push_back(t);
  }
  if (pass.intermediate && (run_taps.empty() || run_taps.back() != pass.run_end)) {
    run_taps.push_back(pass.run_end);  // the phase's forced tap
  }
  for (const size_t t : run_taps) {
    OpenTap tap;
    tap.op_idx = t;
    // The final tap is the partition's output as the export gets it, so
    // that the export can be assembled from the final taps by copying them
    // (it is never compressed: checkpoint.compression is for the others).
    tap.compressed = c_.settings.compress && t != pass.last_op;
    tap.rel_path = RunJobPaths::TapStem(t, w.p, c_.set->bounds.size()) + "." + c_.token +
                   (tap.compressed ? ".jsonl.zst" : ".jsonl");
    const std::string data = c_.checkpoints + "/" + tap.rel_path;
    if (t == pass.last_op) {
      tap.final_rows = std::make_unique<io::OutputStream>(data, /*overwrite=*/false, *c_.disk);
      tap.final_rows->HashContent();
    } else {
      tap.stream = std::make_unique<io::AtomicFileWriter>(data, /*overwrite=*/false, *c_.disk);
      tap.hash = std::make_unique<io::Xxh3>();
      w.options.taps.push_back(t);
    }
    w.open.push_back(std::move(tap));
  }
  w.options.compress_taps = c_.settings.compress;
  if (!w.open.empty()) {
    w.options.tap_sink = [&open = w.open](size_t i, std::string_view bytes, uint64_t rows) {
      open[i].stream->Append(bytes);
      open[i].hash->Update(bytes);
      open[i].rows += rows;
      CrashPoint("tap_append");
    };
  }
}

// A phase's forced tap keeps where each of its rows came from, so that the
// errors of the next phase name the input rows (ExecOptions::origin); a
// partition resumed from such a tap reads them back.
void PartitionRunner::OpenOrigins(Pass& pass, Partition& w) {
  if (pass.intermediate) {
    w.origins_rel = RunJobPaths::TapStem(pass.run_end, w.p, c_.set->bounds.size()) + "." +
                    c_.token + ".origins.jsonl";
    w.origins = std::make_unique<io::AtomicFileWriter>(c_.checkpoints + "/" + w.origins_rel,
                                                       /*overwrite=*/false, *c_.disk);
    w.options.tap_origin_sink = [&origins = w.origins, &origins_hash = w.origins_hash,
                                 forced = w.options.taps.size() - 1](size_t i,
                                                                     std::string_view lines) {
      if (i != forced) return;
      origins->Append(lines);
      origins_hash.Update(lines);
    };
  }
  const std::string rel = w.from.resumed ? w.from.commit.value("origins_path", "") : "";
  if (rel.empty()) return;
  std::unique_ptr<io::ByteSource> in = io::OpenInput(c_.checkpoints + "/" + rel);
  std::string text;
  std::vector<char> buf(1 << 16);
  for (size_t n; (n = in->Read(buf.data(), buf.size())) > 0;) text.append(buf.data(), n);
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    const json o = json::parse(text.substr(at, nl - at), nullptr, false);
    if (!o.is_array() || o.size() != 2 || !o[0].is_string() || !o[1].is_number_unsigned()) {
      throw Error(c_.checkpoints + "/" + rel, w.from_origins.size() + 1,
                  "not a row origin [\"file\", line]", "start a new job");
    }
    w.from_origins.push_back({o[0].get<std::string>(), o[1].get<uint64_t>()});
    at = nl + 1;
  }
  w.options.origin = [&from_origins = w.from_origins](uint64_t line) -> const exec::RowOrigin* {
    return line >= 1 && line <= from_origins.size() ? &from_origins[line - 1] : nullptr;
  };
}

// The executor's output tee into the final tap and its op events.
void PartitionRunner::HookExecutor(Pass& pass, Partition& w) {
  // The final tap: the partition's output itself when the export is
  // assembled from final taps, else a copy teed from the output.
  w.final_rows =
      !w.open.empty() && w.open.back().final_rows ? w.open.back().final_rows.get() : nullptr;
  if (w.final_rows != nullptr && !pass.assemble) {
    w.options.output_tee = [final_rows = w.final_rows](std::string_view bytes, uint64_t) {
      final_rows->Append(bytes);
      CrashPoint("tap_append");
    };
  } else if (w.final_rows != nullptr) {
    w.options.output_tee = [](std::string_view, uint64_t) { CrashPoint("tap_append"); };
  }
  // Op events per (partition, op): start when the partition's first batch
  // enters the operator, complete when its last leaves (SPEC §8).
  w.op_started.assign(c_.plan->operators.size(), 0);
  w.options.op_event = [this, &w](size_t i, const exec::OperatorCounters* done) {
    const uint64_t p = w.p;
    if (done == nullptr) {
      w.op_started[i] = MonotonicSeconds();
      Emit("op_start",
           {{"partition_id", p}, {"op_idx", i}, {"op_name", c_.plan->operators[i].op->name()}});
      return;
    }
    const exec::OperatorCounters& c = *done;
    const double wall = MonotonicSeconds() - w.op_started[i];
    Emit("op_complete",
         {{"partition_id", p},
          {"op_idx", i},
          {"op_name", c.name},
          {"status", "completed"},
          {"duration_secs", wall},
          {"metadata", {{"busy_secs", c.seconds}}},
          {"input_rows", c.rows_in},
          {"output_rows", c.rows_out},
          {"throughput_rows_per_second",
           wall > 0 ? json(static_cast<double>(c.rows_in) / wall) : json()},
          {"reduction_ratio", c.rows_in > 0 ? json(1.0 - static_cast<double>(c.rows_out) /
                                                             static_cast<double>(c.rows_in))
                                            : json()}});
  };
}

// With a final tap, the partition's errors are kept beside it, so that a
// resumed run writes them again. Every tap of a partition is committed after
// the whole partition ran, so each commit names the errors of all its
// operators with the lines of the input: a partition resumed from an
// intermediate tap takes those (its operators after the tap would only
// repeat their own errors, with the tap's line numbers).
void PartitionRunner::OpenErrors(Pass& pass, Partition& w) {
  // A phase's taps keep the errors of the operators through the phase
  // (errors_through_op): the pass that resumes from its forced tap copies
  // them and adds those of its own operators.
  const std::string from_errors = w.from.resumed ? w.from.commit.value("errors_path", "") : "";
  w.committed_errors =
      !from_errors.empty() && ErrorsThroughOp(w.from.commit, pass.last_op) >= pass.run_end;
  if (w.committed_errors) {
    w.errors_rel = from_errors;
    w.errors_sum = io::Checksum::FromJsonOrEmpty(w.from.commit, "errors_");
  } else if (!w.open.empty() && (w.open.back().op_idx == pass.last_op || pass.intermediate)) {
    w.errors_rel = RunJobPaths::TapStem(pass.run_end, w.p, c_.set->bounds.size()) + "." + c_.token +
                   ".errors.jsonl";
    w.part_errors = std::make_unique<io::OutputStream>(c_.checkpoints + "/" + w.errors_rel,
                                                       /*overwrite=*/false, *c_.disk);
    w.part_errors->HashContent();  // a plain file: its content is its stored bytes
    if (!from_errors.empty()) w.part_errors->AppendFile(c_.checkpoints + "/" + from_errors);
  }
  w.has_errors = w.committed_errors || w.part_errors != nullptr;
}

// Runs the executor over the partition, then seals what it wrote beside the
// taps: journal segments, the errors and origins files.
void PartitionRunner::RunExecutor(Pass& pass, Partition& w) {
  io::OutputStream* errors = w.part_errors ? w.part_errors.get() : &pass.errors;
  w.part = exec::Execute(*c_.plan, w.exec_inputs,
                         w.final_rows != nullptr && pass.assemble ? *w.final_rows : pass.output,
                         w.committed_errors ? nullptr : errors, w.options);
  // Sealed journal segments are committed before the taps, so that a
  // resumed run finds what this one journaled (deleted once the final tap
  // commits); parents not yet sealed need no segment any more.
  for (const std::unique_ptr<GatherJournal>& journal : w.journals) {
    if (journal) journal->Flush();
  }
  // A partition commits only what it read whole.
  const uint64_t want_rows = w.from.resumed ? w.from.commit.value("rows", uint64_t{0}) : w.b.rows();
  if (w.part.rows_in != want_rows) {
    throw Error(c_.input_name, 0,
                "partition " + std::to_string(w.p) + " read " + std::to_string(w.part.rows_in) +
                    " rows of " + std::to_string(want_rows),
                "the input changed while the job ran; resume it once nothing writes to it");
  }
  if (w.part_errors) {
    w.part_errors->Commit();
    w.errors_sum = io::Checksum::Xxh3(w.part_errors->ContentXxh3());
  }
  if (w.origins) {
    w.origins->Commit();
    w.origins_sum = io::Checksum::Xxh3(w.origins_hash.HexDigest());
  }
}

// Adds the partition to the run's counters (a phase's partition is counted
// by the pass that completes it), and its counters from the recipe's first
// operator, as its commits keep them, to w.cumulative.
void PartitionRunner::CountPartition(Pass& pass, Partition& w) {
  const exec::Plan& plan = *c_.plan;
  const StartPoint& from = w.from;
  const size_t first_op = w.options.first_op;
  // Ops before the tap resumed from count what the commit recorded.
  const exec::ExecSummary earlier =
      from.resumed ? CountersFrom(plan, from.commit, plan.operators.size()) : exec::ExecSummary{};
  {
    std::lock_guard<std::mutex> lock(pass.mu);
    if (!pass.intermediate && from.resumed) {
      for (size_t i = 0; i < first_op; ++i) total_.operators[i].Add(earlier.operators[i]);
      total_.errors += ErrorsBefore(plan, from.commit, earlier, first_op);
      // Regions that ended before the tap resumed from: as the commit kept them.
      exec::AddRegionCounters(total_, earlier);
    }
    if (!pass.intermediate) AddCounters(total_, w.part, first_op);
    if (!from.continued) rows_computed_ += w.part.rows_in;
  }
  w.cumulative = w.part;
  if (from.resumed) {
    for (size_t i = 0; i < first_op; ++i) w.cumulative.operators[i] = earlier.operators[i];
    exec::AddRegionCounters(w.cumulative, earlier);
    w.cumulative.errors += ErrorsBefore(plan, from.commit, earlier, first_op);
  }
}

// Commits tap i of the partition (SPEC-checkpoints §5): its data file, then
// the commit record that makes it a checkpoint (taps are committed earliest
// operator first). The final tap goes to the export; with keep: latest the
// partition's older taps go.
void PartitionRunner::CommitTap(Pass& pass, Partition& w, size_t i) {
  OpenTap& tap = w.open[i];
  io::Checksum sum;
  // Hashed as written: reading the file back would cost a pass.
  if (tap.final_rows) {
    tap.final_rows->Commit();
    sum = io::Checksum::Xxh3(tap.final_rows->ContentXxh3());
    tap.rows = w.part.rows_out;
  } else {
    tap.stream->Commit();
    sum = io::Checksum::Xxh3(tap.hash->HexDigest());
  }
  const std::string data = c_.checkpoints + "/" + tap.rel_path;
  CrashPoint("tap_data_published");
  struct stat dst {};
  ::stat(data.c_str(), &dst);
  const int64_t now = NowNanos();
  json record = CommitRecord(pass, w, i, sum, static_cast<uint64_t>(dst.st_size), now);
  const std::string commit_path = c_.checkpoints + "/" +
                                  RunJobPaths::TapStem(tap.op_idx, w.p, c_.set->bounds.size()) +
                                  ".commit.json";
  FinalTap done{data, w.has_errors ? c_.checkpoints + "/" + w.errors_rel : ""};
  if (!c_.publish_commit(commit_path, record.dump(2) + "\n")) {
    // An earlier commit of the same tap stays (the same rows: output
    // never depends on the run); this data file is garbage.
    c_.disk->Unlink(data);
    const json earlier = json::parse(io::ReadFile(commit_path), nullptr, false);
    if (!earlier.is_object()) throw Error(commit_path, 0, "not a commit record");
    done.data = c_.checkpoints + "/" + earlier.value("data_path", "");
    const std::string errors_path = earlier.value("errors_path", "");
    done.errors = errors_path.empty() ? "" : c_.checkpoints + "/" + errors_path;
  }
  if (tap.op_idx == pass.last_op) {
    if (pass.assemble) {
      pass.FinalReady(w.p, done);
    } else if (done.errors.size() > 0) {
      AppendFile(done.errors, pass.errors);
    }
  }
  CrashPoint("tap_committed");
  if (c_.on_checkpoint) {
    std::lock_guard<std::mutex> lock(pass.mu);
    c_.on_checkpoint(now);
  }
  json saved = {{"partition_id", w.p},
                {"op_idx", tap.op_idx},
                {"op_name", record["op_name"]},
                {"checkpoint_path", tap.rel_path},
                {"output_rows", tap.rows}};
  sum.ToJson(saved, "checkpoint_");
  Emit("checkpoint_save", saved);
  if (!c_.settings.keep_all) DropOlderTaps(c_, w.p, tap.op_idx, w.errors_rel, w.origins_rel);
}

// The commit record of tap i (SPEC-checkpoints §5): its data file (`sum`,
// `size_bytes`), the partition's input, errors and origins, and its counters.
json PartitionRunner::CommitRecord(const Pass& pass, const Partition& w, size_t i,
                                   const io::Checksum& sum, uint64_t size_bytes,
                                   int64_t now) const {
  const exec::Plan& plan = *c_.plan;
  const OpenTap& tap = w.open[i];
  const bool exact =
      tap.op_idx == pass.last_op || (pass.intermediate && tap.op_idx == pass.run_end);
  json record = {
      {"schema_version", 1},
      {"job_id", c_.job_id},
      {"shard_id", c_.shard_id},
      {"partition_id", w.p},
      {"op_idx", tap.op_idx},
      {"op_name", plan.operators[tap.op_idx].op->name()},
      {"ops_prefix_sha256", OpsPrefixSha256(c_.root, tap.op_idx)},
      {"config_sha256", c_.config_sha256},
      {"data_path", tap.rel_path},
      {"compression", tap.compressed ? "zstd" : "none"},
      {"rows", tap.rows},
      {"size_bytes", size_bytes},
      {"created_at", FormatUtcIso8601Micros(now)},
      {"hostname", HostName()},
      {"pid", ::getpid()},
      {"attempt_token", c_.token},
      {"engine", {{"version", version()}, {"git_commit", git_commit()}, {"libtorch", nullptr}}},
      {"model_devices", total_.model_devices},
      {"counters", CountersJson(plan, w.cumulative, tap.op_idx, w.b.rows(), w.bytes, exact)}};
  sum.ToJson(record);
  c_.set->digests[w.p].checksum.ToJson(record, "input_partition_");
  if (w.has_errors) {
    record["errors_path"] = w.errors_rel;
    w.errors_sum.ToJson(record, "errors_");
    // Through this pass's last operator, or as far as the errors taken
    // from the tap it resumed from go.
    const size_t through =
        w.committed_errors ? ErrorsThroughOp(w.from.commit, pass.last_op) : pass.run_end;
    if (through < pass.last_op) record["errors_through_op"] = through;
  }
  if (w.origins && tap.op_idx == pass.run_end) {
    record["origins_path"] = w.origins_rel;
    w.origins_sum.ToJson(record, "origins_");
  }
  return record;
}

// The final tap is committed: the partition's journals go, and it is
// complete (unless a later pass completes it).
void PartitionRunner::FinishPartition(Pass& pass, Partition& w) {
  // The journals of an earlier run go too (resumed from a tap after the region).
  for (size_t r = 0; r < c_.plan->regions.size() && !w.open.empty() && !pass.intermediate; ++r) {
    // (A directory scan each: only where a journal may be.)
    if (c_.plan->regions[r].parent < 0 && (w.journals[r] || w.from.resumed)) {
      DeleteJournal(c_.checkpoints, JournalStem(c_, r, w.p), *c_.disk);
    }
  }
  if (pass.intermediate) return;  // a later pass completes it
  const double secs = MonotonicSeconds() - w.start;
  const uint64_t rows = w.b.rows();
  Emit("partition_complete", {{"partition_id", w.p},
                              {"status", "completed"},
                              {"duration_secs", secs},
                              {"input_rows", rows},
                              {"output_rows", w.part.rows_out},
                              {"throughput_rows_per_second",
                               secs > 0 ? json(static_cast<double>(rows) / secs) : json()}});
  std::lock_guard<std::mutex> lock(pass.mu);
  ++completed_;
  if (c_.on_partition_done) c_.on_partition_done(total_, completed_, resumed_);
}

}  // namespace djshard::job
