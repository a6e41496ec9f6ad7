#include "djshard/job/shard_run.h"

#include <algorithm>
#include <filesystem>
#include <future>
#include <map>

#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/job/job_files.h"
#include "djshard/job/partition_runner.h"
#include "djshard/preflight/preflight.h"

namespace djshard::job {

namespace {

// One attempt's run of a checkpointed shard: the worker's claim reaches it
// through ShardAttempt's callbacks.
class ShardRun {
 public:
  ShardRun(const ShardCheckpoints& c, const ShardAttempt& a) : c_(c), a_(a) {}

  // A checkpointed shard (SPEC-checkpoints §7): its partition set, the
  // commits earlier attempts left (verified, or rejected into rejected/),
  // then the partitions from where those commits stand.
  ShardRunResult Run(io::OutputStream& output, io::OutputStream& errors) {
    const std::string& dir = a_.checkpoints;
    const io::InputCandidate& input = a_.input;
    ShardPartitions sp;
    OpenPartitionSet(input, dir, sp);
    for (const std::string& path : sp.unreadable) {
      RejectCommit(dir, path, nlohmann::json(), "not a commit record");
    }
    std::vector<StartPoint> starts = ResumePoints(dir, sp);
    RemoveUnreferencedData(dir);
    RunPartitions(input, dir, sp.set, std::move(starts), output, errors);
    return {summary_, partitions_};
  }

 private:
  // Runs `fn` under the claim's fence; a lost claim marks the attempt lost
  // and throws.
  void AsOwner(const std::function<void()>& fn) {
    if (!a_.as_owner(fn)) {
      a_.lost->store(true);
      throw Error("lost the claim of " + a_.shard_id + "; committing nothing");
    }
  }

  // Publishes `content` at `path` first-writer-wins under the claim's fence.
  // The file is written and fsynced first, so that the fenced section is one
  // link(): a process frozen there (SIGSTOP, a hung node) would hold the
  // flock, and with it keep every other worker from taking the shard over.
  bool PublishFenced(const std::string& dir, const std::string& path, const std::string& content) {
    io::Disk& disk = *c_.disk;
    const std::string tmp =
        dir + "/tmp." + std::filesystem::path(path).filename().string() + "." + a_.token;
    disk.WriteAtomic(tmp, content);
    bool linked = false;
    try {
      AsOwner([&] { linked = disk.Link(tmp, path); });
    } catch (...) {
      disk.Unlink(tmp);
      throw;
    }
    disk.Unlink(tmp);
    if (linked) disk.SyncDir(dir);
    return linked;
  }

  // A commit and why it is rejected ("" for the one a partition resumes from).
  struct Decision {
    const Commit* commit;
    std::string why;
  };

  // What an attempt found in its shard's checkpoint directory.
  struct ShardPartitions {
    PartitionSet set;
    std::map<uint64_t, std::vector<Commit>> commits;
    std::vector<std::string> unreadable;  // commit records that are not records
    std::vector<Decision> decisions;      // point into `commits`
  };

  // §7 steps 2-3, the checks: per partition, commits newest first until one
  // verifies against `against`.
  std::vector<Decision> DecideCommits(const std::string& dir,
                                      const std::map<uint64_t, std::vector<Commit>>& commits,
                                      const PartitionSet& against) {
    const size_t num_ops = c_.plan->operators.size();
    std::vector<Decision> out;
    for (const auto& [partition, list] : commits) {
      for (const Commit& c : list) {
        std::string why;
        const std::string engine =
            c.record.value("engine", nlohmann::json::object()).value("version", "");
        if (partition >= against.bounds.size()) {
          why = "partition " + std::to_string(partition) + " is not one of the shard's " +
                std::to_string(against.bounds.size());
        } else if (c.record.value("shard_id", nlohmann::json()) != a_.shard_id) {
          why = "made for another shard";
        } else if (c.op_idx >= num_ops || c.record.value("ops_prefix_sha256", "") !=
                                              OpsPrefixSha256(c_.recipe->root, c.op_idx)) {
          why = "its operators differ from the recipe's (ops_prefix_sha256)";
        } else if (engine != c_.engine_version) {
          why = "made by djshard " + engine + ", the job by " + c_.engine_version;
        } else if (const std::optional<CommitProblem> problem =
                       VerifyCommitFiles(c, dir, against)) {
          why = problem->subject + ": " + problem->what;
        }
        out.push_back({&c, why});
        if (why.empty()) break;
      }
    }
    return out;
  }

