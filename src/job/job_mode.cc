// `djshard run` as a job: partitions, checkpoint taps and commits, resume,
// events and the job summary (SPEC-checkpoints §3-6 and 8).
#include "src/job/job_mode.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
#include "djshard/job/job_status.h"
#include "djshard/job/partition.h"
#include "djshard/job/partition_runner.h"
#include "src/job/job_preflight.h"
#include "src/job/run_stop.h"

namespace djshard::job {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string GenerateJobId() { return FormatUtcForName(NowNanos()) + "_" + RandomHex(6); }

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
  void Beat() { disk_.WriteReplace(path_, FormatUtcIso8601Micros(NowNanos()) + "\n"); }
  std::string path_;
  io::Disk& disk_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Throws Error unless the partitions can run in alternating execution
// groups: the model operators still unloaded, a tap that each phase can be
// resumed from, and no phase ending inside an expand/gather region.
void CheckExecutionGroups(const recipe::Recipe& recipe, const exec::Plan& plan,
                          const JobSettings& st, const std::vector<size_t>& taps,
                          const JobPreflight& pre) {
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
}

// After a phase that ended at `phase_end`, each partition of [first, end)
// that ran it starts the next phase from its forced tap there.
void ContinueFromPhaseTaps(const std::string& checkpoints, size_t phase_end, uint64_t first,
                           uint64_t end, uint64_t num_partitions, std::vector<StartPoint>& starts) {
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
  CheckExecutionGroups(recipe, plan, st, taps, pre);
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
      ContinueFromPhaseTaps(checkpoints, phase_end, first, end, num_partitions, starts);
    }
  }
}

bool IsCompressedName(const std::string& path) {
  return EndsWithIgnoreCase(path, ".gz") || EndsWithIgnoreCase(path, ".zst");
}

// The id of the job: --resume's, else --job_id, else the recipe's job_id,
// else a new one.
std::string ChooseJobId(const RunRequest& request, const JobSettings& st) {
  if (request.resume) {
    if (request.job_id && *request.job_id != *request.resume) {
      throw Error("--job_id " + *request.job_id + " and --resume " + *request.resume +
                      " name different jobs",
                  "give the same id to both, or only --resume");
    }
    return *request.resume;
  }
  if (request.job_id) return *request.job_id;
  if (st.job_id) return *st.job_id;
  return GenerateJobId();
}

// One `djshard run` of a job, step by step in the order RunJob calls them:
// the job's id and paths (construction), the resume checks or the new
// partitioning, the job files, the summary and heartbeat, the event log and
// stop watcher, the partition runner, then its execution and the summary's
// final state.
class RunJobSession {
 public:
  // Every argument must outlive this.
  RunJobSession(const RunRequest& request, const recipe::Recipe& recipe, exec::Plan& plan,
                const recipe::DatasetPath& dataset, const std::vector<io::InputCandidate>& inputs,
                RunOutcome& outcome, io::Disk& disk);
  RunJobSession(const RunJobSession&) = delete;
  RunJobSession& operator=(const RunJobSession&) = delete;

  // §6: every check of a resume before anything is written or removed, then
  // the job's partitions and where each starts. True when the job completed
  // already and its export is there (outcome.already_completed is set).
  bool CheckResume();
  // A new job: refuses an existing job directory, then partitions the input.
  void PrepareNewJob();
  // The job directory: metadata of a new job, or a resumed job's stop
  // request cleared and garbage removed; then the execution plan. The run's
  // clock starts here.
  void WriteJobFiles();
  // Writes the "running" summary and starts the heartbeat.
  void StartSummary();
  // Opens this run's event log (job_start), reports the job started, and
  // starts watching for `djshard stop`.
  void OpenEventLog();
  // Makes the partition runner.
  void StartRunner();
  // Preflight, the partitions and the export's commit; a failure or stop is
  // recorded in the summary and events, then rethrown.
  void Execute();
  // The outcome, stats, and the "completed" summary and event.
  void RecordCompletion();

