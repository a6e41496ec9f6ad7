// The worker's phases on a real job directory, with a Disk that fails one
// chosen protocol step: whatever step fails, no row is lost or duplicated and
// a healthy worker finishes the job with the bytes of a single run.
#include "djshard/store/worker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "djshard/common/error.h"
#include "djshard/io/sha256.h"
#include "djshard/job/run_job.h"
#include "djshard/store/claim.h"
#include "djshard/store/job.h"
#include "djshard/store/merge.h"
#include "djshard/store/prepare.h"
#include "djshard/store/records.h"

namespace djshard::store {
namespace {

namespace fs = std::filesystem;

// Fails the first `times` calls (-1: every call) of one operation whose path
// contains `needle`: with an Error carrying `err` (ENOSPC, EIO...) as a failed
// system call would, or with a plain Error when `err` is 0.
class FailOnceDisk : public io::Disk {
 public:
  FailOnceDisk(std::string op, std::string needle, int err = 0, int times = 1)
      : op_(std::move(op)), needle_(std::move(needle)), err_(err), left_(times) {}

  bool CreateExclusive(const std::string& path, std::string_view content, bool durable) override {
    MaybeFail("create", path);
    return io::Disk::CreateExclusive(path, content, durable);
  }
  void WriteReplace(const std::string& path, std::string_view content) override {
    MaybeFail("replace", path);
    io::Disk::WriteReplace(path, content);
  }
  void WriteAtomic(const std::string& path, std::string_view content) override {
    MaybeFail("atomic", path);
    io::Disk::WriteAtomic(path, content);
  }
  bool PublishLink(const std::string& path, std::string_view content,
                   const std::string& temp_dir) override {
    MaybeFail("link", path);
    return io::Disk::PublishLink(path, content, temp_dir);
  }
  bool Link(const std::string& from, const std::string& to) override {
    MaybeFail("link", to);
    return io::Disk::Link(from, to);
  }
  void Rename(const std::string& from, const std::string& to) override {
    MaybeFail("rename", to);
    io::Disk::Rename(from, to);
  }
  bool Unlink(const std::string& path) override {
    MaybeFail("unlink", path);
    return io::Disk::Unlink(path);
  }
  void SyncDir(const std::string& dir) override {
    MaybeFail("syncdir", dir);
    io::Disk::SyncDir(dir);
  }
  void MakeDirs(const std::string& path) override {
    MaybeFail("mkdir", path);
    io::Disk::MakeDirs(path);
  }
  bool failed() const { return failed_; }

 private:
  void MaybeFail(const char* op, const std::string& path) {
    if (left_ == 0 || op_ != op || path.find(needle_) == std::string::npos) return;
    if (left_ > 0) --left_;
    failed_ = true;
    if (err_ != 0) throw Error::FromErrno(path, std::string("injected ") + op + " failure", err_);
    throw Error(path, 0, std::string("injected ") + op + " failure: Input/output error");
  }
  std::string op_, needle_;
  int err_;
  std::atomic<int> left_;
  std::atomic<bool> failed_{false};
};

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/djshard-worker-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ostringstream rows;
    for (int i = 0; i < 40; ++i)
      rows << "{\"id\":" << i << ",\"text\":\"  row " << i << " text \"}\n";
    std::ofstream(dir_ + "/data.jsonl") << rows.str();
    std::ofstream(dir_ + "/r.yaml") << "process:\n  - whitespace_normalization_mapper:\n"
                                       "  - text_length_filter:\n      min_len: 10\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  void PrepareJob(int shards, const std::string& recipe = "r.yaml", double backoff = 0) {
    PrepareRequest req;
    req.config_path = dir_ + "/" + recipe;
    req.dataset_path = dir_ + "/data.jsonl";
    req.job_dir = dir_ + "/job";
    req.num_shards = shards;
    req.policy.lease_secs = 0.6;
    req.policy.heartbeat_secs = 0.2;
    req.policy.poll_interval_secs = 0.2;
    req.policy.retry_backoff_secs = backoff;
    Prepare(req);
  }
  WorkerOptions Options(io::Disk* disk = nullptr) {
    WorkerOptions o;
    o.job_dir = dir_ + "/job";
    o.threads = 1;
    o.disk = disk;
    return o;
  }
  std::string ReferenceSha() {
    job::RunRequest run;
    run.config_path = dir_ + "/r.yaml";
    run.dataset_path = dir_ + "/data.jsonl";
    run.export_path = dir_ + "/reference.jsonl";
    run.threads = 1;
    job::RunRecipe(run);
    return io::Sha256OfFile(dir_ + "/reference.jsonl");
  }
  std::string MergedSha() {
    MergeRequest merge;
    merge.output = dir_ + "/merged.jsonl";
    merge.overwrite = true;
    return Merge(JobDir::Open(dir_ + "/job"), merge).sha256;
  }
  size_t Count(const std::string& rel) {
    size_t n = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir_ + "/" + rel, ec);
         !ec && it != fs::directory_iterator(); it.increment(ec)) {
      ++n;
    }
    return n;
  }
  std::string dir_;
};

