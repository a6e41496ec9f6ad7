// Distributed prepare (store/prepare_scan.h), its tasks run here one after
// the other: the cut, the lines workers read and the hashes are those of a
// one-node prepare, whatever the task size; the check blocks catch an edit.
#include "djshard/store/prepare_scan.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "djshard/common/error.h"
#include "djshard/io/disk.h"
#include "djshard/io/output.h"
#include "djshard/io/sha256.h"
#include "djshard/store/job.h"
#include "djshard/store/prepare.h"
#include "djshard/store/shard_source.h"
#include "tests/unit/temp_dir.h"

namespace djshard::store {
namespace {

using testing::TempDir;

std::string Sha256(std::string_view bytes) {
  io::Sha256 h;
  h.Update(bytes);
  return h.HexDigest();
}

class PrepareScan : public ::testing::Test {
 protected:
  // a.jsonl: compact lines, one longer than two tasks; b.jsonl: spaced
  // (minified), no newline at its end; c.jsonl: relative image paths
  // (rewritten), one task.
  void WriteCorpus() {
    std::string a, b, c;
    for (int i = 0; i < 900; ++i) {
      const std::string n = std::to_string(i);
      a += "{\"text\":\"alpha " + n + std::string(static_cast<size_t>(i % 97) * 3, 'x') +
           "\",\"n\":" + n + "}\n";
      if (i == 300) a += "{\"text\":\"" + std::string(150000, 'L') + "\"}\n";
      b += "{ \"text\" : \"beta " + n + "\" , \"n\" : " + n + " }";
      if (i + 1 < 900) b += "\n";
    }
    for (int i = 0; i < 20; ++i) {
      c += "{\"text\":\"gamma\",\"images\":[\"img/" + std::to_string(i) + ".png\"]}\n";
    }
    dir_.Write("in/a.jsonl", a);
    dir_.Write("in/b.jsonl", b);
    dir_.Write("in/c.jsonl", c);
    dir_.Write("r.yaml", "process:\n  - text_length_filter:\n");
  }

  PrepareRequest Request(const std::string& job, int64_t shards) const {
    PrepareRequest req;
    req.config_path = dir_.Path("r.yaml");
    req.dataset_path = dir_.Path("in");
    req.job_dir = dir_.Path(job);
    req.num_shards = shards;
    req.shards_mode = ShardsMode::kReference;
    req.threads = 2;
    return req;
  }

  // The tasks run here, in order, as dlc instances would run them.
  DistributedScan LocalScan(uint64_t task_bytes) const {
    const std::string dir = dir_.Path("scan");
    std::filesystem::create_directories(dir);
    return {task_bytes,
            [dir](const ScanPlan& plan) {
              std::vector<ScanTaskResult> out;
              for (size_t i = 0; i < plan.tasks.size(); ++i) {
                out.push_back(RunScanTask(plan, i, 2, dir, "t" + std::to_string(plan.task_bytes)));
                out.back().data_file = dir + "/" + out.back().data_file;
              }
              return out;
            },
            {},
            dir};
  }

  Manifest Distributed(const std::string& job, int64_t shards, uint64_t task_bytes) const {
    PrepareRequest req = Request(job, shards);
    req.distributed_scan = LocalScan(task_bytes);
    return Prepare(req).manifest;
  }

  // Every shard's lines as a worker reads them.
  std::vector<std::string> ShardLines(const std::string& job, const Manifest& m) const {
    std::vector<std::string> out;
    const JobPaths paths(dir_.Path(job));
    for (const ShardEntry& s : m.shards) {
      std::unique_ptr<io::ByteSource> src = OpenShard(paths, m, s);
      std::string bytes(1 << 16, '\0'), all;
      for (size_t n; (n = src->Read(bytes.data(), bytes.size())) > 0;) all.append(bytes, 0, n);
      out.push_back(all);
    }
    return out;
  }