 private:
  // §6 step 1: the job directory and its partitioning_info.json exist.
  void LocateJob() const;
  // A file of the job that the interrupted run may not have written yet.
  json ReadJobFile(const std::string& path) const;
  // §6 step 4: the effective configuration is the one the job stored.
  void CheckConfigUnchanged() const;
  // metadata/ of a new job and its partitioning_info.json.
  void WriteNewJobMetadata();
  json InputFingerprint() const;
  // Data files without a commit record are garbage of the interrupted run.
  void RemoveUncommittedTaps();
  // Refuses a resume while the job's run lives: a fresh heartbeat and a
  // process that exists (another machine's cannot be seen).
  void RefuseLiveRun() const;
  json PlanJson() const;
  PartitionRunConfig MakeRunnerConfig();
  // Rewrites the summary at most once a second, and reports progress.
  void OnPartitionDone(const exec::ExecSummary& total, uint64_t completed, uint64_t resumed);
  // Model preflight (SPEC-checkpoints §10): probes and the replica plan,
  // before any partition starts; sets the thread count.
  JobPreflight Preflight();
  void RunPartitions(const JobPreflight& pre, io::OutputStream& output, io::OutputStream& errors);
  void RecordFailure(const std::exception& e);

  const RunRequest& request_;
  const recipe::Recipe& recipe_;
  exec::Plan& plan_;
  const recipe::DatasetPath& dataset_;
  const std::vector<io::InputCandidate>& inputs_;
  RunOutcome& outcome_;
  io::Disk& disk_;

  const YAML::Node root_;  // the recipe with the overrides applied
  const JobSettings st_;
  const std::vector<size_t> taps_;
  std::string job_id_;
  RunJobPaths paths_;
  json effective_;  // EffectiveConfig
  std::string config_sha_;
  std::string token_;  // this run's token in partitioning_info.json and commits

  PartitionSet set_;
  std::vector<StartPoint> starts_;
  json summary_before_;  // a resumed job's summary
  int64_t start_ns_ = 0;
  double start_mono_ = 0;
  JobSummary summary_;
  int threads_ = 1;
  double last_summary_ = 0;  // when OnPartitionDone last wrote the summary

  // Destroyed in reverse: the runner, the stop watcher, the events, then the heartbeat.
  std::optional<Heartbeat> heartbeat_;
  std::optional<EventLog> events_;
  std::optional<RunStop> stop_;  // djshard stop (SPEC-checkpoints §9)
  std::optional<PartitionRunner> runner_;
};

RunJobSession::RunJobSession(const RunRequest& request, const recipe::Recipe& recipe,
                             exec::Plan& plan, const recipe::DatasetPath& dataset,
                             const std::vector<io::InputCandidate>& inputs, RunOutcome& outcome,
                             io::Disk& disk)
    : request_(request),
      recipe_(recipe),
      plan_(plan),
      dataset_(dataset),
      inputs_(inputs),
      outcome_(outcome),
      disk_(disk),
      root_(ApplyOverrides(recipe.root, request.overrides)),
      st_(ParseJobSettings(root_, recipe.path)),
      taps_(TapPositions(st_, recipe)) {
  job_id_ = ChooseJobId(request_, st_);
  CheckJobId(job_id_);
  paths_.dir = ResolveJobDir(request_, st_, recipe_, outcome_.export_path, job_id_);
  paths_.checkpoints = ResolveCheckpointDir(request_, st_, recipe_, paths_.dir, job_id_);
  outcome_.job_id = job_id_;
  outcome_.job_dir = paths_.dir;
  effective_ = EffectiveConfig(root_, dataset_.path, outcome_.export_path);
  config_sha_ = io::Sha256Hex(effective_.dump());
  token_ = RandomHex(16);
}

