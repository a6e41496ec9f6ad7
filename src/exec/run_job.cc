// `djshard run` as a job: partitions, checkpoint taps and commits, resume,
// events and the job summary (SPEC-checkpoints §3-6 and 8).
#include "src/exec/run_job.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "djshard/common/build_info.h"
#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/exec/checkpoint.h"
#include "djshard/exec/partition.h"
#include "djshard/io/input.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "src/exec/job_files.h"
#include "src/exec/job_preflight.h"
#include "src/exec/run_stop.h"

namespace djshard::exec {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kHashAlgorithm = "sha256-lines-v1";

std::string GenerateJobId() { return StampForName(NowNanos()) + "_" + RandomHex(6); }

void CheckJobId(const std::string& id) {
  bool ok = !id.empty() && id.size() <= 128 && id[0] != '.';
  for (const char c : id) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) {
    throw Error("job id '" + id + "' is not valid",
                "use 1-128 characters of A-Z a-z 0-9 . _ -, not starting with '.'");
  }
}

// {work_dir}/{job_id}: --work-dir, else the recipe's work_dir ({job_id}
// substituted, else the id appended), else the export's directory.
std::string ResolveJobDir(const RunRequest& request, const JobSettings& settings,
                          const recipe::Recipe& recipe, const std::string& export_path,
                          const std::string& job_id) {
  fs::path dir;
  if (request.work_dir) {
    dir = fs::absolute(*request.work_dir) / job_id;
  } else if (settings.work_dir) {
    std::string w = *settings.work_dir;
    const size_t at = w.find("{job_id}");
    if (at != std::string::npos) {
      w.replace(at, 8, job_id);
      dir = recipe::ResolveRecipePath(recipe, w);
    } else {
      dir = fs::path(recipe::ResolveRecipePath(recipe, w)) / job_id;
    }
  } else {
    dir = fs::path(export_path).parent_path() / job_id;
  }
  return dir.lexically_normal().string();
}

// Where the job's checkpoints go: <job_dir>/checkpoints, else checkpoint.dir
// with {job_id} substituted, else the id appended (so jobs never share one).
// A relative checkpoint.dir is taken from the working directory when given on
// the command line, else from the recipe's directory, as work_dir is.
std::string ResolveCheckpointDir(const RunRequest& request, const JobSettings& settings,
                                 const recipe::Recipe& recipe, const std::string& job_dir,
                                 const std::string& job_id) {
  if (!settings.checkpoint_dir) return job_dir + "/checkpoints";
  std::string d = *settings.checkpoint_dir;
  const size_t at = d.find("{job_id}");
  const bool placeholder = at != std::string::npos;
  if (placeholder) d.replace(at, 8, job_id);
  bool from_cli = false;
  for (const auto& [k, v] : request.overrides) from_cli = from_cli || k == "checkpoint.dir";
  fs::path dir = from_cli ? fs::absolute(d) : fs::path(recipe::ResolveRecipePath(recipe, d));
  if (!placeholder) dir /= job_id;
  return dir.lexically_normal().string();
}

// Appends a whole file's decoded bytes to `out`; returns their SHA-256.
std::string AppendFile(const std::string& path, io::OutputStream& out) {
  std::unique_ptr<io::ByteSource> in = io::OpenInput(path);
  io::Sha256 hash;
  std::vector<char> buf(1 << 20);
  for (size_t n; (n = in->Read(buf.data(), buf.size())) > 0;) {
    out.Append(std::string_view(buf.data(), n));
    hash.Update(buf.data(), n);
  }
  return hash.HexDigest();
}

// Rows of a file (decoded); `stored`, when given, hashes its stored bytes.
uint64_t CountLines(const std::string& path, io::Sha256* stored = nullptr) {
  std::unique_ptr<io::ByteSource> in = io::OpenInput(path, stored);
  std::vector<char> buf(1 << 20);
  uint64_t lines = 0;
  char last = '\n';
  for (size_t n; (n = in->Read(buf.data(), buf.size())) > 0;) {
    lines += static_cast<uint64_t>(std::count(buf.data(), buf.data() + n, '\n'));
    last = buf[n - 1];
  }
  return lines + (last != '\n' ? 1 : 0);
}

// What a commit record says (SPEC-checkpoints §5), as far as resume uses it.
struct Commit {
  std::string record_path;  // absolute
  uint64_t partition = 0;
  size_t op_idx = 0;
  json record;
};

