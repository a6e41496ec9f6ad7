// `djshard run` as a job: partitions, checkpoint taps and commits, resume,
// events and the job summary (SPEC-checkpoints §3-6 and 8).
#include "src/job/job_mode.h"

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
#include "djshard/common/log.h"
#include "djshard/common/text.h"
#include "djshard/io/input.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "djshard/job/checkpoint.h"
#include "djshard/job/job_files.h"
#include "djshard/job/partition.h"
#include "djshard/job/partition_runner.h"
#include "src/job/job_preflight.h"
#include "src/job/run_stop.h"

namespace djshard::job {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

[[noreturn]] void RefuseResume(const std::string& token, const std::string& step,
                               const std::string& detail, const std::string& hint = {}) {
  throw Error("resume " + token, 0, step + ": " + detail, hint);
}

// §6 step 3: a well-formed partitioning_info.json, as bounds.
PartitionSet ReadPartitioning(const std::string& token, const std::string& path) {
  const json info = json::parse(io::ReadFile(path), nullptr, false);
  return ParsePartitioningInfo(info, [&](const std::string& what) {
    RefuseResume(token, "partitioning_info", path + ": " + what);
  });
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
        // A tap inside an execution group's phase, before its forced tap:
        // its errors file holds errors of operators after it too.
        const size_t errors_through = ErrorsThroughOp(c.record, num_ops - 1);
        if (errors_through > c.op_idx && errors_through < num_ops - 1) continue;
        if (const std::optional<CommitProblem> problem = VerifyCommitFiles(c, checkpoints, set)) {
          RefuseResume(token, "checkpoints", problem->subject + ": " + problem->what,
                       "the committed checkpoint is damaged; start a new job");
        }
        const std::string data = checkpoints + "/" + c.record.value("data_path", "");
        starts[partition] = {true, c.op_idx, data, c.record};
        break;
      }
    }
    return starts;
  });
  uint64_t rows = 0;
  const io::ChecksumKind kind =
      set.digests.empty() ? io::ChecksumKind::kXxh3_128 : set.digests[0].checksum.kind;
  const std::vector<PartitionDigest> now = HashPartitions(inputs, set.bounds, &rows, {kind, {}});
  if (rows != set.total_rows) {
    RefuseResume(token, "input",
                 input_name + " has " + std::to_string(rows) + " rows; the job partitioned " +
                     std::to_string(set.total_rows),
                 "resume with the job's original input");
  }
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i].checksum != set.digests[i].checksum) {
      const io::Checksum& was = set.digests[i].checksum;
      RefuseResume(token, "input",
                   "partition " + std::to_string(i) + " of " + input_name + " changed (" +
                       was.field() + " " + now[i].checksum.hex + ", the job recorded " + was.hex +
                       ")",
                   "resume with the job's original input");
    }
  }
  return verified.get();
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

