#include "djshard/preflight/preflight.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "djshard/common/build_info.h"
#include "djshard/common/error.h"
#include "djshard/common/log.h"
#include "djshard/common/text.h"
#include "djshard/exec/executor.h"
#include "djshard/io/checksum.h"
#include "djshard/io/disk.h"
#include "djshard/io/input.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "djshard/model/device.h"
#include "djshard/model/runtime.h"
#include "djshard/ops/registry.h"
#include "djshard/preflight/probe_records.h"
#include "djshard/preflight/replica_plan.h"

namespace djshard::preflight {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string HostName() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Temp + rename; the temp name is this process's, so that workers of an
// elastic job may write the same file at once (the last rename wins).
void WriteText(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + HostName() + "." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f) throw Error(path, 0, "cannot write");
  }
  fs::rename(tmp, path);
}

// An operator's input_columns / output_columns: nullopt when absent (unknown).
std::optional<std::vector<std::string>> Columns(const recipe::OperatorSpec& spec,
                                                const std::string& key) {
  if (!spec.args.Has(key) || spec.args.Raw(key).IsNull()) return std::nullopt;
  const YAML::Node v = spec.args.Raw(key);
  std::vector<std::string> out;
  if (v.IsScalar()) {
    out.push_back(v.Scalar());
  } else if (v.IsSequence()) {
    for (const auto& item : v) {
      if (!item.IsScalar() || item.Scalar().empty()) {
        spec.args.Fail(key, "must be a list of field names", "e.g. [text, __dj__meta__.score]");
      }
      out.push_back(item.Scalar());
    }
  } else {
    spec.args.Fail(key, "must be a list of field names", "e.g. [text, __dj__meta__.score]");
  }
  return out;
}

// Whether two column names can touch the same data: equal, one a nested part
// of the other, or a trailing * matching a prefix.
bool Overlaps(const std::string& a, const std::string& b) {
  auto prefix_of = [](const std::string& p, const std::string& full) {
    if (!p.empty() && p.back() == '*') {
      return full.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0;
    }
    return full == p ||
           (full.size() > p.size() && full.compare(0, p.size(), p) == 0 && full[p.size()] == '.');
  };
  return prefix_of(a, b) || prefix_of(b, a);
}

bool AnyOverlap(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const std::string& x : a) {
    for (const std::string& y : b) {
      if (Overlaps(x, y)) return true;
    }
  }
  return false;
}

bool IsModelOp(const exec::Plan& plan, size_t i) {
  return plan.operators[i].op->model_description().has_value();
}

// The operators a probe of `target` replays, and its mode (SPEC-checkpoints
// §10.2): parallel when every ancestor is a CPU operator with known contracts
// (then only the ancestors are replayed), else ordered (every earlier operator).
struct ReplayChoice {
  std::vector<size_t> ops;
  std::string mode;
  std::string warning;  // set when the probe cannot replay what the job runs
};

// Expand and gather entries and the operators between them (SPEC-lineage)
// run on children, which a probe does not build: it replays parent-level
// operators only.
bool InLineage(const exec::Plan& plan, size_t i) {
  if (plan.operators[i].region >= 0) return true;
  for (const exec::LineageRegion& r : plan.regions) {
    if (r.expand_idx == i || r.gather_idx == i) return true;
  }
  return false;
}

ReplayChoice ChooseReplay(const recipe::Recipe& recipe, const exec::Plan& plan, size_t target) {
  ReplayChoice ordered;
  ordered.mode = "ordered";
  bool skipped = false;
  for (size_t i = 0; i < target; ++i) {
    if (InLineage(plan, i)) {
      skipped = true;
    } else {
      ordered.ops.push_back(i);
    }
  }
  if (plan.operators[target].region >= 0) {
    ordered.warning =
        "the operator runs on the children of an expand region; it was probed on parent rows";
    return ordered;
  }
  if (skipped) {
    ordered.warning = "expand/gather regions before the operator were not replayed";
  }
  std::optional<std::vector<std::string>> reads = Columns(recipe.process[target], "input_columns");
  if (!reads) return ordered;
  std::vector<std::string> needed = *reads;
  std::vector<size_t> ancestors;
  for (size_t k = target; k-- > 0;) {
    const recipe::OperatorSpec& spec = recipe.process[k];
    const std::optional<std::vector<std::string>> in = Columns(spec, "input_columns");
    const std::optional<std::vector<std::string>> out = Columns(spec, "output_columns");
    if (!in || !out || InLineage(plan, k)) return ordered;
    // A filter decides which rows reach the target: always an ancestor.
    const bool filter = plan.operators[k].op->kind() == ops::OpKind::kFilter;
    if (!filter && !AnyOverlap(*out, needed)) continue;
    if (IsModelOp(plan, k)) return ordered;
    ancestors.push_back(k);
    needed.insert(needed.end(), in->begin(), in->end());
  }
  std::sort(ancestors.begin(), ancestors.end());
  return {ancestors, "parallel", ""};
}

// Model files: contents hashed up to 64 MiB each, larger files by size and
// modification time (hashing gigabytes of weights on every run would cost
// more than the probe).
json ModelFingerprint(const std::string& dir) {
  json files = json::object();
  std::vector<fs::path> paths;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file()) paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const fs::path& p : paths) {
    const std::string rel = fs::relative(p, dir).string();
    struct stat st {};
    ::stat(p.c_str(), &st);
    if (st.st_size <= (64 << 20)) {
      files[rel] = io::Sha256Hex(ReadText(p.string()));
    } else {
      files[rel] =
          "size:" + std::to_string(st.st_size) + ",mtime_ns:" +
          std::to_string(static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec);
    }
  }
  return files;
}

// Tests make host memory bind on any machine: with the test operators
// enabled, DJSHARD_TEST_HOST_MEMORY_BYTES is the host's total and free memory.
std::optional<uint64_t> TestHostMemory() {
  const char* ops = std::getenv("DJSHARD_ENABLE_TEST_OPERATORS");
  const char* bytes = std::getenv("DJSHARD_TEST_HOST_MEMORY_BYTES");
  if (ops == nullptr || std::string_view(ops) != "1" || bytes == nullptr || *bytes == '\0') {
    return std::nullopt;
  }
  return std::strtoull(bytes, nullptr, 10);
}

uint64_t PhysicalMemory() {
  if (const std::optional<uint64_t> test = TestHostMemory()) return *test;
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

uint64_t AvailableMemory() {
  if (const std::optional<uint64_t> test = TestHostMemory()) return *test;
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return PhysicalMemory();
}

// A field of /proc/self/status in bytes ("VmRSS:", "VmHWM:", "RssAnon:");
// nullopt when the kernel does not report it.
std::optional<uint64_t> StatusBytes(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) != 0) continue;
    std::istringstream in(line.substr(field.size()));
    uint64_t kb = 0;
    if (in >> kb) return kb * 1024;
  }
  return std::nullopt;
}

// Resets the process's peak RSS (VmHWM) to its current RSS (Linux 4.0+);
// false when the kernel refuses.
bool ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// The probe record's memory (SPEC-checkpoints §10.4). On the CPU: the host
// memory the probe child measured, plus 10% as memory_fraction of the
// machine's memory; context_bytes and scheduled_share are GPU notions (null).
// On a GPU this build measures no device memory: every byte is null and the
// share is 1/max_gpu_workers_per_device.
json ProbeMemory(const std::string& device, const json& measured, uint64_t max_workers) {
  json m = {{"weights_bytes", nullptr},
            {"activation_peak_bytes", nullptr},
            {"context_bytes", nullptr},
            {"memory_fraction", nullptr},
            {"scheduled_share", nullptr}};
  if (device != "cpu") {
    m["scheduled_share"] = 1.0 / static_cast<double>(max_workers);
    return m;
  }
  const json host = measured.value("host_memory", json::object());
  m["weights_bytes"] = host.value("weights_bytes", json(nullptr));
  m["activation_peak_bytes"] = host.value("activation_peak_bytes", json(nullptr));
  const uint64_t total = PhysicalMemory();
  if (m["weights_bytes"].is_number() && m["activation_peak_bytes"].is_number() && total > 0) {
    const double needed =
        m["weights_bytes"].get<double>() + m["activation_peak_bytes"].get<double>();
    m["memory_fraction"] = 1.1 * needed / static_cast<double>(total);
  }
  return m;
}