// Every commit record in `dir`, by partition.
std::map<uint64_t, std::vector<Commit>> ListCommits(const std::string& dir) {
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
        !c.record.contains("op_idx")) {
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

[[noreturn]] void RefuseResume(const std::string& token, const std::string& step,
                               const std::string& detail, const std::string& hint = {}) {
  throw Error("resume " + token, 0, step + ": " + detail, hint);
}

// The partition set of a job: bounds and the digests of the input under them.
struct PartitionSet {
  std::string mode;
  std::vector<PartitionBounds> bounds;
  std::vector<PartitionDigest> digests;
  uint64_t total_rows = 0, total_bytes = 0;
  std::string input_sha256;
};

// Per partition, where processing starts: the committed tap it resumes from.
struct StartPoint {
  bool resumed = false;
  size_t op_idx = 0;      // the tap's operator
  std::string data_path;  // absolute
  json commit;
};

// A new job's partitions: a scan for rows and the sample that hashes nothing,
// then one read that hashes the partitions and the whole input (SPEC §4 allows
// one extra read).
PartitionSet PartitionNewJob(const JobSettings& st, const recipe::Recipe& recipe,
                             const std::vector<io::InputCandidate>& inputs,
                             const std::string& input_name) {
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
  set.digests = HashPartitions(inputs, set.bounds, &rows, &set.input_sha256);
  if (rows != scan.rows) {
    throw Error(input_name, 0, "the input changed while it was partitioned",
                "run again once nothing writes to it");
  }
  return set;
}

json PartitioningInfoJson(const PartitionSet& set, const std::string& job_id,
                          const std::string& token) {
  json parts = json::array();
  for (size_t i = 0; i < set.bounds.size(); ++i) {
    parts.push_back({{"partition_id", i},
                     {"start_row", set.bounds[i].start},
                     {"end_row", set.bounds[i].end},
                     {"rows", set.bounds[i].rows()},
                     {"size_bytes", set.digests[i].size_bytes},
                     {"sha256", set.digests[i].sha256}});
  }
  return {{"schema_version", 1},
          {"job_id", job_id},
          {"shard_id", nullptr},
          {"mode", set.mode},
          {"num_partitions", set.bounds.size()},
          {"total_rows", set.total_rows},
          {"total_bytes", set.total_bytes},
          {"input_sha256", set.input_sha256},
          {"hash_algorithm", kHashAlgorithm},
          {"created_at", FormatUtcIso8601(NowNanos())},
          {"created_by", {{"hostname", HostName()}, {"pid", ::getpid()}, {"attempt_token", token}}},
          {"partitions", parts}};
}

// §6 step 3: a well-formed partitioning_info.json, as bounds.
PartitionSet ReadPartitioning(const std::string& token, const std::string& path) {
  const json info = json::parse(io::ReadFile(path), nullptr, false);
  auto bad = [&](const std::string& what) {
    RefuseResume(token, "partitioning_info", path + ": " + what);
  };
  if (!info.is_object()) bad("not a JSON object");
  PartitionSet set;
  try {
    if (info.value("hash_algorithm", "") != kHashAlgorithm) bad("unknown hash_algorithm");
    set.mode = info.at("mode").get<std::string>();
    set.total_rows = info.at("total_rows").get<uint64_t>();
    set.total_bytes = info.at("total_bytes").get<uint64_t>();
    set.input_sha256 = info.at("input_sha256").get<std::string>();
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
      set.digests.push_back(
          {p.at("size_bytes").get<uint64_t>(), p.at("sha256").get<std::string>()});
      next = end;
    }
    if (next != set.total_rows) bad("the last partition does not end at total_rows");
  } catch (const json::exception& e) {
    bad(e.what());
  }
  return set;
}

// §6 steps 5-6: the input still has those partitions, and per partition the
// newest commit whose operator prefix is unchanged, its data file verified.
std::vector<StartPoint> ValidateResume(const std::string& token, const std::string& checkpoints,
                                       const PartitionSet& set, const YAML::Node& root,
                                       const std::vector<io::InputCandidate>& inputs,
                                       const std::string& input_name, size_t num_ops) {
  // Step 6 reads the committed files while step 5 rescans the input, on
  // another thread; step 5's refusal still comes first.
  std::future<std::vector<StartPoint>> verified = std::async(std::launch::async, [&] {
    std::vector<StartPoint> starts(set.bounds.size());
    const auto commits = ListCommits(checkpoints);
    for (const auto& [partition, list] : commits) {
      if (partition >= starts.size()) continue;
      for (const Commit& c : list) {
        if (c.op_idx >= num_ops ||
            c.record.value("ops_prefix_sha256", "") != OpsPrefixSha256(root, c.op_idx)) {
          continue;
        }
        const std::string rel = c.record.value("data_path", "");
        const std::string data = checkpoints + "/" + rel;
        auto refuse = [&](const std::string& what) {
          RefuseResume(token, "checkpoints", rel + ": " + what,
                       "the committed checkpoint is damaged; start a new job");
        };
        struct stat st {};
        if (rel.empty() || ::stat(data.c_str(), &st) != 0) refuse("missing");
        if (static_cast<uint64_t>(st.st_size) != c.record.value("size_bytes", uint64_t{0})) {
          refuse("size " + std::to_string(st.st_size) + ", the commit says " +
                 std::to_string(c.record.value("size_bytes", uint64_t{0})));
        }
        // One read: the stored bytes hashed, the decoded rows counted.
        io::Sha256 stored;
        uint64_t lines = 0;
        try {
          lines = CountLines(data, &stored);
        } catch (const Error& e) {
          refuse(std::string("unreadable: ") + e.what());
        }
        if (stored.HexDigest() != c.record.value("sha256", "")) refuse("sha256 differs");
        if (lines != c.record.value("rows", uint64_t{0})) refuse("row count differs");
        if (c.record.value("input_partition_sha256", "") != set.digests[partition].sha256) {
          refuse("made from other input rows");
        }
        if (const std::string errors_rel = c.record.value("errors_path", ""); !errors_rel.empty()) {
          const std::string errors = checkpoints + "/" + errors_rel;
          if (::stat(errors.c_str(), &st) != 0 ||
              io::Sha256OfFile(errors) != c.record.value("errors_sha256", "")) {
            RefuseResume(token, "checkpoints", errors_rel + ": missing or changed",
                         "the committed checkpoint is damaged; start a new job");
          }
        }
        starts[partition] = {true, c.op_idx, data, c.record};
        break;
      }
    }
    return starts;
  });
  uint64_t rows = 0;
  const std::vector<PartitionDigest> now = HashPartitions(inputs, set.bounds, &rows);
  if (rows != set.total_rows) {
    RefuseResume(token, "input",
                 input_name + " has " + std::to_string(rows) + " rows; the job partitioned " +
                     std::to_string(set.total_rows),
                 "resume with the job's original input");
  }
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i].sha256 != set.digests[i].sha256) {
      RefuseResume(token, "input",
                   "partition " + std::to_string(i) + " of " + input_name + " changed (sha256 " +
                       now[i].sha256 + ", the job recorded " + set.digests[i].sha256 + ")",
                   "resume with the job's original input");
    }
  }
  return verified.get();
}

