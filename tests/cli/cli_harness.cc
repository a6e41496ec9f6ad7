#include "tests/cli/cli_harness.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "djshard/io/sha256.h"
#include "djshard/store/job.h"

namespace djshard::testing {

namespace fs = std::filesystem;

namespace {
std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

Spawned SpawnDjshard(const std::vector<std::string>& args, const std::string& cwd,
                     const std::vector<std::string>& env, const std::vector<std::string>& prefix) {
  char out_tmpl[] = "/tmp/djshard-out-XXXXXX";
  char err_tmpl[] = "/tmp/djshard-err-XXXXXX";
  const int out_fd = mkstemp(out_tmpl);
  const int err_fd = mkstemp(err_tmpl);
  std::vector<std::string> command = prefix;
  command.push_back(DJSHARD_BIN);
  command.insert(command.end(), args.begin(), args.end());
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    for (const std::string& e : env) {
      if (e.find('=') == std::string::npos) {
        unsetenv(e.c_str());
      } else {
        putenv(strdup(e.c_str()));
      }
    }
    std::vector<char*> argv;
    for (std::string& a : command) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(out_fd);
  close(err_fd);
  return Spawned{pid, out_tmpl, err_tmpl};
}

CliResult WaitFor(const Spawned& p) {
  int status = 0;
  struct rusage usage {};
  wait4(p.pid, &status, 0, &usage);
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.peak_rss_kb = usage.ru_maxrss;
  r.out = Slurp(p.out_path);
  r.err = Slurp(p.err_path);
  unlink(p.out_path.c_str());
  unlink(p.err_path.c_str());
  return r;
}

std::string ErrSoFar(const Spawned& p) { return Slurp(p.err_path); }

bool IsStopped(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && line.size() > paren + 2 && line[paren + 2] == 'T';
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

CliResult RunDjshard(const std::vector<std::string>& args, const std::string& cwd) {
  return WaitFor(SpawnDjshard(args, cwd));
}

void CliTest::SetUp() {
  char tmpl[] = "/tmp/djshard-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  dir_ = tmpl;
}

void CliTest::TearDown() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string CliTest::Write(const std::string& rel, const std::string& content) const {
  const std::string path = Path(rel);
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

std::string CliTest::Read(const std::string& rel) const { return Slurp(Path(rel)); }

bool CliTest::Exists(const std::string& rel) const { return fs::exists(Path(rel)); }

bool CliTest::Contains(const std::string& rel, const std::string& text) const {
  return Exists(rel) && Read(rel).find(text) != std::string::npos;
}

double CliTest::AgeSecs(const std::string& rel) const {
  struct stat st {};
  if (::stat(Path(rel).c_str(), &st) != 0) return -1;
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
         static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
}

void CliTest::Touch(const std::string& rel) const {
  ::utimensat(AT_FDCWD, Path(rel).c_str(), nullptr, 0);
}

std::vector<std::string> CliTest::List(const std::string& rel) const {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(Path(rel))) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

std::string CliTest::DemoRecipe(const std::string& dataset, const std::string& extra_ops) const {
  return Write("recipe.yaml",
               "dataset_path: " + dataset +
                   "\nprocess:\n  - whitespace_normalization_mapper:\n"
                   "  - text_length_filter:\n      min_len: 1\n      max_len: 10000\n" +
                   extra_ops);
}

void CliTest::FinishAllShards(const std::string& job_dir, const std::string& hostname) const {
  const store::JobDir job = store::JobDir::Open(job_dir);
  for (const store::ShardEntry& s : job.manifest().shards) {
    const std::string attempt = "attempts/" + s.id + "/0001-00000000000000000000000000000001";
    fs::create_directories(job_dir + "/" + attempt);
    const std::string output = attempt + "/processed.jsonl";
    fs::copy_file(job_dir + "/" + s.path, job_dir + "/" + output);
    const nlohmann::json done = {{"shard_id", s.id},
                                 {"status", "done"},
                                 {"completed_at", "2026-11-30T00:00:00.000Z"},
                                 {"hostname", hostname},
                                 {"pid", 4242},
                                 {"token", "00000000000000000000000000000001"},
                                 {"attempt_number", 1},
                                 {"output_path", output},
                                 {"rows", s.rows},
                                 {"size_bytes", s.size_bytes},
                                 {"sha256", io::Sha256OfFile(job_dir + "/" + output)}};
    std::ofstream(job.DonePath(s.id)) << done.dump();
  }
}

}  // namespace djshard::testing