TEST_F(WorkerTest, DrainsTheJobAndReportsWhatItDid) {
  PrepareJob(3);
  std::vector<std::string> lines;
  WorkerOptions o = Options();
  std::vector<LogRecord> records;
  o.log = [&](const LogRecord& r) {
    lines.push_back(r.message);
    records.push_back(r);
  };
  const WorkerOutcome out = RunWorker(o);
  EXPECT_EQ(out.end, WorkerEnd::kJobComplete);
  EXPECT_EQ(out.shards_taken, 3);
  EXPECT_EQ(out.shards_failed, 0);
  EXPECT_EQ(WorkerExitCode(out), 0);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("every shard is done"), std::string::npos) << lines.back();
  EXPECT_EQ(MergedSha(), ReferenceSha());
  // The records name their event, job and shard, for JSON logs.
  std::vector<std::string> claimed, done;
  for (const LogRecord& r : records) {
    EXPECT_FALSE(r.job_id.empty()) << r.message;
    if (r.event == "claim") claimed.push_back(r.shard_id);
    if (r.event == "done") done.push_back(r.shard_id);
  }
  EXPECT_EQ(claimed.size(), 3u);
  EXPECT_EQ(done, claimed);
  EXPECT_EQ(records.back().event, "job_done");
  EXPECT_EQ(records.back().level, LogLevel::kInfo);
}

TEST_F(WorkerTest, MaxShardsStopsAfterThatManyClaims) {
  PrepareJob(3);
  WorkerOptions o = Options();
  o.max_shards = 2;
  const WorkerOutcome out = RunWorker(o);
  EXPECT_EQ(out.end, WorkerEnd::kMaxShards);
  EXPECT_EQ(out.shards_taken, 2);
  EXPECT_EQ(Count("job/state/done"), 2u);
}

TEST_F(WorkerTest, AnAbortedWorkerClaimsNothing) {
  PrepareJob(2);
  WorkerOptions o = Options();
  o.aborted = [] { return true; };
  const WorkerOutcome out = RunWorker(o);
  EXPECT_EQ(out.end, WorkerEnd::kAborted);
  EXPECT_EQ(out.shards_taken, 0);
  EXPECT_EQ(Count("job/attempts"), 0u);
}

// A recipe this build cannot run is the job's problem: the worker refuses it
// before claiming, and no shard is charged with a failed attempt.
TEST_F(WorkerTest, ARecipeThatCannotCompileTouchesNoShard) {
  PrepareJob(2);
  // An argument the operator does not take, as an older build may have let through.
  std::ofstream(dir_ + "/job/recipe.yaml")
      << "process:\n  - text_length_filter:\n      min_lenght: 3\n";
  WorkerOptions o = Options();
  o.allow_version_mismatch = true;  // the snapshot no longer matches its sha256
  try {
    RunWorker(o);
    FAIL() << "the worker accepted a recipe it cannot run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("min_lenght"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), 2);
  }
  EXPECT_EQ(Count("job/attempts"), 0u);
  EXPECT_EQ(Count("job/state/locks"), 0u);
  EXPECT_EQ(Count("job/state/failed"), 0u);
}

TEST_F(WorkerTest, AJobDirWithATrailingSlashIsTheSameJob) {
  PrepareJob(1);
  WorkerOptions o = Options();
  o.job_dir += "/";
  EXPECT_EQ(RunWorker(o).end, WorkerEnd::kJobComplete);
  EXPECT_EQ(JobPaths(dir_ + "/job/").dir(), dir_ + "/job");
  EXPECT_EQ(JobPaths(dir_ + "/job/.").dir(), dir_ + "/job");
  EXPECT_EQ(JobPaths(dir_ + "/x/../job").dir(), dir_ + "/job");
}

struct Step {
  const char* op;
  const char* needle;
};
void PrintTo(const Step& step, std::ostream* os) { *os << step.op << " " << step.needle; }

class WorkerDiskFailure : public WorkerTest, public ::testing::WithParamInterface<Step> {};

