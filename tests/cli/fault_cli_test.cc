// Faults that are not the shard's: a job directory on a filesystem that
// fills up in the middle of a shard.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "djshard/io/sha256.h"
#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

class FaultCli : public CliTest {};

// The libtorch module loads beside the libraries djshard itself links
// (libsentencepiece exports protobuf symbols that libtorch's protobuf must not
// bind to): `djshard version` reports the libtorch it found.
TEST_F(FaultCli, VersionLoadsTheTorchModule) {
  const CliResult r = Run({"version"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("djshard "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libtorch: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("cannot load"), std::string::npos) << r.out;
}

// The job lives on a small tmpfs in a private mount namespace. A worker fills
// it mid-shard: exit 75 naming the path and the error, the attempt
// "interrupted", no failed record, no lock and no half-written file. Once the
// mount is enlarged, the same job completes with the bytes of a single run.
TEST_F(FaultCli, AFullJobDirectoryHandsTheShardBackAndTheJobCompletesOnceThereIsSpace) {
  std::string rows;
  for (int i = 0; i < 4000; ++i) {
    rows += "{\"id\":" + std::to_string(i) + ",\"text\":\"  row " + std::to_string(i) + " " +
            std::string(480, 'x') + " \"}\n";
  }
  Write("data.jsonl", rows);  // about 2 MB, compact, so run and merge see the same bytes
  DemoRecipe();
  ASSERT_EQ(Run({"run", "--config", "recipe.yaml", "--export-path", "reference.jsonl"}).exit_code,
            0);
  Write("fill.sh", std::string(R"SH(set -u
cd "$1"; bin="$2"
mkdir -p mnt
if ! mount -t tmpfs -o size=16m none mnt 2>/dev/null; then echo "mount=refused"; exit 0; fi
"$bin" prepare --config recipe.yaml --job-dir mnt/job --num-shards 2 --lease-secs 5 \
  --heartbeat-secs 1 >/dev/null || { echo "prepare=failed"; exit 0; }
used=$(du -sk mnt | cut -f1)
mount -o remount,size=$((used + 512))k mnt
"$bin" worker --job-dir mnt/job --threads 1 2>full.err; echo "full=$?"
echo "failed=$(ls mnt/job/state/failed | wc -l) locks=$(ls mnt/job/state/locks | wc -l)"
echo "tmp=$(find mnt/job -name '*.tmp.*' | wc -l) outputs=$(find mnt/job/attempts -name processed.jsonl | wc -l)"
echo "statuses=$(cat mnt/job/attempts/*/*/attempt.json | grep -o '"status": "[a-z]*"' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
mount -o remount,size=16m mnt
"$bin" worker --job-dir mnt/job --threads 1 2>/dev/null; echo "healthy=$?"
"$bin" merge --job-dir mnt/job --output merged.jsonl >/dev/null; echo "merge=$?"
umount mnt
)SH"));
  // The script gets the test dir and the djshard binary as $1 and $2.
  const CliResult r = WaitFor(
      Spawn({}, {}, {"unshare", "-m", "--propagation", "private", "bash", Path("fill.sh"), dir_}));
  if (r.out.find("mount=refused") != std::string::npos) {
    GTEST_SKIP() << "mounting a tmpfs is not allowed here (needs root and a mount namespace)";
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("full=75"), std::string::npos) << r.out;
  const std::string err = Read("full.err");
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_NE(err.find("mnt/job/attempts/"), std::string::npos) << err;
  EXPECT_NE(err.find("the job directory's filesystem failed"), std::string::npos) << err;
  EXPECT_NE(r.out.find("failed=0 locks=0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tmp=0 outputs="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"status\": \"interrupted\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"status\": \"failed\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("healthy=0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("merge=0"), std::string::npos) << r.out;
  EXPECT_EQ(io::Sha256OfFile(Path("merged.jsonl")), io::Sha256OfFile(Path("reference.jsonl")));
}

// About 8 MB of compact rows of varied lengths: normalizing leaves them as
// they are.
std::string EightMbOfCompactRows() {
  std::string rows;
  for (int i = 0; rows.size() < (8u << 20); ++i) {
    rows += "{\"id\":" + std::to_string(i) + ",\"text\":\"row " + std::to_string(i) + " " +
            std::string(200 + i % 300, 'y') + "\"}\n";
  }
  return rows;
}

// Prepare writes the data once: a job directory on a filesystem only 5%
// larger than the normalized input holds the job, and its shards are the
// input's rows in order.
TEST_F(FaultCli, PrepareFitsOnAFilesystemFivePercentLargerThanTheData) {
  const std::string rows = EightMbOfCompactRows();
  Write("data.jsonl", rows);  // compact: normalizing leaves it as it is
  DemoRecipe();
  const uint64_t limit_kb = (rows.size() * 105 / 100 + 1023) / 1024;
  Write("small.sh", std::string(R"SH(set -u
cd "$1"; bin="$2"; kb="$3"
mkdir -p mnt
if ! mount -t tmpfs -o size=${kb}k none mnt 2>/dev/null; then echo "mount=refused"; exit 0; fi
"$bin" prepare --config recipe.yaml --job-dir mnt/job --num-shards 4 2>prepare.err
echo "prepare=$?"
cat mnt/job/shards/*.jsonl >shards.jsonl
echo "left=$(ls -A mnt | tr '
' ' ')"
umount mnt
)SH"));
  // The script gets the test dir, the djshard binary and the size as $1..$3.
  const CliResult r =
      WaitFor(Spawn({std::to_string(limit_kb)}, {},
                    {"unshare", "-m", "--propagation", "private", "bash", Path("small.sh"), dir_}));
  if (r.out.find("mount=refused") != std::string::npos) {
    GTEST_SKIP() << "mounting a tmpfs is not allowed here (needs root and a mount namespace)";
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("prepare=0"), std::string::npos) << r.out << Read("prepare.err");
  EXPECT_NE(r.out.find("left=job \n"), std::string::npos) << r.out;
  EXPECT_TRUE(Read("shards.jsonl") == rows);
}

// A distributed prepare of a copy job writes the shards once too (its write
// tasks' files are linked into the job): it fits on a filesystem 5% larger
// than the data. A second job on the now full filesystem fails naming the
// file and "No space left on device", and leaves no temporary file and no
// task file, only the prepare's result.
TEST_F(FaultCli, ADistributedPrepareFitsBesideTheDataAndFailsCleanlyWhenFull) {
  const std::string rows = EightMbOfCompactRows();
  Write("data.jsonl", rows);
  DemoRecipe();
  const uint64_t limit_kb = (rows.size() * 105 / 100 + 1023) / 1024;
  Write("dist.sh", std::string(R"SH(set -u
cd "$1"; bin="$2"; kb="$3"
mkdir -p mnt
if ! mount -t tmpfs -o size=${kb}k none mnt 2>/dev/null; then echo "mount=refused"; exit 0; fi
for job in job job2; do
  "$bin" prepare --config recipe.yaml --job-dir mnt/$job --num-shards 4 --distributed \
    --task-mib 0.25 --poll-interval-secs 0.2 2>$job.err >/dev/null
  echo "$job=$?"
done
cat mnt/job/shards/*.jsonl >shards.jsonl
echo "left=$(ls -A mnt | tr '\n' ' ')"
echo "coordination=$(ls -A mnt/.job2.dlc-coordination/prepare | tr '\n' ' ')"
echo "tmp=$(find mnt -name '*.tmp.*' -o -name '*.jsonl' -path '*coordination*' | wc -l)"
umount mnt
)SH"));
  const CliResult r =
      WaitFor(Spawn({std::to_string(limit_kb)}, {},
                    {"unshare", "-m", "--propagation", "private", "bash", Path("dist.sh"), dir_}));
  if (r.out.find("mount=refused") != std::string::npos) {
    GTEST_SKIP() << "mounting a tmpfs is not allowed here (needs root and a mount namespace)";
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("job=0"), std::string::npos) << r.out << Read("job.err");
  EXPECT_TRUE(Read("shards.jsonl") == rows);
  EXPECT_NE(r.out.find("job2=2"), std::string::npos) << r.out;
  const std::string err = Read("job2.err");
  EXPECT_NE(err.find("ERROR: " + Path("mnt/.job2.dlc-coordination/prepare/write-")),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_NE(r.out.find("left=.job.dlc-coordination .job2.dlc-coordination job \n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("coordination=prepare-result.json \n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tmp=0"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace djshard::testing

namespace djshard::testing {
namespace {

// A filesystem without hard links (a FUSE mount whose link() fails, as on
// vfat or sshfs without its hard_link option) cannot hold a job: prepare
// refuses it naming link() and the mount, before writing anything. tmpfs and
// ext4 (the other tests' job dirs) are accepted.
TEST_F(FaultCli, AFilesystemWithoutHardLinksIsRefusedNamingLinkAndTheMount) {
  Write("data.jsonl", "{\"text\":\"one row\"}\n{\"text\":\"two rows\"}\n");
  DemoRecipe();
  Write("nolink.sh", std::string(R"SH(set -u
cd "$1"; fs="$2"; bin="$3"
mkdir -p root mnt
if ! /usr/bin/python3 "$fs" root mnt 2>fuse.err; then echo "mount=refused"; exit 0; fi
for i in $(seq 50); do mountpoint -q mnt && break; sleep 0.1; done
"$bin" prepare --config recipe.yaml --job-dir mnt/job --num-shards 1 >out.txt 2>err.txt
echo "prepare=$?"
echo "left=$(ls -A root | wc -l)"
umount mnt
)SH"));
  const CliResult r =
      WaitFor(Spawn({}, {},
                    {"unshare", "-m", "--propagation", "private", "bash", Path("nolink.sh"), dir_,
                     std::string(DJSHARD_SOURCE_DIR) + "/tests/cli/tools/nolink_fs.py"}));
  if (r.out.find("mount=refused") != std::string::npos) {
    GTEST_SKIP() << "cannot mount a FUSE filesystem here: " << Read("fuse.err");
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("prepare=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("left=0"), std::string::npos) << r.out;
  const std::string err = Read("err.txt");
  EXPECT_NE(err.find("does not support link(): "), std::string::npos) << err;
  EXPECT_NE(err.find("fuse"), std::string::npos) << err;
  EXPECT_NE(err.find(Path("mnt")), std::string::npos) << err;
}

}  // namespace
}  // namespace djshard::testing