  TempDir dir_;
};

TEST_F(PrepareScan, CutsTheShardsOfAOneNodePrepareWhateverTheTaskSize) {
  WriteCorpus();
  const Manifest one = Prepare(Request("one", 7)).manifest;
  const std::vector<std::string> lines = ShardLines("one", one);
  for (const uint64_t task_bytes :
       {kScanTaskUnitBytes, 3 * kScanTaskUnitBytes, uint64_t{4} << 20}) {
    const std::string job = "dist" + std::to_string(task_bytes);
    const Manifest m = Distributed(job, 7, task_bytes);
    ASSERT_EQ(m.shards.size(), one.shards.size());
    EXPECT_EQ(m.total_rows, one.total_rows);
    EXPECT_EQ(m.total_size_bytes, one.total_size_bytes);
    EXPECT_EQ(m.scan_task_bytes, task_bytes);
    for (size_t i = 0; i < m.shards.size(); ++i) {
      const ShardEntry &s = m.shards[i], &o = one.shards[i];
      EXPECT_EQ(s.rows, o.rows) << i;
      EXPECT_EQ(s.size_bytes, o.size_bytes) << i;
      EXPECT_TRUE(s.checksum.empty());
      ASSERT_EQ(s.ranges.size(), o.ranges.size()) << i;
      for (size_t k = 0; k < s.ranges.size(); ++k) {
        const ShardRange &r = s.ranges[k], &q = o.ranges[k];
        EXPECT_EQ(
            std::vector<uint64_t>({r.file, r.offset, r.length, r.rows, r.first_row, r.first_line}),
            std::vector<uint64_t>({q.file, q.offset, q.length, q.rows, q.first_row, q.first_line}))
            << "shard " << i << " range " << k;
        EXPECT_TRUE(r.checksum.empty());
      }
    }
    for (size_t f = 0; f < m.input_files.size(); ++f) {
      EXPECT_EQ(m.input_files[f].rows, one.input_files[f].rows);
      EXPECT_EQ(m.input_files[f].normalization, one.input_files[f].normalization);
    }
    const std::vector<std::string> read = ShardLines(job, m);
    EXPECT_EQ(read, lines) << task_bytes;
    // Blocks of every file, one line of 33 bytes each.
    const std::string blocks = dir_.Read(job + "/" + kInputBlocksFile);
    EXPECT_EQ(blocks.size(), m.check_blocks_bytes);
    EXPECT_EQ(blocks.size() % 33, 0u);
  }
}

// A copy job: the tasks write the shard files that a one-node prepare writes.
TEST_F(PrepareScan, WritesTheShardFilesOfACopyJobAsAOneNodePrepare) {
  WriteCorpus();
  PrepareRequest plain = Request("one", 5);
  plain.shards_mode = ShardsMode::kCopy;
  const Manifest one = Prepare(plain).manifest;
  PrepareRequest req = Request("dist", 5);
  req.shards_mode = ShardsMode::kCopy;
  req.distributed_scan = LocalScan(kScanTaskUnitBytes);
  const std::string tasks = dir_.Path("write-tasks");
  std::filesystem::create_directories(tasks);
  req.distributed_scan.write = [tasks](const ShardWritePlan& plan) {
    // The plan names no coordinator's staging: one that takes over plans
    // the same tasks.
    EXPECT_EQ(plan.blocks_dir.rfind(tasks.substr(0, tasks.rfind('/')) + "/scan/write-blocks-", 0),
              0u)
        << plan.blocks_dir;
    EXPECT_EQ(plan.ToJson().find(".preparing."), std::string::npos);
    // A writer whose claim was taken over stops and removes its file.
    EXPECT_THROW(RunShardWriteTask(plan, 0, tasks, "lost", [] { return false; }), Error);
    EXPECT_FALSE(std::filesystem::exists(tasks + "/part-00000-of-00005.lost.jsonl"));
    std::vector<nlohmann::json> out;
    for (size_t i = 0; i < plan.tasks.size(); ++i) {
      out.push_back(RunShardWriteTask(plan, i, tasks, "t", [] { return true; }));
      for (nlohmann::json& shard : out.back()["shards"]) {
        shard["file"] = tasks + "/" + shard["file"].get<std::string>();
      }
    }
    return out;
  };
  const Manifest m = Prepare(req).manifest;
  EXPECT_EQ(m.schema_version, kManifestSchemaVersion);
  EXPECT_EQ(m.shards_mode, ShardsMode::kCopy);
  EXPECT_EQ(m.check_block_bytes, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_.Path("dist/" + std::string(kInputBlocksFile))));
  ASSERT_EQ(m.shards.size(), one.shards.size());
  for (size_t i = 0; i < m.shards.size(); ++i) {
    EXPECT_EQ(m.shards[i].path, one.shards[i].path);
    EXPECT_EQ(m.shards[i].rows, one.shards[i].rows);
    EXPECT_EQ(m.shards[i].checksum, one.shards[i].checksum) << i;
    EXPECT_TRUE(m.shards[i].ranges.empty());
    EXPECT_TRUE(dir_.Read("dist/" + m.shards[i].path) == dir_.Read("one/" + one.shards[i].path))
        << i;
  }
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.Path("dist/shards"))) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos);
    ++files;
  }
  EXPECT_EQ(files, m.shards.size());
}

