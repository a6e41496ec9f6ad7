#include "djshard/store/records.h"

#include <nlohmann/json.hpp>

#include "djshard/common/error.h"
#include "djshard/io/json_fields.h"

namespace djshard::store {

using nlohmann::json;

namespace {

constexpr const char* kStatusNames[] = {"running", "done",        "failed",    "stale",
                                        "lost",    "interrupted", "superseded"};

// Parses a record's text; errors name the file and say which record it is.
json ParseRecord(const std::string& text, const std::string& path, const char* what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(path, 0, std::string(what) + " is not valid JSON: " + e.what(),
                "the file was cut short or edited");
  }
  if (!j.is_object()) {
    throw Error(path, 0, std::string(what) + " is not a JSON object", "the file was edited");
  }
  int version = kRecordSchemaVersion;
  try {
    version = io::IntegerField<int>(j, "schema_version", kRecordSchemaVersion);
  } catch (const json::exception& e) {
    throw Error(path, 0, std::string(what) + " is not valid: " + e.what(), "the file was edited");
  }
  if (version > kSourcedDoneRecordSchemaVersion) {
    throw Error(path, 0,
                std::string(what) + " has schema_version " + std::to_string(version) +
                    ", newer than this djshard's " +
                    std::to_string(kSourcedDoneRecordSchemaVersion),
                "use the djshard version that wrote the job");
  }
  return j;
}

// Runs `read` on a parsed record, turning a missing or mistyped field into an
// Error naming the file.
template <typename Fn>
void ReadFields(const char* what, const std::string& path, Fn&& read) {
  try {
    read();
  } catch (const json::exception& e) {
    throw Error(path, 0, std::string(what) + " is not valid: " + e.what(),
                "the file was edited or written by another tool");
  }
}

json LockJson(const LockRecord& r) {
  return {{"schema_version", kRecordSchemaVersion},
          {"shard_id", r.shard_id},
          {"token", r.token},
          {"hostname", r.hostname},
          {"pid", r.pid},
          {"claimed_at", r.claimed_at},
          {"attempt_number", r.attempt_number},
          {"attempt_dir", r.attempt_dir}};
}

LockRecord LockFromJson(const json& j) {
  LockRecord r;
  r.shard_id = j.value("shard_id", "");
  r.token = j.value("token", "");
  r.hostname = j.value("hostname", "");
  r.pid = io::IntegerField<int64_t>(j, "pid", int64_t{0});
  r.claimed_at = j.value("claimed_at", "");
  r.attempt_number = io::IntegerField<int64_t>(j, "attempt_number", int64_t{0});
  r.attempt_dir = j.value("attempt_dir", "");
  return r;
}

}  // namespace

const char* AttemptStatusName(AttemptStatus status) {
  return kStatusNames[static_cast<int>(status)];
}

std::optional<AttemptStatus> ParseAttemptStatus(const std::string& name) {
  for (size_t i = 0; i < std::size(kStatusNames); ++i) {
    if (name == kStatusNames[i]) return static_cast<AttemptStatus>(i);
  }
  return std::nullopt;
}

std::string LockRecord::ToJson() const { return LockJson(*this).dump(); }

LockRecord LockRecord::FromJson(const std::string& text, const std::string& path) {
  const json j = ParseRecord(text, path, "lock");
  LockRecord r;
  ReadFields("lock", path, [&] { r = LockFromJson(j); });
  return r;
}

std::string AttemptRecord::ToJson() const {
  json j = LockJson(claim);
  j["status"] = AttemptStatusName(status);
  j["input_path"] = input_path;
  j["started_at"] = started_at;
  if (!finished_at.empty()) j["finished_at"] = finished_at;
  if (!error.empty()) j["error"] = error;
  if (!partitions.is_null()) j["partitions"] = partitions;
  if (!resumed_from.is_null()) j["resumed_from"] = resumed_from;
  if (!plan.is_null()) j["plan"] = plan;
  return j.dump(2) + "\n";
}

