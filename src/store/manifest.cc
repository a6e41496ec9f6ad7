#include "djshard/store/manifest.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/json_fields.h"

namespace djshard::store {

using nlohmann::json;

std::string ShardId(uint64_t index, uint64_t num_shards) {
  const int width = std::max(5, DecimalDigits(num_shards));
  return "part-" + ZeroPad(index, width) + "-of-" + ZeroPad(num_shards, width);
}

ShardCutter::ShardCutter(uint64_t total_rows, uint64_t total_bytes, uint64_t num_shards)
    : total_rows_(total_rows), total_bytes_(total_bytes), num_shards_(num_shards) {}

bool ShardCutter::Add(uint64_t row_bytes) {
  ++written_rows_;
  written_bytes_ += row_bytes;
  if (shard_ + 1 >= num_shards_) return false;
  using u128 = unsigned __int128;
  const bool enough_bytes = static_cast<u128>(written_bytes_) * num_shards_ >=
                            static_cast<u128>(total_bytes_) * (shard_ + 1);
  const bool rows_just_suffice = total_rows_ - written_rows_ == num_shards_ - shard_ - 1;
  if (enough_bytes || rows_just_suffice) {
    ++shard_;
    return true;
  }
  return false;
}

std::vector<uint64_t> CutShards(const std::vector<uint64_t>& row_bytes, uint64_t num_shards) {
  uint64_t total = 0;
  for (uint64_t b : row_bytes) total += b;
  ShardCutter cutter(row_bytes.size(), total, num_shards);
  std::vector<uint64_t> rows(num_shards, 0);
  for (uint64_t b : row_bytes) {
    const uint64_t shard = cutter.current_shard();
    ++rows[shard];
    cutter.Add(b);
  }
  return rows;
}

namespace {
// Whole seconds stay integers in the manifest, as older djshard versions wrote them.
json SecondsJson(double secs) {
  if (secs == static_cast<double>(static_cast<int64_t>(secs))) return static_cast<int64_t>(secs);
  return secs;
}
}  // namespace

std::string ShardEntry::Describe(const Manifest& m) const {
  if (ranges.empty()) return path;
  const ShardRange& r = ranges.front();
  const std::string& first = m.input_files.at(r.file).path;
  if (ranges.size() == 1) {
    return "lines " + std::to_string(r.first_line) + "-" +
           std::to_string(r.first_line + r.rows - 1) + " of " + first;
  }
  return "lines from " + std::to_string(r.first_line) + " of " + first + " and " +
         std::to_string(ranges.size() - 1) + " more input file(s)";
}

std::string Manifest::ToJson() const {
  json j;
  j["schema_version"] = schema_version;
  j["job_id"] = job_id;
  j["created_at"] = created_at;
  j["dataset_path"] = dataset_path;
  j["media_root"] = media_root;
  j["media_keys"] = media_keys;
  j["index_keys"] = index_keys;
  j["input_files"] = json::array();
  for (const InputFile& f : input_files) {
    json file = {{"path", f.path},
                 {"relative_path", f.relative_path},
                 {"size_bytes", f.size_bytes},
                 {"mtime_ns", f.mtime_ns},
                 {"rows", f.rows},
                 {"sha256", f.sha256}};
    if (!f.normalization.empty()) file["normalization"] = f.normalization;
    if (!f.tree_sha256.empty()) file["tree_sha256"] = f.tree_sha256;
    if (check_block_bytes > 0) file["check_first_block"] = f.check_first_block;
    j["input_files"].push_back(std::move(file));
  }
  j["total_rows"] = total_rows;
  j["total_size_bytes"] = total_size_bytes;
  j["normalized_sha256"] = normalized_sha256;
  if (scan_task_bytes > 0) {
    j["prepare_scan"] = {{"task_bytes", scan_task_bytes},
                         {"normalized_tree_sha256", normalized_tree_sha256}};
  }
  if (check_block_bytes > 0) {
    j["input_check"] = {{"block_bytes", check_block_bytes},
                        {"path", kInputBlocksFile},
                        {"bytes", check_blocks_bytes}};
    check_blocks_checksum.ToJson(j["input_check"]);
  }
  j["num_shards"] = num_shards;
  j["shards_mode"] = shards_mode == ShardsMode::kReference ? "reference" : "copy";
  j["output_layout"] = output_layout == OutputLayout::kParts ? "parts" : "file";
  j["shards"] = json::array();
  for (const ShardEntry& s : shards) {
    json shard = {{"id", s.id},
                  {"index", s.index},
                  {"path", s.path},
                  {"rows", s.rows},
                  {"size_bytes", s.size_bytes}};
    if (!s.checksum.empty()) s.checksum.ToJson(shard);
    if (shards_mode == ShardsMode::kReference) {
      shard["ranges"] = json::array();
      for (const ShardRange& r : s.ranges) {
        json range = {{"file", r.file}, {"offset", r.offset},       {"length", r.length},
                      {"rows", r.rows}, {"first_row", r.first_row}, {"first_line", r.first_line}};
        if (!r.checksum.empty()) r.checksum.ToJson(range);
        shard["ranges"].push_back(std::move(range));
      }
    }
    j["shards"].push_back(std::move(shard));
  }
  j["recipe"] = {{"source_path", recipe_source_path},
                 {"snapshot_path", recipe_snapshot_path},
                 {"sha256", recipe_sha256}};
  j["engine"] = {
      {"name", engine_name}, {"version", engine_version}, {"git_commit", engine_git_commit}};
  j["policy"] = {{"lease_secs", SecondsJson(policy.lease_secs)},
                 {"heartbeat_secs", SecondsJson(policy.heartbeat_secs)},
                 {"max_retries", policy.max_retries},
                 {"poll_interval_secs", SecondsJson(policy.poll_interval_secs)},
                 {"retry_backoff_secs", SecondsJson(policy.retry_backoff_secs)}};
  j["warnings"] = warnings;
  if (!dedup_stages.empty()) {
    j["dedup_stages"] = json::array();
    for (const DedupStageEntry& d : dedup_stages) {
      j["dedup_stages"].push_back(
          {{"op", d.op}, {"op_index", d.op_index}, {"key_ranges", d.key_ranges}});
    }
  }
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

// j[key] (default: the first of `known`), refused unless it is one of them.
std::string KnownValue(const json& j, const char* key, std::vector<std::string> known,
                       const std::string& path) {
  const std::string value = j.value(key, known.front());
  if (std::find(known.begin(), known.end(), value) == known.end()) {
    throw Error(path, 0, std::string("manifest ") + key + " '" + value + "' is not known",
                "prepare the job again with this djshard");
  }
  return value;
}

// One entry of "shards", with a reference shard's ranges.
ShardEntry ParseShard(const json& s, const Manifest& m, const std::string& path) {
  ShardEntry shard{s.at("id").get<std::string>(),
                   io::IntegerField<uint64_t>(s, "index"),
                   s.at("path").get<std::string>(),
                   io::IntegerField<uint64_t>(s, "rows"),
                   io::IntegerField<uint64_t>(s, "size_bytes"),
                   io::Checksum::FromJsonOrEmpty(s),
                   {}};
  // Only a job whose input is checked by blocks has shards without a checksum.
  if (shard.checksum.empty() && m.check_block_bytes == 0) io::Checksum::FromJson(s);
  if (m.shards_mode != ShardsMode::kReference) return shard;
  const std::string edited = "the job directory was edited; prepare the job again";
  uint64_t rows = 0;
  for (const json& r : s.at("ranges")) {
    ShardRange range{io::IntegerField<uint64_t>(r, "file"),
                     io::IntegerField<uint64_t>(r, "offset"),
                     io::IntegerField<uint64_t>(r, "length"),
                     io::IntegerField<uint64_t>(r, "rows"),
                     io::IntegerField<uint64_t>(r, "first_row"),
                     io::IntegerField<uint64_t>(r, "first_line"),
                     io::Checksum::FromJsonOrEmpty(r)};
    if (range.checksum.empty() && m.check_block_bytes == 0) io::Checksum::FromJson(r);
    if (range.file >= m.input_files.size() ||
        range.offset + range.length > m.input_files[range.file].size_bytes) {
      throw Error(path, 0,
                  "manifest shard " + shard.id + " names bytes of input file " +
                      std::to_string(range.file) + " that the manifest does not list",
                  edited);
    }
    rows += range.rows;
    shard.ranges.push_back(std::move(range));
  }
  if (shard.ranges.empty() || rows != shard.rows) {
    throw Error(path, 0,
                "manifest shard " + shard.id + " has ranges of " + std::to_string(rows) +
                    " rows, not " + std::to_string(shard.rows),
                edited);
  }
  return shard;
}

}  // namespace

Manifest Manifest::FromJson(const std::string& text, const std::string& path) {
  Manifest m;
  try {
    const json j = json::parse(text);
    m.schema_version = io::IntegerField<int>(j, "schema_version");
    if (m.schema_version < kOldestManifestSchemaVersion ||
        m.schema_version > kReferenceManifestSchemaVersion) {
      throw Error(path, 0,
                  "manifest schema_version " + std::to_string(m.schema_version) +
                      " is not supported (this djshard reads " +
                      std::to_string(kOldestManifestSchemaVersion) + " to " +
                      std::to_string(kReferenceManifestSchemaVersion) + ")",
                  "prepare the job again with this djshard");
    }
    m.job_id = j.at("job_id").get<std::string>();
    m.created_at = j.at("created_at").get<std::string>();
    m.dataset_path = j.at("dataset_path").get<std::string>();
    m.media_root = j.at("media_root").get<std::string>();
    m.media_keys = j.at("media_keys").get<std::vector<std::string>>();
    m.index_keys = j.at("index_keys").get<std::vector<std::string>>();
    for (const json& f : j.at("input_files")) {
      m.input_files.push_back(
          {f.at("path").get<std::string>(), f.at("relative_path").get<std::string>(),
           io::IntegerField<uint64_t>(f, "size_bytes"), io::IntegerField<int64_t>(f, "mtime_ns"),
           io::IntegerField<uint64_t>(f, "rows"), f.at("sha256").get<std::string>(),
           f.value("normalization", std::string()), f.value("tree_sha256", std::string()),
           f.value("check_first_block", uint64_t{0})});
    }
    m.total_rows = io::IntegerField<uint64_t>(j, "total_rows");
    m.total_size_bytes = io::IntegerField<uint64_t>(j, "total_size_bytes");
    m.normalized_sha256 = j.at("normalized_sha256").get<std::string>();
    if (j.contains("prepare_scan")) {
      const json& scan = j.at("prepare_scan");
      m.scan_task_bytes = io::IntegerField<uint64_t>(scan, "task_bytes");
      m.normalized_tree_sha256 = scan.at("normalized_tree_sha256").get<std::string>();
    }
    if (j.contains("input_check")) {
      const json& check = j.at("input_check");
      m.check_block_bytes = io::IntegerField<uint64_t>(check, "block_bytes");
      m.check_blocks_bytes = io::IntegerField<uint64_t>(check, "bytes");
      m.check_blocks_checksum = io::Checksum::FromJson(check);
      if (m.check_block_bytes == 0 || check.at("path").get<std::string>() != kInputBlocksFile) {
        throw Error(path, 0, "manifest input_check is not valid",
                    "the job directory was edited; prepare the job again");
      }
    }
    m.num_shards = io::IntegerField<uint64_t>(j, "num_shards");
    m.shards_mode = KnownValue(j, "shards_mode", {"copy", "reference"}, path) == "reference"
                        ? ShardsMode::kReference
                        : ShardsMode::kCopy;
    m.output_layout = KnownValue(j, "output_layout", {"file", "parts"}, path) == "parts"
                          ? OutputLayout::kParts
                          : OutputLayout::kFile;
    if (m.shards_mode == ShardsMode::kReference &&
        m.schema_version != kReferenceManifestSchemaVersion) {
      throw Error(path, 0,
                  "manifest of reference shards has schema_version " +
                      std::to_string(m.schema_version) + ", not 4",
                  "the job directory was edited; prepare the job again");
    }
    for (const json& s : j.at("shards")) m.shards.push_back(ParseShard(s, m, path));
    const json& r = j.at("recipe");
    m.recipe_source_path = r.at("source_path").get<std::string>();
    m.recipe_snapshot_path = r.at("snapshot_path").get<std::string>();
    m.recipe_sha256 = r.at("sha256").get<std::string>();
    const json& e = j.at("engine");
    m.engine_name = e.at("name").get<std::string>();
    m.engine_version = e.at("version").get<std::string>();
    m.engine_git_commit = e.at("git_commit").get<std::string>();
    const json& p = j.at("policy");
    m.policy.lease_secs = p.at("lease_secs").get<double>();
    m.policy.heartbeat_secs = p.at("heartbeat_secs").get<double>();
    m.policy.max_retries = io::IntegerField<int64_t>(p, "max_retries");
    m.policy.poll_interval_secs = p.at("poll_interval_secs").get<double>();
    // Manifests written before retries backed off have no such key.
    m.policy.retry_backoff_secs = p.value("retry_backoff_secs", Policy{}.retry_backoff_secs);
    m.warnings = j.at("warnings").get<std::vector<std::string>>();
    if (j.contains("dedup_stages")) {
      for (const json& d : j.at("dedup_stages")) {
        m.dedup_stages.push_back({d.at("op").get<std::string>(),
                                  io::IntegerField<uint64_t>(d, "op_index"),
                                  io::IntegerField<uint64_t>(d, "key_ranges")});
      }
    }
  } catch (const json::exception& e) {
    throw Error(path, 0, std::string("manifest is not valid: ") + e.what(),
                "the job directory was not written by djshard prepare, or was edited");
  }
  return m;
}

}  // namespace djshard::store
