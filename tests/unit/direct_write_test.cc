// Direct writes: on a local block filesystem the whole buffers of a large
// output skip the page cache, and the file holds exactly the bytes written
// whichever way each block went; elsewhere (tmpfs) every write is buffered.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "djshard/common/error.h"
#include "djshard/io/fd.h"
#include "djshard/io/output.h"
#include "tests/unit/temp_dir.h"

namespace djshard::io {
namespace {

// `size` bytes of numbered lines.
std::string Lines(size_t size) {
  std::string s;
  for (int i = 0; s.size() < size; ++i) s += "{\"id\":" + std::to_string(i) + ",\"t\":\"x\"}\n";
  s.resize(size);
  return s;
}

// Whether a fresh file in `dir` gets direct writes.
bool DirectWritesIn(const std::string& dir) {
  const std::string probe = dir + "/probe";
  ScopedFd fd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  const bool direct = fd.get() >= 0 && TryDirectWrites(fd.get());
  ::unlink(probe.c_str());
  return direct;
}

// Pages of the file at `path` that are in the page cache, one bool a page.
std::vector<bool> CachedPages(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  EXPECT_EQ(::fstat(fd.get(), &st), 0);
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  EXPECT_NE(map, MAP_FAILED);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> vec((size + page - 1) / page);
  EXPECT_EQ(::mincore(map, size, vec.data()), 0);
  ::munmap(map, size);
  std::vector<bool> cached;
  for (unsigned char v : vec) cached.push_back((v & 1) != 0);
  return cached;
}

// One directory on the test's filesystem, one on tmpfs when there is one.
std::vector<std::string> Parents() {
  std::vector<std::string> parents = {"/tmp"};
  struct stat shm {};
  if (::stat("/dev/shm", &shm) == 0) parents.push_back("/dev/shm");
  return parents;
}

// Every size around the block and buffer edges, written in pieces of many
// sizes, reads back as written, on either kind of filesystem.
TEST(DirectWrites, AFileOfAnySizeHoldsExactlyTheBytesAppended) {
  const std::string content = Lines((3u << 20) + 4097);
  for (const std::string& parent : Parents()) {
    testing::TempDir tmp(parent);
    for (size_t size :
         {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{(1u << 20) - 1},
          size_t{1u << 20}, size_t{(1u << 20) + 1}, size_t{2u << 20}, content.size()}) {
      SCOPED_TRACE(parent + ", " + std::to_string(size) + " bytes");
      const std::string want = content.substr(0, size);
      AtomicFileWriter out(tmp.Path("out.jsonl"), /*overwrite=*/true);
      std::mt19937 rng(static_cast<unsigned>(size));
      for (size_t at = 0; at < size;) {
        // Mostly small pieces, now and then one larger than the buffer.
        const size_t piece = rng() % 8 == 0 ? (1u << 20) + rng() % 5000 : rng() % 70000;
        const size_t n = std::min(piece, size - at);
        out.Append(std::string_view(want).substr(at, n));
        at += n;
      }
      out.Commit();
      EXPECT_TRUE(tmp.Read("out.jsonl") == want);
    }
  }
}

// Where direct writes apply, a large file's whole blocks are not left in the
// page cache: they went to the disk straight from the writer's buffers, the
// last partial buffer's whole blocks too. Only the last partial block,
// written buffered, is.
TEST(DirectWrites, ALargeFilesWholeBlocksSkipThePageCache) {
  testing::TempDir tmp;
  if (!DirectWritesIn(tmp.dir())) GTEST_SKIP() << "no direct writes on " << tmp.dir();
  const std::string want = Lines((3u << 20) + 10000);
  AtomicFileWriter out(tmp.Path("out.jsonl"));
  out.Append(want);
  out.Commit();
  const std::vector<bool> cached = CachedPages(tmp.Path("out.jsonl"));
  const size_t direct_pages = want.size() / 4096;
  ASSERT_EQ(cached.size(), direct_pages + 1);
  EXPECT_EQ(std::count(cached.begin(), cached.begin() + direct_pages, true), 0);
  EXPECT_TRUE(cached.back());
  EXPECT_TRUE(tmp.Read("out.jsonl") == want);
}

// A file copied in after direct writes lands after them.
TEST(DirectWrites, AFileAppendedAfterDirectWritesFollowsThem) {
  for (const std::string& parent : Parents()) {
    SCOPED_TRACE(parent);
    testing::TempDir tmp(parent);
    const std::string head = Lines((2u << 20) + 123), tail = Lines(300000);
    const std::string source = tmp.Write("source.jsonl", tail);
    AtomicFileWriter out(tmp.Path("out.jsonl"));
    out.Append(head);
    EXPECT_EQ(out.AppendFileContents(source), tail.size());
    out.Append("end\n");
    out.Commit();
    EXPECT_TRUE(tmp.Read("out.jsonl") == head + tail + "end\n");
  }
}

// A write the system refuses (here: past the process's file size limit, as
// a full disk would) fails the writer with an error naming its file, whether
// the refused buffer went directly (on the writer's thread) or buffered, and
// nothing is left under either name.
TEST(DirectWrites, ARefusedWriteIsAnErrorNamingTheFileAndLeavesNothing) {
  const std::string content = Lines(5u << 20);
  for (const std::string& parent : Parents()) {
    SCOPED_TRACE(parent);
    testing::TempDir tmp(parent);
    struct rlimit old {};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
    const sighandler_t old_handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old;
    small.rlim_cur = 2u << 20;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    std::string error;
    try {
      AtomicFileWriter out(tmp.Path("out.jsonl"));
      for (size_t at = 0; at < content.size(); at += 100000) {
        out.Append(std::string_view(content).substr(at, 100000));
      }
      out.Commit();
    } catch (const Error& e) {
      error = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
    EXPECT_NE(error.find(tmp.Path("out.jsonl.tmp.")), std::string::npos) << error;
    EXPECT_NE(error.find("File too large"), std::string::npos) << error;
    EXPECT_TRUE(tmp.List().empty());
  }
}

// A writer destroyed uncommitted while buffers wait for its thread (a
// failure elsewhere ended the output) leaves nothing behind.
TEST(DirectWrites, AWriterDestroyedWithBuffersQueuedLeavesNothing) {
  const std::string content = Lines(6u << 20);
  for (const std::string& parent : Parents()) {
    SCOPED_TRACE(parent);
    testing::TempDir tmp(parent);
    {
      AtomicFileWriter out(tmp.Path("out.jsonl"));
      out.Append(content);
    }
    EXPECT_TRUE(tmp.List().empty());
  }
}

// Threads writing adjacent, unaligned ranges of one file in any order, some
// small, some spanning many blocks: every byte lands where it was written.
TEST(DirectWrites, OffsetWritesFromManyThreadsFillTheFileExactly) {
  const std::string want = Lines(9u << 20);
  for (const std::string& parent : Parents()) {
    SCOPED_TRACE(parent);
    testing::TempDir tmp(parent);
    const std::string path = tmp.Path("shard.jsonl");
    ScopedFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_GE(fd.get(), 0);
    std::vector<std::pair<size_t, size_t>> ranges;  // offset, size
    std::mt19937 rng(7);
    for (size_t at = 0; at < want.size();) {
      const size_t piece = rng() % 3 == 0 ? rng() % 3000 : rng() % (1500u << 10);
      const size_t n = std::min(piece + 1, want.size() - at);
      ranges.emplace_back(at, n);
      at += n;
    }
    std::shuffle(ranges.begin(), ranges.end(), rng);
    {
      OffsetWriter writer(fd.get(), path);
      std::vector<std::thread> threads;
      for (size_t t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          for (size_t i = t; i < ranges.size(); i += 4) {
            writer.Write(std::string_view(want).substr(ranges[i].first, ranges[i].second),
                         ranges[i].first);
          }
        });
      }
      for (std::thread& th : threads) th.join();
    }
    ASSERT_EQ(::fsync(fd.get()), 0);
    EXPECT_TRUE(tmp.Read("shard.jsonl") == want);
  }
}

// Refuses direct writes after the next `n` while in scope.
class RefuseDirectWritesAfter {
 public:
  explicit RefuseDirectWritesAfter(int n) { RefuseDirectWritesAfterForTesting(n); }
  ~RefuseDirectWritesAfter() { RefuseDirectWritesAfterForTesting(-1); }
  RefuseDirectWritesAfter(const RefuseDirectWritesAfter&) = delete;
  RefuseDirectWritesAfter& operator=(const RefuseDirectWritesAfter&) = delete;
};

// A filesystem that refuses a direct write (EINVAL) at the first buffer, or
// after some: that buffer and the rest are written through the page cache,
// and the file holds exactly the bytes appended.
TEST(DirectWrites, AWriterRefusedDirectWritesWritesTheRestBuffered) {
  testing::TempDir tmp("/tmp");
  if (!DirectWritesIn(tmp.dir())) GTEST_SKIP() << "no direct writes on " << tmp.dir();
  const std::string want = Lines((6u << 20) + 12345);
  for (const int taken : {0, 1, 3}) {
    SCOPED_TRACE(std::to_string(taken) + " direct writes taken");
    {
      const RefuseDirectWritesAfter refuse(taken);
      AtomicFileWriter out(tmp.Path("out.jsonl"), /*overwrite=*/true);
      for (size_t at = 0; at < want.size(); at += 700000) {
        out.Append(std::string_view(want).substr(at, 700000));
      }
      out.Commit(/*durable=*/true);
    }
    EXPECT_TRUE(tmp.Read("out.jsonl") == want);
    // Buffered after the refusal: the file's later whole buffers are cached.
    const std::vector<bool> cached = CachedPages(tmp.Path("out.jsonl"));
    EXPECT_TRUE(cached[cached.size() - 300]);
  }
}

// The same for offset writes from several threads: the refusal ends their
// direct writes, and every byte still lands where it belongs.
TEST(DirectWrites, OffsetWritesRefusedDirectWritesFillTheFileExactly) {
  testing::TempDir tmp("/tmp");
  if (!DirectWritesIn(tmp.dir())) GTEST_SKIP() << "no direct writes on " << tmp.dir();
  const std::string want = Lines(5u << 20);
  const std::string path = tmp.Path("merged.jsonl");
  ScopedFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_GE(fd.get(), 0);
  {
    const RefuseDirectWritesAfter refuse(2);
    OffsetWriter writer(fd.get(), path);
    std::vector<std::thread> threads;
    constexpr size_t kPiece = (320u << 10) + 7;
    for (size_t t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        for (size_t at = t * kPiece; at < want.size(); at += 3 * kPiece) {
          writer.Write(std::string_view(want).substr(at, kPiece), at);
        }
      });
    }
    for (std::thread& th : threads) th.join();
  }
  ASSERT_EQ(::fsync(fd.get()), 0);
  EXPECT_TRUE(tmp.Read("merged.jsonl") == want);
}

}  // namespace
}  // namespace djshard::io
