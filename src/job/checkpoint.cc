#include "djshard/job/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "djshard/common/error.h"
#include "djshard/exec/plan.h"
#include "djshard/io/checksum.h"
#include "djshard/io/sha256.h"

namespace djshard::job {

namespace {

int LineOf(const YAML::Node& node) { return node.Mark().line >= 0 ? node.Mark().line + 1 : 0; }

// Reads one section's keys, refusing any it does not know.
class Section {
 public:
  Section(const YAML::Node& root, const char* name, const std::string& path)
      : node_(root[name]), name_(name), path_(path) {
    if (node_ && !node_.IsNull() && !node_.IsMap()) {
      throw Error(path_, LineOf(node_), std::string("'") + name + "' must be a mapping");
    }
  }
  void Known(std::set<std::string> keys) const {
    if (!node_ || !node_.IsMap()) return;
    for (const auto& kv : node_) {
      const std::string key = kv.first.as<std::string>();
      if (keys.count(key) == 0) {
        std::string list;
        for (const std::string& k : keys) list += (list.empty() ? "" : ", ") + k;
        throw Error(path_, LineOf(kv.first), "unknown key '" + name_ + "." + key + "'",
                    "known keys: " + list);
      }
    }
  }
  // Whether `key` is present, even as null.
  bool Has(const char* key) const {
    if (!node_ || !node_.IsMap()) return false;
    for (const auto& kv : node_) {
      if (kv.first.as<std::string>() == key) return true;
    }
    return false;
  }
  // The value of `key`; nullopt when absent or null.
  std::optional<YAML::Node> Get(const char* key) const {
    if (!node_ || !node_.IsMap()) return std::nullopt;
    for (const auto& kv : node_) {
      if (kv.first.as<std::string>() == key && !kv.second.IsNull()) return kv.second;
    }
    return std::nullopt;
  }
  std::optional<std::string> String(const char* key) const {
    const std::optional<YAML::Node> v = Get(key);
    if (!v) return std::nullopt;
    if (!v->IsScalar()) Fail(*v, key, "must be a string");
    return v->as<std::string>();
  }
  std::optional<uint64_t> Positive(const char* key) const {
    const std::optional<YAML::Node> v = Get(key);
    if (!v) return std::nullopt;
    int64_t n = 0;
    try {
      n = v->as<int64_t>();
    } catch (const YAML::Exception&) {
      Fail(*v, key, "must be a positive integer");
    }
    if (n < 1) Fail(*v, key, "must be a positive integer");
    return static_cast<uint64_t>(n);
  }
  std::optional<bool> Bool(const char* key) const {
    const std::optional<YAML::Node> v = Get(key);
    if (!v) return std::nullopt;
    try {
      return v->as<bool>();
    } catch (const YAML::Exception&) {
      Fail(*v, key, "must be true or false");
    }
  }
  [[noreturn]] void Fail(const YAML::Node& v, const char* key, const std::string& what,
                         const std::string& hint = {}) const {
    const std::string got = v.IsScalar() ? " (got '" + v.Scalar() + "')" : "";
    throw Error(path_, LineOf(v), "'" + name_ + "." + key + "' " + what + got, hint);
  }