// Bytes as "12.3 MB" for the printed plan.
std::string Megabytes(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

// The probe sample (SPEC-checkpoints §10.1).
struct Sample {
  std::string rows;  // JSONL, each line ending in '\n'
  uint64_t count = 0;
  json meta;  // mode, offset, seed, rows, xxh3_128
  bool reusable = true;
  std::vector<std::string> warnings;
};

Sample DrawSample(const std::vector<std::string>& inputs, const PreflightSettings& st,
                  uint64_t rows) {
  Sample s;
  bool shuffle = st.sample_shuffle;
  const bool compressed = std::any_of(inputs.begin(), inputs.end(), [](const std::string& p) {
    return p.size() > 3 &&
           (p.ends_with(".gz") || p.ends_with(".zst") || p.ends_with(".GZ") || p.ends_with(".ZST"));
  });
  if (shuffle && compressed) {
    s.warnings.push_back(
        "gpu_probe_sample_shuffle reads plain files only: the sample is the first rows");
    shuffle = false;
  }
  if (shuffle) {
    if (st.sample_offset > 0) {
      s.warnings.push_back("gpu_probe_sample_shuffle wins over gpu_probe_sample_offset");
    }
    uint64_t seed = 0;
    if (st.sample_seed) {
      seed = *st.sample_seed;
    } else {
      seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
      s.reusable = false;  // measured every time, never reused
    }
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> sizes;
    uint64_t total = 0;
    for (const std::string& p : inputs) {
      struct stat stt {};
      ::stat(p.c_str(), &stt);
      sizes.push_back(static_cast<uint64_t>(stt.st_size));
      total += static_cast<uint64_t>(stt.st_size);
    }
    // Random byte offsets; each draws the line that starts after it (or at it,
    // at a file's start). Cost is the sample, not the dataset.
    for (uint64_t i = 0; total > 0 && i < rows; ++i) {
      uint64_t at = rng() % total;
      size_t f = 0;
      while (at >= sizes[f]) at -= sizes[f++];
      for (size_t tries = 0; tries <= inputs.size(); ++tries) {
        std::ifstream in(inputs[f], std::ios::binary);
        in.seekg(static_cast<std::streamoff>(at > 0 ? at - 1 : 0));
        std::string line;
        if (at > 0) std::getline(in, line);  // the rest of the line the offset fell in
        while (std::getline(in, line) && line.empty()) {
        }
        if (!line.empty()) {
          s.rows += line + "\n";
          ++s.count;
          break;
        }
        f = (f + 1) % inputs.size();  // past the last line: the next file's first
        at = 0;
      }
    }
    s.meta = {{"mode", "shuffle"},
              {"offset", nullptr},
              {"seed", st.sample_seed ? json(*st.sample_seed) : json(nullptr)}};
  } else {
    uint64_t skip = st.sample_offset;
    for (const std::string& p : inputs) {
      if (s.count >= rows) break;
      io::LineReader reader(io::OpenInput(p), p);
      std::string_view line;
      while (s.count < rows && reader.Next(&line)) {
        if (line.empty()) continue;
        if (skip > 0) {
          --skip;
          continue;
        }
        s.rows.append(line);
        s.rows.push_back('\n');
        ++s.count;
      }
    }
    s.meta = {{"mode", "offset"}, {"offset", st.sample_offset}, {"seed", nullptr}};
  }
  s.meta["rows"] = s.count;
  io::Xxh3 hash;
  hash.Update(s.rows);
  s.meta["xxh3_128"] = hash.HexDigest();
  return s;
}

// The last "ERROR: ..." line of a child's log, else its tail.
std::string ChildError(const std::string& log) {
  const std::string text = ReadText(log);
  const size_t at = text.rfind("ERROR: ");
  std::string msg = at != std::string::npos ? text.substr(at + 7) : text;
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (msg.size() > 2000) msg = msg.substr(msg.size() - 2000);
  return msg.empty() ? "the probe process failed without a message" : msg;
}

std::string SelfExe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the djshard binary (/proc/self/exe) to start a probe");
  return p.string();
}

std::string DeviceFlag() {
  switch (model::GetDeviceSettings().request) {
    case model::DeviceSettings::Request::kCpu:
      return "cpu";
    case model::DeviceSettings::Request::kCuda:
      return "cuda";
    case model::DeviceSettings::Request::kAuto:
      break;
  }
  return "auto";
}

// Starts `djshard probe-op` with stdout and stderr into `log`; returns its pid.
pid_t StartProbeChild(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("cannot start a probe process (fork failed)");
  if (pid == 0) {
    // A probe whose job process died (kill -9) ends too, rather than holding
    // a device while another worker probes the same key again.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Bytes from "1500MB", "2GiB", "1e9" or a plain number.
std::optional<uint64_t> ParseBytes(const std::string& text) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "B") {
    mult = 1;
  } else if (unit == "KB" || unit == "K") {
    mult = 1e3;
  } else if (unit == "MB" || unit == "M") {
    mult = 1e6;
  } else if (unit == "GB" || unit == "G") {
    mult = 1e9;
  } else if (unit == "KIB") {
    mult = 1024.0;
  } else if (unit == "MIB") {
    mult = 1024.0 * 1024;
  } else if (unit == "GIB") {
    mult = 1024.0 * 1024 * 1024;
  } else {
    return std::nullopt;
  }
  if (!(x > 0) || !std::isfinite(x)) return std::nullopt;
  return static_cast<uint64_t>(x * mult);
}

// The plan's stages: consecutive CPU operators fuse, each model operator is
// a stage of its own.
struct StageOfPlan {
  std::string kind;
  std::vector<size_t> op_idxs;
};

std::vector<StageOfPlan> SplitStages(const exec::Plan& plan) {
  std::vector<StageOfPlan> stages;
  for (size_t i = 0; i < plan.operators.size(); ++i) {
    if (IsModelOp(plan, i)) {
      stages.push_back({"model", {i}});
    } else if (!stages.empty() && stages.back().kind == "cpu_fused") {
      stages.back().op_idxs.push_back(i);
    } else {
      stages.push_back({"cpu_fused", {i}});
    }
  }
  return stages;
}

std::string Fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// The stage of the plan that holds operator `op`.
size_t StageOf(const std::vector<StageOfPlan>& stages, size_t op) {
  for (size_t s = 0; s < stages.size(); ++s) {
    if (std::find(stages[s].op_idxs.begin(), stages[s].op_idxs.end(), op) !=
        stages[s].op_idxs.end()) {
      return s;
    }
  }
  return 0;
}

// What the phases of RunPreflight share.
struct Preflight {
  explicit Preflight(const PreflightContext& c)
      : cx(c), recipe(*c.recipe), plan(*c.plan), st(c.settings) {}

  const PreflightContext& cx;
  const recipe::Recipe& recipe;
  const exec::Plan& plan;
  const PreflightSettings& st;
  std::vector<size_t> targets;  // the model operators, in plan order
  std::vector<StageOfPlan> stages;
  model::TorchRuntimeInfo torch;
  bool on_cpu = true;                  // every model operator runs on the CPU
  std::vector<PlannerDevice> devices;  // the devices replicas may go to
  PlannerLimits limits;
  // Per target, in the order of `targets`: its stage for the replica planner,
  // the printout's note on it, and its measured init seconds (-1: not measured).
  std::vector<PlannerStage> planner_stages;
  std::vector<std::string> stage_notes;
  std::vector<double> init_secs;
  json probe_json;  // dag_execution_plan.json's "probe"
  PreflightResult result;
};

// The devices replicas may go to, and the replica planner's limits.
void ChooseDevices(Preflight& p) {
  for (size_t t : p.targets) {
    if (p.plan.operators[t].op->model_description()->device != "cpu") p.on_cpu = false;
  }
  if (p.on_cpu) {
    p.devices.push_back({"cpu", PhysicalMemory(), AvailableMemory()});
  } else {
    // This build does not read device memory: replicas are placed by the
    // per-device cap (every device counted as free).
    for (const std::string& d : model::UsableCudaDevices()) {
      p.devices.push_back({d, 0, UINT64_MAX});
    }
  }
  // On the CPU every executor thread runs each model stage itself: each
  // stage may have as many replicas as threads (their sum is bounded by the
  // thread budget below, not by this cap).
  p.limits.max_workers_per_device =
      p.on_cpu ? p.cx.threads * static_cast<int>(std::max<size_t>(1, p.targets.size()))
               : static_cast<int>(p.st.max_gpu_workers_per_device);
  p.limits.cpu_threads = p.cx.threads;
  p.limits.max_batches_in_flight = static_cast<int>(
      static_cast<uint64_t>(p.cx.threads) * std::max<uint64_t>(1, p.cx.partitions_in_flight));
}