// The failing worker ends with an Error (or, where the step belongs to one
// attempt, fails that attempt and goes on); whatever it left (a lock, a
// temporary file in its attempt, a published record whose lock was not
// removed) a healthy worker then finishes the job, each shard has one done
// record, and the merged bytes equal a single run's.
TEST_P(WorkerDiskFailure, AHealthyWorkerThenFinishesTheJobWithTheSameBytes) {
  const std::string reference = ReferenceSha();
  PrepareJob(2);
  FailOnceDisk disk(GetParam().op, GetParam().needle);
  try {
    RunWorker(Options(&disk));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(disk.failed());
  const WorkerOutcome out = RunWorker(Options());
  EXPECT_EQ(out.end, WorkerEnd::kJobComplete);
  EXPECT_EQ(Count("job/state/done"), 2u);
  EXPECT_EQ(Count("job/state/locks"), 0u);
  EXPECT_EQ(Count("job/state/failed"), 0u);
  EXPECT_EQ(MergedSha(), reference);
}

INSTANTIATE_TEST_SUITE_P(
    Steps, WorkerDiskFailure,
    ::testing::Values(Step{"create", "/state/locks/"}, Step{"mkdir", "/attempts/"},
                      Step{"replace", "attempt.json"}, Step{"rename", "processed.jsonl"},
                      Step{"link", "/state/done/"}, Step{"unlink", "/state/locks/"},
                      Step{"syncdir", "/state/done"}),
    [](const ::testing::TestParamInfo<Step>& info) {
      std::string name = std::string(info.param.op) + "_" + info.param.needle;
      for (char& c : name) {
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

// The gap between linking the done record and removing the lock: the record
// is out, the lock stays (the disk refuses every unlink of a lock, so the
// failing worker cannot hand it back either). The next worker removes the
// lock and marks the attempt done, since the record carries its token.
TEST_F(WorkerTest, ALockLeftBesideItsDoneRecordIsClearedAndItsAttemptMarkedDone) {
  PrepareJob(1);
  FailOnceDisk disk("unlink", "/state/locks/", 0, /*times=*/-1);
  EXPECT_THROW(RunWorker(Options(&disk)), Error);
  const JobDir job = JobDir::Open(dir_ + "/job");
  const std::string shard = job.manifest().shards[0].id;
  ASSERT_TRUE(fs::exists(job.DonePath(shard)));
  ASSERT_TRUE(fs::exists(job.LockPath(shard)));
  EXPECT_EQ(RunWorker(Options()).end, WorkerEnd::kJobComplete);
  EXPECT_FALSE(fs::exists(job.LockPath(shard)));
  const DoneRecord done = DoneRecord::FromJson(io::ReadFile(job.DonePath(shard)), "done");
  const std::string attempt = job.InJob(done.output_path.substr(0, done.output_path.rfind('/')));
  const AttemptRecord record =
      AttemptRecord::FromJson(io::ReadFile(JobPaths::AttemptRecordPath(attempt)), "attempt");
  EXPECT_EQ(record.status, AttemptStatus::kDone);
}

// Retries back off: after n failed attempts a shard waits backoff * 2^(n-1)
// seconds (at most 600) from its last failure, and status says so.
TEST_F(WorkerTest, FailedShardsWaitOutAnExponentialBackoff) {
  PrepareJob(1);
  JobDir job = JobDir::Open(dir_ + "/job");
  const std::string shard = job.manifest().shards[0].id;
  ClaimStore claims(job);
  const auto fail_once = [&] {
    std::optional<Claim> c = claims.TryClaim(shard);
    ASSERT_TRUE(c.has_value());
    claims.StartAttempt(*c, "shards/x.jsonl");
    claims.SetAttemptStatus(c->attempt_dir(), AttemptStatus::kFailed, "boom");
    ASSERT_TRUE(claims.Release(*c));
  };
  EXPECT_EQ(claims.RetryBackoffLeft(shard, 100, job.FilesystemNowNanos()), 0);
  fail_once();
  double left = claims.RetryBackoffLeft(shard, 100, job.FilesystemNowNanos());
  EXPECT_GT(left, 95);
  EXPECT_LE(left, 100);
  fail_once();
  left = claims.RetryBackoffLeft(shard, 100, job.FilesystemNowNanos());
  EXPECT_GT(left, 195);
  EXPECT_LE(left, 200);
  for (int i = 0; i < 4; ++i) fail_once();
  left = claims.RetryBackoffLeft(shard, 100, job.FilesystemNowNanos());
  EXPECT_GT(left, 595);
  EXPECT_LE(left, 600);  // 100 * 2^5 capped
  EXPECT_EQ(claims.RetryBackoffLeft(shard, 0, job.FilesystemNowNanos()), 0);
}

TEST_F(WorkerTest, StatusShowsWhenAFailedShardMayBeRetried) {
  PrepareJob(1, "r.yaml", /*backoff=*/300);
  JobDir job = JobDir::Open(dir_ + "/job");
  ClaimStore claims(job);
  std::optional<Claim> c = claims.TryClaim(job.manifest().shards[0].id);
  ASSERT_TRUE(c.has_value());
  claims.StartAttempt(*c, "shards/x.jsonl");
  claims.SetAttemptStatus(c->attempt_dir(), AttemptStatus::kFailed, "boom");
  ASSERT_TRUE(claims.Release(*c));
  const std::vector<ShardStatus> statuses = JobDir::Open(dir_ + "/job").Statuses();
  EXPECT_EQ(statuses[0].state, ShardState::kPending);
  EXPECT_GT(statuses[0].retry_in_secs, 290);
  // A worker with nothing else to do waits for the backoff instead of
  // retrying at once (or ending the job); it wakes to see an abort.
  WorkerOptions o = Options();
  int asked = 0;
  o.aborted = [&] { return ++asked > 3; };
  EXPECT_EQ(RunWorker(o).end, WorkerEnd::kAborted);
  EXPECT_EQ(Count("job/attempts/" + job.manifest().shards[0].id), 1u);  // not retried yet
}

struct InfraStep {
  const char* op;
  const char* needle;
  int err;
};
void PrintTo(const InfraStep& step, std::ostream* os) {
  *os << step.op << " " << step.needle << " " << std::strerror(step.err);
}

class WorkerFilesystemFailure : public WorkerTest,
                                public ::testing::WithParamInterface<InfraStep> {};

// A full, read-only or failing job directory is not the shard's fault: the
// worker hands the attempt back as "interrupted", leaves no lock and no failed
// record, and ends with exit 75 naming the path and the error. Once the
// filesystem is healthy, the job completes with the bytes of a single run.
TEST_P(WorkerFilesystemFailure, HandsTheShardBackAndEndsWithExit75) {
  const std::string reference = ReferenceSha();
  PrepareJob(2);
  FailOnceDisk disk(GetParam().op, GetParam().needle, GetParam().err, /*times=*/-1);
  const WorkerOutcome out = RunWorker(Options(&disk));
  EXPECT_EQ(out.end, WorkerEnd::kFilesystemFailed);
  EXPECT_EQ(WorkerExitCode(out), 75);
  EXPECT_NE(out.error.find(GetParam().needle), std::string::npos) << out.error;
  EXPECT_NE(out.error.find(std::strerror(GetParam().err)), std::string::npos) << out.error;
  EXPECT_EQ(out.shards_failed, 0);
  EXPECT_EQ(Count("job/state/locks"), 0u);
  EXPECT_EQ(Count("job/state/failed"), 0u);
  const JobDir job = JobDir::Open(dir_ + "/job");
  ClaimStore claims(job);
  for (const ShardEntry& s : job.manifest().shards) EXPECT_EQ(claims.CountFailures(s.id), 0);

  const WorkerOutcome healthy = RunWorker(Options());
  EXPECT_EQ(healthy.end, WorkerEnd::kJobComplete);
  EXPECT_EQ(Count("job/state/done"), 2u);
  EXPECT_EQ(MergedSha(), reference);
}

INSTANTIATE_TEST_SUITE_P(Errors, WorkerFilesystemFailure,
                         ::testing::Values(InfraStep{"rename", "processed.jsonl", ENOSPC},
                                           InfraStep{"link", "/state/done/", EDQUOT},
                                           InfraStep{"mkdir", "/attempts/", EROFS},
                                           InfraStep{"replace", "attempt.json", EIO},
                                           InfraStep{"create", "/state/locks/", ESTALE}),
                         [](const ::testing::TestParamInfo<InfraStep>& info) {
                           std::string name =
                               std::string(info.param.op) + "_" + std::to_string(info.param.err);
                           return name;
                         });

// An attempt handed back for the filesystem says so in its record.
TEST_F(WorkerTest, TheHandedBackAttemptIsInterruptedWithTheReason) {
  PrepareJob(1);
  FailOnceDisk disk("rename", "processed.jsonl", ENOSPC, /*times=*/-1);
  EXPECT_EQ(RunWorker(Options(&disk)).end, WorkerEnd::kFilesystemFailed);
  const std::string attempts =
      dir_ + "/job/attempts/" + JobDir::Open(dir_ + "/job").manifest().shards[0].id;
  ASSERT_EQ(Count("job/attempts/" + fs::path(attempts).filename().string()), 1u);
  const std::string attempt = fs::directory_iterator(attempts)->path().string();
  const AttemptRecord record =
      AttemptRecord::FromJson(io::ReadFile(JobPaths::AttemptRecordPath(attempt)), "attempt");
  EXPECT_EQ(record.status, AttemptStatus::kInterrupted);
  EXPECT_NE(record.error.find("No space left on device"), std::string::npos) << record.error;
}

}  // namespace
}  // namespace djshard::store
