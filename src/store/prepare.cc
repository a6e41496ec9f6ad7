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
#include "djshard/exec/dedup_run.h"
#include "djshard/exec/plan.h"
#include "djshard/exec/shard_safety.h"
#include "djshard/io/input.h"
#include "djshard/io/json_fields.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "djshard/job/checkpoint.h"
#include "djshard/job/partition_runner.h"
#include "djshard/model/device.h"
#include "djshard/recipe/dataset.h"
#include "djshard/recipe/recipe.h"
#include "djshard/store/dedup_stage.h"
#include "djshard/store/fs_check.h"
#include "djshard/store/job.h"
#include "djshard/store/job_summary.h"
#include "djshard/store/normalize.h"
#include "djshard/store/prepare_scan.h"
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
                                ShardsMode shards_mode, OutputLayout output_layout,
                                const std::vector<InputCandidate>& inputs) {
  const std::string& job_dir = job.dir();
  const Error mismatch(job_dir, 0,
                       "Job directory already exists and does not match this request "
                       "(dataset, recipe, shard count, --shards, --layout or input files differ)",
                       "Choose a new --job-dir, or remove the old one");
  const std::string manifest_path = job.ManifestPath();
  std::error_code ec;
  if (!fs::is_regular_file(manifest_path, ec)) throw mismatch;
  Manifest m = Manifest::FromJson(io::ReadFile(manifest_path), manifest_path);
  if (m.dataset_path != dataset_path || m.recipe_sha256 != recipe_sha256 ||
      m.num_shards != num_shards || m.input_files.size() != inputs.size() ||
      m.shards_mode != shards_mode || m.output_layout != output_layout) {
    throw mismatch;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputFile& recorded = m.input_files[i];
    if (recorded.path != inputs[i].path) throw mismatch;
    const FileStat now = StatFile(inputs[i].path);
    if (now.size != recorded.size_bytes || now.mtime_ns != recorded.mtime_ns) throw mismatch;
    // The full hash catches content edited with its mtime restored.
    const bool tree = !recorded.tree_sha256.empty();
    const std::string now_sha256 =
        tree ? FileTreeSha256(inputs[i].path, m.scan_task_bytes) : io::Sha256OfFile(inputs[i].path);
    if (now_sha256 != (tree ? recorded.tree_sha256 : recorded.sha256)) throw mismatch;
  }
  return PrepareOutcome{true, job_dir, std::move(m)};
}

void CheckPolicy(const Policy& p) {
  if (p.lease_secs <= 0) throw Error("--lease-secs must be greater than 0");
  if (p.heartbeat_secs <= 0 || p.heartbeat_secs >= p.lease_secs) {
    throw Error("--heartbeat-secs must be greater than 0 and less than --lease-secs",
                "a lease must survive at least one missed heartbeat");
  }
  if (p.max_retries < 0) throw Error("--max-retries must be 0 or more");
  if (p.poll_interval_secs <= 0) throw Error("--poll-interval-secs must be greater than 0");
}

// The recipe as prepare checked it, before the input is looked at.
struct CheckedRecipe {
  std::string bytes;
  std::string sha256;
  recipe::Recipe recipe;
  exec::ShardSafetyReport safety;
  // partition: and checkpoint: sections (SPEC-checkpoints §2).
  std::optional<job::JobSettings> partitioning;
  std::unique_ptr<exec::Plan> compiled;  // with checkpointing: for dag_execution_plan.json
  std::vector<size_t> checkpoint_taps;
  // The deduplicators, each a dedup stage; key_ranges is 1 or 0 (a stage
  // that groups nothing) until the input's size is known.
  std::vector<DedupStageEntry> dedup_stages;
};