void AddCounters(ExecSummary& total, const ExecSummary& part, size_t first_op) {
  total.rows_out += part.rows_out;
  total.bytes_out += part.bytes_out;
  total.errors += part.errors;
  for (size_t i = first_op; i < part.operators.size() && i < total.operators.size(); ++i) {
    total.operators[i].rows_in += part.operators[i].rows_in;
    total.operators[i].rows_out += part.operators[i].rows_out;
    total.operators[i].errors += part.operators[i].errors;
    total.operators[i].seconds += part.operators[i].seconds;
  }
  AddRegionCounters(total, part);
}

// A partition's counters through operator op_idx, as a commit keeps them.
json CountersJson(const ExecSummary& s, size_t op_idx, uint64_t rows_in, uint64_t bytes_in) {
  json ops = json::array();
  for (size_t i = 0; i <= op_idx && i < s.operators.size(); ++i) {
    ops.push_back(OperatorCountersJson(s.operators[i]));
  }
  return {{"rows_in", rows_in}, {"bytes_in", bytes_in}, {"operators", ops}};
}

// Counters stored in a commit, back as a summary (operators through op_idx).
ExecSummary CountersFrom(const json& commit, size_t num_ops) {
  ExecSummary s;
  s.operators.resize(num_ops);
  const json c = commit.value("counters", json::object());
  const json ops = c.value("operators", json::array());
  for (size_t i = 0; i < ops.size() && i < num_ops; ++i) {
    s.operators[i].rows_in = ops[i].value("rows_in", uint64_t{0});
    s.operators[i].rows_out = ops[i].value("rows_out", uint64_t{0});
    s.operators[i].errors = ops[i].value("errors", uint64_t{0});
    s.operators[i].seconds = ops[i].value("seconds", 0.0);
  }
  return s;
}

// The job summary (§8), rewritten whole each time.
struct JobSummary {
  json j;
  void Write(io::Disk& disk, const std::string& path) { disk.WriteAtomic(path, j.dump(2) + "\n"); }
};

// Touches the heartbeat every 5 s and lets the loop rewrite the summary.
class Heartbeat {
 public:
  Heartbeat(std::string path, io::Disk& disk) : path_(std::move(path)), disk_(disk) {
    Beat();
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::seconds(5), [this] { return stop_; })) {
        try {
          Beat();
        } catch (const Error&) {
          // A missed beat only makes the job look stale sooner.
        }
      }
    });
  }
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Beat() { disk_.WriteReplace(path_, IsoMicros(NowNanos()) + "\n"); }
  std::string path_;
  io::Disk& disk_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

json OpKindName(const ops::Operator& op) {
  return op.kind() == ops::OpKind::kFilter ? "filter" : "mapper";
}