// Runs the partitions in execution groups that alternate model phases
// (SPEC-checkpoints §10.7): per group of `pre.group_size` partitions, per
// phase, the phase's model operators are loaded, its operators run over the
// group's partitions up to its forced tap, and the operators are unloaded
// before the next phase loads; the next phase resumes each partition from
// that tap.
void RunExecutionGroups(const recipe::Recipe& recipe, exec::Plan& plan, const JobSettings& st,
                        const std::vector<size_t>& taps, const JobPreflight& pre,
                        const std::string& checkpoints, uint64_t num_partitions,
                        PartitionRunner& runner, io::OutputStream& output,
                        io::OutputStream& errors) {
  if (!plan.models_deferred) {
    throw Error("internal: an alternating run needs its model operators unloaded");
  }
  if (!st.checkpointing() || taps.empty()) {
    throw Error(
        "the model stages do not fit on the devices together and checkpointing is "
        "disabled: alternating execution groups resume each phase from a forced tap",
        "enable checkpoint (any strategy), or give the job more device memory");
  }
  for (const exec::LineageRegion& r : plan.regions) {
    for (const preflight::PreflightResult::Phase& ph : pre.phases) {
      for (size_t op : ph.model_ops) {
        if (op > r.expand_idx && op < r.gather_idx) {
          throw Error(recipe.path, plan.operators[op].line,
                      "the model stages do not fit on the devices together and " +
                          recipe.process[op].name + " runs inside the expand/gather region '" +
                          r.name + "', where no phase of an execution group can end",
                      "give the job more device memory, or run the model operators in separate "
                      "jobs");
        }
      }
    }
  }
  const ops::Registry& registry = ops::Registry::Global();
  const size_t last_op = plan.operators.size() - 1;
  const uint64_t group = std::max<uint64_t>(1, pre.group_size);
  std::vector<StartPoint> starts = runner.starts();
  for (uint64_t first = 0; first < num_partitions; first += group) {
    const uint64_t end = std::min(num_partitions, first + group);
    for (size_t k = 0; k < pre.phases.size(); ++k) {
      const preflight::PreflightResult::Phase& ph = pre.phases[k];
      const bool last_phase = k + 1 == pre.phases.size();
      const size_t phase_end = last_phase ? last_op : ph.last_op;
      bool needed = false;  // a partition of the group still runs this phase's operators
      for (uint64_t p = first; p < end; ++p) {
        needed = needed || !starts[p].resumed || starts[p].op_idx < phase_end;
      }
      if (!needed && !last_phase) continue;
      if (needed) exec::RebuildOperators(recipe, registry, ph.model_ops, true, &plan);
      runner.set_pass(first, end, last_phase ? std::nullopt : std::optional<size_t>(phase_end),
                      starts);
      try {
        runner.Run(output, errors);
      } catch (...) {
        exec::RebuildOperators(recipe, registry, ph.model_ops, false, &plan);
        throw;
      }
      // Unloaded before the next phase loads.
      exec::RebuildOperators(recipe, registry, ph.model_ops, false, &plan);
      if (last_phase) break;
      for (uint64_t p = first; p < end; ++p) {
        if (starts[p].resumed && starts[p].op_idx >= phase_end) continue;
        const std::string record_path =
            checkpoints + "/" + RunJobPaths::TapStem(phase_end, p, num_partitions) + ".commit.json";
        const json record = json::parse(io::ReadFile(record_path), nullptr, false);
        if (!record.is_object()) throw Error(record_path, 0, "not a commit record");
        starts[p] = {true, phase_end, checkpoints + "/" + record.value("data_path", ""), record,
                     /*continued=*/true};
      }
    }
  }
}

bool IsCompressedName(const std::string& path) {
  return EndsWithIgnoreCase(path, ".gz") || EndsWithIgnoreCase(path, ".zst");
}

}  // namespace

bool WantsJobMode(const RunRequest& request, const recipe::Recipe& recipe) {
  return !request.overrides.empty() || request.job_id || request.work_dir || request.resume ||
         (recipe.root["partition"] && !recipe.root["partition"].IsNull()) ||
         (recipe.root["checkpoint"] && !recipe.root["checkpoint"].IsNull());
}