// A recipe with deduplicators runs them as dedup stages (store/dedup_stage.h):
// refused with partition:/checkpoint: sections (a stage's tasks are retried
// whole) and with operators this build lacks (stage positions would move).
void CheckDedupStagesRecipe(CheckedRecipe& c, const exec::Plan& plan) {
  const std::vector<size_t> dedups = exec::DedupOperators(plan);
  if (dedups.empty()) return;
  const recipe::OperatorSpec& first = c.recipe.process.at(dedups.front());
  if (c.partitioning) {
    throw Error(c.recipe.path, first.line,
                "operator '" + first.name +
                    "' runs as a dedup stage, which an elastic job cannot combine with "
                    "partition: or checkpoint: sections",
                "remove the sections: a dedup stage's tasks are retried whole, or use "
                "`djshard run` on one machine");
  }
  if (plan.operators.size() != c.recipe.process.size()) {
    throw Error(c.recipe.path, first.line,
                "a recipe with a deduplicator needs every operator in this build",
                "`djshard ops` lists the operators this build has");
  }
  exec::CheckDedupRecipe(c.recipe, plan, /*job_mode=*/false);
  c.dedup_stages = DedupStages(plan, 0, 1);
}

// The request's options and the recipe, every key, tap name and operator
// argument checked before any job dir exists.
CheckedRecipe CheckRequestAndRecipe(const PrepareRequest& request) {
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
  CheckedRecipe c;
  c.bytes = io::ReadFile(request.config_path);
  c.recipe = recipe::LoadRecipe(request.config_path);
  c.safety = exec::CheckShardSafety(c.recipe, ops::Registry::Global(), /*run_deduplicators=*/true);
  const YAML::Node p = c.recipe.root["partition"], k = c.recipe.root["checkpoint"];
  if ((p && !p.IsNull()) || (k && !k.IsNull())) {
    c.partitioning = job::ParseJobSettings(c.recipe.root, c.recipe.path);
    job::TapPositions(*c.partitioning, c.recipe);
  }
  // The plan a worker builds, with every argument checked, so that a job no
  // worker could run is refused here; only operators this build lacks are
  // left to the warnings above. Model paths and configs are checked; weights
  // load on the workers, which may have GPUs this machine lacks.
  model::CheckOnlyScope check_only;
  exec::Plan plan = exec::CompilePlan(c.recipe, ops::Registry::Global(),
                                      /*skip_unimplemented=*/true, /*run_deduplicators=*/true);
  CheckDedupStagesRecipe(c, plan);
  if (c.partitioning && c.partitioning->checkpointing() &&
      plan.operators.size() == c.recipe.process.size()) {
    c.checkpoint_taps = job::TapPositions(*c.partitioning, c.recipe);
    c.compiled = std::make_unique<exec::Plan>(std::move(plan));
  }
  io::Sha256 hash;
  hash.Update(c.bytes);
  c.sha256 = hash.HexDigest();
  return c;
}

// A prepare refuses an input without rows, and more shards than rows.
void CheckRowsForShards(uint64_t rows, uint64_t num_shards, const std::string& dataset_display) {
  if (rows == 0) throw Error(dataset_display, 0, "no records found", "the input files are empty");
  if (num_shards > rows) {
    throw Error("--num-shards " + std::to_string(num_shards) + " is more than the " +
                    std::to_string(rows) + " rows of the input",
                "every shard must hold at least one row");
  }
}

