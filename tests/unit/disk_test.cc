// The real Disk's primitives: atomic replace, exclusive create, first-writer-
// wins publishing, where temporary files go, and errors that name the path.
#include "djshard/io/disk.h"

#include <gtest/gtest.h>

#include "djshard/common/error.h"
#include "tests/unit/temp_dir.h"

namespace djshard::io {
namespace {

class DiskTest : public ::testing::Test {
 protected:
  Disk& disk_ = RealDisk();
  testing::TempDir tmp_;
};

TEST_F(DiskTest, WriteAtomicCreatesAndReplacesLeavingNoTemporary) {
  disk_.WriteAtomic(tmp_.Path("f.json"), "first");
  EXPECT_EQ(tmp_.Read("f.json"), "first");
  disk_.WriteAtomic(tmp_.Path("f.json"), "second, longer");
  EXPECT_EQ(tmp_.Read("f.json"), "second, longer");
  disk_.WriteAtomic(tmp_.Path("f.json"), "");
  EXPECT_EQ(tmp_.Read("f.json"), "");
  EXPECT_EQ(tmp_.List(), (std::vector<std::string>{"f.json"}));
}

TEST_F(DiskTest, WriteReplaceCreatesAndReplacesLeavingNoTemporary) {
  disk_.WriteReplace(tmp_.Path("a.json"), "1");
  disk_.WriteReplace(tmp_.Path("a.json"), "22");
  EXPECT_EQ(tmp_.Read("a.json"), "22");
  EXPECT_EQ(tmp_.List(), (std::vector<std::string>{"a.json"}));
}

TEST_F(DiskTest, WriteAtomicIntoAMissingDirectoryNamesThePathAndLeavesNothing) {
  try {
    disk_.WriteAtomic(tmp_.Path("missing/f.json"), "x");
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(tmp_.Path("missing/f.json")), std::string::npos)
        << e.what();
    EXPECT_NE(e.message().find("cannot create"), std::string::npos) << e.message();
  }
  EXPECT_TRUE(tmp_.List().empty());
}

TEST_F(DiskTest, CreateExclusiveReturnsFalseOnAnExistingFileAndLeavesItAlone) {
  EXPECT_TRUE(disk_.CreateExclusive(tmp_.Path("lock"), "mine\n"));
  EXPECT_EQ(tmp_.Read("lock"), "mine\n");
  EXPECT_FALSE(disk_.CreateExclusive(tmp_.Path("lock"), "yours\n"));
  EXPECT_FALSE(disk_.CreateExclusive(tmp_.Path("lock"), "yours\n", /*durable=*/false));
  EXPECT_EQ(tmp_.Read("lock"), "mine\n");
  EXPECT_TRUE(disk_.CreateExclusive(tmp_.Path("other"), "", /*durable=*/false));
  EXPECT_EQ(tmp_.List(), (std::vector<std::string>{"lock", "other"}));
}

TEST_F(DiskTest, CreateExclusiveInAMissingDirectoryIsAnErrorNotALostRace) {
  try {
    disk_.CreateExclusive(tmp_.Path("missing/lock"), "x");
    ADD_FAILURE() << "created in a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), tmp_.Path("missing/lock"));
    EXPECT_EQ(e.message(), "cannot create: No such file or directory");
  }
}

TEST_F(DiskTest, PublishLinkFirstWriterWinsAndNoTemporaryIsLeft) {
  EXPECT_TRUE(disk_.PublishLink(tmp_.Path("done.json"), "first"));
  EXPECT_FALSE(disk_.PublishLink(tmp_.Path("done.json"), "second"));
  EXPECT_EQ(tmp_.Read("done.json"), "first");
  EXPECT_EQ(tmp_.List(), (std::vector<std::string>{"done.json"}));
}

TEST_F(DiskTest, PublishLinkPutsItsTemporaryInTheTempDir) {
  tmp_.Write("attempt/keep", "");
  tmp_.Write("state/.keep", "");
  EXPECT_TRUE(disk_.PublishLink(tmp_.Path("state/done.json"), "a", tmp_.Path("attempt")));
  EXPECT_FALSE(disk_.PublishLink(tmp_.Path("state/done.json"), "b", tmp_.Path("attempt")));
  EXPECT_EQ(tmp_.Read("state/done.json"), "a");
  EXPECT_EQ(tmp_.List("attempt"), (std::vector<std::string>{"keep"}));
  EXPECT_EQ(tmp_.List("state"), (std::vector<std::string>{".keep", "done.json"}));
  // A temp dir that does not exist is where the create fails, not beside the record.
  try {
    disk_.PublishLink(tmp_.Path("state/other.json"), "c", tmp_.Path("no-attempt"));
    ADD_FAILURE() << "published through a missing temp dir";
  } catch (const Error& e) {
    EXPECT_EQ(e.file().rfind(tmp_.Path("no-attempt/other.json.tmp."), 0), 0u) << e.file();
  }
  EXPECT_FALSE(tmp_.Exists("state/other.json"));
}

TEST_F(DiskTest, AFailedPublishLeavesItsTemporaryNowhere) {
  tmp_.Write("attempt/keep", "");
  try {
    disk_.PublishLink(tmp_.Path("missing/done.json"), "a", tmp_.Path("attempt"));
    ADD_FAILURE() << "published into a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), tmp_.Path("missing/done.json"));
    EXPECT_EQ(e.message().rfind("cannot publish", 0), 0u) << e.message();
  }
  EXPECT_EQ(tmp_.List("attempt"), (std::vector<std::string>{"keep"}));
}

TEST_F(DiskTest, LinkIsFirstWriterWinsAndALinkAlreadyMadeIsOurs) {
  disk_.WriteAtomic(tmp_.Path("a"), "a");
  disk_.WriteAtomic(tmp_.Path("b"), "b");
  EXPECT_TRUE(disk_.Link(tmp_.Path("a"), tmp_.Path("record")));
  // Another file at the target: someone else's.
  EXPECT_FALSE(disk_.Link(tmp_.Path("b"), tmp_.Path("record")));
  // The same inode at the target: our own link, answered EEXIST as NFS does
  // when it sends the request again after a lost reply.
  EXPECT_TRUE(disk_.Link(tmp_.Path("a"), tmp_.Path("record")));
  EXPECT_EQ(tmp_.Read("record"), "a");
}

TEST_F(DiskTest, RenameMovesAndNamesBothPathsOnFailure) {
  tmp_.Write("a", "x");
  disk_.Rename(tmp_.Path("a"), tmp_.Path("b"));
  EXPECT_EQ(tmp_.List(), (std::vector<std::string>{"b"}));
  EXPECT_EQ(tmp_.Read("b"), "x");
  try {
    disk_.Rename(tmp_.Path("a"), tmp_.Path("c"));
    ADD_FAILURE() << "renamed a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), tmp_.Path("c"));
    EXPECT_NE(e.message().find(tmp_.Path("a")), std::string::npos) << e.message();
  }
}

TEST_F(DiskTest, SyncDirOfAMissingDirectoryNamesIt) {
  disk_.SyncDir(tmp_.dir());
  try {
    disk_.SyncDir(tmp_.Path("missing"));
    ADD_FAILURE() << "synced a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), tmp_.Path("missing"));
  }
}

TEST_F(DiskTest, ReadFileReturnsEveryByteAndItsErrorNamesThePath) {
  std::string big(200000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31);
  tmp_.Write("big.bin", big);
  EXPECT_TRUE(ReadFile(tmp_.Path("big.bin")) == big);
  try {
    ReadFile(tmp_.Path("absent.json"));
    ADD_FAILURE() << "read a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), tmp_.Path("absent.json"));
    EXPECT_EQ(e.message(), "cannot open: No such file or directory");
    EXPECT_EQ(std::string(e.what()).rfind(tmp_.Path("absent.json") + ": cannot open", 0), 0u);
  }
}

TEST_F(DiskTest, RemoveTreeQuietlyRemovesATreeAndIgnoresAMissingOne) {
  tmp_.Write("t/a/b/c", "x");
  RemoveTreeQuietly(tmp_.Path("t"));
  EXPECT_FALSE(tmp_.Exists("t"));
  RemoveTreeQuietly(tmp_.Path("t"));
}

}  // namespace
}  // namespace djshard::io
