#include "djshard/store/stop.h"

#include <cstdio>
#include <memory>

#include "commands.h"
#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/io/disk.h"

namespace djshard::cli {

namespace {

// Waits until no process of the job is live; 0, or 1 after `timeout` (0: none).
int WaitUntilStopped(const store::StopTarget& target, double timeout) {
  const double until = MonotonicSeconds() + timeout;
  for (;;) {
    const std::vector<std::string> live = store::LiveHolders(target);
    if (live.empty()) {
      std::printf("Job %s has stopped: no live claim or heartbeat is left\n",
                  target.job_id.c_str());
      return kExitOk;
    }
    if (timeout > 0 && MonotonicSeconds() >= until) {
      std::printf("Job %s is still running after %g s:\n", target.job_id.c_str(), timeout);
      for (const std::string& l : live) std::printf("  %s\n", l.c_str());
      return kExitIncomplete;
    }
    SleepInterruptibly(0.25);
    ThrowIfStopRequested();
  }
}

}  // namespace

void AddStopCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string job, work_dir = ".", reason;
    bool force = false, wait = false, clear = false, list = false;
    double timeout = 0, grace = job::kStopGraceSecs;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "stop",
      "Stop a job on every node: its workers, dlc instances and run claim nothing more, finish "
      "what is in flight (at most --grace-secs) and exit 3");
  cmd->add_option("job", opt->job, "Job directory (elastic or run), or a run job's id");
  cmd->add_option("--work-dir", opt->work_dir, "Directory of job directories (default: .)");
  CLI::Option* force = cmd->add_flag("--force", opt->force,
                                     "Abort the work in flight within 2 s (also after a "
                                     "graceful request); signals the job's local processes");
  CLI::Option* reason = cmd->add_option("--reason", opt->reason, "Why, recorded in the request");
  CLI::Option* wait = cmd->add_flag(
      "--wait", opt->wait, "Wait until no live claim or heartbeat is left (exit 1 on --timeout)");
  AddSecondsOption(cmd, "--timeout", &opt->timeout, "With --wait: give up after S seconds")
      ->needs(wait);
  CLI::Option* grace = AddSecondsOption(
      cmd, "--grace-secs", &opt->grace,
      "How long work in flight may finish before it is aborted as --force (default 60)");
  CLI::Option* clear = cmd->add_flag(
      "--clear", opt->clear, "Remove the stop request (kept in the job's history) so work goes on");
  CLI::Option* list = cmd->add_flag("--list", opt->list, "List the running jobs (jobs --running)");
  clear->excludes(force)->excludes(reason)->excludes(wait)->excludes(grace);
  list->excludes(force)->excludes(reason)->excludes(wait)->excludes(grace)->excludes(clear);
  cmd->callback([opt, exit_code]() {
    if (opt->list) {
      *exit_code = PrintJobs(opt->work_dir, /*running_only=*/true, /*as_json=*/false);
      return;
    }
    if (opt->job.empty()) {
      throw Error("stop needs a JOB", "pass a job directory or a run job's id, or --list");
    }
    const store::StopTarget target = store::ResolveStopTarget(opt->job, opt->work_dir);
    if (opt->clear) {
      if (store::ClearStop(target)) {
        std::printf("Cleared the stop request of job %s (kept in %s); work may go on\n",
                    target.job_id.c_str(), target.HistoryDir().c_str());
      } else {
        std::printf("Job %s has no stop request\n", target.job_id.c_str());
      }
      *exit_code = kExitOk;
      return;
    }
    const store::StopOutcome out =
        store::RequestStop(target, opt->force, opt->reason, opt->grace, io::RealDisk());
    const job::StopRequest& r = out.request;
    if (out.finished) {
      std::printf("Job %s already completed; nothing to stop\n", target.job_id.c_str());
      *exit_code = kExitOk;
      return;
    }
    if (!out.published && !out.forced) {
      std::printf("Job %s already has a %s stop request (%s by %s:%lld); nothing changed\n",
                  target.job_id.c_str(), r.mode.c_str(), r.requested_at.c_str(), r.hostname.c_str(),
                  static_cast<long long>(r.pid));
    } else if (r.mode == "force") {
      std::printf(
          "Forced stop requested for job %s: every process of the job aborts its work in flight "
          "within 2 s and exits 3; signalled %zu local process(es)\n",
          target.job_id.c_str(), out.signalled.size());
    } else {
      std::printf(
          "Stop requested for job %s: every process of the job claims nothing more, finishes "
          "its work in flight (at most %g s) and exits 3\n",
          target.job_id.c_str(), r.grace_secs);
    }
    std::printf("To let the job go on: djshard stop --clear %s\n", target.dir.c_str());
    std::fflush(stdout);
    *exit_code = opt->wait ? WaitUntilStopped(target, opt->timeout) : kExitOk;
  });
}

}  // namespace djshard::cli
