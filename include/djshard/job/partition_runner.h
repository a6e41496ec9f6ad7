#pragma once

#include <yaml-cpp/yaml.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "djshard/exec/executor.h"
#include "djshard/exec/plan.h"
#include "djshard/io/discover.h"
#include "djshard/io/disk.h"
#include "djshard/io/output.h"
#include "djshard/job/checkpoint.h"
#include "djshard/job/partition.h"
#include "djshard/recipe/recipe.h"

namespace djshard::job {

class EventLog;

// The bytes partitioning_info.json hashes: each row's bytes without its
// terminator (one trailing \r dropped), each followed by \n; partitions
// hashed with XXH3-128 (SHA-256 in older jobs), the whole input of a run job
// with SHA-256.
inline constexpr const char* kPartitionHashAlgorithm = "sha256-lines-v1";

// The partition set of a `run` job or of one shard: bounds and the digests of
// the input under them (SPEC-checkpoints §3-4).
struct PartitionSet {
  std::string mode;
  std::vector<PartitionBounds> bounds;
  std::vector<PartitionDigest> digests;
  uint64_t total_rows = 0, total_bytes = 0;
  // The whole input's hash (`input_sha256` of a run job; a shard's is its
  // `input_xxh3_128`, the manifest's); empty when it was not taken.
  io::Checksum input;
};

// A new partition set of `inputs`: a scan for rows and auto mode's sample,
// then one read that takes `hashes`. A manual count above the rows is an
// Error "num_of_partitions (P) exceeds the rows of <input_name> (R)". With
// `known_rows` (a shard's rows from the manifest) a manual count needs no
// scan: the input is read once.
PartitionSet PartitionInput(const JobSettings& settings, const recipe::Recipe& recipe,
                            const std::vector<io::InputCandidate>& inputs,
                            const std::string& input_name,
                            std::optional<uint64_t> known_rows = std::nullopt,
                            const InputHashes& hashes = {io::ChecksumKind::kXxh3_128,
                                                         io::ChecksumKind::kSha256});

// partitioning_info.json of a set; `shard_id` is null for `run`.
nlohmann::json PartitioningInfoJson(const PartitionSet& set, const std::string& job_id,
                                    const nlohmann::json& shard_id, const std::string& token);

// A well-formed partitioning_info.json as a set (§6 step 3); `bad` is called
// with what is wrong and must throw.
PartitionSet ParsePartitioningInfo(const nlohmann::json& info,
                                   const std::function<void(const std::string&)>& bad);

// Whether two sets have the same bounds and partition digests.
bool SameBounds(const PartitionSet& a, const PartitionSet& b);

// One commit record in a checkpoint directory (§5).
struct Commit {
  std::string record_path;  // absolute
  uint64_t partition = 0;
  size_t op_idx = 0;
  nlohmann::json record;
};

// Every commit record in `dir` by partition, newest operator first. A record
// that is not JSON with partition_id and op_idx is an Error, unless
// `unreadable` is given: it is then called with the record's path and the
// record skipped.
std::map<uint64_t, std::vector<Commit>> ListCommits(
    const std::string& dir, const std::function<void(const std::string&)>& unreadable = {});

// What is wrong with a commit's files: `subject` (the data or errors file,
// relative to the checkpoint dir) and `what`.
struct CommitProblem {
  std::string subject;
  std::string what;
};

// Verifies a commit's data file (present, size, xxh3_128 of the stored bytes,
// rows), its input partition's hash in `set` and its errors file. nullopt
// when it may be used.
std::optional<CommitProblem> VerifyCommitFiles(const Commit& commit, const std::string& checkpoints,
                                               const PartitionSet& set);

// Per partition, where processing starts: the committed tap it resumes from.
struct StartPoint {
  bool resumed = false;
  size_t op_idx = 0;      // the tap's operator
  std::string data_path;  // absolute
  nlohmann::json commit;
  // The tap is the forced tap of this run's previous phase (an alternating
  // execution group): the partition goes on without resume events.
  bool continued = false;
};

// The operator through which a commit's errors file holds the partition's
// operator errors: the recipe's last unless the commit says
// `errors_through_op` (a tap committed by a phase of an execution group).
size_t ErrorsThroughOp(const nlohmann::json& commit, size_t last_op);

// dag_execution_plan.json (SPEC-checkpoints §8) of a plan, its taps and
// `partitioning` ({mode, num_partitions}; a prepared elastic job gives each
// shard its own set, so num_partitions may be null there).
nlohmann::json ExecutionPlanJson(const exec::Plan& plan, const std::string& job_id,
                                 const std::string& config_sha256, const std::vector<size_t>& taps,
                                 const JobSettings& settings, const nlohmann::json& partitioning);

// Counters of a partition set's run (rows, bytes, operators).
void AddCounters(exec::ExecSummary& total, const exec::ExecSummary& part, size_t first_op);

// What a PartitionRunner runs and how it reports.
struct PartitionRunConfig {
  const exec::Plan* plan = nullptr;
  YAML::Node root;  // the recipe with overrides: operator prefixes are hashed from it
  JobSettings settings;
  std::vector<size_t> taps;  // TapPositions
  std::string checkpoints;   // the partition set's checkpoint directory
  std::string job_id;
  nlohmann::json shard_id;  // null for `run`
  std::string token;        // the run's or attempt's token: in every data file name
  std::string config_sha256;
  const PartitionSet* set = nullptr;
  std::vector<StartPoint> starts;  // one per partition
  std::vector<io::InputCandidate> inputs;
  std::string input_name;  // for messages
  int threads = 1;
  // Whether the output is assembled from the final taps at the end (else it
  // is written as the partitions finish, one at a time).
  bool assemble = false;
  // An alternating execution group's pass (SPEC-checkpoints §10.7): Run
  // processes partitions [first_partition, end_partition) only (the others'
  // rows are skipped), and with `phase_end_op` before the recipe's last
  // operator it runs each of them through that operator only, ending with a
  // forced tap there (committed with the errors so far); such a partition
  // is neither counted nor complete until a later pass resumes it.
  uint64_t first_partition = 0;
  uint64_t end_partition = UINT64_MAX;
  std::optional<size_t> phase_end_op;
  const std::atomic<bool>* cancel = nullptr;  // as ExecOptions::cancel
  EventLog* events = nullptr;
  nlohmann::json event_fields = nlohmann::json::object();  // added to every event
  io::Disk* disk = nullptr;