TEST_F(PrepareScan, AFileOfSeveralTasksHasTheTreeHashThatSplitAndSha256sumGive) {
  WriteCorpus();
  const uint64_t block = 2 * kScanTaskUnitBytes;
  const Manifest m = Distributed("dist", 3, block);
  const std::string a = dir_.Read("in/a.jsonl");
  ASSERT_GT(a.size(), 2 * block);
  std::string lines;
  for (size_t at = 0; at < a.size(); at += block) lines += Sha256(a.substr(at, block)) + "\n";
  EXPECT_EQ(m.input_files[0].tree_sha256, Sha256(lines));
  EXPECT_EQ(m.input_files[0].sha256, "");
  EXPECT_EQ(FileTreeSha256(dir_.Path("in/a.jsonl"), block), Sha256(lines));
  // c.jsonl is one task: its plain SHA-256.
  EXPECT_EQ(m.input_files[2].sha256, Sha256(dir_.Read("in/c.jsonl")));
  EXPECT_EQ(m.input_files[2].tree_sha256, "");
  EXPECT_EQ(m.normalized_sha256, "");
  EXPECT_EQ(m.normalized_tree_sha256.size(), 64u);
  // The same request again finds the job unchanged, by its tree hashes.
  PrepareRequest again = Request("dist", 3);
  again.distributed_scan = LocalScan(block);
  EXPECT_TRUE(Prepare(again).already_prepared);
}

TEST_F(PrepareScan, AByteEditedAfterPrepareFailsTheShardThatReadsItsBlock) {
  WriteCorpus();
  const Manifest m = Distributed("dist", 4, kScanTaskUnitBytes);
  const std::string path = dir_.Path("in/a.jsonl");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  std::string a = dir_.Read("in/a.jsonl");
  const size_t at = a.find("alpha 5");
  a[at] = 'A';
  dir_.Write("in/a.jsonl", a);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  try {
    ShardLines("dist", m);
    FAIL() << "the edit went unnoticed";
  } catch (const InputChangedError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(std::string(e.what()).find("differ (xxh3_128 of its check block 0)"),
              std::string::npos)
        << e.what();
  }
  PrepareRequest again = Request("dist", 4);
  again.distributed_scan = LocalScan(kScanTaskUnitBytes);
  EXPECT_THROW(Prepare(again), Error) << "a repeated prepare compares the tree hash";
}

TEST_F(PrepareScan, AnEditedCheckBlocksFileIsTheJobDirectorysFaultNotTheInputs) {
  WriteCorpus();
  const Manifest m = Distributed("dist", 4, kScanTaskUnitBytes);
  std::string blocks = dir_.Read("dist/" + std::string(kInputBlocksFile));
  blocks[0] = blocks[0] == '0' ? '1' : '0';
  dir_.Write("dist/" + std::string(kInputBlocksFile), blocks);
  try {
    ShardLines("dist", m);
    FAIL() << "the edit went unnoticed";
  } catch (const InputChangedError& e) {
    FAIL() << "blamed on the input: " << e.what();
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), dir_.Path("dist/" + std::string(kInputBlocksFile)));
    EXPECT_NE(std::string(e.what()).find("differ from the manifest"), std::string::npos)
        << e.what();
  }
}

TEST_F(PrepareScan, ABadLineInALaterTaskIsNamedByItsLineInTheFile) {
  WriteCorpus();
  std::string a = dir_.Read("in/a.jsonl");
  size_t at = 0;
  for (int line = 1; line < 700; ++line) at = a.find('\n', at) + 1;
  ASSERT_GT(at, 3 * kScanTaskUnitBytes);
  a.insert(at, "{not json}\n");
  dir_.Write("in/a.jsonl", a);
  PrepareRequest req = Request("dist", 4);
  req.distributed_scan = LocalScan(kScanTaskUnitBytes);
  try {
    Prepare(req);
    FAIL() << "the bad line went unnoticed";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), dir_.Path("in/a.jsonl"));
    EXPECT_EQ(e.line(), 700u);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.Path("dist")));
}

