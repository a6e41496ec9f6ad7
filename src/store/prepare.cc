#include "djshard/store/prepare.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <thread>

#include "djshard/common/build_info.h"
#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/common/text.h"
#include "djshard/exec/checkpoint.h"
#include "djshard/exec/partition_runner.h"
#include "djshard/exec/plan.h"
#include "djshard/exec/shard_safety.h"
#include "djshard/io/input.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "djshard/model/device.h"
#include "djshard/recipe/dataset.h"
#include "djshard/recipe/recipe.h"
#include "djshard/store/fs_check.h"
#include "djshard/store/job.h"
#include "djshard/store/job_summary.h"
#include "djshard/store/normalize.h"
#include "src/store/normalize_pass.h"

namespace djshard::store {

namespace fs = std::filesystem;
using io::InputCandidate;

namespace {

struct FileStat {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

FileStat StatFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) ThrowSystemError(path, "cannot stat");
  return {static_cast<uint64_t>(st.st_size), MtimeNanos(st)};
}

// Compares an existing job directory with this request (SPEC "Repeating prepare").
PrepareOutcome CheckExistingJob(const JobPaths& job, const std::string& dataset_path,
                                const std::string& recipe_sha256, uint64_t num_shards,
                                const std::vector<InputCandidate>& inputs) {
  const std::string& job_dir = job.dir();
  const Error mismatch(job_dir, 0,
                       "Job directory already exists and does not match this request "
                       "(dataset, recipe, shard count or input files differ)",
                       "Choose a new --job-dir, or remove the old one");
  const std::string manifest_path = job.ManifestPath();
  std::error_code ec;
  if (!fs::is_regular_file(manifest_path, ec)) throw mismatch;
  Manifest m = Manifest::FromJson(io::ReadFile(manifest_path), manifest_path);
  if (m.dataset_path != dataset_path || m.recipe_sha256 != recipe_sha256 ||
      m.num_shards != num_shards || m.input_files.size() != inputs.size()) {
    throw mismatch;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputFile& recorded = m.input_files[i];
    if (recorded.path != inputs[i].path) throw mismatch;
    const FileStat now = StatFile(inputs[i].path);
    if (now.size != recorded.size_bytes || now.mtime_ns != recorded.mtime_ns) throw mismatch;
    // The full hash catches content edited with its mtime restored.
    if (io::Sha256OfFile(inputs[i].path) != recorded.sha256) throw mismatch;
  }
  return PrepareOutcome{true, job_dir, std::move(m)};
}

// Removes the staging directory unless it was published.
class StagingDir {
 public:
  explicit StagingDir(std::string path) : path_(std::move(path)) {}
  ~StagingDir() {
    if (!published_) io::RemoveTreeQuietly(path_);
  }
  const std::string& path() const { return path_; }
  void MarkPublished() { published_ = true; }

 private:
  std::string path_;
  bool published_ = false;
};

void CheckPolicy(const Policy& p) {
  if (p.lease_secs <= 0) throw Error("--lease-secs must be greater than 0");
  if (p.heartbeat_secs <= 0 || p.heartbeat_secs >= p.lease_secs) {
    throw Error("--heartbeat-secs must be greater than 0 and less than --lease-secs",
                "a lease must survive at least one missed heartbeat");
  }
  if (p.max_retries < 0) throw Error("--max-retries must be 0 or more");
  if (p.poll_interval_secs <= 0) throw Error("--poll-interval-secs must be greater than 0");
}

}  // namespace

