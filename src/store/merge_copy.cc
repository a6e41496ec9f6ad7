#include "djshard/store/merge_copy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/io/fd.h"
#include "djshard/io/input.h"
#include "djshard/io/json_fields.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "djshard/store/status.h"
#include "src/store/merge_outputs.h"

namespace djshard::store {

namespace fs = std::filesystem;
using nlohmann::json;

std::string MergeCopyPlan::ToJson() const {
  json j = {{"output", output}, {"temp", temp},           {"temp_inode", temp_inode},
            {"bytes", bytes},   {"parts", json::array()}, {"tasks", json::array()}};
  for (const Part& p : parts) {
    j["parts"].push_back({{"shard", p.shard}, {"offset", p.offset}, {"bytes", p.bytes}});
  }
  for (const auto& [first, end] : tasks) j["tasks"].push_back({first, end});
  return j.dump(2) + "\n";
}

MergeCopyPlan MergeCopyPlan::FromJson(const std::string& text, const std::string& path) {
  MergeCopyPlan plan;
  try {
    const json j = json::parse(text);
    plan.output = j.at("output").get<std::string>();
    plan.temp = j.at("temp").get<std::string>();
    plan.temp_inode = io::IntegerField<uint64_t>(j, "temp_inode");
    plan.bytes = io::IntegerField<uint64_t>(j, "bytes");
    for (const json& p : j.at("parts")) {
      plan.parts.push_back({io::IntegerField<size_t>(p, "shard"),
                            io::IntegerField<uint64_t>(p, "offset"),
                            io::IntegerField<uint64_t>(p, "bytes")});
    }
    for (const json& t : j.at("tasks")) {
      plan.tasks.emplace_back(t.at(0).get<size_t>(), t.at(1).get<size_t>());
      if (plan.tasks.back().first > plan.tasks.back().second ||
          plan.tasks.back().second > plan.parts.size()) {
        throw Error(path, 0, "merge copy task names parts the plan lacks");
      }
    }
  } catch (const json::exception& e) {
    throw Error(path, 0, std::string("merge copy plan is not valid: ") + e.what(),
                "the coordination directory was edited; start the run with a new run id");
  }
  return plan;
}

bool CanMergeByCopyTasks(const JobDir& job, const MergeRequest& request) {
  if (request.layout.value_or(job.manifest().output_layout) != OutputLayout::kFile) return false;
  const std::string output =
      request.output.empty() ? job.DefaultMergedOutput(OutputLayout::kFile) : request.output;
  return !io::IsCompressedInput(output);
}

MergeCopyPlan PlanMergeCopy(const JobDir& job, const MergeRequest& request, uint64_t task_bytes,
                            size_t min_tasks, const std::string& tag, io::Disk& disk) {
  RequireComplete(job, "merge");
  MergeCopyPlan plan;
  plan.output = CheckedOutput(job, request, OutputLayout::kFile);
  plan.temp = plan.output + ".tmp." + tag;
  const std::vector<ShardEntry>& shards = job.manifest().shards;
  for (size_t i = 0; i < shards.size(); ++i) {
    const DoneRecord done = ReadShardDone(job, shards[i]);
    plan.parts.push_back({i, plan.bytes, done.size_bytes});
    plan.bytes += done.size_bytes;
  }
  // Tasks of `task_bytes`, or smaller so that there are `min_tasks`.
  const uint64_t limit =
      std::max<uint64_t>(1, std::min(task_bytes, plan.bytes / std::max<size_t>(1, min_tasks)));
  uint64_t task_start = 0;
  for (size_t i = 0; i < plan.parts.size(); ++i) {
    const uint64_t end = plan.parts[i].offset + plan.parts[i].bytes;
    if (end - task_start >= limit || i + 1 == plan.parts.size()) {
      const size_t first = plan.tasks.empty() ? 0 : plan.tasks.back().second;
      plan.tasks.emplace_back(first, i + 1);
      task_start = end;
    }
  }
  // A coordinator that took over finds the file of the same plan.
  io::ScopedFd fd(::open(plan.temp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) ThrowSystemError(plan.temp, "cannot create");
  // Reserve the space now: a full disk fails the merge before any copy.
  if (::ftruncate(fd.get(), static_cast<off_t>(plan.bytes)) != 0) {
    ThrowSystemError(plan.temp, "cannot size");
  }
  const int err =
      plan.bytes == 0 ? 0 : ::posix_fallocate(fd.get(), 0, static_cast<off_t>(plan.bytes));
  if (err != 0 && err != EOPNOTSUPP && err != EINVAL) {
    throw Error::FromErrno(plan.temp, "cannot allocate " + std::to_string(plan.bytes) + " bytes",
                           err);
  }
  if (::fsync(fd.get()) != 0) ThrowSystemError(plan.temp, "cannot fsync");
  disk.SyncDir(fs::path(plan.temp).parent_path().string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) ThrowSystemError(plan.temp, "cannot stat");
  plan.temp_inode = static_cast<uint64_t>(st.st_ino);
  return plan;
}

json RunMergeCopyTask(const JobDir& job, const MergeCopyPlan& plan, size_t task,
                      const std::function<bool()>& owned) {
  json result = {{"task", task}, {"parts", json::array()}};
  io::ScopedFd fd(::open(plan.temp.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) ThrowSystemError(plan.temp, "cannot open");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) ThrowSystemError(plan.temp, "cannot stat");
  if (static_cast<uint64_t>(st.st_ino) != plan.temp_inode) {
    throw Error(plan.temp, 0, "is not the file this merge was planned into",
                "a coordinator that took over planned the merge again; nothing to do");
  }
  io::OffsetWriter out(fd.get(), plan.temp);
  const auto [first, end] = plan.tasks.at(task);
  for (size_t p = first; p < end; ++p) {
    const MergeCopyPlan::Part& part = plan.parts[p];
    const ShardEntry& shard = job.manifest().shards.at(part.shard);
    const std::string record_path = job.DonePath(shard.id);
    const DoneRecord done = ReadShardDone(job, shard);
    io::Sha256 sha256;
    uint64_t at = part.offset;
    ReadShardOutput(job, done, record_path, false, [&](std::string_view bytes) {
      if (at + bytes.size() > part.offset + part.bytes) {
        throw Error(record_path, 0,
                    "the output of " + shard.id + " is longer than when the merge was planned",
                    ChangedOutputHint(done, record_path));
      }
      if (!owned()) {
        throw Error(plan.temp, 0, "lost the claim of this copy task",
                    "its lease went stale and another instance took it over");
      }
      out.Write(bytes, at);
      sha256.Update(bytes);
      at += bytes.size();
    });
    result["parts"].push_back({{"shard_id", shard.id}, {"sha256", sha256.HexDigest()}});
    CrashPoint("merge_shard_copied");
  }
  if (::fdatasync(fd.get()) != 0) ThrowSystemError(plan.temp, "cannot fsync");
  return result;
}

namespace {

// The parts' SHA-256 from the tasks' results, in order; the first failure
// is rethrown.
std::vector<std::string> PartDigests(const JobDir& job, const MergeCopyPlan& plan,
                                     const std::vector<json>& results) {
  for (const json& r : results) {
    if (r.contains("error")) throw io::ErrorFromJson(r.at("error"));
  }
  if (results.size() != plan.tasks.size()) throw Error("merge copy results do not match the plan");
  std::vector<std::string> digests;
  for (size_t t = 0; t < results.size(); ++t) {
    const json& r = results[t];
    const json& parts = r.at("parts");
    const auto [first, end] = plan.tasks[t];
    if (parts.size() != end - first)
      throw Error("merge copy task " + std::to_string(t) + " copied too few parts");
    for (size_t p = first; p < end; ++p) {
      const std::string& id = job.manifest().shards.at(plan.parts[p].shard).id;
      if (parts[p - first].at("shard_id") != id) {
        throw Error("merge copy task " + std::to_string(t) + " copied parts out of order");
      }
      digests.push_back(parts[p - first].at("sha256").get<std::string>());
    }
  }
  return digests;
}

// The whole file's SHA-256, read once.
std::string WholeSha256(const std::string& path) {
  io::Sha256 sha256;
  const std::unique_ptr<io::ByteSource> source = io::OpenInput(path);
  std::string buf(4 << 20, '\0');
  for (size_t n; (n = source->Read(buf.data(), buf.size())) > 0;) {
    sha256.Update(std::string_view(buf.data(), n));
  }
  return sha256.HexDigest();
}

}  // namespace

MergeOutcome FinishMergeCopy(const JobDir& job, const MergeCopyPlan& plan,
                             const std::vector<json>& results, bool whole_sha256, io::Disk& disk) {
  const std::vector<std::string> digests = PartDigests(job, plan, results);
  VerifiedOutputs v;
  json parts = json::array();
  io::Sha256 tree;
  for (size_t p = 0; p < plan.parts.size(); ++p) {
    const ShardEntry& shard = job.manifest().shards.at(plan.parts[p].shard);
    const DoneRecord done = ReadShardDone(job, shard);
    Count(done, v);
    tree.Update(digests[p] + "\n");
    parts.push_back({{"shard_id", shard.id},
                     {"offset", plan.parts[p].offset},
                     {"bytes", plan.parts[p].bytes},
                     {"rows", done.rows},
                     {"sha256", digests[p]}});
  }
  if (whole_sha256) v.sha256 = WholeSha256(plan.temp);
  disk.Rename(plan.temp, plan.output);
  disk.SyncDir(fs::path(plan.output).parent_path().string());
  CrashPoint("merge_committed");
  MergeErrorFiles(job, io::ErrorsFileOf(plan.output), disk);
  json merge = {{"job_id", job.manifest().job_id},
                {"merged_at", FormatUtcIso8601(NowNanos())},
                {"output_path", plan.output},
                {"layout", "file"},
                {"rows", v.rows},
                {"num_shards", plan.parts.size()},
                {"copy_tasks", plan.tasks.size()},
                {"parts", parts},
                {"tree_sha256", tree.HexDigest()}};
  if (whole_sha256) merge["sha256"] = v.sha256;
  RecordMerge(job, merge, disk);
  return OutcomeOf(job, plan.output, v, OutputLayout::kFile);
}

}  // namespace djshard::store