// Pass 1 (validate, count, hash) and pass 2 (write the shards, or with
// reference shards cut them into ranges of the input) over the input, into
// the staged job; fills the manifest's input files and shards.
NormalizedInput WriteShards(const std::vector<InputCandidate>& inputs, const NormalizeRules& rules,
                            int threads, uint64_t num_shards, const std::string& dataset_display,
                            const JobPaths& staged, Manifest& m) {
  const NormalizedInput normalized = ScanNormalized(inputs, rules, threads);
  m.input_files = normalized.files;
  CheckRowsForShards(normalized.rows, num_shards, dataset_display);
  ThrowIfStopRequested();
  CrashPoint("prepare_normalized");
  const bool reference = m.shards_mode == ShardsMode::kReference;
  std::vector<std::string> shard_paths;
  for (uint64_t i = 0; i < num_shards; ++i) {
    ShardEntry shard;
    shard.id = ShardId(i, num_shards);
    shard.index = i;
    if (!reference) {
      shard.path = JobPaths::ShardRelPath(shard.id);
      shard_paths.push_back(staged.InJob(shard.path));
    }
    m.shards.push_back(std::move(shard));
  }
  std::vector<ShardWritten> written =
      reference ? CutReferenceShards(inputs, rules, threads, normalized, num_shards)
                : WriteNormalizedShards(inputs, rules, threads, normalized, shard_paths);
  for (uint64_t i = 0; i < num_shards; ++i) {
    m.shards[i].rows = written[i].rows;
    m.shards[i].size_bytes = written[i].bytes;
    m.shards[i].checksum = written[i].checksum;
    m.shards[i].ranges = std::move(written[i].ranges);
  }
  if (reference) {
    m.schema_version = kReferenceManifestSchemaVersion;
    for (size_t i = 0; i < inputs.size(); ++i) {
      m.input_files[i].normalization = SecondPassName(normalized.second_pass[i]);
    }
  }
  return normalized;
}

// A copy job of a distributed prepare: the shard files, written by `scan`'s
// write tasks (on every dlc instance) from the cut in `m` (a reference job's
// until then), linked into place; `m` becomes the copy job's manifest.
void WriteDistributedShards(const DistributedScan& scan, const NormalizeRules& rules,
                            const JobPaths& staged, io::Disk& disk, Manifest& m) {
  Manifest reading = m;
  reading.shards_mode = ShardsMode::kReference;
  reading.media_keys = rules.media_keys;
  reading.media_root = rules.media_root;
  // The check blocks where a coordinator that takes over finds them again,
  // named by their hash.
  const std::string blocks_dir =
      scan.blocks_root + "/write-blocks-" + m.check_blocks_checksum.hex.substr(0, 16);
  disk.MakeDirs(blocks_dir);
  disk.Link(staged.InJob(kInputBlocksFile), blocks_dir + "/" + kInputBlocksFile);
  const ShardWritePlan plan{blocks_dir, reading.ToJson(),
                            PlanShardWrites(m.shards, scan.task_bytes)};
  const std::vector<nlohmann::json> results = scan.write(plan);
  for (size_t t = 0; t < results.size(); ++t) {
    const nlohmann::json& r = results[t];
    if (r.contains("error")) throw io::ErrorFromJson(r.at("error"));
    const auto [first, end] = plan.tasks.at(t);
    for (size_t i = first; i < end; ++i) {
      ShardEntry& shard = m.shards[i];
      const nlohmann::json& w = r.at("shards").at(i - first);
      const std::string file = w.at("file").get<std::string>();
      if (w.at("id") != shard.id || w.at("rows") != shard.rows ||
          w.at("size_bytes") != shard.size_bytes) {
        throw Error(file, 0, "shard written by a task differs from the cut (id, rows or bytes)",
                    "prepare again");
      }
      shard.path = JobPaths::ShardRelPath(shard.id);
      shard.checksum = io::Checksum::FromJson(w);
      shard.ranges.clear();
      if (!disk.Link(file, staged.InJob(shard.path))) {
        throw Error(staged.InJob(shard.path), 0, "shard file already exists", "prepare again");
      }
    }
  }
  disk.SyncDir(staged.ShardsDir());
  // A copy job reads its shard files: the input's check blocks go.
  disk.Unlink(staged.InJob(kInputBlocksFile));
  m.schema_version = kManifestSchemaVersion;
  m.check_block_bytes = 0;
  m.check_blocks_bytes = 0;
  m.check_blocks_checksum = {};
  for (InputFile& f : m.input_files) {
    f.normalization.clear();
    f.check_first_block = 0;
  }
}