  // §7 steps 1-3: checks the shard file against the manifest, publishes or
  // reads partitioning_info.json, and decides the earlier commits (verified on
  // another thread while this attempt hashes the shard).
  void OpenPartitionSet(const io::InputCandidate& input, const std::string& dir,
                        ShardPartitions& sp) {
    io::Disk& disk = *c_.disk;
    // Normalized shards end every line with \n, so the hash of the
    // sha256-lines-v1 bytes is the file's.
    const std::optional<io::FileStat> file = disk.Stat(input.path);
    if (!file || file->size != a_.size_bytes) {
      throw Error(input.path, 0, "shard file size differs from the manifest",
                  "the job directory was changed; prepare the job again");
    }
    disk.MakeDirs(dir);
    const std::string info_path = dir + "/partitioning_info.json";
    auto read_info = [&] {
      const nlohmann::json info = nlohmann::json::parse(disk.Read(info_path), nullptr, false);
      return ParsePartitioningInfo(info, [&](const std::string& what) {
        throw Error(info_path, 0, what, "remove the shard's checkpoint directory");
      });
    };
    auto list_commits = [&] {
      sp.commits =
          ListCommits(dir, [&](const std::string& path) { sp.unreadable.push_back(path); });
    };
    std::optional<PartitionSet> theirs;
    std::future<std::vector<Decision>> decided;
    if (disk.Stat(info_path)) {
      theirs = read_info();
      list_commits();
      decided =
          std::async(std::launch::async, [&] { return DecideCommits(dir, sp.commits, *theirs); });
    }
    // The shard's checksum is checked here, or, on a takeover, through the
    // partitions' hashes: they must equal those of partitioning_info.json,
    // whose writer checked the whole shard's against the manifest.
    InputHashes hashes;
    if (theirs && !theirs->digests.empty()) hashes.partitions = theirs->digests[0].checksum.kind;
    if (!theirs) hashes.whole = a_.checksum.kind;
    sp.set = PartitionInput(c_.settings, *c_.recipe, {input}, a_.shard_id, a_.rows, hashes);
    if (theirs) {
      if (theirs->input != a_.checksum) {
        throw Error(info_path, 0,
                    "its input checksum is not the manifest's " + a_.checksum.field() + " of " +
                        a_.shard_id,
                    "remove the shard's checkpoint directory");
      }
      sp.set.input = theirs->input;
    }
    if (sp.set.total_rows != a_.rows || sp.set.total_bytes != a_.size_bytes ||
        sp.set.input != a_.checksum) {
      throw Error(
          input.path, 0,
          "shard file differs from the manifest (rows, size or " + a_.checksum.field() + ")",
          "the job directory was changed; prepare the job again");
    }
    if (!theirs) {
      const bool first = PublishFenced(
          dir, info_path,
          PartitioningInfoJson(sp.set, c_.job_id, a_.shard_id, a_.token).dump(2) + "\n");
      if (!first) theirs = read_info();
    }
    if (theirs && !SameBounds(sp.set, *theirs)) {
      throw Error(info_path, 0,
                  "partition bounds differ: this attempt computed " +
                      std::to_string(sp.set.bounds.size()) + " partitions, the file has " +
                      std::to_string(theirs->bounds.size()) + " or other bounds",
                  "the recipe's partition settings or the shard changed; prepare a new job");
    }
    if (decided.valid()) {
      sp.decisions = decided.get();
    } else if (theirs) {
      list_commits();
      sp.decisions = DecideCommits(dir, sp.commits, sp.set);
    }
  }

  // The events of a checkpointed shard's attempt carry these.
  nlohmann::json ShardEventFields() const {
    return {{"shard_id", a_.shard_id}, {"attempt_token", a_.token}};
  }