 private:
  YAML::Node node_;
  std::string name_;
  std::string path_;
};

// The preflight keys of partition: (SPEC-checkpoints §10).
constexpr const char* kPreflightKeys[] = {
    "gpu_preflight_enabled",     "max_gpu_workers_per_device",       "max_concurrent_gpu_probes",
    "gpu_probe_timeout_seconds", "gpu_probe_warmup_batches",         "gpu_probe_steady_batches",
    "gpu_probe_sample_offset",   "gpu_probe_sample_shuffle",         "gpu_probe_sample_seed",
    "execution_group_size",      "max_initialization_overhead_ratio"};

// A whole number >= `min`, nullopt when absent or null.
std::optional<uint64_t> Count(const Section& sec, const char* key, int64_t min) {
  const std::optional<YAML::Node> v = sec.Get(key);
  if (!v) return std::nullopt;
  int64_t n = -1;
  try {
    n = v->as<int64_t>();
  } catch (const YAML::Exception&) {
    n = -1;
  }
  if (n < min) {
    sec.Fail(*v, key,
             min == 0 ? "must be a whole number, 0 or more" : "must be a positive integer");
  }
  return static_cast<uint64_t>(n);
}

// A number > 0 (or >= 0 with `zero_ok`), nullopt when absent or null.
std::optional<double> Number(const Section& sec, const char* key, bool zero_ok) {
  const std::optional<YAML::Node> v = sec.Get(key);
  if (!v) return std::nullopt;
  double x = -1;
  try {
    x = v->as<double>();
  } catch (const YAML::Exception&) {
    x = -1;
  }
  if (!std::isfinite(x) || x < 0 || (x == 0 && !zero_ok)) {
    sec.Fail(*v, key, zero_ok ? "must be a number, 0 or more" : "must be a positive number");
  }
  return x;
}

bool IsAuto(const std::optional<YAML::Node>& v) {
  return v && v->IsScalar() && v->Scalar() == "auto";
}

void ParsePreflight(const Section& sec, preflight::PreflightSettings* p) {
  if (auto b = sec.Bool("gpu_preflight_enabled")) p->enabled = *b;
  if (auto n = Count(sec, "max_gpu_workers_per_device", 1)) p->max_gpu_workers_per_device = *n;
  if (!IsAuto(sec.Get("max_concurrent_gpu_probes"))) {
    if (auto n = Count(sec, "max_concurrent_gpu_probes", 1)) p->max_concurrent_probes = *n;
  }
  p->timeout_seconds = Number(sec, "gpu_probe_timeout_seconds", false);
  if (auto n = Count(sec, "gpu_probe_warmup_batches", 0)) p->warmup_batches = *n;
  if (auto n = Count(sec, "gpu_probe_steady_batches", 1)) p->steady_batches = *n;
  if (auto n = Count(sec, "gpu_probe_sample_offset", 0)) p->sample_offset = *n;
  if (auto b = sec.Bool("gpu_probe_sample_shuffle")) p->sample_shuffle = *b;
  // Present and null means "no seed"; absent means Data-Juicer's 42.
  if (sec.Has("gpu_probe_sample_seed")) {
    const std::optional<YAML::Node> v = sec.Get("gpu_probe_sample_seed");
    const bool null_text = v && v->IsScalar() && (v->Scalar() == "null" || v->Scalar() == "~");
    p->sample_seed = null_text ? std::nullopt : Count(sec, "gpu_probe_sample_seed", 0);
  }
  if (!IsAuto(sec.Get("execution_group_size"))) {
    p->execution_group_size = Count(sec, "execution_group_size", 1);
  }
  if (auto x = Number(sec, "max_initialization_overhead_ratio", false)) {
    if (*x > 1) {
      sec.Fail(*sec.Get("max_initialization_overhead_ratio"), "max_initialization_overhead_ratio",
               "must be a number in (0, 1]");
    }
    p->max_initialization_overhead_ratio = *x;
  }
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = s.find(',', start);
    const std::string part = s.substr(start, comma - start);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

void CollectDiffs(const nlohmann::json& a, const nlohmann::json& b, const std::string& prefix,
                  std::vector<std::string>* out) {
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
    for (const std::string& k : keys) {
      const std::string path = prefix.empty() ? k : prefix + "." + k;
      if (!a.contains(k) || !b.contains(k)) {
        out->push_back(path);
      } else {
        CollectDiffs(a[k], b[k], path, out);
      }
    }
    return;
  }
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i) {
      CollectDiffs(a[i], b[i], prefix + "[" + std::to_string(i) + "]", out);
    }
    return;
  }
  if (a != b) out->push_back(prefix);
}

}  // namespace

const char* TapStrategyName(TapStrategy s) {
  switch (s) {
    case TapStrategy::kEveryNOps:
      return "every_n_ops";
    case TapStrategy::kEveryOp:
      return "every_op";
    case TapStrategy::kManual:
      return "manual";
    case TapStrategy::kDisabled:
      return "disabled";
  }
  return "disabled";
}

YAML::Node ApplyOverrides(const YAML::Node& root, const std::vector<ConfigOverride>& overrides) {
  // Without overrides the document itself: its marks name recipe lines in errors.
  if (overrides.empty()) return root;
  YAML::Node copy = YAML::Clone(root);
  for (const auto& [key, value] : overrides) {
    const size_t dot = key.find('.');
    const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
    if (!copy[section] || !copy[section].IsMap()) {
      copy[section] = YAML::Node(YAML::NodeType::Map);
    }
    if (key == "checkpoint.op_names") {
      YAML::Node list(YAML::NodeType::Sequence);
      for (const std::string& n : SplitCommas(value)) list.push_back(n);
      copy[section][name] = list;
    } else {
      copy[section][name] = value;
    }
    // The command line beats the recipe's Data-Juicer alias.
    if (key == "checkpoint.dir") copy.remove("checkpoint_dir");
  }
  return copy;
}