json PlanJson(const Plan& plan, const std::string& job_id, const std::string& config_sha,
              const std::vector<size_t>& taps, const JobSettings& st, const PartitionSet& set) {
  json ops = json::array(), edges = json::array(), idxs = json::array();
  for (size_t i = 0; i < plan.operators.size(); ++i) {
    const bool tap = std::find(taps.begin(), taps.end(), i) != taps.end();
    ops.push_back({{"op_idx", i},
                   {"name", plan.operators[i].op->name()},
                   {"kind", OpKindName(*plan.operators[i].op)},
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
          {"lineage_stages", LineageStagesJson(plan)},
          {"edges", edges},
          {"partitioning", {{"mode", set.mode}, {"num_partitions", set.bounds.size()}}},
          {"checkpoint", {{"strategy", TapStrategyName(st.strategy)}, {"taps", taps}}},
          {"execution_groups", nullptr},
          {"probe", {{"enabled", false}, {"cache_keys", json::array()}}}};
}

// One tap file being written for one partition.
struct OpenTap {
  size_t op_idx = 0;
  std::string rel_path;                          // relative to the checkpoint dir
  bool compressed = false;                       // zstd frames, else rows
  std::unique_ptr<io::AtomicFileWriter> stream;  // stored bytes (an intermediate tap)
  std::unique_ptr<io::Sha256> hash;              // of the stored bytes, as they are appended
  std::unique_ptr<io::OutputStream> final_rows;  // the final tap: the partition's output
  uint64_t rows = 0;
};

// A partition's committed output: its final tap and its operator errors.
struct FinalTap {
  std::string data;    // absolute
  std::string errors;  // absolute; empty when none were kept
};

bool IsCompressedName(const std::string& path) {
  return EndsWithIgnoreCase(path, ".gz") || EndsWithIgnoreCase(path, ".zst");
}

}  // namespace

bool WantsJobMode(const RunRequest& request, const recipe::Recipe& recipe) {
  return !request.overrides.empty() || request.job_id || request.work_dir || request.resume ||
         (recipe.root["partition"] && !recipe.root["partition"].IsNull()) ||
         (recipe.root["checkpoint"] && !recipe.root["checkpoint"].IsNull());
}

void RunJob(const RunRequest& request, const recipe::Recipe& recipe, const Plan& plan,
            const recipe::DatasetPath& dataset, const std::vector<io::InputCandidate>& inputs,
            RunOutcome& outcome, io::Disk& disk) {
  const YAML::Node root = ApplyOverrides(recipe.root, request.overrides);
  const JobSettings st = ParseJobSettings(root, recipe.path);
  const std::vector<size_t> taps = TapPositions(st, recipe);
  const size_t num_ops = plan.operators.size();

  std::string job_id;
  if (request.resume) {
    if (request.job_id && *request.job_id != *request.resume) {
      throw Error("--job_id " + *request.job_id + " and --resume " + *request.resume +
                      " name different jobs",
                  "give the same id to both, or only --resume");
    }
    job_id = *request.resume;
  } else if (request.job_id) {
    job_id = *request.job_id;
  } else if (st.job_id) {
    job_id = *st.job_id;
  } else {
    job_id = GenerateJobId();
  }
  CheckJobId(job_id);
  RunJobPaths paths;
  paths.dir = ResolveJobDir(request, st, recipe, outcome.export_path, job_id);
  paths.checkpoints = ResolveCheckpointDir(request, st, recipe, paths.dir, job_id);
  outcome.job_id = job_id;
  outcome.job_dir = paths.dir;
  const json effective = EffectiveConfig(root, dataset.path, outcome.export_path);
  const std::string config_sha = Sha256Hex(effective.dump());
  const std::string token = RandomHex(16);

  PartitionSet set;
  std::vector<StartPoint> starts;
  json summary_before;
  if (request.resume) {
    // §6: every check before anything is written or removed.
    const std::string& t = job_id;
    struct stat sb {};
    if (::stat(paths.dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      RefuseResume(t, "locate", "no job directory " + paths.dir,
                   "pass the --work-dir (or recipe work_dir) of the original run");
    }
    if (::stat(paths.PartitioningInfo().c_str(), &sb) != 0) {
      RefuseResume(t, "locate", "no " + paths.PartitioningInfo(),
                   "the job never started a partition, or ran with another checkpoint.dir; "
                   "run it again without --resume");
    }
    // A file of the job that the interrupted run may not have written yet.
    auto read_job_file = [&](const std::string& path) {
      struct stat fb {};
      if (::stat(path.c_str(), &fb) != 0) {
        RefuseResume(t, "locate", "no " + path, "the job did not get far enough to resume it");
      }
      return json::parse(io::ReadFile(path), nullptr, false);
    };
    summary_before = read_job_file(paths.Summary());
    if (summary_before.is_object()) {
      if (summary_before.value("status", "") == "completed" &&
          ::stat(outcome.export_path.c_str(), &sb) == 0) {
        outcome.already_completed = true;
        return;
      }
      if (!summary_before.value("checkpointing", json::object()).value("resumable", true)) {
        RefuseResume(t, "locate", "the job ran with checkpointing disabled",
                     "start a new job instead");
      }
    }
    if (!st.checkpointing()) {
      RefuseResume(t, "config", "checkpointing is disabled", "enable checkpoint to resume");
    }
    const json stored = read_job_file(paths.Metadata() + "/effective_config.json");
    if (stored != effective) {
      std::string keys;
      for (const std::string& k : DifferingKeys(stored, effective)) {
        keys += (keys.empty() ? "" : ", ") + k;
      }
      RefuseResume(t, "config", "the effective configuration differs from the job's: " + keys,
                   "rerun the original command with the original recipe");
    }
    set = ReadPartitioning(t, paths.PartitioningInfo());
    starts = ValidateResume(t, paths.Checkpoints(), set, root, inputs, dataset.display, num_ops);
  } else {
    struct stat sb {};
    if (::stat(paths.dir.c_str(), &sb) == 0) {
      throw Error(paths.dir, 0, "job " + job_id + " already exists",
                  "add --resume " + job_id + " to resume it, or choose another --job_id");
    }
    set = PartitionNewJob(st, recipe, inputs, dataset.display);
    starts.resize(set.bounds.size());
  }

  // The job directory and its files.
  const int64_t start_ns = NowNanos();
  const double start_mono = MonotonicSeconds();
  disk.MakeDirs(paths.Checkpoints());
  disk.MakeDirs(paths.Metadata());
  if (!request.resume) {
    disk.WriteAtomic(paths.Metadata() + "/config_snapshot.yaml", io::ReadFile(recipe.path));
    json cli = {{"job_id", job_id},
                {"dataset_path", dataset.path},
                {"export_path", outcome.export_path},
                {"overrides", json::object()}};
    for (const auto& [k, v] : request.overrides) cli["overrides"][k] = v;
    disk.WriteAtomic(paths.Metadata() + "/cli.json", cli.dump(2) + "\n");
    disk.WriteAtomic(paths.Metadata() + "/effective_config.json", effective.dump(2) + "\n");
    json files = json::array();
    for (const io::InputCandidate& in : inputs) {
      struct stat fst {};
      ::stat(in.path.c_str(), &fst);
      files.push_back({{"path", in.path},
                       {"size", static_cast<uint64_t>(fst.st_size)},
                       {"mtime", FormatUtcIso8601(MtimeNanos(fst))}});
    }
    disk.WriteAtomic(paths.Metadata() + "/input_fingerprint.json",
                     json({{"files", files},
                           {"rows", set.total_rows},
                           {"bytes", set.total_bytes},
                           {"hash_algorithm", kHashAlgorithm},
                           {"sha256", set.input_sha256}})
                             .dump(2) +
                         "\n");
    disk.WriteAtomic(paths.PartitioningInfo(),
                     PartitioningInfoJson(set, job_id, token).dump(2) + "\n");
  } else {
    if (ClearStopOnResume(paths.dir)) {
      std::fprintf(stderr, "Cleared the stop request of job %s (kept in metadata/)\n",
                   job_id.c_str());
    }
    // Data files without a commit record are garbage of the interrupted run.
    std::error_code ec;
    std::vector<std::string> referenced;
    for (const auto& [p, list] : ListCommits(paths.Checkpoints())) {
      for (const Commit& c : list) {
        referenced.push_back(c.record.value("data_path", ""));
        referenced.push_back(c.record.value("errors_path", ""));
      }
    }
    for (const auto& e : fs::directory_iterator(paths.Checkpoints(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("checkpoint_op_", 0) != 0 || name.find(".commit.json") != std::string::npos) {
        continue;
      }
      const std::string& rel = name;
      if (std::find(referenced.begin(), referenced.end(), rel) == referenced.end()) {
        disk.Unlink(e.path().string());
      }
    }
  }
  disk.WriteAtomic(paths.Plan(), PlanJson(plan, job_id, config_sha, taps, st, set).dump(2) + "\n");

  const std::string resumption = "djshard run --config " + recipe.path + " --resume " + job_id;
  JobSummary summary;
  summary.j = {{"job_id", job_id},
               {"executor_type", "djshard"},
               {"status", "running"},
               {"config_file", recipe.path},
               {"config_sha256", config_sha},
               {"work_dir", fs::path(paths.dir).parent_path().string()},
               {"job_dir", paths.dir},
               {"start_time", IsoMicros(start_ns)},
               {"end_time", nullptr},
               {"duration_secs", nullptr},
               {"resume_token", st.checkpointing() ? json(job_id) : json(nullptr)},
               {"resumption_command", st.checkpointing() ? json(resumption) : json(nullptr)},
               {"error_message", nullptr},
               {"hostname", HostName()},
               {"pid", ::getpid()},
               {"partitions",
                {{"total", set.bounds.size()}, {"completed", 0}, {"failed", 0}, {"resumed", 0}}},
               {"rows", {{"in", 0}, {"out", 0}}},
               {"checkpointing",
                {{"strategy", st.checkpointing() ? TapStrategyName(st.strategy) : "disabled"},
                 {"n_ops", st.n_ops},
                 {"op_names", st.op_names},
                 {"last_checkpoint_time", nullptr},
                 {"resumable", st.checkpointing()},
                 {"checkpoint_dir", paths.Checkpoints()}}},
               {"stop", nullptr}};
  if (summary_before.is_object() && summary_before.contains("start_time")) {
    summary.j["first_start_time"] =
        summary_before.value("first_start_time", summary_before["start_time"]);
  }
  summary.Write(disk, paths.Summary());
  Heartbeat heartbeat(paths.Heartbeat(), disk);
  std::string events_path;
  if (st.event_logging) {
    // One file per run of the job; a second run within the same second adds host and pid.
    events_path = paths.dir + "/events_" + StampForName(start_ns) + ".jsonl";
    struct stat eb {};
    if (::stat(events_path.c_str(), &eb) == 0) {
      events_path = paths.dir + "/events_" + StampForName(start_ns) + "_" + HostName() + "_" +
                    std::to_string(::getpid()) + ".jsonl";
    }
  }
  EventLog events(events_path, job_id);
  events.Emit("job_start",
              {{"status", "running"},
               {"metadata",
                {{"resume", request.resume.has_value()}, {"num_partitions", set.bounds.size()}}}});
  if (request.job_started) request.job_started(job_id, st.checkpointing());
  const RunStop stop(paths.dir, events);  // djshard stop (SPEC-checkpoints §9)

  ExecSummary total;
  total.operators.resize(num_ops);
  for (size_t i = 0; i < num_ops; ++i) total.operators[i].name = plan.operators[i].op->name();
  const int threads = outcome.threads;
  double last_summary = MonotonicSeconds();
  uint64_t completed = 0, resumed = 0;

  try {
    // Model preflight (SPEC-checkpoints §10): probes and the replica plan,
    // before any partition starts.
    RunJobPreflight(
        recipe, plan, st, inputs, paths.dir, threads, set.bounds.size(),
        [&] { return PlanJson(plan, job_id, config_sha, taps, st, set); }, events, disk);
    io::OutputStream output(outcome.export_path, /*overwrite=*/true, disk);
    io::OutputStream errors(outcome.errors_path, /*overwrite=*/true, disk);
    ExecOptions base;
    base.threads = threads;
    io::LineChunker input(inputs.size(), base.batch_bytes, plan.batch_rows,
                          [&inputs](size_t i) { return io::OpenInput(inputs[i].path); });
    const size_t last_op = num_ops == 0 ? 0 : num_ops - 1;
    // With checkpointing, each partition's output is its final tap; a plain
    // export is assembled from them at the end (so the output is written once
    // before that copy), a compressed one is written as the partitions finish.
    const bool assemble = st.checkpointing() && !IsCompressedName(outcome.export_path);
    std::vector<FinalTap> finals(set.bounds.size());
    auto append_final = [&](const FinalTap& done) {
      output.AppendFile(done.data);
      if (!done.errors.empty()) AppendFile(done.errors, errors);
      CrashPoint("final_concat");
    };
    // Partitions in flight at once: each runs the executor on its own threads
    // and writes its own final tap, so order matters only for the export,
    // assembled at the end. A compressed export (or no final taps) is written
    // as partitions finish, one at a time.
    const uint64_t in_flight =
        std::min<uint64_t>(assemble ? st.max_concurrent_partitions : 1, set.bounds.size());
    // The input is read once, in order: a partition reads its rows when every
    // earlier one has read its own (its turn), so partitions overlap where
    // one drains and the next fills.
    std::mutex mu;  // guards the counters, the summary, finals and the turn
    std::condition_variable turn_cv;
    uint64_t turn = 0;
    bool aborted = false;
    auto take_turn = [&](uint64_t p) {
      std::unique_lock<std::mutex> lock(mu);
      turn_cv.wait(lock, [&] { return turn == p || aborted; });
      if (aborted) throw Error("partition " + std::to_string(p) + " stopped: another failed");
    };
    auto pass_turn = [&](uint64_t p) {
      std::lock_guard<std::mutex> lock(mu);
      turn = p + 1;
      turn_cv.notify_all();
    };
    // Rows of partitions that need no input, skipped only when a later
    // partition reads (a job resumed whole from final taps reads nothing).
    // Touched by the partition whose turn it is only.
    uint64_t rows_to_skip = 0;
    auto skip_rows = [&](uint64_t p, uint64_t rows) {
      take_turn(p);
      rows_to_skip += rows;
      pass_turn(p);
    };
    auto run_partition = [&](uint64_t p) {
      const PartitionBounds& b = set.bounds[p];
      const StartPoint& from = starts[p];
      const double p_start = MonotonicSeconds();
      const uint64_t p_bytes = set.digests[p].size_bytes;
      {
        std::lock_guard<std::mutex> lock(mu);
        total.rows_in += b.rows();
        total.bytes_in += p_bytes;
      }
      if (from.resumed && from.op_idx == last_op) {
        // A finished partition: its final tap is the output, concatenated.
        skip_rows(p, b.rows());
        events.Emit("partition_resume", {{"partition_id", p}, {"op_idx", from.op_idx}});
        FinalTap done{from.data_path, ""};
        // The partition's operator errors, as its run wrote them.
        if (const std::string rel = from.commit.value("errors_path", ""); !rel.empty()) {
          done.errors = paths.Checkpoints() + "/" + rel;
        }
        if (assemble) {
          finals[p] = done;  // its own slot: no lock needed
        } else {
          append_final(done);
        }
        events.Emit("checkpoint_load", {{"partition_id", p},
                                        {"op_idx", from.op_idx},
                                        {"checkpoint_path", from.commit.value("data_path", "")},
                                        {"checkpoint_sha256", from.commit.value("sha256", "")}});
        ExecSummary part = CountersFrom(from.commit, num_ops);
        part.rows_out = from.commit.value("rows", uint64_t{0});
        {
          std::lock_guard<std::mutex> lock(mu);
          AddCounters(total, part, 0);
          ++resumed;
          ++completed;
        }
        events.Emit("partition_complete", {{"partition_id", p},
                                           {"status", "resumed"},
                                           {"input_rows", b.rows()},
                                           {"output_rows", part.rows_out}});
        return;
      }

      // The rows: this partition of the input, or the committed tap it resumes from.
      std::vector<io::InputCandidate> exec_inputs = inputs;
      std::unique_ptr<io::LineChunker> tap_reader;
      ExecOptions options = base;
      if (from.resumed) {
        skip_rows(p, b.rows());
        exec_inputs = {{from.data_path, from.data_path, from.commit.value("data_path", "")}};
        tap_reader = std::make_unique<io::LineChunker>(
            1, base.batch_bytes, plan.batch_rows,
            [&exec_inputs](size_t) { return io::OpenInput(exec_inputs[0].path); });
        options.source = [&tap_reader](io::LineChunk* c) { return tap_reader->Next(c); };
        options.first_op = from.op_idx + 1;
        events.Emit("partition_resume", {{"partition_id", p}, {"op_idx", from.op_idx}});
        events.Emit("checkpoint_load", {{"partition_id", p},
                                        {"op_idx", from.op_idx},
                                        {"checkpoint_path", from.commit.value("data_path", "")},
                                        {"checkpoint_sha256", from.commit.value("sha256", "")}});
      } else {
        options.source = [&, p, reading = false, done = false](io::LineChunk* c) mutable {
          if (done) return false;
          if (!reading) {
            take_turn(p);
            if (rows_to_skip > 0) input.SkipLines(rows_to_skip);
            rows_to_skip = 0;
            input.LimitLines(b.rows());
            reading = true;
          }
          if (input.Next(c)) return true;
          done = true;
          pass_turn(p);
          return false;
        };
      }
      events.Emit("partition_start", {{"partition_id", p}, {"input_rows", b.rows()}});
      std::vector<OpenTap> open;
      for (const size_t t : taps) {
        if (t < options.first_op) continue;
        OpenTap tap;
        tap.op_idx = t;
        // The final tap is the partition's output as the export gets it, so
        // that the export can be assembled from the final taps by copying them
        // (it is never compressed: checkpoint.compression is for the others).
        tap.compressed = st.compress && t != last_op;
        tap.rel_path = RunJobPaths::TapStem(t, p, set.bounds.size()) + "." + token +
                       (tap.compressed ? ".jsonl.zst" : ".jsonl");
        const std::string data = paths.Checkpoints() + "/" + tap.rel_path;
        if (t == last_op) {
          tap.final_rows = std::make_unique<io::OutputStream>(data, /*overwrite=*/false, disk);
          tap.final_rows->HashContent();
        } else {
          tap.stream = std::make_unique<io::AtomicFileWriter>(data, /*overwrite=*/false, disk);
          tap.hash = std::make_unique<io::Sha256>();
          options.taps.push_back(t);
        }
        open.push_back(std::move(tap));
      }
      options.compress_taps = st.compress;
      if (!open.empty()) {
        options.tap_sink = [&open](size_t i, std::string_view bytes, uint64_t rows) {
          open[i].stream->Append(bytes);
          open[i].hash->Update(bytes);
          open[i].rows += rows;
          CrashPoint("tap_append");
        };
      }
      // The final tap: the partition's output itself when the export is
      // assembled from final taps, else a copy teed from the output.
      io::OutputStream* final_rows =
          !open.empty() && open.back().final_rows ? open.back().final_rows.get() : nullptr;
      if (final_rows != nullptr && !assemble) {
        options.output_tee = [final_rows](std::string_view bytes, uint64_t) {
          final_rows->Append(bytes);
          CrashPoint("tap_append");
        };
      } else if (final_rows != nullptr) {
        options.output_tee = [](std::string_view, uint64_t) { CrashPoint("tap_append"); };
      }
      // Op events per (partition, op): start when the partition's first batch
      // enters the operator, complete when its last leaves (SPEC §8).
      std::vector<double> op_started(num_ops, 0);
      options.op_event = [&](size_t i, const OperatorCounters* done) {
        if (done == nullptr) {
          op_started[i] = MonotonicSeconds();
          events.Emit(
              "op_start",
              {{"partition_id", p}, {"op_idx", i}, {"op_name", plan.operators[i].op->name()}});
          return;
        }
        const OperatorCounters& c = *done;
        const double wall = MonotonicSeconds() - op_started[i];
        events.Emit(
            "op_complete",
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
      // With a final tap, the partition's errors are kept beside it, so that a
      // resumed run writes them again.
      std::unique_ptr<io::OutputStream> part_errors;
      std::string errors_rel;
      if (!open.empty() && open.back().op_idx == last_op) {
        errors_rel =
            RunJobPaths::TapStem(last_op, p, set.bounds.size()) + "." + token + ".errors.jsonl";
        part_errors = std::make_unique<io::OutputStream>(paths.Checkpoints() + "/" + errors_rel,
                                                         /*overwrite=*/false, disk);
      }
      const ExecSummary part =
          Execute(plan, exec_inputs, final_rows != nullptr && assemble ? *final_rows : output,
                  part_errors ? part_errors.get() : &errors, options);
      // A partition commits only what it read whole.
      const uint64_t want_rows = from.resumed ? from.commit.value("rows", uint64_t{0}) : b.rows();
      if (part.rows_in != want_rows) {
        throw Error(dataset.display, 0,
                    "partition " + std::to_string(p) + " read " + std::to_string(part.rows_in) +
                        " rows of " + std::to_string(want_rows),
                    "the input changed while the job ran; resume it once nothing writes to it");
      }
      std::string errors_sha;
      if (part_errors) {
        part_errors->Commit();
        errors_sha = io::Sha256OfFile(paths.Checkpoints() + "/" + errors_rel);
      }
      // Ops before the tap resumed from count what the commit recorded.
      ExecSummary earlier = from.resumed ? CountersFrom(from.commit, num_ops) : ExecSummary{};
      std::unique_lock<std::mutex> counters_lock(mu);
      if (from.resumed) {
        for (size_t i = 0; i < options.first_op; ++i) {
          total.operators[i].rows_in += earlier.operators[i].rows_in;
          total.operators[i].rows_out += earlier.operators[i].rows_out;
          total.operators[i].errors += earlier.operators[i].errors;
          total.operators[i].seconds += earlier.operators[i].seconds;
        }
      }
      AddCounters(total, part, options.first_op);
      counters_lock.unlock();
      ExecSummary cumulative = part;
      for (size_t i = 0; i < options.first_op && from.resumed; ++i) {
        cumulative.operators[i] = earlier.operators[i];
      }
      // Commits, earliest operator first: only a commit record makes a checkpoint.
      for (OpenTap& tap : open) {
        std::string sha;
        // Hashed as written: reading the file back would cost a pass.
        if (tap.final_rows) {
          tap.final_rows->Commit();
          sha = tap.final_rows->ContentSha256();
          tap.rows = part.rows_out;
        } else {
          tap.stream->Commit();
          sha = tap.hash->HexDigest();
        }
        const std::string data = paths.Checkpoints() + "/" + tap.rel_path;
        CrashPoint("tap_data_published");
        struct stat dst {};
        ::stat(data.c_str(), &dst);
        const int64_t now = NowNanos();
        json record = {
            {"schema_version", 1},
            {"job_id", job_id},
            {"shard_id", nullptr},
            {"partition_id", p},
            {"op_idx", tap.op_idx},
            {"op_name", plan.operators[tap.op_idx].op->name()},
            {"ops_prefix_sha256", OpsPrefixSha256(root, tap.op_idx)},
            {"config_sha256", config_sha},
            {"input_partition_sha256", set.digests[p].sha256},
            {"data_path", tap.rel_path},
            {"compression", tap.compressed ? "zstd" : "none"},
            {"rows", tap.rows},
            {"size_bytes", static_cast<uint64_t>(dst.st_size)},
            {"sha256", sha},
            {"created_at", IsoMicros(now)},
            {"hostname", HostName()},
            {"pid", ::getpid()},
            {"attempt_token", token},
            {"engine",
             {{"version", version()}, {"git_commit", git_commit()}, {"libtorch", nullptr}}},
            {"model_devices", json::array()},
            {"counters", CountersJson(cumulative, tap.op_idx, b.rows(), p_bytes)}};
        if (tap.op_idx == last_op && part_errors) {
          record["errors_path"] = errors_rel;
          record["errors_sha256"] = errors_sha;
        }
        const std::string commit_path = paths.Checkpoints() + "/" +
                                        RunJobPaths::TapStem(tap.op_idx, p, set.bounds.size()) +
                                        ".commit.json";
        FinalTap done{data, part_errors ? paths.Checkpoints() + "/" + errors_rel : ""};
        if (!disk.PublishLink(commit_path, record.dump(2) + "\n", paths.Checkpoints())) {
          // An earlier commit of the same tap stays (the same rows: output
          // never depends on the run); this data file is garbage.
          disk.Unlink(data);
          const json earlier = json::parse(io::ReadFile(commit_path), nullptr, false);
          if (!earlier.is_object()) throw Error(commit_path, 0, "not a commit record");
          done.data = paths.Checkpoints() + "/" + earlier.value("data_path", "");
          const std::string errors_path = earlier.value("errors_path", "");
          done.errors = errors_path.empty() ? "" : paths.Checkpoints() + "/" + errors_path;
        }
        if (tap.op_idx == last_op) {
          if (assemble) {
            finals[p] = done;
          } else if (done.errors.size() > 0) {
            AppendFile(done.errors, errors);
          }
        }
        CrashPoint("tap_committed");
        {
          std::lock_guard<std::mutex> lock(mu);
          summary.j["checkpointing"]["last_checkpoint_time"] = IsoMicros(now);
        }
        events.Emit("checkpoint_save", {{"partition_id", p},
                                        {"op_idx", tap.op_idx},
                                        {"op_name", record["op_name"]},
                                        {"checkpoint_path", tap.rel_path},
                                        {"checkpoint_sha256", sha},
                                        {"output_rows", tap.rows}});
        if (!st.keep_all) {
          // keep: latest: older taps of the partition go, record first, then
          // data (found by name: other partitions' files are not this one's).
          for (size_t older = 0; older < tap.op_idx; ++older) {
            const std::string record_path = paths.Checkpoints() + "/" +
                                            RunJobPaths::TapStem(older, p, set.bounds.size()) +
                                            ".commit.json";
            struct stat rst {};
            if (::stat(record_path.c_str(), &rst) != 0) continue;
            const json old = json::parse(io::ReadFile(record_path), nullptr, false);
            disk.Unlink(record_path);
            if (old.is_object() && old.value("data_path", json()).is_string()) {
              disk.Unlink(paths.Checkpoints() + "/" + old["data_path"].get<std::string>());
            }
          }
        }
      }
      const double secs = MonotonicSeconds() - p_start;
      events.Emit("partition_complete",
                  {{"partition_id", p},
                   {"status", "completed"},
                   {"duration_secs", secs},
                   {"input_rows", b.rows()},
                   {"output_rows", part.rows_out},
                   {"throughput_rows_per_second",
                    secs > 0 ? json(static_cast<double>(b.rows()) / secs) : json()}});
      std::lock_guard<std::mutex> lock(mu);
      ++completed;
      if (MonotonicSeconds() - last_summary >= 1.0) {
        last_summary = MonotonicSeconds();
        summary.j["partitions"]["completed"] = completed;
        summary.j["partitions"]["resumed"] = resumed;
        summary.j["rows"] = {{"in", total.rows_in}, {"out", total.rows_out}};
        summary.Write(disk, paths.Summary());
      }
      if (request.progress) {
        total.seconds = MonotonicSeconds() - start_mono;
        request.progress(total);
      }
    };
    if (in_flight <= 1) {
      for (uint64_t p = 0; p < set.bounds.size(); ++p) {
        stop.BeforePartition();
        run_partition(p);
      }
    } else {
      // Partitions are taken in order. The first error stops the others
      // (those waiting for their turn at once); a stop request only keeps
      // new partitions from starting, so those in flight finish and commit.
      std::atomic<uint64_t> next{0};
      std::exception_ptr failure;
      bool no_more = false;
      std::vector<std::thread> runners;
      for (uint64_t k = 0; k < in_flight; ++k) {
        runners.emplace_back([&] {
          for (uint64_t p; (p = next++) < set.bounds.size();) {
            try {
              stop.BeforePartition();
            } catch (...) {
              std::lock_guard<std::mutex> lock(mu);
              if (!failure) failure = std::current_exception();
              no_more = true;
              return;
            }
            try {
              run_partition(p);
            } catch (...) {
              std::lock_guard<std::mutex> lock(mu);
              if (!failure) failure = std::current_exception();
              aborted = true;
              turn_cv.notify_all();
              return;
            }
            std::lock_guard<std::mutex> lock(mu);
            if (aborted || no_more) return;
          }
        });
      }
      for (std::thread& t : runners) t.join();
      if (failure) std::rethrow_exception(failure);
    }
    if (assemble) {
      // The export is the final taps one after another, copied by the kernel.
      for (const FinalTap& done : finals) {
        append_final(done);
      }
    }
    total.bytes_out = output.bytes_in();
    CrashPoint("before_export_commit");
    output.Commit();
    errors.Commit();
  } catch (const std::exception& e) {
    const int64_t end_ns = NowNanos();
    // A stop request or a signal ends the job "stopped", still resumable.
    const bool stopped = RunStop::Stopping();
    summary.j["status"] = stopped ? "stopped" : "failed";
    if (stopped) summary.j["stop"] = stop.SummaryJson();
    summary.j["error_message"] = e.what();
    summary.j["end_time"] = IsoMicros(end_ns);
    summary.j["duration_secs"] = MonotonicSeconds() - start_mono;
    summary.j["partitions"]["completed"] = completed;
    summary.j["partitions"]["resumed"] = resumed;
    summary.j["partitions"]["failed"] = stopped ? 0 : 1;
    try {
      summary.Write(disk, paths.Summary());
      events.Emit(stopped ? "job_stopped" : "job_failed",
                  {{"status", stopped ? "stopped" : "failed"}, {"error_message", e.what()}});
    } catch (const std::exception&) {
      // The original error matters more.
    }
    throw;
  }
  total.seconds = MonotonicSeconds() - start_mono;
  outcome.summary = total;
  outcome.partitions = set.bounds.size();
  outcome.partitions_resumed = resumed;
  disk.WriteAtomic(outcome.stats_path, SummaryJson(total, threads));
  summary.j["status"] = "completed";
  summary.j["end_time"] = IsoMicros(NowNanos());
  summary.j["duration_secs"] = total.seconds;
  summary.j["partitions"]["completed"] = completed;
  summary.j["partitions"]["resumed"] = resumed;
  summary.j["rows"] = {{"in", total.rows_in}, {"out", total.rows_out}};
  summary.Write(disk, paths.Summary());
  events.Emit("job_complete", {{"status", "completed"},
                               {"duration_secs", total.seconds},
                               {"input_rows", total.rows_in},
                               {"output_rows", total.rows_out}});
}

}  // namespace djshard::exec