AttemptRecord AttemptRecord::FromJson(const std::string& text, const std::string& path) {
  const json j = ParseRecord(text, path, "attempt record");
  AttemptRecord r;
  ReadFields("attempt record", path, [&] {
    r.claim = LockFromJson(j);
    const std::string status = j.at("status").get<std::string>();
    const std::optional<AttemptStatus> parsed = ParseAttemptStatus(status);
    if (!parsed) {
      throw Error(path, 0, "attempt record has an unknown status '" + status + "'",
                  "the file was edited");
    }
    r.status = *parsed;
    r.input_path = j.value("input_path", "");
    r.started_at = j.value("started_at", "");
    r.finished_at = j.value("finished_at", "");
    r.error = j.value("error", "");
    if (j.contains("partitions")) r.partitions = j["partitions"];
    if (j.contains("resumed_from")) r.resumed_from = j["resumed_from"];
    if (j.contains("plan")) r.plan = j["plan"];
  });
  return r;
}

std::string DoneRecord::ToJson() const {
  json ops = json::array();
  for (const exec::OperatorCounters& c : op_stats) ops.push_back(exec::OperatorCountersJson(c));
  json j = {{"schema_version",
             output_source.empty() ? kRecordSchemaVersion : kSourcedDoneRecordSchemaVersion},
            {"shard_id", shard_id},
            {"status", "done"},
            {"completed_at", completed_at},
            {"hostname", hostname},
            {"pid", pid},
            {"token", token},
            {"attempt_number", attempt_number},
            {"output_path", output_path},
            {"rows", rows},
            {"size_bytes", size_bytes},
            {"engine",
             {{"name", "djshard"}, {"version", engine_version}, {"git_commit", engine_git_commit}}},
            {"op_stats", ops},
            {"seconds", seconds},
            {"model_devices", model_devices}};
  checksum.ToJson(j);
  if (!output_sha256.empty()) j["output_sha256"] = output_sha256;
  if (!output_source.empty()) {
    json ranges = json::array();
    for (const auto& [offset, bytes] : output_source.ranges) {
      ranges.push_back(offset);
      ranges.push_back(bytes);
    }
    j["output_source"] = {{"path", output_source.path}, {"ranges", ranges}};
  }
  if (!region_stats.empty()) j["regions"] = exec::RegionCountersJson(region_stats);
  if (!partitions.is_null()) j["partitions"] = partitions;
  if (!stage.is_null()) j["stage"] = stage;
  return j.dump(2) + "\n";
}