namespace {

// partition.max_concurrent_partitions: auto (unset) or 1 to 64.
void ParseMaxConcurrentPartitions(const Section& partition, JobSettings* s) {
  const std::optional<YAML::Node> v = partition.Get("max_concurrent_partitions");
  if (!v || (v->IsScalar() && v->Scalar() == "auto")) return;
  int64_t n = 0;
  try {
    n = v->as<int64_t>();
  } catch (const YAML::Exception&) {
    n = 0;
  }
  if (n < 1 || n > 64) {
    partition.Fail(*v, "max_concurrent_partitions", "must be auto or a number from 1 to 64");
  }
  s->max_concurrent_partitions = static_cast<uint64_t>(n);
}

// The `partition` section: how the input is cut, and the preflight keys.
void ParsePartitionSection(const YAML::Node& root, const std::string& path, JobSettings* s) {
  const Section partition(root, "partition", path);
  std::set<std::string> partition_keys = {"mode", "num_of_partitions", "target_size_mb",
                                          "size", "max_size_mb",       "max_concurrent_partitions"};
  for (const char* k : kPreflightKeys) partition_keys.insert(k);
  partition.Known(partition_keys);
  if (auto mode = partition.String("mode")) {
    if (*mode == "auto") {
      s->mode = PartitionMode::kAuto;
    } else if (*mode == "manual") {
      s->mode = PartitionMode::kManual;
    } else {
      partition.Fail(*partition.Get("mode"), "mode", "must be auto or manual");
    }
  }
  if (auto n = partition.Positive("num_of_partitions")) s->num_of_partitions = *n;
  if (auto n = partition.Positive("target_size_mb")) {
    if (*n != 128 && *n != 256 && *n != 512 && *n != 1024) {
      partition.Fail(*partition.Get("target_size_mb"), "target_size_mb",
                     "must be 128, 256, 512 or 1024");
    }
    s->target_size_mb = *n;
  }
  s->size = partition.Positive("size");
  if (auto n = partition.Positive("max_size_mb")) s->max_size_mb = *n;
  ParseMaxConcurrentPartitions(partition, s);
  ParsePreflight(partition, &s->preflight);
}

// checkpoint.strategy and the operators it taps after (n_ops, op_names).
void ParseTapStrategy(const Section& checkpoint, JobSettings* s) {
  if (auto st = checkpoint.String("strategy")) {
    if (*st == "every_n_ops") {
      s->strategy = TapStrategy::kEveryNOps;
    } else if (*st == "every_op") {
      s->strategy = TapStrategy::kEveryOp;
    } else if (*st == "manual") {
      s->strategy = TapStrategy::kManual;
    } else if (*st == "disabled") {
      s->strategy = TapStrategy::kDisabled;
    } else {
      checkpoint.Fail(*checkpoint.Get("strategy"), "strategy",
                      "must be every_n_ops, every_op, manual or disabled");
    }
  }
  if (auto n = checkpoint.Positive("n_ops")) s->n_ops = *n;
  if (const std::optional<YAML::Node> got = checkpoint.Get("op_names")) {
    const YAML::Node names = *got;
    if (names.IsScalar()) {
      s->op_names = SplitCommas(names.as<std::string>());
    } else if (names.IsSequence()) {
      for (const auto& n : names) {
        if (!n.IsScalar()) checkpoint.Fail(names, "op_names", "must be a list of operator names");
        s->op_names.push_back(n.as<std::string>());
      }
    } else {
      checkpoint.Fail(names, "op_names", "must be a list of operator names");
    }
  }
}

// checkpoint.dir, or the recipe's top-level Data-Juicer alias checkpoint_dir.
void ParseCheckpointDir(const YAML::Node& root, const std::string& path, const Section& checkpoint,
                        JobSettings* s) {
  s->checkpoint_dir = checkpoint.String("dir");
  if (const YAML::Node alias = root["checkpoint_dir"]; alias && !alias.IsNull()) {
    if (!alias.IsScalar() || alias.as<std::string>().empty()) {
      throw Error(path, LineOf(alias), "'checkpoint_dir' must be a directory path");
    }
    if (s->checkpoint_dir && *s->checkpoint_dir != alias.as<std::string>()) {
      throw Error(path, LineOf(alias),
                  "checkpoint_dir and checkpoint.dir name different directories",
                  "keep one of them");
    }
    s->checkpoint_dir = alias.as<std::string>();
  }
  if (s->checkpoint_dir && s->checkpoint_dir->empty()) {
    checkpoint.Fail(*checkpoint.Get("dir"), "dir", "must be a directory path");
  }
}

// The `checkpoint` section: whether, where and how partitions are tapped.
void ParseCheckpointSection(const YAML::Node& root, const std::string& path, JobSettings* s) {
  const Section checkpoint(root, "checkpoint", path);
  checkpoint.Known({"enabled", "strategy", "n_ops", "op_names", "compression", "keep", "dir",
                    "keep_after_done"});
  if (auto b = checkpoint.Bool("enabled")) s->checkpoint_enabled = *b;
  ParseTapStrategy(checkpoint, s);
  if (auto c = checkpoint.String("compression")) {
    if (*c != "zstd" && *c != "none") {
      checkpoint.Fail(*checkpoint.Get("compression"), "compression", "must be zstd or none");
    }
    s->compress = *c == "zstd";
  }
  if (auto k = checkpoint.String("keep")) {
    if (*k != "latest" && *k != "all") {
      checkpoint.Fail(*checkpoint.Get("keep"), "keep", "must be latest or all");
    }
    s->keep_all = *k == "all";
  }
  if (auto b = checkpoint.Bool("keep_after_done")) s->keep_after_done = *b;
  ParseCheckpointDir(root, path, checkpoint, s);
}

}  // namespace