  // §7 step 3: a commit that fails is rejected, not fatal: it moves into
  // rejected/ (record and data) with a checkpoint_rejected event.
  void RejectCommit(const std::string& dir, const std::string& record_path,
                    const nlohmann::json& record, const std::string& why) {
    io::Disk& disk = *c_.disk;
    const std::string rejected = dir + "/rejected";
    const std::string name = std::filesystem::path(record_path).filename().string();
    const std::string& token = a_.token;
    AsOwner([&] {
      disk.MakeDirs(rejected);
      disk.Rename(record_path, rejected + "/" + name + "." + token);
      for (const char* key : {"data_path", "errors_path"}) {
        const std::string rel = record.is_object() ? record.value(key, "") : "";
        if (!rel.empty() && rel.find('/') == std::string::npos && disk.Stat(dir + "/" + rel)) {
          disk.Rename(dir + "/" + rel, rejected + "/" + rel);
        }
      }
    });
    nlohmann::json fields = ShardEventFields();
    if (record.is_object()) {
      fields["partition_id"] = record.value("partition_id", nlohmann::json());
      fields["op_idx"] = record.value("op_idx", nlohmann::json());
      fields["checkpoint_path"] = record.value("data_path", nlohmann::json());
      AddCheckpointChecksum(fields, record);
    }
    fields["error_message"] = why;
    fields["metadata"] = {{"commit", name}, {"moved_to", "rejected/" + name + "." + token}};
    c_.events->Emit("checkpoint_rejected", fields);
    a_.log("checkpoint_rejected",
           "rejected checkpoint " + name + ": " + why + " (moved to rejected/)");
  }

  // Where each partition starts: the commit it resumes from, if any; §7 step
  // 4: what is resumed, in attempt.json and process.log.
  std::vector<StartPoint> ResumePoints(const std::string& dir, const ShardPartitions& sp) {
    const size_t num_ops = c_.plan->operators.size();
    const size_t total = sp.set.bounds.size();
    std::vector<StartPoint> starts(total);
    nlohmann::json resumed_from = nlohmann::json::array();
    uint64_t finished = 0;
    for (const Decision& d : sp.decisions) {
      const Commit& c = *d.commit;
      if (!d.why.empty()) {
        RejectCommit(dir, c.record_path, c.record, d.why);
        continue;
      }
      starts[c.partition] = {true, c.op_idx, dir + "/" + c.record.value("data_path", ""), c.record};
      if (c.op_idx == num_ops - 1) ++finished;
      resumed_from.push_back(
          {{"partition_id", c.partition},
           {"op_idx", c.op_idx},
           {"commit", std::filesystem::path(c.record_path).filename().string()},
           {"origin_attempt_token", c.record.value("attempt_token", nlohmann::json())}});
    }
    const nlohmann::json partitions = {
        {"total", total}, {"resumed", finished}, {"computed", total - finished}};
    a_.record_partitions(partitions, resumed_from);
    partitions_ = partitions;
    a_.log("resume", "partitions: total " + std::to_string(total) + ", resumed " +
                         std::to_string(finished) + ", computed " +
                         std::to_string(total - finished) + "; checkpoints in " + dir);
    for (const nlohmann::json& r : resumed_from) {
      a_.log("resume", "resumed partition " + r["partition_id"].dump() + " from op " +
                           r["op_idx"].dump() + " (" + r["commit"].get<std::string>() +
                           " of attempt " + r["origin_attempt_token"].dump() + ")");
    }
    return starts;
  }

