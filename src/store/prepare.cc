#include "djshard/store/prepare.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "djshard/common/build_info.h"
#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/common/text.h"
#include "djshard/exec/plan.h"
#include "djshard/exec/shard_safety.h"
#include "djshard/io/input.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "djshard/recipe/dataset.h"
#include "djshard/recipe/recipe.h"
#include "djshard/store/job.h"
#include "djshard/store/normalize.h"

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

// What one pass over the input saw.
struct PassTotals {
  uint64_t rows = 0;
  uint64_t bytes = 0;
  std::string digest;
};

// Reads every input line, normalizes it and hands it to `sink(line, size)`.
// Records per-file rows, sizes and raw sha256 into `files` when `record_files`.
template <typename Sink>
PassTotals ReadAll(const std::vector<InputCandidate>& inputs, RecordNormalizer& normalizer,
                   std::vector<InputFile>* files, Sink&& sink) {
  PassTotals totals;
  io::Sha256 digest;
  std::string normalized;
  for (size_t f = 0; f < inputs.size(); ++f) {
    const InputCandidate& in = inputs[f];
    const FileStat before = StatFile(in.path);
    io::Sha256 raw_hash;
    io::LineReader reader(io::OpenInput(in.path, &raw_hash), in.display_path);
    std::string_view line;
    uint64_t rows = 0;
    while (reader.Next(&line)) {
      normalizer.Normalize(line, totals.rows, in.display_path, reader.line_number(), &normalized);
      normalized.push_back('\n');
      digest.Update(normalized);
      sink(normalized);
      ++rows;
      ++totals.rows;
      totals.bytes += normalized.size();
      if ((rows & 4095) == 0) ThrowIfStopRequested();
    }
    const FileStat after = StatFile(in.path);
    if (after.size != before.size || after.mtime_ns != before.mtime_ns) {
      throw Error(in.display_path, 0, "input changed while it was being read",
                  "prepare again once the file is no longer being written");
    }
    if (files != nullptr) {
      files->push_back(
          {in.path, in.relative_path, after.size, after.mtime_ns, rows, raw_hash.HexDigest()});
    }
  }
  totals.digest = digest.HexDigest();
  return totals;
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
  // The plan a worker builds, with every argument checked, so that a job no
  // worker could run is refused here; only operators this build lacks are
  // left to the warnings above.
  exec::CompilePlan(recipe, ops::Registry::Global(), /*skip_unimplemented=*/true);

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
  RecordNormalizer normalizer(media_keys, media_root, safety.index_keys);

  // Pass 1: validate everything and measure, writing nothing.
  Manifest m;
  const PassTotals pass1 = ReadAll(inputs, normalizer, &m.input_files, [](const std::string&) {});
  if (pass1.rows == 0) {
    throw Error(dataset_display, 0, "no records found", "the input files are empty");
  }
  if (num_shards > pass1.rows) {
    throw Error("--num-shards " + std::to_string(num_shards) + " is more than the " +
                    std::to_string(pass1.rows) + " rows of the input",
                "every shard must hold at least one row");
  }

  // Pass 2: cut into shards inside a staging directory beside the job dir.
  const fs::path job_path(job_dir);
  fs::create_directories(job_path.parent_path(), ec);
  if (ec) throw Error(job_path.parent_path().string(), 0, "cannot create: " + ec.message());
  StagingDir staging(job.StagingPath(RandomHex(16)));
  const JobPaths staged(staging.path());
  for (const std::string& dir : staged.SkeletonDirs()) {
    if (::mkdir(dir.c_str(), 0755) != 0) ThrowSystemError(dir, "cannot create");
  }

  ShardCutter cutter(pass1.rows, pass1.bytes, num_shards);
  std::unique_ptr<io::AtomicFileWriter> writer;
  std::unique_ptr<io::Sha256> shard_hash;
  ShardEntry shard;
  auto open_shard = [&](uint64_t index) {
    shard = ShardEntry{ShardId(index, num_shards), index, "", 0, 0, ""};
    shard.path = JobPaths::ShardRelPath(shard.id);
    writer = std::make_unique<io::AtomicFileWriter>(staged.InJob(shard.path), true, disk);
    shard_hash = std::make_unique<io::Sha256>();
  };
  auto close_shard = [&]() {
    writer->Commit();
    shard.size_bytes = writer->bytes_written();
    shard.sha256 = shard_hash->HexDigest();
    m.shards.push_back(shard);
    writer.reset();
  };
  open_shard(0);
  const PassTotals pass2 = ReadAll(inputs, normalizer, nullptr, [&](const std::string& line) {
    writer->Append(line);
    shard_hash->Update(line);
    ++shard.rows;
    if (cutter.Add(line.size())) {
      close_shard();
      open_shard(cutter.current_shard());
    }
  });
  if (pass2.rows != pass1.rows || pass2.bytes != pass1.bytes || pass2.digest != pass1.digest ||
      m.shards.size() + 1 != num_shards) {
    throw Error(dataset_display, 0, "input changed between passes",
                "prepare again once the input is no longer being written");
  }
  close_shard();

  m.job_id = job_path.filename().string();
  m.created_at = FormatUtcIso8601(NowNanos());
  m.dataset_path = dataset_path;
  m.media_root = media_root;
  m.media_keys = media_keys;
  m.index_keys = safety.index_keys;
  m.total_rows = pass1.rows;
  m.total_size_bytes = pass1.bytes;
  m.normalized_sha256 = pass1.digest;
  m.num_shards = num_shards;
  m.recipe_source_path = fs::absolute(request.config_path).lexically_normal().string();
  m.recipe_sha256 = recipe_sha256;
  m.engine_version = version();
  m.engine_git_commit = git_commit();
  m.policy = request.policy;
  m.warnings = safety.warnings;

  disk.WriteAtomic(staged.InJob(m.recipe_snapshot_path), recipe_bytes);
  disk.WriteAtomic(staged.ManifestPath(), m.ToJson());
  for (const std::string& dir : {staged.ShardsDir(), staged.StateDir(), staged.dir()}) {
    disk.SyncDir(dir);
  }
  ThrowIfStopRequested();

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
  return PrepareOutcome{false, job_dir, std::move(m)};
}

}  // namespace djshard::store