void RunJob(const RunRequest& request, const recipe::Recipe& recipe, exec::Plan& plan,
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
  const std::string config_sha = io::Sha256Hex(effective.dump());
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
    set = PartitionInput(st, recipe, inputs, dataset.display);
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
                           {"hash_algorithm", kPartitionHashAlgorithm},
                           {"sha256", set.input.hex}})
                             .dump(2) +
                         "\n");
    disk.WriteAtomic(paths.PartitioningInfo(),
                     PartitioningInfoJson(set, job_id, nullptr, token).dump(2) + "\n");
  } else {
    if (ClearStopOnResume(paths.dir)) {
      Log(LogLevel::kInfo, "stop_cleared",
          "Cleared the stop request of job " + job_id + " (kept in metadata/)");
    }
    // Data files without a commit record are garbage of the interrupted run.
    std::error_code ec;
    std::vector<std::string> referenced;
    for (const auto& [p, list] : ListCommits(paths.Checkpoints())) {
      for (const Commit& c : list) {
        referenced.push_back(c.record.value("data_path", ""));
        referenced.push_back(c.record.value("errors_path", ""));
        referenced.push_back(c.record.value("origins_path", ""));
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
  disk.WriteAtomic(paths.Plan(),
                   ExecutionPlanJson(plan, job_id, config_sha, taps, st,
                                     {{"mode", set.mode}, {"num_partitions", set.bounds.size()}})
                           .dump(2) +
                       "\n");

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
               {"model_devices", exec::ModelDevices(plan)},
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

  int threads = outcome.threads;
  double last_summary = MonotonicSeconds();
  PartitionRunConfig config;
  config.plan = &plan;
  config.root = root;
  config.settings = st;
  config.taps = taps;
  config.checkpoints = paths.Checkpoints();
  config.job_id = job_id;
  config.shard_id = nullptr;
  config.token = token;
  config.config_sha256 = config_sha;
  config.set = &set;
  config.starts = starts;
  config.inputs = inputs;
  config.input_name = dataset.display;
  config.threads = threads;
  // With checkpointing, each partition's output is its final tap; a plain
  // export is assembled from them at the end (so the output is written once
  // before that copy), a compressed one is written as the partitions finish.
  config.assemble = st.checkpointing() && !IsCompressedName(outcome.export_path);
  config.events = &events;
  config.disk = &disk;
  config.before_partition = [&stop] { stop.BeforePartition(); };
  config.on_checkpoint = [&summary](int64_t now) {
    summary.j["checkpointing"]["last_checkpoint_time"] = IsoMicros(now);
  };
  config.on_partition_done = [&](const exec::ExecSummary& total, uint64_t completed,
                                 uint64_t resumed) {
    if (MonotonicSeconds() - last_summary >= 1.0) {
      last_summary = MonotonicSeconds();
      summary.j["partitions"]["completed"] = completed;
      summary.j["partitions"]["resumed"] = resumed;
      summary.j["rows"] = {{"in", total.rows_in}, {"out", total.rows_out}};
      summary.Write(disk, paths.Summary());
    }
    if (request.progress) {
      exec::ExecSummary progress = total;
      progress.seconds = MonotonicSeconds() - start_mono;
      request.progress(progress);
    }
  };
  PartitionRunner runner(std::move(config));

  try {
    // Model preflight (SPEC-checkpoints §10): probes and the replica plan,
    // before any partition starts.
    // The thread count is the user's when --threads, np or a num_proc says
    // it; otherwise the replica plan may lower it (CPU memory).
    const bool threads_explicit = request.threads || recipe.np || plan.num_proc > 0;
    const JobPreflight pre = RunJobPreflight(
        recipe, plan, st, inputs, paths.dir, threads, threads_explicit, set.bounds.size(),
        set.total_rows,
        [&] {
          return ExecutionPlanJson(plan, job_id, config_sha, taps, st,
                                   {{"mode", set.mode}, {"num_partitions", set.bounds.size()}});
        },
        events, disk);
    threads = pre.threads;
    runner.set_threads(threads);
    outcome.threads = threads;
    io::OutputStream output(outcome.export_path, /*overwrite=*/true, disk);
    io::OutputStream errors(outcome.errors_path, /*overwrite=*/true, disk);
    if (pre.phases.size() <= 1) {
      if (plan.models_deferred) {
        exec::RebuildOperators(recipe, ops::Registry::Global(), exec::ModelOperators(plan), true,
                               &plan);
        plan.models_deferred = false;
      }
      runner.Run(output, errors);
    } else {
      RunExecutionGroups(recipe, plan, st, taps, pre, paths.Checkpoints(), set.bounds.size(),
                         runner, output, errors);
    }
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
    summary.j["partitions"]["completed"] = runner.completed();
    summary.j["partitions"]["resumed"] = runner.resumed();
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
  exec::ExecSummary total = runner.total();
  const uint64_t completed = runner.completed(), resumed = runner.resumed();
  total.seconds = MonotonicSeconds() - start_mono;
  outcome.summary = total;
  outcome.partitions = set.bounds.size();
  outcome.partitions_resumed = resumed;
  disk.WriteAtomic(outcome.stats_path, exec::SummaryJson(total, threads));
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

}  // namespace djshard::job
