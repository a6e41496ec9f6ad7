#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace djshard::testing {

// What a user sees from one djshard invocation.
struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  long peak_rss_kb = 0;  // of the process itself (wait4), not of its children
};

// Runs the real djshard binary with `args` in `cwd` (default: the test's dir).
CliResult RunDjshard(const std::vector<std::string>& args, const std::string& cwd = "");

// A djshard process running in the background.
struct Spawned {
  int pid = -1;
  std::string out_path, err_path;
};

// Starts djshard with `args` in `cwd`, with `env` ("NAME=value") added to the
// environment ("NAME" alone removes NAME from it), behind `prefix` (a command that execs the rest,
// e.g. unshare or faketime), without waiting for it.
Spawned SpawnDjshard(const std::vector<std::string>& args, const std::string& cwd,
                     const std::vector<std::string>& env = {},
                     const std::vector<std::string>& prefix = {});
// The prefix that runs a spawned command under hostname `host` (a private
// UTS namespace): a node of its own, as the job protocol sees it.
inline std::vector<std::string> OnHost(const std::string& host) {
  return {"unshare", "--uts", "sh", "-c", "hostname \"$0\" && exec \"$@\"", host};
}
// Waits for a spawned process; exit code 128+N when killed by signal N.
CliResult WaitFor(const Spawned& process);
// What a spawned process has written to stderr so far.
std::string ErrSoFar(const Spawned& process);
// Whether process `pid` is stopped (SIGSTOP): state T in /proc/<pid>/stat.
bool IsStopped(int pid);

// How long a test waits for a state that an idle machine reaches in well under
// a second: generous for a loaded one (ctest -j), yet a hang still fails the
// test rather than the ctest timeout.
inline constexpr std::chrono::seconds kPatience{60};

// Polls `condition` every 20 ms until it holds or `timeout` passes; returns
// whether it held. Tests wait for the state they need, never a fixed time.
bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout = kPatience);

// A fresh temporary directory per test, removed afterwards.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Absolute path of `rel` inside the test's directory.
  std::string Path(const std::string& rel) const { return dir_ + "/" + rel; }
  // Writes a file (parents created) and returns its absolute path.
  std::string Write(const std::string& rel, const std::string& content) const;
  std::string Read(const std::string& rel) const;
  bool Exists(const std::string& rel) const;
  // Whether `rel` exists and contains `text`.
  bool Contains(const std::string& rel, const std::string& text) const;
  // Seconds since `rel` was last modified (a lock's lease age); -1 when absent.
  double AgeSecs(const std::string& rel) const;
  // Sets the mtime of `rel` to now, as a worker's heartbeat does to its lock.
  void Touch(const std::string& rel) const;
  // Names in the test directory, for "nothing was left behind" checks.
  std::vector<std::string> List(const std::string& rel = "") const;
  // A recipe with whitespace_normalization_mapper + text_length_filter over `dataset`.
  std::string DemoRecipe(const std::string& dataset = "data.jsonl",
                         const std::string& extra_ops = "") const;
  CliResult Run(const std::vector<std::string>& args) const { return RunDjshard(args, dir_); }
  Spawned Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                const std::vector<std::string>& prefix = {}) const {
    return SpawnDjshard(args, dir_, env, prefix);
  }

  // Plays the part of a worker that finished every shard unchanged: copies
  // each shard into an attempt directory and publishes its done record.
  void FinishAllShards(const std::string& job_dir, const std::string& hostname = "node-a") const;

  std::string dir_;
};

}  // namespace djshard::testing