DoneRecord DoneRecord::FromJson(const std::string& text, const std::string& path) {
  const json j = ParseRecord(text, path, "done record");
  DoneRecord r;
  try {
    r.shard_id = j.at("shard_id").get<std::string>();
    r.hostname = j.value("hostname", "");
    r.pid = io::IntegerField<int64_t>(j, "pid", int64_t{0});
    r.token = j.value("token", "");
    r.attempt_number = io::IntegerField<int64_t>(j, "attempt_number", int64_t{0});
    r.output_path = j.at("output_path").get<std::string>();
    r.rows = io::IntegerField<uint64_t>(j, "rows");
    r.size_bytes = io::IntegerField<uint64_t>(j, "size_bytes");
    r.checksum = io::Checksum::FromJson(j);
    r.output_sha256 = j.value("output_sha256", "");
    if (j.contains("output_source")) {
      const json& source = j.at("output_source");
      r.output_source.path = source.at("path").get<std::string>();
      const json& ranges = source.at("ranges");
      if (r.output_source.path.empty() || !ranges.is_array() || ranges.size() % 2 != 0) {
        throw Error(path, 0, "done record's output_source is not valid",
                    "the record was edited; prepare the job again");
      }
      for (size_t i = 0; i < ranges.size(); i += 2) {
        r.output_source.ranges.emplace_back(ranges[i].get<uint64_t>(),
                                            ranges[i + 1].get<uint64_t>());
      }
    }
    r.completed_at = j.value("completed_at", "");
    if (j.contains("partitions") && j["partitions"].is_object()) r.partitions = j["partitions"];
    if (j.contains("stage") && j["stage"].is_object()) r.stage = j["stage"];
    if (j.contains("engine") && j["engine"].is_object()) {
      r.engine_version = j["engine"].value("version", "");
      r.engine_git_commit = j["engine"].value("git_commit", "");
    }
    if (j.contains("model_devices") && j["model_devices"].is_array()) {
      for (const json& d : j["model_devices"]) {
        if (d.is_string()) r.model_devices.push_back(d.get<std::string>());
      }
    }
    if (j.contains("op_stats") && j["op_stats"].is_array()) {
      for (const json& op : j["op_stats"]) {
        exec::OperatorCounters c;
        c.name = op.value("name", "");
        c.rows_in = io::IntegerField<uint64_t>(op, "rows_in", uint64_t{0});
        c.rows_out = io::IntegerField<uint64_t>(op, "rows_out", uint64_t{0});
        c.errors = io::IntegerField<uint64_t>(op, "errors", uint64_t{0});
        c.seconds = op.value("seconds", 0.0);
        if (op.contains("calls")) {
          c.batched = true;
          c.calls = io::IntegerField<uint64_t>(op, "calls", uint64_t{0});
          c.items = io::IntegerField<uint64_t>(op, "items", uint64_t{0});
        }
        r.op_stats.push_back(std::move(c));
      }
    }
    if (j.contains("regions") && j["regions"].is_object()) {
      for (const auto& item : j["regions"].items()) {
        exec::RegionCounters r_c;
        r_c.name = item.key();
        const nlohmann::json& c = item.value();
        const auto get = [&c](const char* key) {
          return io::IntegerField<uint64_t>(c, key, uint64_t{0});
        };
        r_c.parents_in = get("parents_in");
        r_c.parents_out = get("parents_out");
        r_c.parents_dropped = get("parents_dropped");
        r_c.parents_failed = get("parents_failed");
        r_c.children_expanded = get("children_expanded");
        r_c.children_present = get("children_present");
        r_c.children_dropped = get("children_dropped");
        r_c.children_failed = get("children_failed");
        r_c.children_suppressed = get("children_suppressed");
        r_c.late_discarded = get("late_discarded");
        r.region_stats.push_back(std::move(r_c));
      }
    }
    r.seconds = j.value("seconds", 0.0);
  } catch (const json::exception& e) {
    throw Error(path, 0, std::string("done record is not valid: ") + e.what(),
                "retry the shard to produce a new one");
  }
  return r;
}

std::string FailedRecord::ToJson() const {
  const json j = {{"schema_version", kRecordSchemaVersion},
                  {"shard_id", shard_id},
                  {"status", "failed"},
                  {"failures", failures},
                  {"last_error", last_error},
                  {"last_attempt", last_attempt},
                  {"last_log", last_log},
                  {"failed_at", failed_at},
                  {"hostname", hostname}};
  return j.dump(2) + "\n";
}

FailedRecord FailedRecord::FromJson(const std::string& text, const std::string& path) {
  const json j = ParseRecord(text, path, "failed record");
  FailedRecord r;
  ReadFields("failed record", path, [&] {
    r.shard_id = j.value("shard_id", "");
    r.failures = io::IntegerField<int64_t>(j, "failures", int64_t{0});
    r.last_error = j.value("last_error", "");
    r.last_attempt = j.value("last_attempt", "");
    r.last_log = j.value("last_log", "");
    r.failed_at = j.value("failed_at", "");
    r.hostname = j.value("hostname", "");
  });
  return r;
}

std::string MixedModelDevicesWarning(const ShardsByModelDevices& shards) {
  if (shards.size() < 2) return "";
  std::string kinds;
  for (const auto& [devices, ids] : shards) {
    std::string names;
    for (const std::string& d : devices) names += (names.empty() ? "" : " + ") + d;
    if (names.empty()) names = "no model device recorded";
    kinds += (kinds.empty() ? "" : "; ") + std::to_string(ids.size()) + " shard(s) on " + names +
             " (" + ids.front() + (ids.size() > 1 ? ", ..." : "") + ")";
  }
  return "the shards' model outputs were computed on " + std::to_string(shards.size()) +
         " kinds of device: " + kinds +
         ". Model scores may differ in the last bits between kinds, so this output may differ "
         "from a run on one kind; run every worker on one kind of node for byte-identical results";
}

}  // namespace djshard::store