JobSettings ParseJobSettings(const YAML::Node& root, const std::string& path) {
  JobSettings s;
  ParsePartitionSection(root, path, &s);
  ParseCheckpointSection(root, path, &s);

  const Section events(root, "event_logging", path);
  events.Known({"enabled"});
  if (auto b = events.Bool("enabled")) s.event_logging = *b;

  for (const char* key : {"job_id", "work_dir"}) {
    const YAML::Node v = root[key];
    if (!v || v.IsNull()) continue;
    if (!v.IsScalar()) throw Error(path, LineOf(v), std::string("'") + key + "' must be a string");
    (std::string(key) == "job_id" ? s.job_id : s.work_dir) = v.as<std::string>();
  }
  return s;
}

std::vector<size_t> TapPositions(const JobSettings& s, const recipe::Recipe& recipe) {
  std::vector<size_t> taps;
  const size_t n = recipe.process.size();
  if (!s.checkpointing() || n == 0) return taps;
  switch (s.strategy) {
    case TapStrategy::kEveryOp:
      for (size_t i = 0; i < n; ++i) taps.push_back(i);
      break;
    case TapStrategy::kEveryNOps:
      for (size_t i = 0; i < n; ++i) {
        if ((i + 1) % s.n_ops == 0) taps.push_back(i);
      }
      break;
    case TapStrategy::kManual:
      for (const std::string& name : s.op_names) {
        bool found = false;
        for (size_t i = 0; i < n; ++i) {
          if (recipe.process[i].name != name) continue;
          found = true;
          taps.push_back(i);
        }
        if (!found) {
          throw Error(recipe.path, 0, "checkpoint.op_names names '" + name + "', not in process",
                      "name operators of the recipe's process list");
        }
      }
      break;
    case TapStrategy::kDisabled:
      break;
  }
  taps.push_back(n - 1);
  // Lineage regions carry children, not records: no tap inside one.
  std::erase_if(taps, [&](size_t i) { return exec::InsideLineageRegion(recipe, i); });
  std::sort(taps.begin(), taps.end());
  taps.erase(std::unique(taps.begin(), taps.end()), taps.end());
  return taps;
}

nlohmann::json EffectiveConfig(const YAML::Node& root, const std::string& dataset_path,
                               const std::string& export_path) {
  nlohmann::json j = recipe::CanonicalJson(root);
  if (!j.is_object()) j = nlohmann::json::object();
  for (const char* key : {"np", "work_dir", "job_id", "event_logging"}) j.erase(key);
  // How many partitions run at once never changes the output.
  if (j.contains("partition") && j["partition"].is_object()) {
    j["partition"].erase("max_concurrent_partitions");
    // Preflight only measures and places replicas.
    for (const char* k : kPreflightKeys) j["partition"].erase(k);
    if (j["partition"].empty()) j.erase("partition");
  }
  if (j.contains("checkpoint_dir")) {
    if (!j["checkpoint"].is_object()) j["checkpoint"] = nlohmann::json::object();
    j["checkpoint"]["dir"] = j["checkpoint_dir"];
    j.erase("checkpoint_dir");
  }
  j["dataset_path"] = dataset_path;
  j["export_path"] = export_path;
  return j;
}

std::vector<std::string> DifferingKeys(const nlohmann::json& a, const nlohmann::json& b) {
  std::vector<std::string> out;
  CollectDiffs(a, b, "", &out);
  return out;
}

std::string OpsPrefixSha256(const YAML::Node& root, size_t op_idx) {
  nlohmann::json ops = nlohmann::json::array();
  const YAML::Node process = root["process"];
  for (size_t i = 0; i <= op_idx && i < process.size(); ++i) {
    ops.push_back(recipe::CanonicalJson(process[i]));
  }
  return io::Sha256Hex(ops.dump());
}

void AddCheckpointChecksum(nlohmann::json& fields, const nlohmann::json& record) {
  const io::Checksum sum = io::Checksum::FromJsonOrEmpty(record);
  if (!sum.empty()) sum.ToJson(fields, "checkpoint_");
}

}  // namespace djshard::job
