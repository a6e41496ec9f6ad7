// Output files: nothing under the final name before Commit(), nothing at all
// after a failure, plain/gzip/zstd by name, overwrite refusal, content hash.
#include "djshard/io/output.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <optional>

#include "djshard/common/error.h"
#include "djshard/io/checksum.h"
#include "djshard/io/input.h"
#include "tests/unit/temp_dir.h"

namespace djshard::io {
namespace {

// The content of a file as OpenInput decodes it (gzip and zstd by name).
std::string Decoded(const std::string& path) {
  std::unique_ptr<ByteSource> in = OpenInput(path);
  std::string out;
  char buf[4096];
  for (size_t n; (n = in->Read(buf, sizeof buf)) > 0;) out.append(buf, n);
  return out;
}

std::string Xxh3Of(std::string_view bytes) {
  Xxh3 h;
  h.Update(bytes);
  return h.HexDigest();
}

// About 3 MB of varied lines: more than the writer's 1 MB buffer.
std::string Content() {
  std::string s;
  for (int i = 0; s.size() < (3u << 20); ++i) {
    s += "{\"id\":" + std::to_string(i) + ",\"text\":\"line " + std::to_string(i * 7919) + "\"}\n";
  }
  return s;
}

class OutputTest : public ::testing::Test {
 protected:
  testing::TempDir tmp_;
};

TEST_F(OutputTest, NothingIsVisibleUnderTheFinalNameBeforeCommit) {
  const std::string path = tmp_.Path("out.jsonl");
  OutputStream out(path, false);
  out.Append("{\"a\":1}\n");
  EXPECT_FALSE(tmp_.Exists("out.jsonl"));
  // The bytes go to a temporary file beside it.
  const std::vector<std::string> names = tmp_.List();
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0].rfind("out.jsonl.tmp.", 0), 0u) << names[0];
  out.Commit();
  EXPECT_EQ(tmp_.Read("out.jsonl"), "{\"a\":1}\n");
  EXPECT_EQ(tmp_.List(), (std::vector<std::string>{"out.jsonl"}));
}