// Preflight disabled (fixed-resource experiments): the recipe's num_proc and
// mem_required say everything about each model stage.
void PlanFixedStages(Preflight& p) {
  for (size_t n = 0; n < p.targets.size(); ++n) {
    const size_t t = p.targets[n];
    const recipe::OperatorSpec& spec = p.recipe.process[t];
    for (const char* key : {"num_proc", "mem_required"}) {
      if (!spec.args.Has(key) || spec.args.Raw(key).IsNull()) {
        spec.args.FailAtLineOf(key,
                               spec.name + " needs an explicit " + key +
                                   " when partition.gpu_preflight_enabled is false",
                               "set num_proc and mem_required (e.g. 1500MB), or enable preflight");
      }
    }
    const int64_t num_proc = spec.args.GetInt("num_proc", 0);
    if (num_proc < 1) spec.args.Fail("num_proc", "must be at least 1", "");
    const std::optional<uint64_t> mem = ParseBytes(spec.args.Raw("mem_required").as<std::string>());
    if (!mem) {
      spec.args.Fail("mem_required", "must be a size such as 1500MB or 2GiB", "bytes per replica");
    }
    PlannerStage ps;
    ps.stage_id = StageOf(p.stages, t);
    ps.name = spec.name;
    ps.rows_per_sec = 1;
    ps.replica_bytes = *mem;
    ps.fixed_replicas = static_cast<int>(num_proc);
    p.planner_stages.push_back(ps);
    p.stage_notes[n] = "num_proc " + std::to_string(num_proc) + ", mem_required " +
                       spec.args.Raw("mem_required").as<std::string>();
  }
}

// Removes the probe sample and, when it is empty, the work directory, however
// preflight ends (a failed probe's log stays: its failure names it).
struct SampleCleanup {
  std::string sample, dir;
  ~SampleCleanup() {
    std::error_code ec;
    fs::remove(sample, ec);
    fs::remove(dir, ec);
  }
};

// Draws the probe sample (as many rows as the largest batch) and writes it to
// `path`; an empty sample stops the job.
Sample WriteSample(const Preflight& p, const std::string& path) {
  uint64_t rows = 0;
  for (size_t t : p.targets) {
    rows = std::max<uint64_t>(rows, p.plan.operators[t].op->model_description()->batch_size);
  }
  Sample sample = DrawSample(p.cx.inputs, p.st, rows);
  for (const std::string& w : sample.warnings) Log(LogLevel::kWarn, "warning", "WARNING: " + w);
  if (sample.count == 0) {
    std::string names;
    for (size_t t : p.targets) names += (names.empty() ? "" : ", ") + p.recipe.process[t].name;
    throw Error("preflight: the probe sample of " + names +
                    " is empty (no rows after gpu_probe_sample_offset " +
                    std::to_string(p.st.sample_offset) + ")",
                "lower partition.gpu_probe_sample_offset");
  }
  WriteText(path, sample.rows);
  return sample;
}

// The cached results of earlier runs: this job's, then those of the other
// jobs in its work dir, newest first (the cache key says everything a probe
// depends on, so a rerun of the same recipe as a new job reuses it).
json CachedProbes(const PreflightContext& cx, const std::string& results_path) {
  json cached = json::array();
  std::vector<std::pair<fs::file_time_type, std::string>> others;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(cx.job_dir).parent_path(), ec)) {
    const fs::path f = e.path() / "gpu_probe_results.json";
    if (e.path() == fs::path(cx.job_dir) || !fs::exists(f, ec)) continue;
    others.emplace_back(fs::last_write_time(f, ec), f.string());
  }
  std::sort(others.rbegin(), others.rend());
  // Elastic: this job's own probes are read from their records.
  std::vector<std::string> files;
  if (!cx.shared) files.push_back(results_path);
  for (const auto& o : others) files.push_back(o.second);
  for (const std::string& f : files) {
    if (!fs::exists(f, ec)) continue;
    const json old = json::parse(ReadText(f), nullptr, false);
    if (!old.is_object() || !old.contains("probes") || !old["probes"].is_array()) continue;
    for (const json& entry : old["probes"]) cached.push_back(entry);
  }
  return cached;
}

// A model operator to probe: its cache key, and the probe entry that answers it.
struct ProbeTarget {
  size_t t = 0;  // the operator's index in the plan
  ops::Operator::ModelDescription md;
  ReplayChoice replay;
  json device;
  std::string key;
  json entry;
  bool reused = false;
  std::string prober;  // a shared record's "host:pid" (elastic)
};

// Everything a target's probe depends on, hashed.
std::string ProbeCacheKey(const Preflight& p, const ProbeTarget& g, const Sample& sample) {
  json replayed_configs = json::array();
  for (size_t r : g.replay.ops) {
    replayed_configs.push_back(recipe::CanonicalJson(p.recipe.root["process"][r]));
  }
  const json key_fields = {{"op", recipe::CanonicalJson(p.recipe.root["process"][g.t])},
                           {"replayed_ops", replayed_configs},
                           {"model_files", ModelFingerprint(g.md.dir)},
                           {"device", g.device},
                           {"djshard", version()},
                           {"dtype", g.md.dtype},
                           {"batch_size", g.md.batch_size},
                           {"warmup_batches", p.st.warmup_batches},
                           {"steady_batches", p.st.steady_batches},
                           {"max_gpu_workers_per_device", p.st.max_gpu_workers_per_device},
                           {"sample", sample.meta},
                           // What a probe measures: records of builds that
                           // measured less are not reused.
                           {"measures", "rows_per_sec,host_memory"}};
  return io::Sha256Hex(key_fields.dump());
}

// Each target's cache key (into the plan's probe.cache_keys), and whether an
// earlier probe answers it.
std::vector<ProbeTarget> KeyTargets(Preflight& p, const Sample& sample, const json& cached) {
  std::vector<ProbeTarget> all(p.targets.size());
  for (size_t n = 0; n < p.targets.size(); ++n) {
    ProbeTarget& g = all[n];
    g.t = p.targets[n];
    g.md = *p.plan.operators[g.t].op->model_description();
    g.replay = ChooseReplay(p.recipe, p.plan, g.t);
    g.device = {
        {"name", g.md.device},
        {"total_memory_bytes", g.md.device == "cpu" ? json(PhysicalMemory()) : json(nullptr)},
        {"sm", nullptr},
        {"libtorch", p.torch.torch_version}};
    g.key = ProbeCacheKey(p, g, sample);
    p.probe_json["cache_keys"].push_back(g.key);
    if (!sample.reusable) continue;
    for (const json& c : cached) {
      if (c.is_object() && c.value("cache_key", "") == g.key && c.value("reusable", false)) {
        g.entry = c;
        g.entry["op_idx"] = g.t;
        g.reused = true;
        break;
      }
    }
  }
  return all;
}

// A probe child process and its files.
struct RunningProbe {
  size_t n = 0;  // its target
  pid_t pid = -1;
  double start = 0;
  std::string out_path, work, log;
  bool done = false;
};

// Kills a probe child that has not ended yet, and reaps it.
void KillProbe(RunningProbe& r) {
  ::kill(r.pid, SIGKILL);
  int status = 0;
  ::waitpid(r.pid, &status, 0);
}

// Probes the targets no cached entry answers, each in a `djshard probe-op`
// child: parallel ones up to max_concurrent_gpu_probes at once, ordered ones
// alone. Elastic, through the shared records: one worker probes each key
// under its lock and the others read its record.
class ProbeRunner {
 public:
  // `p` and `sample` must outlive the runner.
  ProbeRunner(const Preflight& p, const Sample& sample, const std::string& probe_dir,
              std::string work_dir, std::string sample_path, std::vector<ProbeTarget> all)
      : p_(p),
        sample_(sample),
        work_dir_(std::move(work_dir)),
        sample_path_(std::move(sample_path)),
        all_(std::move(all)),
        timeout_(p.st.timeout_seconds.value_or(0)) {
    if (p.cx.shared) {
      records_ = std::make_unique<ProbeRecords>(probe_dir, p.cx.shared->lease_secs,
                                                p.cx.shared->heartbeat_secs, io::DiskOr(p.cx.disk));
    }
  }
  ProbeRunner(const ProbeRunner&) = delete;
  ProbeRunner& operator=(const ProbeRunner&) = delete;