// A distributed prepare (store/prepare_scan.h): the scan tasks, run through
// `scan` (on every dlc instance), and the cut from their results into the
// manifest's input files and shards; the input's check blocks are written
// into the staged job.
NormalizedInput CutDistributedShards(const DistributedScan& scan,
                                     const std::vector<InputCandidate>& inputs,
                                     const NormalizeRules& rules, uint64_t num_shards,
                                     const std::string& dataset_display, const JobPaths& staged,
                                     io::Disk& disk, Manifest& m) {
  const ScanPlan plan = PlanScan(inputs, rules.media_keys, rules.media_root, scan.task_bytes);
  const std::vector<ScanTaskResult> results = scan.run(plan);
  CheckScanResults(plan, results);
  uint64_t rows = 0;
  for (const ScanTaskResult& r : results) rows += r.rows;
  CheckRowsForShards(rows, num_shards, dataset_display);
  ThrowIfStopRequested();
  CrashPoint("prepare_normalized");
  ScannedInput cut = CutScannedShards(plan, results, num_shards);
  m.input_files = std::move(cut.files);
  m.shards = std::move(cut.shards);
  for (uint64_t i = 0; i < num_shards; ++i) {
    m.shards[i].id = ShardId(i, num_shards);
    m.shards[i].index = i;
  }
  m.schema_version = kReferenceManifestSchemaVersion;
  m.scan_task_bytes = plan.task_bytes;
  m.normalized_tree_sha256 = cut.normalized_tree_sha256;
  m.check_block_bytes = plan.check_block_bytes;
  m.check_blocks_bytes = cut.check_blocks.size();
  io::Xxh3 check;
  check.Update(cut.check_blocks);
  m.check_blocks_checksum = io::Checksum::Xxh3(check.HexDigest());
  disk.WriteAtomic(staged.InJob(kInputBlocksFile), cut.check_blocks);
  if (m.shards_mode == ShardsMode::kCopy) WriteDistributedShards(scan, rules, staged, disk, m);
  NormalizedInput totals;
  totals.rows = cut.rows;
  totals.bytes = cut.bytes;
  totals.digest = cut.normalized_sha256;
  return totals;
}

// A reference job prepared on one node: the scan tasks' one pass over the
// input instead of WriteShards' two, run here in input order, one task per
// file (so each file keeps its plain SHA-256) with the normalized stream's
// SHA-256 carried from task to task; the cut is a distributed prepare's.
NormalizedInput ScanInOnePass(const std::vector<InputCandidate>& inputs,
                              const NormalizeRules& rules, int threads, uint64_t num_shards,
                              const std::string& dataset_display, const JobPaths& staged,
                              io::Disk& disk, Manifest& m) {
  uint64_t largest = 0;
  for (const InputCandidate& in : inputs) {
    std::error_code ec;
    const uint64_t size = fs::file_size(in.path, ec);
    if (!ec) largest = std::max(largest, size);
  }
  constexpr uint64_t kBlock = 256ull << 10;  // whole check blocks of 256 KiB
  DistributedScan scan;
  scan.task_bytes = std::max<uint64_t>(1, (largest + kBlock - 1) / kBlock) * kBlock;
  NormalizedStream stream;
  const std::string dir = staged.InJob(".scan");
  disk.MakeDirs(dir);
  scan.run = [&](const ScanPlan& plan) {
    // The plan took each file's size again: one that grew meanwhile would get
    // several tasks and a tree hash, which a one-node prepare must not.
    for (size_t t = 0; t < plan.tasks.size(); ++t) {
      if (plan.tasks[t].index > 0) {
        throw Error(plan.files[plan.tasks[t].file].display_path, 0,
                    "input changed during prepare: it grew while prepare read the input's sizes",
                    "prepare again once the file no longer changes");
      }
    }
    std::vector<ScanTaskResult> results;
    for (size_t t = 0; t < plan.tasks.size(); ++t) {
      results.push_back(RunScanTask(plan, t, threads, dir, "local", &stream));
      results.back().data_file = dir + "/" + results.back().data_file;
      if (results.back().failed()) break;  // the first bad line in input order
    }
    return results;
  };
  NormalizedInput normalized =
      CutDistributedShards(scan, inputs, rules, num_shards, dataset_display, staged, disk, m);
  io::RemoveTreeQuietly(dir);
  normalized.digest = stream.sha256.HexDigest();
  m.scan_task_bytes = 0;  // every file and the stream have plain SHA-256
  m.normalized_tree_sha256.clear();
  return normalized;
}