PrepareOutcome Prepare(const PrepareRequest& request, io::Disk& disk) {
  struct stat st {};
  if (::stat(request.config_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      ::access(request.config_path.c_str(), R_OK) != 0) {
    throw Error(request.config_path, 0, "recipe is not a readable file",
                "pass --config with a Data-Juicer YAML recipe");
  }
  if (request.num_shards <= 0) {
    throw Error("--num-shards must be greater than 0", "got " + std::to_string(request.num_shards));
  }
  CheckPolicy(request.policy);
  const std::string recipe_bytes = io::ReadFile(request.config_path);
  const recipe::Recipe recipe = recipe::LoadRecipe(request.config_path);
  const exec::ShardSafetyReport safety = exec::CheckShardSafety(recipe, ops::Registry::Global());
  // partition: and checkpoint: sections (SPEC-checkpoints §2): every key and
  // tap name checked before any job dir exists.
  std::optional<exec::JobSettings> partitioning;
  std::unique_ptr<exec::Plan> compiled;  // with checkpointing: for dag_execution_plan.json
  std::vector<size_t> checkpoint_taps;
  {
    const YAML::Node p = recipe.root["partition"], k = recipe.root["checkpoint"];
    if ((p && !p.IsNull()) || (k && !k.IsNull())) {
      partitioning = exec::ParseJobSettings(recipe.root, recipe.path);
      exec::TapPositions(*partitioning, recipe);
    }
  }
  // The plan a worker builds, with every argument checked, so that a job no
  // worker could run is refused here; only operators this build lacks are
  // left to the warnings above.
  {
    // Model paths and configs are checked; weights load on the workers,
    // which may have GPUs this machine lacks.
    model::CheckOnlyScope check_only;
    exec::Plan plan =
        exec::CompilePlan(recipe, ops::Registry::Global(), /*skip_unimplemented=*/true);
    if (partitioning && partitioning->checkpointing() &&
        plan.operators.size() == recipe.process.size()) {
      checkpoint_taps = exec::TapPositions(*partitioning, recipe);
      compiled = std::make_unique<exec::Plan>(std::move(plan));
    }
  }

  const recipe::DatasetPath dataset = recipe::ResolveDatasetPath(recipe, request.dataset_path);
  const std::string& dataset_path = dataset.path;
  const std::string& dataset_display = dataset.display;
  const std::vector<InputCandidate> inputs = io::DiscoverInputs(dataset_path, dataset_display);

  io::Sha256 recipe_hash;
  recipe_hash.Update(recipe_bytes);
  const std::string recipe_sha256 = recipe_hash.HexDigest();
  const uint64_t num_shards = static_cast<uint64_t>(request.num_shards);

  const JobPaths job(request.job_dir);
  const std::string& job_dir = job.dir();
  std::error_code ec;
  if (fs::exists(fs::symlink_status(job_dir, ec))) {
    return CheckExistingJob(job, dataset_path, recipe_sha256, num_shards, inputs);
  }

  const std::string media_root = fs::is_directory(dataset_path, ec)
                                     ? dataset_path
                                     : fs::path(dataset_path).parent_path().string();
  std::vector<std::string> media_keys = {recipe.image_key, recipe.audio_key, recipe.video_key};
  const int threads = request.threads > 0
                          ? request.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  // The job is built in a staging directory beside the job dir.
  const fs::path job_path(job_dir);
  fs::create_directories(job_path.parent_path(), ec);
  if (ec) throw Error(job_path.parent_path().string(), 0, "cannot create: " + ec.message());
  CheckJobFilesystem(job_path.parent_path().string(), disk);
  StagingDir staging(
      job.StagingPath(request.staging_tag.empty() ? RandomHex(16) : request.staging_tag));
  const JobPaths staged(staging.path());
  for (const std::string& dir : staged.SkeletonDirs()) {
    if (::mkdir(dir.c_str(), 0755) != 0) ThrowSystemError(dir, "cannot create");
  }

  // Pass 1: validate and normalize every line on every core, for the totals
  // and hashes; nothing is written (the data is written once, by pass 2).
  const NormalizeRules rules{media_keys, media_root, safety.index_keys};
  Manifest m;
  const NormalizedInput normalized = ScanNormalized(inputs, rules, threads);
  m.input_files = normalized.files;
  if (normalized.rows == 0) {
    throw Error(dataset_display, 0, "no records found", "the input files are empty");
  }
  if (num_shards > normalized.rows) {
    throw Error("--num-shards " + std::to_string(num_shards) + " is more than the " +
                    std::to_string(normalized.rows) + " rows of the input",
                "every shard must hold at least one row");
  }

  ThrowIfStopRequested();
  CrashPoint("prepare_normalized");
  // Pass 2: normalize again and cut the stream straight into byte-balanced
  // shard files, each hashed as it is written.
  std::vector<std::string> shard_paths;
  for (uint64_t i = 0; i < num_shards; ++i) {
    ShardEntry shard;
    shard.id = ShardId(i, num_shards);
    shard.index = i;
    shard.path = JobPaths::ShardRelPath(shard.id);
    shard_paths.push_back(staged.InJob(shard.path));
    m.shards.push_back(std::move(shard));
  }
  const std::vector<ShardWritten> written =
      WriteNormalizedShards(inputs, rules, threads, normalized, shard_paths);
  for (uint64_t i = 0; i < num_shards; ++i) {
    m.shards[i].rows = written[i].rows;
    m.shards[i].size_bytes = written[i].bytes;
    m.shards[i].checksum = written[i].checksum;
  }
  if (partitioning && partitioning->mode == exec::PartitionMode::kManual) {
    // Every shard is a partition set: a manual count must fit the smallest
    // (the staged shards are removed with the staging directory).
    const ShardEntry* smallest = &m.shards.front();
    for (const ShardEntry& s : m.shards) smallest = s.rows < smallest->rows ? &s : smallest;
    if (partitioning->num_of_partitions > smallest->rows) {
      throw Error("num_of_partitions (" + std::to_string(partitioning->num_of_partitions) +
                      ") exceeds the rows of " + smallest->id + " (" +
                      std::to_string(smallest->rows) + ")",
                  "lower partition.num_of_partitions or --num-shards");
    }
  }

  m.job_id = job_path.filename().string();
  m.created_at = FormatUtcIso8601(NowNanos());
  m.dataset_path = dataset_path;
  m.media_root = media_root;
  m.media_keys = media_keys;
  m.index_keys = safety.index_keys;
  m.total_rows = normalized.rows;
  m.total_size_bytes = normalized.bytes;
  m.normalized_sha256 = normalized.digest;
  m.num_shards = num_shards;
  m.recipe_source_path = fs::absolute(request.config_path).lexically_normal().string();
  m.recipe_sha256 = recipe_sha256;
  m.engine_version = version();
  m.engine_git_commit = git_commit();
  m.policy = request.policy;
  m.warnings = safety.warnings;
  if (partitioning && partitioning->checkpointing() && partitioning->checkpoint_dir) {
    const std::string root =
        JobPaths::CheckpointsRoot(job_dir, m.job_id, partitioning->checkpoint_dir);
    const std::string job_prefix = fs::path(job_dir).lexically_normal().string() + "/";
    if (root.rfind(job_prefix, 0) != 0) {
      m.warnings.push_back("checkpoint.dir " + root +
                           " is not under the job dir: every node must see it, or takeover "
                           "resume falls back to recomputing");
    }
  }

  disk.WriteAtomic(staged.InJob(m.recipe_snapshot_path), recipe_bytes);
  disk.WriteAtomic(staged.ManifestPath(), m.ToJson());
  if (compiled) {
    // Each shard is a partition set of its own: a manual count is every
    // shard's, auto sizes each shard by itself.
    const bool manual = partitioning->mode == exec::PartitionMode::kManual;
    const nlohmann::json parts = {
        {"mode", manual ? "manual" : "auto"},
        {"num_partitions",
         manual ? nlohmann::json(partitioning->num_of_partitions) : nlohmann::json()},
        {"per_shard", true}};
    nlohmann::json plan = exec::ExecutionPlanJson(*compiled, m.job_id, recipe_sha256,
                                                  checkpoint_taps, *partitioning, parts);
    // Model operators are probed by the workers before they claim
    // (SPEC-checkpoints §10): a key depends on the node's device, so the keys
    // and each node's replicas are in its attempts' `plan`.
    for (size_t i = 0; i < compiled->operators.size(); ++i) {
      if (!compiled->operators[i].op->model_description()) continue;
      plan["ops"][i]["kind"] = "model";
      plan["probe"]["enabled"] = partitioning->preflight.enabled;
      plan["probe"]["records"] = "probe/<cache_key>.json; per node: attempts/*/*/attempt.json plan";
    }
    disk.WriteAtomic(staged.dir() + "/dag_execution_plan.json", plan.dump(2) + "\n");
  }
  for (const std::string& dir : {staged.ShardsDir(), staged.StateDir(), staged.dir()}) {
    disk.SyncDir(dir);
  }
  ThrowIfStopRequested();
  CrashPoint("prepare_staged");

  try {
    disk.Rename(staging.path(), job_dir);
  } catch (const Error&) {
    // Another prepare of the same job published first: compare with it.
    if (fs::exists(fs::symlink_status(job_dir, ec))) {
      return CheckExistingJob(job, dataset_path, recipe_sha256, num_shards, inputs);
    }
    throw;
  }
  staging.MarkPublished();
  disk.SyncDir(job_path.parent_path().string());
  // The job's summary says "prepared" until stop, merge or dlc finalize
  // rewrite it (SPEC-checkpoints §8). It is for people: a failure to write
  // it does not undo the published job.
  try {
    WriteJobSummary(JobDir::Open(job_dir, disk),
                    SummaryUpdate{SummaryStatus::kPrepared, {}, false, ""});
  } catch (const Error&) {
  }
  return PrepareOutcome{false, job_dir, std::move(m)};
}

}  // namespace djshard::store