// A one-node prepare hashes an input already minified only once, for copy
// and reference shards: the normalized stream's SHA-256 is what sha256sum
// gives for the normalized lines, whether they stay the file's bytes to its
// end, lack the file's last '\n', or stop being its bytes after a few chunks,
// and when the stream begins with a second file, after an empty one (plain or
// compressed) or a compressed one.
TEST_F(PrepareScan, TheNormalizedDigestOfAnInputAlreadyMinifiedIsTheStreams) {
  std::string compact;
  for (int i = 0; compact.size() < (3u << 20); ++i) {
    compact += "{\"text\":\"row " + std::to_string(i) +
               std::string(static_cast<size_t>(i % 89), 'y') + "\",\"n\":" + std::to_string(i) +
               "}\n";
  }
  const std::string spaced = "{ \"text\" : \"spaced\" }\n", minified = "{\"text\":\"spaced\"}\n";
  const std::string last = "{\"t\":1}";
  struct File {
    std::string name, bytes, normalized;
  };
  struct Case {
    std::string name;
    std::vector<File> files;
  };
  const std::vector<Case> cases = {
      {"whole", {{"a.jsonl", compact, compact}}},
      {"no-newline", {{"a.jsonl", compact + last, compact + last + "\n"}}},
      {"spaced-later", {{"a.jsonl", compact + spaced + compact, compact + minified + compact}}},
      {"spaced-first", {{"a.jsonl", spaced + compact, minified + compact}}},
      {"two-files", {{"a.jsonl", compact, compact}, {"b.jsonl", compact, compact}}},
      {"after-empty", {{"a.jsonl", "", ""}, {"b.jsonl", compact + last, compact + last + "\n"}}},
      {"after-empty-gz",
       {{"a.jsonl.gz", "", ""}, {"b.jsonl", compact + last, compact + last + "\n"}}},
      {"after-gz", {{"a.jsonl.gz", compact, compact}, {"b.jsonl", compact, compact}}},
  };
  for (const std::string mode : {"reference", "copy", "distributed"}) {
    for (const Case& c : cases) {
      const std::string name = c.name + "-" + mode;
      std::filesystem::remove_all(dir_.Path("in"));
      std::filesystem::create_directories(dir_.Path("in"));
      std::string normalized, tree;  // tree: a distributed scan's, one task per file
      bool compressed = false;
      for (const File& f : c.files) {
        if (f.name.ends_with(".gz")) {
          io::OutputStream gz(dir_.Path("in/" + f.name), true);
          gz.Append(f.bytes);
          gz.Commit();
          compressed = true;
        } else {
          dir_.Write("in/" + f.name, f.bytes);
        }
        normalized += f.normalized;
        tree += Sha256(f.normalized) + "\n";
      }
      if (mode == "distributed" && compressed) continue;  // refused for compressed input
      dir_.Write("r.yaml", "process:\n  - text_length_filter:\n");
      PrepareRequest req = Request("job-" + name, 3);
      if (mode == "copy") req.shards_mode = ShardsMode::kCopy;
      if (mode == "distributed") req.distributed_scan = LocalScan(uint64_t{8} << 20);
      const Manifest m = Prepare(req).manifest;
      if (mode == "distributed" && c.files.size() > 1) {
        EXPECT_EQ(m.normalized_tree_sha256, Sha256(tree)) << name;
      } else {
        EXPECT_EQ(m.normalized_sha256, Sha256(normalized)) << name;
      }
      ASSERT_EQ(m.input_files.size(), c.files.size()) << name;
      for (size_t f = 0; f < c.files.size(); ++f) {
        EXPECT_EQ(m.input_files[f].sha256, Sha256(dir_.Read("in/" + c.files[f].name)))
            << name << " " << f;
      }
      std::string lines;
      for (const std::string& shard : ShardLines("job-" + name, m)) lines += shard;
      EXPECT_EQ(lines, normalized) << name;
    }
  }
}

}  // namespace
}  // namespace djshard::store
