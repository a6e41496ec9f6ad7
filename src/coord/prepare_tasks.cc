#include "src/coord/prepare_tasks.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "djshard/common/error.h"
#include "djshard/io/json_fields.h"
#include "djshard/store/prepare_scan.h"

namespace djshard::coord {

using nlohmann::json;

TaskPool::Kind ScanKind(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return {"scan",
          [](const std::string& plan) {
            return store::ScanPlan::FromJson(plan, "scan-plan.json").tasks.size();
          },
          [threads](const std::string& text, size_t task, const std::string& dir,
                    const std::string& tag, const std::function<bool()>&) {
            const store::ScanPlan plan = store::ScanPlan::FromJson(text, dir);
            json j = store::RunScanTask(plan, task, threads, dir, tag).ToJson();
            j["display_path"] = plan.files[plan.tasks[task].file].display_path;
            return j;
          },
          [](const json& r) {
            const json error = r.value("error", json());
            return "scanned " + std::to_string(r.value("rows", uint64_t{0})) + " line(s) of " +
                   r.value("display_path", "?") +
                   (error.is_object() ? ", failed: " + error.value("message", "") : "");
          }};
}

TaskPool::Kind WriteKind() {
  return {"write",
          [](const std::string& plan) {
            return store::ShardWritePlan::FromJson(plan, "write-plan.json").tasks.size();
          },
          [](const std::string& text, size_t task, const std::string& dir, const std::string& tag,
             const std::function<bool()>& owned) {
            return store::RunShardWriteTask(store::ShardWritePlan::FromJson(text, dir), task, dir,
                                            tag, owned);
          },
          [](const json& r) {
            const json error = r.value("error", json());
            return "wrote " + std::to_string(r.value("shards", json::array()).size()) +
                   " shard file(s)" +
                   (error.is_object() ? ", failed: " + error.value("message", "") : "");
          }};
}

namespace {

// A scan task's published result as prepare takes it: its data file found in
// the tasks' directory, or the error that stopped it before it had a result.
store::ScanTaskResult ResultOf(const json& r, const std::string& tasks_dir) {
  if (r.contains("error") && !r.contains("rows")) {
    const Error e = io::ErrorFromJson(r.at("error"));
    store::ScanTaskResult failed;
    failed.task = r.value("task", uint64_t{0});
    failed.error_file = e.file();
    failed.error_message = e.message();
    failed.error_hint = e.hint();
    failed.error_code = e.code();
    return failed;
  }
  store::ScanTaskResult result = store::ScanTaskResult::FromJson(r);
  result.data_file = tasks_dir + "/" + result.data_file;
  return result;
}

}  // namespace

void DistributeScan(store::PrepareRequest& req, uint64_t task_bytes, TaskPool& scan,
                    TaskPool& write, io::Disk& fenced,
                    std::function<void(const std::string&, const std::string&)> say) {
  req.distributed_scan.task_bytes = task_bytes;
  req.distributed_scan.run = [&scan, &fenced, say](const store::ScanPlan& plan) {
    say("scan", "scanning the input in " + std::to_string(plan.tasks.size()) +
                    " task(s) that every instance claims");
    const std::string text = plan.ToJson();
    const std::string dir = scan.TasksDir(text);
    std::vector<store::ScanTaskResult> results;
    for (const json& r : scan.Lead(text, fenced)) results.push_back(ResultOf(r, dir));
    return results;
  };
  req.distributed_scan.write = [&write, &fenced, say](const store::ShardWritePlan& plan) {
    say("write", "writing the shard files in " + std::to_string(plan.tasks.size()) +
                     " task(s) that every instance claims");
    const std::string text = plan.ToJson();
    const std::string dir = write.TasksDir(text);
    std::vector<json> results = write.Lead(text, fenced);
    for (json& r : results) {
      if (!r.contains("shards")) continue;
      for (json& shard : r.at("shards")) {
        shard["file"] = dir + "/" + shard.at("file").get<std::string>();
      }
    }
    return results;
  };
  // The write tasks' check blocks beside their plans (removed with them).
  req.distributed_scan.blocks_root = write.dir();
}

}  // namespace djshard::coord
