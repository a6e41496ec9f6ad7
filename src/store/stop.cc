// `djshard stop` across nodes (SPEC-checkpoints §9): the request is a file in
// the job directory; every process of the job watches for it.
#include "djshard/store/stop.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/disk.h"
#include "djshard/job/job_status.h"
#include "djshard/store/job.h"
#include "djshard/store/job_summary.h"
#include "djshard/store/job_view.h"

namespace djshard::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::optional<StopTarget> TargetAt(const std::string& dir) {
  const std::string abs = NormalizeJobDir(fs::absolute(dir).string());
  if (IsElasticJobDir(abs)) {
    return StopTarget{StopTarget::Kind::kElastic, abs, JobDir::Open(abs).manifest().job_id};
  }
  if (io::IsRegularFile(abs + "/job_summary.json")) {
    const json s = json::parse(io::ReadFile(abs + "/job_summary.json"), nullptr, false);
    std::string id = fs::path(abs).filename().string();
    if (s.is_object() && s.contains("job_id") && s["job_id"].is_string()) {
      id = s["job_id"].get<std::string>();
    }
    return StopTarget{StopTarget::Kind::kRun, abs, id};
  }
  return std::nullopt;
}

// argv of a process, from /proc/<pid>/cmdline; empty when it is gone.
std::vector<std::string> CommandLine(int pid) {
  std::vector<std::string> args;
  std::string text;
  try {
    text = io::ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  } catch (const Error&) {
    return args;
  }
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\0') continue;
    args.push_back(text.substr(start, i - start));
    start = i + 1;
  }
  return args;
}

// The value of option `name` in argv ("--name v" or "--name=v"), else "".
std::string OptionValue(const std::vector<std::string>& args, const std::string& name) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(name + "=", 0) == 0) return args[i].substr(name.size() + 1);
  }
  return "";
}

// Whether `pid` runs djshard on the job at `target`: argv[0] is a djshard
// binary, and its --job-dir (from its working directory) is the job, or, for
// a run job, it is the `run` whose pid the job's summary names.
bool IsJobProcess(int pid, const StopTarget& target, int64_t summary_pid) {
  // Another UTS namespace is another hostname: that "node" sees the request
  // file by itself.
  std::error_code ec;
  if (fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/uts", ec) !=
          fs::read_symlink("/proc/self/ns/uts", ec) ||
      ec) {
    return false;
  }
  const std::vector<std::string> args = CommandLine(pid);
  if (args.size() < 2 || fs::path(args[0]).filename() != "djshard") return false;
  if (target.kind == StopTarget::Kind::kElastic) {
    const std::string dir = OptionValue(args, "--job-dir");
    if (dir.empty()) return false;
    const fs::path cwd = fs::read_symlink("/proc/" + std::to_string(pid) + "/cwd", ec);
    if (ec) return false;
    const fs::path abs = fs::path(dir).is_absolute() ? fs::path(dir) : cwd / dir;
    return NormalizeJobDir(abs.string()) == target.dir;
  }
  // A run job names its process in its summary (each run of the job rewrites
  // it); a job id alone is no proof: jobs in other work dirs may share it.
  return pid == summary_pid && std::find(args.begin(), args.end(), "run") != args.end();
}

}  // namespace

std::string StopTarget::HistoryDir() const {
  return kind == Kind::kElastic ? JobPaths(dir).HistoryDir() : dir + "/metadata";
}

StopTarget ResolveStopTarget(const std::string& job, const std::string& work_dir) {
  if (std::optional<StopTarget> t = TargetAt(job)) return *t;
  if (job.find('/') == std::string::npos) {
    if (std::optional<StopTarget> t = TargetAt(work_dir + "/" + job)) return *t;
  }
  throw Error(job, 0, "no such job (neither an elastic job directory nor a run job)",
              "pass the job directory, or a run job's id with --work-dir");
}