  // Answers every target, by a probe here or (elastic) another worker's record.
  void Run();

  bool elastic() const { return records_ != nullptr; }
  const std::vector<ProbeTarget>& targets() const { return all_; }
  // The cache keys this process probed.
  const json& probed_here() const { return probed_here_; }

 private:
  void RunElastic(std::vector<size_t> pending);
  void LookUpRecord(size_t n, std::vector<size_t>& mine, std::vector<size_t>& busy);
  void RunProbes(const std::vector<size_t>& todo);
  RunningProbe Start(size_t n);
  std::vector<std::string> ChildArgs(const ProbeTarget& g, const RunningProbe& r) const;
  void WaitFor(std::vector<RunningProbe>& group);
  void StopGroup(std::vector<RunningProbe>& group);
  [[noreturn]] void Fail(std::vector<RunningProbe>& group, const RunningProbe& bad,
                         const std::string& type, const std::string& msg, const std::string& hint);
  void PublishFailure(const ProbeTarget& g, const RunningProbe& bad, const std::string& type,
                      const std::string& msg, const std::string& hint);
  void Finish(std::vector<RunningProbe>& group, const RunningProbe& r);
  json Warnings(const ProbeTarget& g, const json& measured) const;
  json Entry(const ProbeTarget& g, const json& measured, const json& warnings) const;

  const Preflight& p_;
  const Sample& sample_;
  const std::string work_dir_;
  const std::string sample_path_;  // the sample every probe reads
  std::vector<ProbeTarget> all_;
  const double timeout_;  // seconds a probe may run; 0: no limit
  // Elastic: the records other workers read, and the locks of the keys this
  // process probes (released on every way out).
  std::unique_ptr<ProbeRecords> records_;
  json probed_here_ = json::array();
  std::set<size_t> told_;  // elastic: the targets whose wait was reported
};

void ProbeRunner::Run() {
  std::vector<size_t> pending;
  for (size_t n = 0; n < all_.size(); ++n) {
    if (!all_[n].reused) pending.push_back(n);
  }
  if (!records_) {
    RunProbes(pending);
    return;
  }
  RunElastic(pending);
}