// Every shard is a partition set: a manual partition count must fit the
// smallest shard (the staged shards are removed with the staging directory).
void CheckManualPartitions(const CheckedRecipe& c, const Manifest& m) {
  if (!c.partitioning || c.partitioning->mode != job::PartitionMode::kManual) return;
  const ShardEntry* smallest = &m.shards.front();
  for (const ShardEntry& s : m.shards) smallest = s.rows < smallest->rows ? &s : smallest;
  if (c.partitioning->num_of_partitions > smallest->rows) {
    throw Error("num_of_partitions (" + std::to_string(c.partitioning->num_of_partitions) +
                    ") exceeds the rows of " + smallest->id + " (" +
                    std::to_string(smallest->rows) + ")",
                "lower partition.num_of_partitions or --num-shards");
  }
}

// A checkpoint.dir outside the job dir is the user's to share between nodes.
void WarnAboutCheckpointDir(const CheckedRecipe& c, const std::string& job_dir, Manifest& m) {
  if (!c.partitioning || !c.partitioning->checkpointing() || !c.partitioning->checkpoint_dir) {
    return;
  }
  const std::string root =
      JobPaths::CheckpointsRoot(job_dir, m.job_id, c.partitioning->checkpoint_dir);
  const std::string job_prefix = fs::path(job_dir).lexically_normal().string() + "/";
  if (root.rfind(job_prefix, 0) != 0) {
    m.warnings.push_back("checkpoint.dir " + root +
                         " is not under the job dir: every node must see it, or takeover "
                         "resume falls back to recomputing");
  }
}

// dag_execution_plan.json of a checkpointed job (SPEC-checkpoints §8). Each
// shard is a partition set of its own: a manual count is every shard's, auto
// sizes each shard by itself.
nlohmann::json ExecutionPlan(const CheckedRecipe& c, const std::string& job_id) {
  const bool manual = c.partitioning->mode == job::PartitionMode::kManual;
  const nlohmann::json parts = {
      {"mode", manual ? "manual" : "auto"},
      {"num_partitions",
       manual ? nlohmann::json(c.partitioning->num_of_partitions) : nlohmann::json()},
      {"per_shard", true}};
  nlohmann::json plan = job::ExecutionPlanJson(*c.compiled, job_id, c.sha256, c.checkpoint_taps,
                                               *c.partitioning, parts);
  // Model operators are probed by the workers before they claim
  // (SPEC-checkpoints §10): a key depends on the node's device, so the keys
  // and each node's replicas are in its attempts' `plan`.
  for (size_t i = 0; i < c.compiled->operators.size(); ++i) {
    if (!c.compiled->operators[i].op->model_description()) continue;
    plan["ops"][i]["kind"] = "model";
    plan["probe"]["enabled"] = c.partitioning->preflight.enabled;
    plan["probe"]["records"] = "probe/<cache_key>.json; per node: attempts/*/*/attempt.json plan";
  }
  return plan;
}

// The recipe snapshot, the manifest and the plan, written into the staged job
// and made durable with its directories.
void WriteJobFiles(const CheckedRecipe& c, const Manifest& m, const JobPaths& staged,
                   io::Disk& disk) {
  disk.WriteAtomic(staged.InJob(m.recipe_snapshot_path), c.bytes);
  disk.WriteAtomic(staged.ManifestPath(), m.ToJson());
  if (c.compiled) {
    disk.WriteAtomic(staged.dir() + "/dag_execution_plan.json",
                     ExecutionPlan(c, m.job_id).dump(2) + "\n");
  }
  for (const std::string& dir : {staged.ShardsDir(), staged.StateDir(), staged.dir()}) {
    disk.SyncDir(dir);
  }
}