// A plain stream with nothing in it can become a link of a plain file: the
// committed output is that file's inode, and nothing may be appended after.
TEST_F(OutputTest, AnEmptyPlainStreamBecomesALinkOfAFileAndTakesNothingMore) {
  const std::string tap = tmp_.Path("tap.jsonl");
  {
    OutputStream source(tap, false);
    source.Append(Content());
    source.Commit();
  }
  OutputStream out(tmp_.Path("out.jsonl"), false);
  ASSERT_TRUE(out.LinkFile(tap));
  EXPECT_EQ(out.bytes_in(), Content().size());
  EXPECT_FALSE(out.LinkFile(tap)) << "linked once";
  EXPECT_THROW(
      {
        out.Append("{}\n");
        out.Commit();
      },
      Error);
  OutputStream again(tmp_.Path("again.jsonl"), false);
  ASSERT_TRUE(again.LinkFile(tap));
  again.Commit();
  EXPECT_TRUE(tmp_.Read("again.jsonl") == Content());
  struct stat a {
  }, b{};
  ASSERT_EQ(::stat(tap.c_str(), &a), 0);
  ASSERT_EQ(::stat(tmp_.Path("again.jsonl").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  // Not when something was appended, nor into a compressed stream.
  OutputStream started(tmp_.Path("started.jsonl"), false);
  started.Append("{}\n");
  EXPECT_FALSE(started.LinkFile(tap));
  OutputStream gz(tmp_.Path("out.jsonl.gz"), false);
  EXPECT_FALSE(gz.LinkFile(tap));
}

// Another filesystem cannot link: the stream stays as it was, for a copy.
TEST_F(OutputTest, AFileOnAnotherFilesystemIsNotLinkedButCopied) {
  struct stat shm {
  }, here{};
  if (::stat("/dev/shm", &shm) != 0 || ::stat(tmp_.dir().c_str(), &here) != 0 ||
      shm.st_dev == here.st_dev) {
    GTEST_SKIP() << "no second filesystem at /dev/shm";
  }
  testing::TempDir other("/dev/shm");
  const std::string tap = other.Path("tap.jsonl");
  {
    OutputStream source(tap, false);
    source.Append(Content());
    source.Commit();
  }
  OutputStream out(tmp_.Path("out.jsonl"), false);
  EXPECT_FALSE(out.LinkFile(tap));
  EXPECT_EQ(out.AppendFile(tap), Content().size());
  out.Commit();
  EXPECT_TRUE(tmp_.Read("out.jsonl") == Content());
}

TEST_F(OutputTest, DestroyingAnUncommittedStreamLeavesNothing) {
  {
    OutputStream plain(tmp_.Path("a.jsonl"), false);
    plain.Append(Content());
    OutputStream gz(tmp_.Path("b.jsonl.gz"), true);
    gz.Append("x\n");
  }
  EXPECT_TRUE(tmp_.List().empty());
}

TEST_F(OutputTest, ARefusedCommitLeavesTheExistingFileAndNoTemporary) {
  tmp_.Write("out.jsonl", "old\n");
  {
    OutputStream out(tmp_.Path("out.jsonl"), false);
    out.Append("new\n");
    try {
      out.Commit();
      ADD_FAILURE() << "an existing output was replaced";
    } catch (const Error& e) {
      EXPECT_EQ(e.file(), tmp_.Path("out.jsonl"));
      EXPECT_EQ(e.message(), "output already exists");
      EXPECT_EQ(e.hint(), "pass --overwrite to replace it");
    }
  }
  EXPECT_EQ(tmp_.Read("out.jsonl"), "old\n");
  EXPECT_EQ(tmp_.List(), (std::vector<std::string>{"out.jsonl"}));
}

TEST_F(OutputTest, AFileThatAppearsBeforeCommitIsNotReplaced) {
  OutputStream out(tmp_.Path("out.jsonl"), false);
  out.Append("mine\n");
  tmp_.Write("out.jsonl", "theirs\n");
  EXPECT_THROW(out.Commit(), Error);
  EXPECT_EQ(tmp_.Read("out.jsonl"), "theirs\n");
}

TEST_F(OutputTest, OverwriteReplacesAnExistingFile) {
  tmp_.Write("out.jsonl", "old old old\n");
  OutputStream out(tmp_.Path("out.jsonl"), true);
  out.Append("new\n");
  EXPECT_EQ(tmp_.Read("out.jsonl"), "old old old\n");
  out.Commit(false);
  EXPECT_EQ(tmp_.Read("out.jsonl"), "new\n");
  EXPECT_EQ(tmp_.List(), (std::vector<std::string>{"out.jsonl"}));
}

TEST_F(OutputTest, PlainOutputHoldsExactlyTheAppendedBytes) {
  const std::string content = Content();
  OutputStream out(tmp_.Path("out.jsonl"), false);
  // Small pieces and one piece larger than the buffer.
  out.Append(std::string_view(content).substr(0, 10));
  out.Append(std::string_view(content).substr(10, 100000));
  out.Append(std::string_view(content).substr(100010));
  out.Commit();
  EXPECT_EQ(out.bytes_in(), content.size());
  EXPECT_TRUE(tmp_.Read("out.jsonl") == content);
}

class CompressedOutput : public OutputTest,
                         public ::testing::WithParamInterface<std::pair<const char*, std::string>> {
};

TEST_P(CompressedOutput, IsCompressedByItsNameAndDecodesToTheAppendedBytes) {
  const auto& [name, magic] = GetParam();
  const std::string content = Content();
  OutputStream out(tmp_.Path(name), false);
  out.HashContent();
  out.Append(content);
  out.Commit();
  const std::string raw = tmp_.Read(name);
  EXPECT_EQ(raw.substr(0, magic.size()), magic);
  EXPECT_LT(raw.size(), content.size() / 2);
  EXPECT_TRUE(Decoded(tmp_.Path(name)) == content);
  EXPECT_EQ(out.bytes_in(), content.size());
  // The hash is of the content, not of the compressed file.
  EXPECT_EQ(out.ContentXxh3(), Xxh3Of(content));
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, CompressedOutput,
    ::testing::Values(std::make_pair("o.jsonl.gz", std::string("\x1f\x8b")),
                      std::make_pair("o.jsonl.GZ", std::string("\x1f\x8b")),
                      std::make_pair("o.jsonl.zst", std::string("\x28\xb5\x2f\xfd")),
                      std::make_pair("o.jsonl.ZsT", std::string("\x28\xb5\x2f\xfd"))));

TEST_F(OutputTest, AnEmptyCompressedOutputDecodesToNothing) {
  for (const char* name : {"e.jsonl.gz", "e.jsonl.zst"}) {
    OutputStream out(tmp_.Path(name), false);
    out.Commit();
    EXPECT_EQ(Decoded(tmp_.Path(name)), "") << name;
  }
}

TEST_F(OutputTest, ContentXxh3CoversEverythingAppendedAfterHashContent) {
  OutputStream out(tmp_.Path("out.jsonl"), false);
  out.HashContent();
  out.Append("{\"a\":1}\n");
  out.Append("{\"b\":2}\n");
  out.Commit();
  EXPECT_EQ(out.ContentXxh3(), Xxh3Of("{\"a\":1}\n{\"b\":2}\n"));
  EXPECT_EQ(out.ContentXxh3(), ChecksumOfFile(tmp_.Path("out.jsonl")).hex);
}

TEST_F(OutputTest, ContentXxh3WithoutHashContentIsAnError) {
  OutputStream out(tmp_.Path("out.jsonl"), false);
  out.Append("x\n");
  try {
    out.ContentXxh3();
    ADD_FAILURE() << "a hash was returned without hashing";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "content hashing was not enabled");
  }
}

TEST_F(OutputTest, AStreamInAMissingDirectoryIsAnErrorNamingItsFile) {
  try {
    OutputStream out(tmp_.Path("no/such/out.jsonl"), false);
    ADD_FAILURE() << "a stream opened in a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.file().rfind(tmp_.Path("no/such/out.jsonl.tmp."), 0), 0u) << e.file();
  }
}

}  // namespace
}  // namespace djshard::io