  // The shard's partitions through the run-job partition runner: taps and
  // commits published under the claim's fence, the output assembled from the
  // final taps.
  void RunPartitions(const io::InputCandidate& input, const std::string& dir,
                     const PartitionSet& set, std::vector<StartPoint> starts,
                     io::OutputStream& output, io::OutputStream& errors) {
    PartitionRunConfig config;
    config.plan = c_.plan;
    config.root = c_.recipe->root;
    config.settings = c_.settings;
    config.taps = c_.taps;
    config.checkpoints = dir;
    config.job_id = c_.job_id;
    config.shard_id = a_.shard_id;
    config.token = a_.token;
    config.config_sha256 = c_.config_sha256;
    config.set = &set;
    config.starts = std::move(starts);
    config.inputs = {input};
    config.input_name = a_.shard_id;
    config.threads = c_.threads;
    config.assemble = true;
    config.cancel = a_.lost;
    config.events = c_.events;
    config.event_fields = ShardEventFields();
    config.disk = c_.disk;
    config.publish_commit = [this, &dir](const std::string& path, const std::string& content) {
      return PublishFenced(dir, path, content);
    };
    config.reject_commit = [this, &dir](const std::string& record_path,
                                        const nlohmann::json& record, const std::string& why) {
      RejectCommit(dir, record_path, record, why);
    };
    // A job stop starts no more partitions; those in flight finish and commit.
    config.before_partition = [] {
      if (StopRequested() || JobStopRequested()) {
        throw Error("stop requested: starting no more partitions", "", kExitStopped);
      }
    };
    PartitionRunner runner(std::move(config));
    a_.log("run", "running " + std::to_string(c_.plan->operators.size()) + " operator(s) with " +
                      std::to_string(c_.threads) + " thread(s) on " + a_.shard_path + " in " +
                      std::to_string(set.bounds.size()) + " partition(s)");
    runner.Run(output, errors);
    summary_ = runner.total();
  }

  // Data files in the shard's checkpoint directory that no commit record
  // names: left by an attempt that died before its commit (or between the
  // two unlinks of keep: latest). Removed while the claim is ours.
  void RemoveUnreferencedData(const std::string& dir) {
    std::vector<std::string> referenced;
    for (const auto& [p, list] : ListCommits(dir, [](const std::string&) {})) {
      for (const Commit& c : list) {
        referenced.push_back(c.record.value("data_path", ""));
        referenced.push_back(c.record.value("errors_path", ""));
      }
    }
    std::vector<std::string> garbage;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.find(a_.token) != std::string::npos) continue;
      if (name.rfind("tmp.", 0) == 0) {  // a fenced publish's file, of a dead attempt
        garbage.push_back(e.path().string());
        continue;
      }
      if (name.rfind("checkpoint_op_", 0) != 0 || name.find(".commit.json") != std::string::npos) {
        continue;
      }
      if (std::find(referenced.begin(), referenced.end(), name) == referenced.end()) {
        garbage.push_back(e.path().string());
      }
    }
    if (garbage.empty()) return;
    AsOwner([&] {
      for (const std::string& g : garbage) c_.disk->Unlink(g);
    });
  }

  const ShardCheckpoints& c_;
  const ShardAttempt& a_;
  exec::ExecSummary summary_;
  nlohmann::json partitions_;
};

}  // namespace

ShardRunResult RunCheckpointedShard(const ShardCheckpoints& checkpoints,
                                    const ShardAttempt& attempt, io::OutputStream& output,
                                    io::OutputStream& errors) {
  return ShardRun(checkpoints, attempt).Run(output, errors);
}

ShardPreflight RunShardPreflight(const ShardPreflightRequest& request) {
  preflight::PreflightContext cx;
  cx.recipe = request.recipe;
  cx.plan = request.plan;
  cx.settings = request.settings.preflight;
  cx.inputs = request.inputs;
  cx.job_dir = request.job_dir;
  cx.disk = request.disk;
  cx.threads = request.threads;
  cx.partitions_in_flight = request.settings.max_concurrent_partitions;
  EventLog* events = request.events;
  cx.emit = [events](const std::string& type, nlohmann::json fields) {
    events->Emit(type, std::move(fields));
  };
  cx.shared = preflight::PreflightContext::Shared{request.lease_secs, request.heartbeat_secs,
                                                  request.poll_secs};
  cx.check_stop = request.check_stop;
  cx.say = request.say;
  const preflight::PreflightResult result = preflight::RunPreflight(cx);
  ShardPreflight out;
  out.threads = request.threads;
  if (!result.has_model_ops) return out;
  out.has_model_ops = true;
  out.threads = preflight::ThreadsAfterPlan(result, request.threads, request.threads_explicit);
  out.plan_fields = result.plan_fields;
  out.printout = result.printout;
  return out;
}

}  // namespace djshard::job