// The job's shards mode: reference shards need every input uncompressed
// (else the shards are copied) and a recipe without partition:/checkpoint:
// sections, whose partitions are cut from shard files.
ShardsMode ShardsModeFor(const PrepareRequest& request, const CheckedRecipe& c,
                         const std::vector<InputCandidate>& inputs) {
  if (request.shards_mode != ShardsMode::kReference) return request.shards_mode;
  if (c.partitioning) {
    const YAML::Node p = c.recipe.root["partition"];
    const YAML::Node section = p && !p.IsNull() ? p : c.recipe.root["checkpoint"];
    throw Error(c.recipe.path, static_cast<uint64_t>(section.Mark().line + 1),
                "--shards reference cannot be combined with partition: or checkpoint: sections",
                "use --shards copy (the default) for a checkpointed job");
  }
  for (const InputCandidate& in : inputs) {
    if (io::IsCompressedInput(in.path)) return ShardsMode::kCopy;
  }
  return ShardsMode::kReference;
}

// One prepare: the checked recipe and its input, staged into a directory
// beside the job dir and published with one rename.
class Preparer {
 public:
  Preparer(const PrepareRequest& request, io::Disk& disk)
      : request_(request),
        disk_(disk),
        checked_(CheckRequestAndRecipe(request)),
        dataset_(recipe::ResolveDatasetPath(checked_.recipe, request.dataset_path)),
        inputs_(io::DiscoverInputs(dataset_.path, dataset_.display)),
        num_shards_(static_cast<uint64_t>(request.num_shards)),
        shards_mode_(ShardsModeFor(request, checked_, inputs_)),
        job_(request.job_dir) {}