// Elastic: per key, read its record, stop on a fresh failure, probe it under
// its lock, or wait for the worker that holds the lock. Waiting starts only
// once this process's own probes are published, so that no two workers wait
// on each other.
void ProbeRunner::RunElastic(std::vector<size_t> pending) {
  while (!pending.empty()) {
    std::vector<size_t> mine, busy;
    for (size_t n : pending) LookUpRecord(n, mine, busy);
    RunProbes(mine);
    pending = busy;
    for (const double until = Now() + (pending.empty() ? 0 : p_.cx.shared->poll_secs);
         Now() < until;) {
      if (p_.cx.check_stop) p_.cx.check_stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

// Elastic: takes target `n`'s record, throws its failure, or adds it to the
// keys this process probes (`mine`) or waits for (`busy`).
void ProbeRunner::LookUpRecord(size_t n, std::vector<size_t>& mine, std::vector<size_t>& busy) {
  ProbeTarget& g = all_[n];
  const recipe::OperatorSpec& spec = p_.recipe.process[g.t];
  const ProbeRecords::Look look = records_->TryKey(g.key);
  const std::string rel = "probe/" + g.key;
  switch (look.state) {
    case ProbeRecords::State::kRecord:
      g.entry = look.record;
      g.entry["op_idx"] = g.t;
      g.reused = true;
      g.prober = g.entry.value("hostname", "?");
      break;
    case ProbeRecords::State::kFailed: {
      const json& f = look.record;
      const std::string hint = f.value("hint", "");
      throw Error(
          p_.recipe.path, spec.line,
          "preflight probe of " + spec.name + " failed on " + f.value("hostname", "?") + ":" +
              std::to_string(f.value("pid", int64_t{0})) + " (" + rel + ".failed.json, " +
              f.value("error_type", "error") + "): " + f.value("error_message", ""),
          (hint.empty() ? "" : hint + "; ") + "a worker started after the lease probes again");
    }
    case ProbeRecords::State::kMine:
      mine.push_back(n);
      break;
    case ProbeRecords::State::kBusy:
      busy.push_back(n);
      if (told_.insert(n).second && p_.cx.say) {
        p_.cx.say("preflight: waiting for " +
                  (look.holder.empty() ? std::string("another worker") : look.holder) +
                  " to probe " + spec.name + " (" + rel + ".lock)");
      }
      break;
  }
}

// Probes `todo` in groups: a run of parallel targets (up to the limit) or one
// ordered target; each group is started, waited for and finished.
void ProbeRunner::RunProbes(const std::vector<size_t>& todo) {
  for (size_t next = 0; next < todo.size();) {
    std::vector<RunningProbe> group;
    const bool parallel = all_[todo[next]].replay.mode == "parallel";
    while (next < todo.size() &&
           (group.empty() || (parallel && all_[todo[next]].replay.mode == "parallel" &&
                              group.size() < p_.st.max_concurrent_probes))) {
      group.push_back(Start(todo[next++]));
    }
    WaitFor(group);
    for (const RunningProbe& r : group) Finish(group, r);
  }
}

// Starts target `n`'s probe child.
RunningProbe ProbeRunner::Start(size_t n) {
  const ProbeTarget& g = all_[n];
  const recipe::OperatorSpec& spec = p_.recipe.process[g.t];
  p_.cx.emit("probe_start", {{"op_idx", g.t},
                             {"op_name", spec.name},
                             {"metadata", {{"cache_key", g.key}, {"probe_mode", g.replay.mode}}}});
  RunningProbe r;
  r.n = n;
  r.out_path = work_dir_ + "/result_op_" + std::to_string(g.t) + ".json";
  r.work = work_dir_ + "/work_op_" + std::to_string(g.t);
  r.log = work_dir_ + "/probe_op_" + std::to_string(g.t) + ".log";
  fs::create_directories(r.work);
  std::error_code ec;
  fs::remove(r.out_path, ec);
  const std::vector<std::string> args = ChildArgs(g, r);
  r.start = Now();
  r.pid = StartProbeChild(args, r.log);
  return r;
}

// The command line of `djshard probe-op` for target `g`.
std::vector<std::string> ProbeRunner::ChildArgs(const ProbeTarget& g, const RunningProbe& r) const {
  std::vector<std::string> args = {SelfExe(),  "probe-op",
                                   "--config", fs::absolute(p_.recipe.path).string(),
                                   "--op-idx", std::to_string(g.t),
                                   "--sample", sample_path_,
                                   "--work",   r.work,
                                   "--warmup", std::to_string(p_.st.warmup_batches),
                                   "--steady", std::to_string(p_.st.steady_batches),
                                   "--result", r.out_path,
                                   "--device", DeviceFlag()};
  std::string replay_list;
  for (size_t i : g.replay.ops) {
    if (!replay_list.empty()) replay_list.push_back(',');
    replay_list.append(std::to_string(i));
  }
  if (!replay_list.empty()) {
    args.push_back("--replay");
    args.push_back(replay_list);
  }
  std::string gpus;
  for (int i : model::GetDeviceSettings().gpus) {
    if (!gpus.empty()) gpus.push_back(',');
    gpus.append(std::to_string(i));
  }
  if (!gpus.empty()) {
    args.push_back("--gpus");
    args.push_back(gpus);
  }
  return args;
}

// Waits until every probe of `group` has ended; a probe that fails or runs
// past the timeout stops the job, and so does a stop request.
void ProbeRunner::WaitFor(std::vector<RunningProbe>& group) {
  for (size_t left = group.size(); left > 0;) {
    try {
      if (records_) records_->Refresh();
      if (p_.cx.check_stop) p_.cx.check_stop();
    } catch (...) {
      StopGroup(group);
      throw;
    }
    for (RunningProbe& r : group) {
      if (r.done) continue;
      int status = 0;
      if (::waitpid(r.pid, &status, WNOHANG) == r.pid) {
        r.done = true;
        --left;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          Fail(group, r, "exception", ChildError(r.log), "");
        }
      } else if (timeout_ > 0 && Now() - r.start > timeout_) {
        KillProbe(r);
        r.done = true;
        Fail(group, r, "timeout",
             "the probe ran past gpu_probe_timeout_seconds (" + Fixed(timeout_, 3) + " s)",
             "raise partition.gpu_probe_timeout_seconds or make the sample smaller");
      }
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Interrupted, not failed: the probes of `group` and their files go.
void ProbeRunner::StopGroup(std::vector<RunningProbe>& group) {
  for (RunningProbe& r : group) {
    if (!r.done) {
      KillProbe(r);
      r.done = true;
    }
    std::error_code ec;
    fs::remove_all(r.work, ec);
    fs::remove(r.out_path, ec);
    fs::remove(r.log, ec);
  }
}

// Stops every probe of `group` and the job, naming the operator of `bad`.
void ProbeRunner::Fail(std::vector<RunningProbe>& group, const RunningProbe& bad,
                       const std::string& type, const std::string& msg, const std::string& hint) {
  for (RunningProbe& r : group) {
    if (!r.done && r.pid != bad.pid) KillProbe(r);
    std::error_code ec;
    fs::remove_all(r.work, ec);
    if (r.pid != bad.pid) {  // only the failed probe's log stays: its failure names it
      fs::remove(r.log, ec);
      fs::remove(r.out_path, ec);
    }
  }
  const ProbeTarget& g = all_[bad.n];
  const recipe::OperatorSpec& spec = p_.recipe.process[g.t];
  p_.cx.emit("probe_failed", {{"op_idx", g.t},
                              {"op_name", spec.name},
                              {"status", "failed"},
                              {"duration_secs", Now() - bad.start},
                              {"error_type", type},
                              {"error_message", msg},
                              {"metadata", {{"cache_key", g.key}}}});
  // The workers waiting on this key stop with this failure.
  if (records_) PublishFailure(g, bad, type, msg, hint);
  throw Error(p_.recipe.path + ":" + std::to_string(spec.line) + ": preflight probe of " +
                  spec.name + " failed: " + msg,
              hint);
}

// Elastic: publishes the failure of `g`'s probe under its key.
void ProbeRunner::PublishFailure(const ProbeTarget& g, const RunningProbe& bad,
                                 const std::string& type, const std::string& msg,
                                 const std::string& hint) {
  records_->PublishFailure(
      g.key, {{"cache_key", g.key},
              {"op_idx", g.t},
              {"op_name", p_.recipe.process[g.t].name},
              {"error_type", type},
              {"error_message", msg},
              {"hint", hint},
              {"log", fs::exists(bad.log) ? json(fs::relative(bad.log, p_.cx.job_dir).string())
                                          : json(nullptr)},
              {"hostname", HostName()},
              {"pid", ::getpid()},
              {"created_at", UtcNow()}});
}

// Reads the result of a probe that ended well into its target's entry (and,
// elastic, its record), and removes the probe's files.
void ProbeRunner::Finish(std::vector<RunningProbe>& group, const RunningProbe& r) {
  ProbeTarget& g = all_[r.n];
  const json measured = json::parse(ReadText(r.out_path), nullptr, false);
  if (!measured.is_object()) {
    // A failure like any other: the workers waiting on the key read it.
    Fail(group, r, "exception", "the probe wrote no result", "see the probe's log");
  }
  const recipe::OperatorSpec& spec = p_.recipe.process[g.t];
  std::error_code ec;
  fs::remove_all(r.work, ec);
  fs::remove(r.out_path, ec);
  fs::remove(r.log, ec);
  const json warnings = Warnings(g, measured);
  g.entry = Entry(g, measured, warnings);
  for (const json& w : warnings) {
    Log(LogLevel::kWarn, "warning", "WARNING: " + spec.name + ": " + w.get<std::string>());
  }
  probed_here_.push_back(g.key);
  if (records_) {
    // Another prober (of a lock taken over as stale) may have published
    // first: its record stands, for every worker alike.
    g.entry = records_->Publish(g.key, g.entry);
    g.entry["op_idx"] = g.t;
  }
  p_.cx.emit("probe_complete",
             {{"op_idx", g.t},
              {"op_name", spec.name},
              {"status", "completed"},
              {"duration_secs", Now() - r.start},
              {"input_rows", measured.value("rows", 0)},
              {"throughput_rows_per_second", measured["steady_rows_per_sec"]},
              {"metadata", {{"cache_key", g.key}, {"probe_mode", g.replay.mode}}}});
}

// The warnings of a probe: the child's, the sample's, the replay's, and the
// device memory this build does not measure.
json ProbeRunner::Warnings(const ProbeTarget& g, const json& measured) const {
  json warnings = measured.value("warnings", json::array());
  for (const std::string& w : sample_.warnings) warnings.push_back(w);
  if (!g.replay.warning.empty()) warnings.push_back(g.replay.warning);
  if (g.md.device != "cpu") {
    warnings.push_back(
        "device memory is not measured by this build: replicas are placed "
        "by max_gpu_workers_per_device");
  }
  return warnings;
}

// A probe's entry in gpu_probe_results.json (and, elastic, its record).
json ProbeRunner::Entry(const ProbeTarget& g, const json& measured, const json& warnings) const {
  return {{"op_idx", g.t},
          {"op_name", p_.recipe.process[g.t].name},
          {"cache_key", g.key},
          {"device", g.device},
          {"dtype", g.md.dtype},
          {"batch_size", g.md.batch_size},
          {"sample", sample_.meta},
          {"probe_mode", g.replay.mode},
          {"replayed_ops", g.replay.ops},
          {"timings", measured["timings"]},
          {"steady_rows_per_sec", measured["steady_rows_per_sec"]},
          {"output_ratio", measured["output_ratio"]},
          {"input_ratio", measured["input_ratio"]},
          {"memory", ProbeMemory(g.md.device, measured, p_.st.max_gpu_workers_per_device)},
          {"warnings", warnings},
          {"reusable", sample_.reusable},
          {"created_at", UtcNow()},
          {"hostname", HostName()}};
}

// A GPU replica's share of its device, from the recipe's gpu_required (or
// num_gpus) and the probe's measured memory fraction.
double GpuShare(const Preflight& p, const recipe::OperatorSpec& spec, const json& entry) {
  std::optional<double> requested, measured;
  for (const char* key : {"gpu_required", "num_gpus"}) {
    if (spec.args.Has(key) && !spec.args.Raw(key).IsNull()) {
      requested = spec.args.GetDouble(key, 0);
    }
  }
  const json fraction = entry.value("memory", json::object()).value("memory_fraction", json());
  if (fraction.is_number()) measured = fraction.get<double>();
  std::string warning;
  const double share =
      GpuReplicaShare(requested, measured, p.st.max_gpu_workers_per_device, &warning);
  if (!warning.empty()) Log(LogLevel::kWarn, "warning", "WARNING: " + spec.name + ": " + warning);
  return share;
}

// Measured host memory, plus 10%: the weights once (the replicas of a process
// share them), the activations per replica. Returns the printout's note on it.
std::string AddHostMemory(const ProbeTarget& g, PlannerStage& ps) {
  const json memory = g.entry.value("memory", json::object());
  if (g.md.device != "cpu" || !memory.value("weights_bytes", json()).is_number() ||
      !memory.value("activation_peak_bytes", json()).is_number()) {
    return "";
  }
  const auto w = memory["weights_bytes"].get<uint64_t>();
  const auto a = memory["activation_peak_bytes"].get<uint64_t>();
  ps.weights_bytes = static_cast<uint64_t>(std::ceil(1.1 * static_cast<double>(w)));
  ps.replica_bytes = static_cast<uint64_t>(std::ceil(1.1 * static_cast<double>(a)));
  return ", weights " + Megabytes(w) + " + activations " + Megabytes(a) + " per replica";
}

// The planner stage of target `n` from its probe entry, with its note and
// init seconds.
void AddProbedStage(Preflight& p, size_t n, const ProbeTarget& g) {
  const recipe::OperatorSpec& spec = p.recipe.process[g.t];
  PlannerStage ps;
  ps.stage_id = StageOf(p.stages, g.t);
  ps.name = spec.name;
  ps.rows_per_sec = g.entry.value("steady_rows_per_sec", 0.0);
  ps.input_ratio = g.entry.value("input_ratio", 1.0);
  if (g.md.device != "cpu") ps.min_share = GpuShare(p, spec, g.entry);
  const std::string memory_note = AddHostMemory(g, ps);
  if (spec.args.Has("num_proc") && !spec.args.Raw("num_proc").IsNull() &&
      spec.args.GetInt("num_proc", -1) > 0) {
    ps.fixed_replicas = static_cast<int>(spec.args.GetInt("num_proc", 1));
  }
  p.planner_stages.push_back(ps);
  p.init_secs[n] = g.entry.value("timings", json::object()).value("init_secs", -1.0);
  p.stage_notes[n] = Fixed(ps.rows_per_sec, 1) + " rows/s per replica (" +
                     (!g.prober.empty() ? "probe record of " + g.prober
                      : g.reused        ? "probe reused"
                                        : "probed " + g.replay.mode) +
                     ")" + memory_note;
}

// Elastic: the job's gpu_probe_results.json is an index of its probes
// (SPEC-checkpoints §10.5): the records are the truth, the index is for
// people and for later jobs' reuse. Workers on other devices have other keys:
// theirs are kept. Returns the index with `entries` in it.
json ProbeIndex(Preflight& p, const std::string& results_path, const json& entries) {
  json index = json::array();
  const json& keys = p.probe_json["cache_keys"];
  const json old = json::parse(ReadText(results_path), nullptr, false);
  if (old.is_object() && old.contains("probes") && old["probes"].is_array()) {
    for (const json& e : old["probes"]) {
      const std::string key = e.is_object() ? e.value("cache_key", "") : "";
      if (std::find(keys.begin(), keys.end(), json(key)) == keys.end()) index.push_back(e);
    }
  }
  for (const json& e : entries) index.push_back(e);
  p.probe_json["records"] = json::array();
  for (const json& k : keys) {
    p.probe_json["records"].push_back("probe/" + k.get<std::string>() + ".json");
  }
  return index;
}

// Preflight enabled: draws the sample, answers each model operator by a
// cached or a new probe, and makes its planner stage of the result. Run: the
// sample and the probes' results and logs go to probe/. Elastic: probe/ holds
// the shared records, and each process works in a directory of its own there.
void ProbeStages(Preflight& p) {
  const std::string probe_dir = p.cx.job_dir + "/probe";
  std::string work_dir = p.cx.shared
                             ? probe_dir + "/work." + HostName() + "." + std::to_string(::getpid())
                             : probe_dir;
  fs::create_directories(work_dir);
  std::string sample_path = work_dir + "/sample.jsonl";
  const SampleCleanup cleanup{sample_path, work_dir};
  const Sample sample = WriteSample(p, sample_path);
  const std::string results_path = p.cx.job_dir + "/gpu_probe_results.json";
  const json cached = CachedProbes(p.cx, results_path);
  std::vector<ProbeTarget> all = KeyTargets(p, sample, cached);
  ProbeRunner runner(p, sample, probe_dir, std::move(work_dir), std::move(sample_path),
                     std::move(all));
  runner.Run();
  json entries = json::array();
  for (size_t n = 0; n < runner.targets().size(); ++n) {
    entries.push_back(runner.targets()[n].entry);
    AddProbedStage(p, n, runner.targets()[n]);
  }
  p.probe_json["probed"] = runner.probed_here();
  if (runner.elastic()) entries = ProbeIndex(p, results_path, entries);
  WriteText(results_path, json({{"schema_version", 1}, {"probes", entries}}).dump(2) + "\n");
}

// dag_execution_plan.json's "stages" (into `model_stage_ids`, the model ones),
// and the printout's line on each model stage.
json StagesJson(Preflight& p, const ReplicaPlan& rp, json* model_stage_ids) {
  json stages_json = json::array();
  for (size_t s = 0; s < p.stages.size(); ++s) {
    json one = {{"stage_id", s},
                {"kind", p.stages[s].kind},
                {"op_idxs", p.stages[s].op_idxs},
                {"batch_size", p.plan.batch_rows},
                {"replicas", p.cx.threads},
                {"devices", json::array({"cpu"})}};
    if (p.stages[s].kind == "model") {
      const size_t t = p.stages[s].op_idxs.front();
      const std::string& name = p.recipe.process[t].name;
      model_stage_ids->push_back(s);
      one["op_name"] = name;
      one["batch_size"] = p.plan.operators[t].op->model_description()->batch_size;
      for (size_t n = 0; n < rp.stages.size(); ++n) {
        if (rp.stages[n].stage_id != s) continue;
        one["replicas"] = rp.stages[n].replicas;
        one["devices"] = rp.stages[n].devices;
        one["bound"] = rp.stages[n].bound;
        p.result.printout.push_back("  stage " + std::to_string(s) + " " + name + ": " +
                                    std::to_string(rp.stages[n].replicas) + " replica(s) on " +
                                    rp.stages[n].devices.front() + ", " + p.stage_notes[n]);
      }
    }
    stages_json.push_back(one);
  }
  return stages_json;
}

// The model stages of a phase, for people: "stage 1 a, stage 3 b".
std::string StageNames(const Preflight& p, const std::vector<size_t>& phase) {
  std::string names;
  for (size_t n : phase) {
    names += (names.empty() ? "" : ", ") + std::string("stage ") +
             std::to_string(p.planner_stages[n].stage_id) + " " + p.planner_stages[n].name;
  }
  return names;
}

// Elastic workers do not alternate execution groups: model stages that fit
// only apart stop the job.
void RefuseAlternatingElastic(const Preflight& p, const ReplicaPlan& rp) {
  std::string phases;
  for (const std::vector<size_t>& phase : rp.phases) {
    phases += (phases.empty() ? "" : "; ") + std::string("{") + StageNames(p, phase) + "}";
  }
  throw Error("the model stages do not fit on the devices together (" + phases +
                  " fit only apart) and elastic workers do not alternate execution groups",
              "run the recipe with `djshard run` (which alternates them), or give the workers "
              "more device memory");
}

// Each phase's cost, and whether its init was measured.
struct PhaseCosts {
  std::vector<PhaseCost> costs;
  std::vector<bool> measured;
};

// Each phase's operators (into the result's phases) and cost; a phase whose
// init is not measured costs {1, 0} (the whole run is one group).
PhaseCosts PlanPhases(Preflight& p, const ReplicaPlan& rp, double partition_rows) {
  PhaseCosts out;
  for (size_t k = 0; k < rp.phases.size(); ++k) {
    const std::vector<size_t>& phase = rp.phases[k];
    PreflightResult::Phase ph;
    ph.first_op = k == 0 ? 0 : p.result.phases.back().last_op + 1;
    for (size_t n : phase) ph.model_ops.push_back(p.targets[n]);
    ph.last_op = k + 1 == rp.phases.size() ? p.plan.operators.size() - 1 : ph.model_ops.back();
    p.result.phases.push_back(ph);
    PhaseCost c;
    bool measured = true;
    for (size_t n : phase) {
      if (p.init_secs[n] < 0) measured = false;
      c.init_secs += std::max(0.0, p.init_secs[n]);
    }
    c.secs_per_partition = PhaseSecondsPerPartition(p.planner_stages, rp, k, partition_rows);
    if (!measured) c = {1, 0};  // unknown: the whole run is one group
    out.costs.push_back(c);
    out.measured.push_back(measured);
  }
  return out;
}

// dag_execution_plan.json's "execution_groups" (SPEC-checkpoints §10.7):
// elastic, one group of every partition of every shard this process runs;
// otherwise groups of `group` partitions, each running every phase.
json ExecutionGroupsJson(const Preflight& p, const ReplicaPlan& rp, const json& model_stage_ids,
                         uint64_t group) {
  json groups = json::array();
  if (p.cx.shared) {
    groups.push_back({{"group_id", 0},
                      {"stage_ids", model_stage_ids},
                      {"partitions", "all"},
                      {"phases", json::array({{{"stage_ids", model_stage_ids},
                                               {"op_range", {0, p.plan.operators.size() - 1}},
                                               {"forced_tap_op", nullptr}}})},
                      {"size", nullptr}});
    return groups;
  }
  json phases_json = json::array();
  for (size_t k = 0; k < rp.phases.size(); ++k) {
    json ids = json::array();
    for (size_t n : rp.phases[k]) ids.push_back(p.planner_stages[n].stage_id);
    const PreflightResult::Phase& ph = p.result.phases[k];
    phases_json.push_back(
        {{"stage_ids", ids},
         {"op_range", {ph.first_op, ph.last_op}},
         {"forced_tap_op", k + 1 < rp.phases.size() ? json(ph.last_op) : json(nullptr)}});
  }
  for (uint64_t first = 0, id = 0; first < p.cx.num_partitions; first += group, ++id) {
    json partitions = json::array();
    const uint64_t end = std::min<uint64_t>(p.cx.num_partitions, first + group);
    for (uint64_t q = first; q < end; ++q) partitions.push_back(q);
    groups.push_back({{"group_id", id},
                      {"stage_ids", model_stage_ids},
                      {"partitions", partitions},
                      {"phases", phases_json},
                      {"size", end - first}});
  }
  return groups;
}

// The printout's head line and, when phases alternate, a line per phase.
void DescribeGroups(Preflight& p, const ReplicaPlan& rp, const PhaseCosts& costs, uint64_t group,
                    size_t num_groups) {
  const std::string source = p.st.enabled ? "preflight" : "explicit";
  std::vector<std::string>& printout = p.result.printout;
  if (rp.phases.size() <= 1) {
    printout.insert(printout.begin(), "Replica plan (" + source +
                                          "; one execution group: replicas live for the "
                                          "whole run):");
    return;
  }
  const double ratio = InitializationOverheadRatio(costs.costs, group);
  const double limit = p.st.max_initialization_overhead_ratio;
  const std::string shown = std::isfinite(ratio) ? Fixed(ratio, 3) : std::string("unknown");
  const std::string why =
      p.st.execution_group_size
          ? "execution_group_size " + std::to_string(*p.st.execution_group_size) +
                ", init/compute " + shown
          : "execution_group_size auto, init/compute " + shown +
                (ratio <= limit ? " <= " + Fixed(limit, 3)
                                : " > " + Fixed(limit, 3) + " even with every partition");
  printout.insert(printout.begin(),
                  "Replica plan (" + source +
                      "; the model stages do not fit together: " + std::to_string(num_groups) +
                      " execution group(s) of " + std::to_string(group) + " partition(s) (" + why +
                      ") alternate " + std::to_string(rp.phases.size()) + " phases):");
  for (size_t k = 0; k < rp.phases.size(); ++k) {
    const PreflightResult::Phase& ph = p.result.phases[k];
    printout.push_back(
        "  phase " + std::to_string(k) + ": loads " + StageNames(p, rp.phases[k]) + ", runs ops " +
        std::to_string(ph.first_op) + ".." + std::to_string(ph.last_op) +
        (k + 1 < rp.phases.size() ? ", forced tap after op " + std::to_string(ph.last_op) : "") +
        (costs.measured[k] ? " (init " + Fixed(costs.costs[k].init_secs, 3) + " s, " +
                                 Fixed(costs.costs[k].secs_per_partition, 3) + " s per partition)"
                           : std::string(" (init not measured)")));
  }
}

// Each operator's declared input and output columns (null: not declared).
json OperatorColumns(const recipe::Recipe& recipe) {
  json columns = json::array();
  for (const recipe::OperatorSpec& spec : recipe.process) {
    const auto in = Columns(spec, "input_columns");
    const auto out = Columns(spec, "output_columns");
    columns.push_back({{"input_columns", in ? json(*in) : json(nullptr)},
                       {"output_columns", out ? json(*out) : json(nullptr)}});
  }
  return columns;
}

// The replica plan and the execution groups. When every model stage fits at
// once the replicas live as long as the process: one group, the whole run
// (elastic: every partition of every shard this process runs). Otherwise the
// groups alternate phases: each loads its model stages, runs its operators
// over the group's partitions up to a forced tap after its last model
// operator, and unloads them before the next phase loads.
void PlanExecution(Preflight& p) {
  const ReplicaPlan rp = PlanReplicas(p.planner_stages, p.devices, p.limits);
  if (p.on_cpu) p.result.cpu_threads = CpuExecutorThreads(rp, p.cx.threads);
  for (const std::string& w : rp.warnings) Log(LogLevel::kWarn, "warning", "WARNING: " + w);
  json model_stage_ids = json::array();
  const json stages_json = StagesJson(p, rp, &model_stage_ids);
  const bool alternating = rp.phases.size() > 1;
  if (alternating && p.cx.shared) RefuseAlternatingElastic(p, rp);
  const uint64_t num_partitions = std::max<uint64_t>(1, p.cx.num_partitions);
  const double partition_rows =
      static_cast<double>(p.cx.total_rows) / static_cast<double>(num_partitions);
  const PhaseCosts costs = PlanPhases(p, rp, partition_rows);
  uint64_t group = num_partitions;
  if (alternating) {
    group = ExecutionGroupSize(p.st.execution_group_size, costs.costs, num_partitions,
                               p.st.max_initialization_overhead_ratio);
  }
  p.result.group_size = group;
  const json groups = ExecutionGroupsJson(p, rp, model_stage_ids, group);
  DescribeGroups(p, rp, costs, group, groups.size());
  p.result.plan_fields = {
      {"stages", stages_json}, {"execution_groups", groups}, {"probe", p.probe_json}};
  p.result.op_columns = OperatorColumns(p.recipe);
}

}  // namespace

PreflightResult RunPreflight(const PreflightContext& cx) {
  Preflight p(cx);
  // Contracts are checked for every operator, model or not.
  for (const recipe::OperatorSpec& spec : p.recipe.process) {
    Columns(spec, "input_columns");
    Columns(spec, "output_columns");
  }
  for (size_t i = 0; i < p.plan.operators.size(); ++i) {
    if (IsModelOp(p.plan, i)) p.targets.push_back(i);
  }
  if (p.targets.empty()) return p.result;  // nothing to probe
  p.result.has_model_ops = true;
  p.stages = SplitStages(p.plan);
  p.torch = model::QueryTorchRuntime();
  ChooseDevices(p);
  p.probe_json = {{"enabled", p.st.enabled}, {"cache_keys", json::array()}};
  p.stage_notes.resize(p.targets.size());
  p.init_secs.assign(p.targets.size(), -1);
  if (p.st.enabled) {
    ProbeStages(p);
  } else {
    PlanFixedStages(p);
  }
  PlanExecution(p);
  return std::move(p.result);
}

void AddPreflightToPlan(const PreflightResult& result, json* plan_json) {
  if (!result.has_model_ops) return;
  json& j = *plan_json;
  for (const auto& [k, v] : result.plan_fields.items()) j[k] = v;
  for (size_t i = 0; i < j["ops"].size() && i < result.op_columns.size(); ++i) {
    j["ops"][i]["input_columns"] = result.op_columns[i]["input_columns"];
    j["ops"][i]["output_columns"] = result.op_columns[i]["output_columns"];
  }
  for (const json& stage : j["stages"]) {
    for (const json& op : stage["op_idxs"]) {
      const size_t i = op.get<size_t>();
      if (i >= j["ops"].size()) continue;
      j["ops"][i]["stage_id"] = stage["stage_id"];
      if (stage["kind"] == "model") {
        j["ops"][i]["kind"] = "model";
        j["ops"][i]["accelerator"] = stage["devices"][0];
      }
    }
  }
}

namespace {

// Builds operator `i` of the recipe as a plan's operator.
exec::PlannedOperator BuildOperator(const recipe::Recipe& recipe, size_t i) {
  const recipe::OperatorSpec& spec = recipe.process[i];
  const ops::OperatorInfo* info = ops::Registry::Global().Find(spec.name);
  if (info == nullptr || !info->implemented) {
    throw Error(recipe.path, spec.line, "operator '" + spec.name + "' is not implemented");
  }
  exec::PlannedOperator p;
  p.op = info->factory(spec, recipe.text_key);
  p.skip_op_error = spec.args.GetBool("skip_op_error", recipe.skip_op_error);
  return p;
}

// Runs `plan` on one thread over the file `in` into `out`; returns its
// summary and the seconds it took.
std::pair<exec::ExecSummary, double> TimedExecute(exec::Plan& plan, const std::string& in,
                                                  const std::string& out) {
  io::OutputStream output(out, /*overwrite=*/true);
  exec::ExecOptions options;
  options.threads = 1;
  const double t0 = Now();
  const exec::ExecSummary s =
      exec::Execute(plan, {{in, in, fs::path(in).filename().string()}}, output, nullptr, options);
  const double secs = Now() - t0;
  output.Commit(/*durable=*/false);
  return std::make_pair(s, secs);
}

// The rows the probed operator sees: the sample after its replayed ancestors.
struct ReplayedRows {
  std::string rows;
  uint64_t count = 0;
  double secs = 0;  // the replay's
};

// Replays the ancestors over the sample; when they leave no rows, the probe
// runs on the sample itself (with a warning).
ReplayedRows ReplayAncestors(const recipe::Recipe& recipe, const ProbeRequest& r,
                             uint64_t sample_rows, json& warnings) {
  ReplayedRows out;
  std::string rows_path = r.sample;
  if (!r.replay.empty()) {
    exec::Plan replay;
    replay.keep_stats = true;
    replay.text_key = recipe.text_key;
    for (size_t i : r.replay) {
      replay.operators.push_back(BuildOperator(recipe, i));
      replay.writes_stats =
          replay.writes_stats || replay.operators.back().op->kind() == ops::OpKind::kFilter;
      replay.batch_rows =
          std::max(replay.batch_rows, replay.operators.back().op->preferred_batch_rows());
    }
    rows_path = r.work + "/replayed.jsonl";
    out.secs = TimedExecute(replay, r.sample, rows_path).second;
  }
  out.rows = ReadText(rows_path);
  out.count = CountNewlines(out.rows);
  if (out.count == 0) {
    warnings.push_back("the replayed operators left no rows: probed on the sample itself");
    out.rows = ReadText(r.sample);
    out.count = sample_rows;
  }
  return out;
}

// The probed operator, initialized once, and the host memory around it.
struct LoadedOperator {
  exec::Plan plan;
  double init_secs = 0;
  std::optional<uint64_t> anon_before, anon_loaded, rss_loaded;
  bool peak_reset = false;
};

// Initializes the operator. Host memory (SPEC-checkpoints §10.4 on the CPU):
// the weights are the anonymous memory the operator's initialization keeps
// (the model's tensors are copied out of the file, so file-backed pages such
// as libtorch's code are not counted); a replica's activations are the peak
// RSS over the warmup and steady batches above the RSS after initialization.
LoadedOperator LoadOperator(const recipe::Recipe& recipe, size_t op_idx, uint64_t survivors) {
  LoadedOperator t;
  t.anon_before = StatusBytes("RssAnon:");
  const double t0 = Now();
  t.plan.keep_stats = true;
  t.plan.text_key = recipe.text_key;
  t.plan.operators.push_back(BuildOperator(recipe, op_idx));
  t.init_secs = Now() - t0;
  t.anon_loaded = StatusBytes("RssAnon:");
  t.rss_loaded = StatusBytes("VmRSS:");
  t.peak_reset = ResetPeakRss();
  const ops::Operator& op = *t.plan.operators.front().op;
  const std::optional<ops::Operator::ModelDescription> md = op.model_description();
  t.plan.writes_stats = op.kind() == ops::OpKind::kFilter;
  t.plan.batch_rows = md ? static_cast<uint64_t>(md->batch_size) : survivors;
  return t;
}

// Writes one batch of `batch` rows to `path`, the rows cycled.
void WriteBatch(const std::string& rows, uint64_t batch, const std::string& path) {
  std::string batch_rows;
  std::vector<std::string> lines;
  std::istringstream s(rows);
  for (std::string line; std::getline(s, line);) lines.push_back(line);
  for (uint64_t i = 0; i < batch; ++i) batch_rows += lines[i % lines.size()] + "\n";
  WriteText(path, batch_rows);
}

// The timed batches: warmup, then steady.
struct BatchTimings {
  double warmup_secs = 0;
  json steady = json::array();  // seconds per steady batch
  double steady_total = 0;
  uint64_t in_rows = 0, out_rows = 0;  // over the steady batches
};

BatchTimings TimeBatches(exec::Plan& plan, const ProbeRequest& r, const std::string& batch_path) {
  const std::string out_path = r.work + "/out.jsonl";
  BatchTimings b;
  for (uint64_t i = 0; i < r.warmup; ++i)
    b.warmup_secs += TimedExecute(plan, batch_path, out_path).second;
  for (uint64_t i = 0; i < r.steady; ++i) {
    const auto [s, secs] = TimedExecute(plan, batch_path, out_path);
    b.steady.push_back(secs);
    b.steady_total += secs;
    b.in_rows += s.rows_in;
    b.out_rows += s.rows_out;
  }
  return b;
}

// The weights and a replica's activations in host memory (null: not measured).
json HostMemory(const LoadedOperator& t, json& warnings) {
  json memory = {{"weights_bytes", nullptr}, {"activation_peak_bytes", nullptr}};
  if (t.anon_before && t.anon_loaded) {
    memory["weights_bytes"] = *t.anon_loaded > *t.anon_before ? *t.anon_loaded - *t.anon_before : 0;
  }
  const std::optional<uint64_t> peak = StatusBytes("VmHWM:");
  if (t.peak_reset && peak && t.rss_loaded) {
    memory["activation_peak_bytes"] = *peak > *t.rss_loaded ? *peak - *t.rss_loaded : 0;
  } else {
    warnings.push_back(
        "the kernel does not reset the peak RSS (/proc/self/clear_refs): activations are not "
        "measured");
  }
  return memory;
}

}  // namespace

void ProbeOperator(const ProbeRequest& r) {
  const recipe::Recipe recipe = recipe::LoadRecipe(r.config);
  if (r.op_idx >= recipe.process.size()) throw Error("--op-idx is past the recipe's operators");
  json warnings = json::array();
  const uint64_t sample_rows = CountNewlines(ReadText(r.sample));
  const ReplayedRows replayed = ReplayAncestors(recipe, r, sample_rows, warnings);
  LoadedOperator target = LoadOperator(recipe, r.op_idx, replayed.count);
  const ops::Operator& op = *target.plan.operators.front().op;
  const std::string batch_path = r.work + "/batch.jsonl";
  WriteBatch(replayed.rows, target.plan.batch_rows, batch_path);
  const BatchTimings b = TimeBatches(target.plan, r, batch_path);
  const json memory = HostMemory(target, warnings);
  if (b.in_rows > 0 && b.out_rows == 0) {
    if (op.kind() == ops::OpKind::kMapper) {
      throw Error(op.name() + " returned no rows for the " + std::to_string(b.in_rows) +
                      " probe rows (every row failed; see its record errors)",
                  "check the operator's input fields (e.g. query_key) against the data");
    }
    warnings.push_back(op.name() + " dropped every probe row: its throughput is a worst case");
  }
  const json result = {
      {"timings",
       {{"replay_secs", replayed.secs},
        {"init_secs", target.init_secs},
        {"warmup_secs", b.warmup_secs},
        {"steady_secs", b.steady}}},
      {"steady_rows_per_sec",
       b.steady_total > 0 ? static_cast<double>(b.in_rows) / b.steady_total : 0.0},
      {"output_ratio", b.in_rows > 0 ? static_cast<double>(b.out_rows) / b.in_rows : 0.0},
      {"input_ratio", sample_rows > 0 ? static_cast<double>(replayed.count) / sample_rows : 1.0},
      {"rows", sample_rows},
      {"host_memory", memory},
      {"warnings", warnings}};
  WriteText(r.result, result.dump(2) + "\n");
}

}  // namespace djshard::preflight

namespace djshard::preflight {

int ThreadsAfterPlan(const PreflightResult& result, int threads, bool threads_explicit) {
  if (result.cpu_threads <= 0 || result.cpu_threads >= threads) return threads;
  if (!threads_explicit) return result.cpu_threads;
  Log(LogLevel::kWarn, "warning",
      "WARNING: the CPU memory holds " + std::to_string(result.cpu_threads) +
          " model replicas (the replica plan); the explicit thread count " +
          std::to_string(threads) + " runs more");
  return threads;
}

}  // namespace djshard::preflight