StopOutcome RequestStop(const StopTarget& target, bool force, const std::string& reason,
                        double grace_secs, io::Disk& disk) {
  StopOutcome out;
  // A finished job has nothing to stop; a request would only linger.
  const job::JobState state = target.kind == StopTarget::Kind::kElastic
                                  ? ReadElasticJob(JobDir::Open(target.dir, disk)).state
                                  : job::ReadRunJob(target.dir).state;
  if (state == job::JobState::kCompleted) {
    out.finished = true;
    return out;
  }
  const job::StopRequest mine =
      job::StopRequest::Now(force ? "force" : "graceful", reason, grace_secs);
  out.published = job::PublishStopRequest(target.dir, mine, disk);
  if (force) out.forced = job::PublishForceStop(target.dir, mine, disk);
  out.request = job::ReadStopRequest(target.dir, disk).value_or(mine);
  if (target.kind == StopTarget::Kind::kElastic && (out.published || out.forced)) {
    SummaryUpdate update;
    update.status = SummaryStatus::kStopped;
    update.stop = out.request;
    WriteJobSummary(JobDir::Open(target.dir, disk), update);
  }
  if (force) {
    for (const int pid : LocalJobProcesses(target)) {
      if (::kill(pid, SIGUSR1) == 0) out.signalled.push_back(pid);
    }
  }
  return out;
}

namespace {

// What an elastic job whose stop request is cleared is: what its shards say
// (job_view's status), a job with shards left being "prepared" again.
SummaryStatus StatusAfterClearedStop(job::JobState shards_say) {
  switch (shards_say) {
    case job::JobState::kCompleted:
      return SummaryStatus::kCompleted;
    case job::JobState::kFailed:
      return SummaryStatus::kFailed;
    case job::JobState::kRunning:
      return SummaryStatus::kRunning;
    case job::JobState::kStopped:
      return SummaryStatus::kStopped;
    default:
      return SummaryStatus::kPrepared;
  }
}

}  // namespace

bool ClearStop(const StopTarget& target) {
  if (!job::ClearStopRequest(target.dir, target.HistoryDir())) return false;
  if (target.kind == StopTarget::Kind::kElastic) {
    const JobDir job = JobDir::Open(target.dir);
    SummaryUpdate update;
    update.status = StatusAfterClearedStop(ReadElasticJob(job).state);
    update.clear_stop = true;
    WriteJobSummary(job, update);
  }
  return true;
}

std::vector<std::string> LiveHolders(const StopTarget& target) {
  std::vector<std::string> live;
  if (target.kind == StopTarget::Kind::kElastic) {
    const JobDir job = JobDir::Open(target.dir);
    for (const ShardStatus& sh : job.Statuses()) {
      if (sh.state != ShardState::kRunning || !sh.lock) continue;
      live.push_back(sh.shard->id + " held by " + sh.lock->hostname + ":" +
                     std::to_string(sh.lock->pid));
    }
    return live;
  }
  const job::RunJobView v = job::ReadRunJob(target.dir);
  if (v.state == job::JobState::kRunning) {
    live.push_back("run on " + v.hostname + " (heartbeat " +
                   std::to_string(static_cast<int64_t>(v.heartbeat_age_secs)) + " s ago)");
  }
  return live;
}

std::vector<int> LocalJobProcesses(const StopTarget& target) {
  std::vector<int> pids;
  if (target.kind == StopTarget::Kind::kRun) {
    const json s = json::parse(io::ReadFile(target.dir + "/job_summary.json"), nullptr, false);
    if (!s.is_object() || s.value("hostname", "") != HostName()) return pids;
    const int64_t pid = s.value("pid", int64_t{0});
    if (pid > 0 && pid != ::getpid() && IsJobProcess(static_cast<int>(pid), target, pid)) {
      pids.push_back(static_cast<int>(pid));
    }
    return pids;
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const int pid = std::atoi(name.c_str());
    if (pid == ::getpid()) continue;
    if (IsJobProcess(pid, target, 0)) pids.push_back(pid);
  }
  return pids;
}

}  // namespace djshard::store