  // Publishes a commit record at `path` (first writer wins): true when this
  // one was linked, false when one existed. Throws when the caller may not
  // publish any more (a worker that lost its claim). Default: Disk::PublishLink.
  std::function<bool(const std::string& path, const std::string& record)> publish_commit;
  // Moves a commit record that failed verification (and the files it names)
  // aside, with `why` (a lineage journal segment: SPEC-lineage §6). Default:
  // into <checkpoints>/rejected/, logged as checkpoint_rejected.
  std::function<void(const std::string& record_path, const nlohmann::json& record,
                     const std::string& why)>
      reject_commit;
  // Before each partition starts (may throw to start no more).
  std::function<void()> before_partition;
  // After each commit, under the runner's lock, with its time.
  std::function<void(int64_t commit_ns)> on_checkpoint;
  // After each partition, under the runner's lock.
  std::function<void(const exec::ExecSummary& total, uint64_t completed, uint64_t resumed)>
      on_partition_done;
};

// Runs the partitions of a set (SPEC-checkpoints §5-7): each from its start
// point, through the executor with taps teed into the checkpoint directory,
// each tap published by a commit record; the final taps make the output.
// Used by `djshard run` jobs and by workers for each shard.
class PartitionRunner {
 public:
  explicit PartitionRunner(PartitionRunConfig config);
  PartitionRunner(const PartitionRunner&) = delete;
  PartitionRunner& operator=(const PartitionRunner&) = delete;

  // Runs every partition into `output` and `errors` (neither is committed).
  // The first error stops the partitions in flight and is rethrown.
  void Run(io::OutputStream& output, io::OutputStream& errors);

  // The executor threads of the partitions (before Run).
  void set_threads(int threads) { c_.threads = threads; }
  // The next Run's pass (see PartitionRunConfig): its partitions, the
  // operator it ends with (nullopt: the last), and where each partition
  // starts. Counters go on adding up over the passes.
  void set_pass(uint64_t first_partition, uint64_t end_partition,
                std::optional<size_t> phase_end_op, std::vector<StartPoint> starts) {
    c_.first_partition = first_partition;
    c_.end_partition = end_partition;
    c_.phase_end_op = phase_end_op;
    c_.starts = std::move(starts);
  }
  const std::vector<StartPoint>& starts() const { return c_.starts; }

  // Counters so far (also after a failure).
  const exec::ExecSummary& total() const { return total_; }
  uint64_t completed() const { return completed_; }
  uint64_t resumed() const { return resumed_; }
  // Rows that went through an operator in this run (input rows of each
  // partition that was not finished already).
  uint64_t rows_computed() const { return rows_computed_; }

 private:
  struct Pass;       // what the partitions of one Run share (partition_runner.cc)
  struct Partition;  // one partition's run through the executor

  // Emits an event with c_.event_fields added.
  void Emit(const std::string& type, nlohmann::json fields) const;
  // The default reject_commit: the record and its data file into
  // <checkpoints>/rejected/, logged as checkpoint_rejected.
  void RejectIntoDirectory(const std::string& record_path, const nlohmann::json& record,
                           const std::string& why) const;
  // Runs the pass's partitions on pass.in_flight threads, in order.
  void RunInFlight(Pass& pass);
  // The phases of one partition, in the order RunPartition runs them.
  void RunPartition(Pass& pass, uint64_t p);
  void ResumeFinished(Pass& pass, uint64_t p);
  void ReadRows(Pass& pass, Partition& w);
  void OpenJournals(Pass& pass, Partition& w);
  void OpenTaps(Pass& pass, Partition& w);
  void OpenOrigins(Pass& pass, Partition& w);
  void HookExecutor(Pass& pass, Partition& w);
  void OpenErrors(Pass& pass, Partition& w);
  void RunExecutor(Pass& pass, Partition& w);
  void CountPartition(Pass& pass, Partition& w);
  void CommitTap(Pass& pass, Partition& w, size_t i);
  nlohmann::json CommitRecord(const Pass& pass, const Partition& w, size_t i,
                              const io::Checksum& sum, uint64_t size_bytes, int64_t now) const;
  void FinishPartition(Pass& pass, Partition& w);

  PartitionRunConfig c_;
  exec::ExecSummary total_;
  uint64_t completed_ = 0, resumed_ = 0, rows_computed_ = 0;
};

}  // namespace djshard::job