  PrepareOutcome Run() {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(job_.dir(), ec))) return CheckExisting();
    // The job is built in a staging directory beside the job dir.
    const fs::path parent = fs::path(job_.dir()).parent_path();
    fs::create_directories(parent, ec);
    if (ec) throw Error(parent.string(), 0, "cannot create: " + ec.message());
    CheckJobFilesystem(parent.string(), disk_);
    io::StagingDir staging(
        job_.StagingPath(request_.staging_tag.empty() ? RandomHex(16) : request_.staging_tag));
    const JobPaths staged(staging.path());
    for (const std::string& dir : staged.SkeletonDirs()) {
      if (::mkdir(dir.c_str(), 0755) != 0) ThrowSystemError(dir, "cannot create");
    }
    Manifest m = Stage(staged);
    ThrowIfStopRequested();
    CrashPoint("prepare_staged");
    return Publish(staging, std::move(m));
  }

 private:
  // Compares the job directory that exists with this request.
  PrepareOutcome CheckExisting() const {
    return CheckExistingJob(job_, dataset_.path, checked_.sha256, num_shards_, shards_mode_,
                            request_.output_layout, inputs_);
  }

  // The shards, the manifest, the recipe snapshot and the plan, written into
  // the staged job.
  Manifest Stage(const JobPaths& staged) {
    const std::string& dataset_path = dataset_.path;
    std::error_code ec;
    const std::string media_root = fs::is_directory(dataset_path, ec)
                                       ? dataset_path
                                       : fs::path(dataset_path).parent_path().string();
    const recipe::Recipe& recipe = checked_.recipe;
    const NormalizeRules rules{{recipe.image_key, recipe.audio_key, recipe.video_key},
                               media_root,
                               checked_.safety.index_keys};
    const int threads = request_.threads > 0
                            ? request_.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    Manifest m;
    m.shards_mode = shards_mode_;
    m.output_layout = request_.output_layout;
    if (request_.shards_mode != shards_mode_) {
      m.warnings.push_back(
          "--shards reference: an input file is compressed, so the shards were copied into the "
          "job directory");
    }
    NormalizedInput normalized;
    if (Distributed(rules)) {
      normalized = CutDistributedShards(request_.distributed_scan, inputs_, rules, num_shards_,
                                        dataset_.display, staged, disk_, m);
    } else if (shards_mode_ == ShardsMode::kReference && rules.index_keys.empty()) {
      normalized =
          ScanInOnePass(inputs_, rules, threads, num_shards_, dataset_.display, staged, disk_, m);
    } else {
      normalized = WriteShards(inputs_, rules, threads, num_shards_, dataset_.display, staged, m);
    }
    CheckManualPartitions(checked_, m);
    m.job_id = fs::path(job_.dir()).filename().string();
    m.created_at = FormatUtcIso8601(NowNanos());
    m.dataset_path = dataset_path;
    m.media_root = media_root;
    m.media_keys = rules.media_keys;
    m.index_keys = checked_.safety.index_keys;
    m.total_rows = normalized.rows;
    m.total_size_bytes = normalized.bytes;
    m.normalized_sha256 = normalized.digest;
    m.num_shards = num_shards_;
    m.recipe_source_path = fs::absolute(request_.config_path).lexically_normal().string();
    m.recipe_sha256 = checked_.sha256;
    m.engine_version = version();
    m.engine_git_commit = git_commit();
    m.policy = request_.policy;
    m.warnings.insert(m.warnings.end(), checked_.safety.warnings.begin(),
                      checked_.safety.warnings.end());
    m.dedup_stages = checked_.dedup_stages;
    for (DedupStageEntry& stage : m.dedup_stages) {
      if (stage.key_ranges > 0) stage.key_ranges = DedupKeyRanges(m.total_size_bytes, m.num_shards);
    }
    WarnAboutCheckpointDir(checked_, job_.dir(), m);
    WriteJobFiles(checked_, m, staged, disk_);
    return m;
  }

  // Whether the input is scanned by request_.distributed_scan: lines that
  // get no index keys (their values depend on global rows, which the tasks
  // do not know), in uncompressed files (tasks read byte ranges); a copy
  // job's shards written by its tasks too.
  bool Distributed(const NormalizeRules& rules) const {
    const DistributedScan& d = request_.distributed_scan;
    if (!d.run || !rules.index_keys.empty()) return false;
    if (shards_mode_ == ShardsMode::kReference) return true;
    for (const InputCandidate& in : inputs_) {
      if (io::IsCompressedInput(in.path)) return false;
    }
    return static_cast<bool>(d.write);
  }

  // Renames the staged job into place, then writes its summary.
  PrepareOutcome Publish(io::StagingDir& staging, Manifest m) {
    const std::string& job_dir = job_.dir();
    std::error_code ec;
    try {
      disk_.Rename(staging.path(), job_dir);
    } catch (const Error&) {
      // Another prepare of the same job published first: compare with it.
      if (fs::exists(fs::symlink_status(job_dir, ec))) return CheckExisting();
      throw;
    }
    staging.MarkPublished();
    disk_.SyncDir(fs::path(job_dir).parent_path().string());
    // The job's summary says "prepared" until stop, merge or dlc finalize
    // rewrite it (SPEC-checkpoints §8). It is for people: a failure to write
    // it does not undo the published job.
    try {
      WriteJobSummary(JobDir::Open(job_dir, disk_),
                      SummaryUpdate{SummaryStatus::kPrepared, {}, false, ""});
    } catch (const Error&) {
    }
    return PrepareOutcome{false, job_dir, std::move(m)};
  }

  const PrepareRequest& request_;
  io::Disk& disk_;
  const CheckedRecipe checked_;
  const recipe::DatasetPath dataset_;
  const std::vector<InputCandidate> inputs_;
  const uint64_t num_shards_;
  const ShardsMode shards_mode_;
  const JobPaths job_;
};

}  // namespace

PrepareOutcome Prepare(const PrepareRequest& request, io::Disk& disk) {
  return Preparer(request, disk).Run();
}

}  // namespace djshard::store