void RunJobSession::LocateJob() const {
  struct stat sb {};
  if (::stat(paths_.dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    RefuseResume(job_id_, "locate", "no job directory " + paths_.dir,
                 "pass the --work-dir (or recipe work_dir) of the original run");
  }
  if (::stat(paths_.PartitioningInfo().c_str(), &sb) != 0) {
    RefuseResume(job_id_, "locate", "no " + paths_.PartitioningInfo(),
                 "the job never started a partition, or ran with another checkpoint.dir; "
                 "run it again without --resume");
  }
}

json RunJobSession::ReadJobFile(const std::string& path) const {
  struct stat fb {};
  if (::stat(path.c_str(), &fb) != 0) {
    RefuseResume(job_id_, "locate", "no " + path, "the job did not get far enough to resume it");
  }
  return json::parse(io::ReadFile(path), nullptr, false);
}

void RunJobSession::CheckConfigUnchanged() const {
  const json stored = ReadJobFile(paths_.Metadata() + "/effective_config.json");
  if (stored != effective_) {
    std::string keys;
    for (const std::string& k : DifferingKeys(stored, effective_)) {
      keys += (keys.empty() ? "" : ", ") + k;
    }
    RefuseResume(job_id_, "config", "the effective configuration differs from the job's: " + keys,
                 "rerun the original command with the original recipe");
  }
}

void RunJobSession::RefuseLiveRun() const {
  const RunJobView view = ReadRunJob(paths_.dir);
  if (view.state != JobState::kRunning) return;
  const std::string host = summary_before_.value("hostname", "");
  const int64_t pid = summary_before_.value("pid", int64_t{0});
  // A run of this host whose process is gone was killed; its heartbeat is
  // still fresh for a while.
  if (host == HostName() && pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
    return;
  }
  RefuseResume(job_id_, "locate",
               "the job is running (pid " + std::to_string(pid) + " on " + host + ", heartbeat " +
                   std::to_string(static_cast<int>(view.heartbeat_age_secs)) + " s old)",
               "wait for that run to end, or stop it with `djshard stop " + job_id_ +
                   "`; a run killed on another machine can be resumed once its heartbeat is " +
                   std::to_string(static_cast<int>(kHeartbeatStaleSecs)) + " s old");
}

bool RunJobSession::CheckResume() {
  LocateJob();
  summary_before_ = ReadJobFile(paths_.Summary());
  if (summary_before_.is_object()) {
    RefuseLiveRun();
    struct stat sb {};
    if (ParseJobState(summary_before_.value("status", "")) == JobState::kCompleted &&
        ::stat(outcome_.export_path.c_str(), &sb) == 0) {
      outcome_.already_completed = true;
      return true;
    }
    if (!summary_before_.value("checkpointing", json::object()).value("resumable", true)) {
      RefuseResume(job_id_, "locate", "the job ran with checkpointing disabled",
                   "start a new job instead");
    }
  }
  if (!st_.checkpointing()) {
    RefuseResume(job_id_, "config", "checkpointing is disabled", "enable checkpoint to resume");
  }
  CheckConfigUnchanged();
  set_ = ReadPartitioning(job_id_, paths_.PartitioningInfo());
  starts_ = ValidateResume(job_id_, paths_.Checkpoints(), set_, root_, inputs_, dataset_.display,
                           plan_.operators.size());
  return false;
}

void RunJobSession::PrepareNewJob() {
  struct stat sb {};
  if (::stat(paths_.dir.c_str(), &sb) == 0) {
    throw Error(paths_.dir, 0, "job " + job_id_ + " already exists",
                "add --resume " + job_id_ + " to resume it, or choose another --job_id");
  }
  set_ = PartitionInput(st_, recipe_, inputs_, dataset_.display);
  starts_.resize(set_.bounds.size());
}

void RunJobSession::WriteJobFiles() {
  start_ns_ = NowNanos();
  start_mono_ = MonotonicSeconds();
  disk_.MakeDirs(paths_.Checkpoints());
  disk_.MakeDirs(paths_.Metadata());
  if (!request_.resume) {
    WriteNewJobMetadata();
  } else {
    if (ClearStopOnResume(paths_.dir)) {
      Log(LogLevel::kInfo, "stop_cleared",
          "Cleared the stop request of job " + job_id_ + " (kept in metadata/)");
    }
    RemoveUncommittedTaps();
    for (const std::string& path : RemoveExportLeftovers(outcome_.export_path, job_id_,
                                                         /*other_hosts_ended=*/false, disk_)) {
      Log(LogLevel::kInfo, "leftover_removed",
          "Removed " + path + ", left by a run of job " + job_id_ + " that was killed");
    }
  }
  disk_.WriteAtomic(paths_.Plan(), PlanJson().dump(2) + "\n");
}

void RunJobSession::WriteNewJobMetadata() {
  disk_.WriteAtomic(paths_.Metadata() + "/config_snapshot.yaml", io::ReadFile(recipe_.path));
  json cli = {{"job_id", job_id_},
              {"dataset_path", dataset_.path},
              {"export_path", outcome_.export_path},
              {"overrides", json::object()}};
  for (const auto& [k, v] : request_.overrides) cli["overrides"][k] = v;
  disk_.WriteAtomic(paths_.Metadata() + "/cli.json", cli.dump(2) + "\n");
  disk_.WriteAtomic(paths_.Metadata() + "/effective_config.json", effective_.dump(2) + "\n");
  disk_.WriteAtomic(paths_.Metadata() + "/input_fingerprint.json",
                    InputFingerprint().dump(2) + "\n");
  disk_.WriteAtomic(paths_.PartitioningInfo(),
                    PartitioningInfoJson(set_, job_id_, nullptr, token_).dump(2) + "\n");
}

json RunJobSession::InputFingerprint() const {
  json files = json::array();
  for (const io::InputCandidate& in : inputs_) {
    struct stat fst {};
    ::stat(in.path.c_str(), &fst);
    files.push_back({{"path", in.path},
                     {"size", static_cast<uint64_t>(fst.st_size)},
                     {"mtime", FormatUtcIso8601(MtimeNanos(fst))}});
  }
  return {{"files", files},
          {"rows", set_.total_rows},
          {"bytes", set_.total_bytes},
          {"hash_algorithm", kPartitionHashAlgorithm},
          {"sha256", set_.input.hex}};
}

void RunJobSession::RemoveUncommittedTaps() {
  std::error_code ec;
  std::vector<std::string> referenced;
  for (const auto& [p, list] : ListCommits(paths_.Checkpoints())) {
    for (const Commit& c : list) {
      referenced.push_back(c.record.value("data_path", ""));
      referenced.push_back(c.record.value("errors_path", ""));
      referenced.push_back(c.record.value("origins_path", ""));
    }
  }
  for (const auto& e : fs::directory_iterator(paths_.Checkpoints(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint_op_", 0) != 0 || name.find(".commit.json") != std::string::npos) {
      continue;
    }
    if (std::find(referenced.begin(), referenced.end(), name) == referenced.end()) {
      disk_.Unlink(e.path().string());
    }
  }
}

json RunJobSession::PlanJson() const {
  return ExecutionPlanJson(plan_, job_id_, config_sha_, taps_, st_,
                           {{"mode", set_.mode}, {"num_partitions", set_.bounds.size()}});
}

void RunJobSession::StartSummary() {
  const bool checkpointing = st_.checkpointing();
  const std::string resumption = "djshard run --config " + recipe_.path + " --resume " + job_id_;
  summary_.j = {{"job_id", job_id_},
                {"executor_type", "djshard"},
                {"status", "running"},
                {"config_file", recipe_.path},
                {"config_sha256", config_sha_},
                {"work_dir", fs::path(paths_.dir).parent_path().string()},
                {"job_dir", paths_.dir},
                {"start_time", FormatUtcIso8601Micros(start_ns_)},
                {"end_time", nullptr},
                {"duration_secs", nullptr},
                {"resume_token", checkpointing ? json(job_id_) : json(nullptr)},
                {"resumption_command", checkpointing ? json(resumption) : json(nullptr)},
                {"error_message", nullptr},
                {"hostname", HostName()},
                {"pid", ::getpid()},
                {"partitions",
                 {{"total", set_.bounds.size()}, {"completed", 0}, {"failed", 0}, {"resumed", 0}}},
                {"rows", {{"in", 0}, {"out", 0}}},
                {"model_devices", exec::ModelDevices(plan_)},
                {"checkpointing",
                 {{"strategy", checkpointing ? TapStrategyName(st_.strategy) : "disabled"},
                  {"n_ops", st_.n_ops},
                  {"op_names", st_.op_names},
                  {"last_checkpoint_time", nullptr},
                  {"resumable", checkpointing},
                  {"checkpoint_dir", paths_.Checkpoints()}}},
                {"stop", nullptr}};
  if (summary_before_.is_object() && summary_before_.contains("start_time")) {
    summary_.j["first_start_time"] =
        summary_before_.value("first_start_time", summary_before_["start_time"]);
  }
  summary_.Write(disk_, paths_.Summary());
  heartbeat_.emplace(paths_.Heartbeat(), disk_);
}

void RunJobSession::OpenEventLog() {
  std::string events_path;
  if (st_.event_logging) {
    // One file per run of the job; a second run within the same second adds host and pid.
    events_path = paths_.dir + "/events_" + FormatUtcForName(start_ns_) + ".jsonl";
    struct stat eb {};
    if (::stat(events_path.c_str(), &eb) == 0) {
      events_path = paths_.dir + "/events_" + FormatUtcForName(start_ns_) + "_" + HostName() + "_" +
                    std::to_string(::getpid()) + ".jsonl";
    }
  }
  events_.emplace(events_path, job_id_);
  events_->Emit(
      "job_start",
      {{"status", "running"},
       {"metadata",
        {{"resume", request_.resume.has_value()}, {"num_partitions", set_.bounds.size()}}}});
  if (request_.job_started) request_.job_started(job_id_, st_.checkpointing());
  stop_.emplace(paths_.dir, *events_);
}

void RunJobSession::StartRunner() {
  threads_ = outcome_.threads;
  last_summary_ = MonotonicSeconds();
  runner_.emplace(MakeRunnerConfig());
}

PartitionRunConfig RunJobSession::MakeRunnerConfig() {
  PartitionRunConfig config;
  config.plan = &plan_;
  config.root = root_;
  config.settings = st_;
  config.taps = taps_;
  config.checkpoints = paths_.Checkpoints();
  config.job_id = job_id_;
  config.shard_id = nullptr;
  config.token = token_;
  config.config_sha256 = config_sha_;
  config.set = &set_;
  config.starts = starts_;
  config.inputs = inputs_;
  config.input_name = dataset_.display;
  config.threads = threads_;
  // With checkpointing, each partition's output is its final tap; a plain
  // export is assembled from them at the end (so the output is written once
  // before that copy), a compressed one is written as the partitions finish.
  config.assemble = st_.checkpointing() && !IsCompressedName(outcome_.export_path);
  config.events = &*events_;
  config.disk = &disk_;
  config.before_partition = [this] { stop_->BeforePartition(); };
  config.on_checkpoint = [this](int64_t now) {
    summary_.j["checkpointing"]["last_checkpoint_time"] = FormatUtcIso8601Micros(now);
  };
  config.on_partition_done = [this](const exec::ExecSummary& total, uint64_t completed,
                                    uint64_t resumed) {
    OnPartitionDone(total, completed, resumed);
  };
  return config;
}

void RunJobSession::OnPartitionDone(const exec::ExecSummary& total, uint64_t completed,
                                    uint64_t resumed) {
  if (MonotonicSeconds() - last_summary_ >= 1.0) {
    last_summary_ = MonotonicSeconds();
    summary_.j["partitions"]["completed"] = completed;
    summary_.j["partitions"]["resumed"] = resumed;
    summary_.j["rows"] = {{"in", total.rows_in}, {"out", total.rows_out}};
    summary_.Write(disk_, paths_.Summary());
  }
  if (request_.progress) {
    exec::ExecSummary progress = total;
    progress.seconds = MonotonicSeconds() - start_mono_;
    request_.progress(progress);
  }
}

JobPreflight RunJobSession::Preflight() {
  // The thread count is the user's when --threads, np or a num_proc says
  // it; otherwise the replica plan may lower it (CPU memory).
  const bool threads_explicit = request_.threads || recipe_.np || plan_.num_proc > 0;
  const JobPreflight pre = RunJobPreflight(
      recipe_, plan_, st_, inputs_, paths_.dir, threads_, threads_explicit, set_.bounds.size(),
      set_.total_rows, [this] { return PlanJson(); }, *events_, disk_);
  threads_ = pre.threads;
  runner_->set_threads(threads_);
  outcome_.threads = threads_;
  return pre;
}

void RunJobSession::RunPartitions(const JobPreflight& pre, io::OutputStream& output,
                                  io::OutputStream& errors) {
  if (pre.phases.size() <= 1) {
    if (plan_.models_deferred) {
      exec::RebuildOperators(recipe_, ops::Registry::Global(), exec::ModelOperators(plan_), true,
                             &plan_);
      plan_.models_deferred = false;
    }
    runner_->Run(output, errors);
  } else {
    RunExecutionGroups(recipe_, plan_, st_, taps_, pre, paths_.Checkpoints(), set_.bounds.size(),
                       *runner_, output, errors);
  }
}

void RunJobSession::Execute() {
  try {
    const JobPreflight pre = Preflight();
    io::OutputStream output(outcome_.export_path, /*overwrite=*/true, disk_,
                            ExportTempTag(job_id_));
    io::OutputStream errors(outcome_.errors_path, /*overwrite=*/true, disk_,
                            ExportTempTag(job_id_));
    RunPartitions(pre, output, errors);
    CrashPoint("before_export_commit");
    output.Commit();
    errors.Commit();
  } catch (const std::exception& e) {
    RecordFailure(e);
    throw;
  }
}

void RunJobSession::RecordFailure(const std::exception& e) {
  const int64_t end_ns = NowNanos();
  // A stop request or a signal ends the job "stopped", still resumable.
  const bool stopped = RunStop::Stopping();
  summary_.j["status"] = stopped ? "stopped" : "failed";
  if (stopped) summary_.j["stop"] = stop_->SummaryJson();
  summary_.j["error_message"] = e.what();
  summary_.j["end_time"] = FormatUtcIso8601Micros(end_ns);
  summary_.j["duration_secs"] = MonotonicSeconds() - start_mono_;
  summary_.j["partitions"]["completed"] = runner_->completed();
  summary_.j["partitions"]["resumed"] = runner_->resumed();
  summary_.j["partitions"]["failed"] = stopped ? 0 : 1;
  try {
    summary_.Write(disk_, paths_.Summary());
    events_->Emit(stopped ? "job_stopped" : "job_failed",
                  {{"status", stopped ? "stopped" : "failed"}, {"error_message", e.what()}});
  } catch (const std::exception&) {
    // The original error matters more.
  }
}

void RunJobSession::RecordCompletion() {
  exec::ExecSummary total = runner_->total();
  const uint64_t completed = runner_->completed(), resumed = runner_->resumed();
  total.seconds = MonotonicSeconds() - start_mono_;
  outcome_.summary = total;
  outcome_.partitions = set_.bounds.size();
  outcome_.partitions_resumed = resumed;
  disk_.WriteAtomic(outcome_.stats_path, exec::SummaryJson(total, threads_));
  summary_.j["status"] = "completed";
  summary_.j["end_time"] = FormatUtcIso8601Micros(NowNanos());
  summary_.j["duration_secs"] = total.seconds;
  summary_.j["partitions"]["completed"] = completed;
  summary_.j["partitions"]["resumed"] = resumed;
  summary_.j["rows"] = {{"in", total.rows_in}, {"out", total.rows_out}};
  summary_.Write(disk_, paths_.Summary());
  events_->Emit("job_complete", {{"status", "completed"},
                                 {"duration_secs", total.seconds},
                                 {"input_rows", total.rows_in},
                                 {"output_rows", total.rows_out}});
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
  RunJobSession job(request, recipe, plan, dataset, inputs, outcome, disk);
  if (request.resume) {
    if (job.CheckResume()) return;
  } else {
    job.PrepareNewJob();
  }
  job.WriteJobFiles();
  job.StartSummary();
  job.OpenEventLog();
  job.StartRunner();
  job.Execute();
  job.RecordCompletion();
}

}  // namespace djshard::job
