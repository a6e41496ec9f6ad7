#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/io/disk.h"
#include "djshard/io/fd.h"

namespace djshard::io {

class Sha256;
class Xxh3;

// A buffered writer to a new file that becomes visible under its final name
// only on Commit(): bytes go to "<path>.tmp.<random>", Commit() flushes,
// fsyncs and renames. Destroying an uncommitted writer removes the temp file,
// so no reader ever sees a half-written file. On a local block filesystem
// its whole 1 MiB buffers are written with O_DIRECT on a thread of its own
// (see TryDirectWrites), what ends the file through the page cache.
// The operator errors file beside output `output`: "<output>.errors.jsonl".
inline std::string ErrorsFileOf(const std::string& output) { return output + ".errors.jsonl"; }

// The start of the name of every temporary file an AtomicFileWriter for
// `path` with `temp_tag` makes: "<path>.tmp." (then "<tag>." when tagged).
std::string TempPrefix(const std::string& path, const std::string& temp_tag = "");

class AtomicFileWriter {
 public:
  // `path` is the final name. When `overwrite` is false, Commit() refuses to
  // replace an existing file (the check is made again just before the rename).
  // The rename and the directory fsync go through `disk`, which must outlive
  // the writer. The temporary file is named TempPrefix(path, temp_tag) and a
  // random suffix, so that its owner can find it again after a crash.
  explicit AtomicFileWriter(std::string path, bool overwrite = false, Disk& disk = RealDisk(),
                            const std::string& temp_tag = "");
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void Append(std::string_view bytes);
  // Appends the whole content of the file at `source` as it is stored, copied
  // by the kernel (copy_file_range: a reflink or a server-side copy where the
  // filesystem offers one). Returns the bytes appended.
  uint64_t AppendFileContents(const std::string& source);
  // Makes the file, while nothing was written to it, a hard link of
  // `source` (which must not change afterwards: the two are one file), so
  // that committing it copies nothing. Nothing more may be appended. False,
  // the writer unchanged, when the filesystem cannot link them (another
  // filesystem, no hard links).
  bool LinkContents(const std::string& source);
  // Flushes, fsyncs, renames into place and fsyncs the directory. Without
  // `durable` only flushes and renames (a file no protocol step relies on).
  void Commit(bool durable = true);

  uint64_t bytes_written() const { return bytes_written_; }
  const std::string& path() const { return path_; }

 private:
  struct DirectQueue;
  void Flush();
  void WriteAll(std::string_view bytes);

  std::string path_;
  std::string temp_path_;
  bool overwrite_;
  int fd_ = -1;
  // kDirectWriteAlign-aligned buffers: one, and two more for the queue.
  std::vector<AlignedBuffer> buffers_;
  char* buffer_ = nullptr;  // the one being filled
  size_t buffered_ = 0;     // bytes in buffer_
  bool direct_ = false;     // O_DIRECT is on for fd_
  // Whole buffers written with O_DIRECT on a thread of its own (made at the
  // first); declared after the buffers, so that it ends before they go.
  std::unique_ptr<DirectQueue> queue_;
  uint64_t bytes_written_ = 0;
  uint64_t file_offset_ = 0;       // bytes handed to write(2)
  bool linked_ = false;            // LinkContents made it another file's link
  uint64_t writeback_offset_ = 0;  // bytes whose writeback was started
  bool committed_ = false;
  Disk& disk_;
};

}  // namespace djshard::io

namespace djshard::io {

// An AtomicFileWriter that compresses with gzip or zstd when the final name
// ends in ".gz" or ".zst" (case-insensitive), and writes plain bytes otherwise.
// Nothing is visible under the final name before Commit().
class OutputStream {
 public:
  OutputStream(std::string path, bool overwrite, Disk& disk = RealDisk(),
               const std::string& temp_tag = "");
  ~OutputStream();
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;

  void Append(std::string_view bytes);
  // Appends the decoded content of the file at `source` (decompressed when
  // its name ends in .gz or .zst); a plain file into a plain stream is copied
  // by the kernel. Returns the uncompressed bytes appended.
  uint64_t AppendFile(const std::string& source);
  // As the first and only content: a plain stream becomes a hard link of
  // the plain file `source` (AtomicFileWriter::LinkContents). False when it
  // cannot (compressed, hashed, something appended, no link): append it then.
  bool LinkFile(const std::string& source);
  // Finishes the compressed stream and commits the file (see AtomicFileWriter).
  void Commit(bool durable = true);
  // Uncompressed bytes appended so far.
  uint64_t bytes_in() const { return bytes_in_; }

  // Hashes everything appended from now on (call before the first Append):
  // XXH3-128, and SHA-256 too when `sha256`.
  void HashContent(bool sha256 = false);
  // XXH3-128 of the uncompressed bytes appended (after HashContent()).
  std::string ContentXxh3();
  // Their SHA-256 (after HashContent(true)).
  std::string ContentSha256();

 private:
  struct Codec;
  AtomicFileWriter file_;
  std::unique_ptr<Codec> codec_;
  std::unique_ptr<Xxh3> hash_;
  std::unique_ptr<Sha256> sha256_;
  std::string digest_, sha256_digest_;
  uint64_t bytes_in_ = 0;
};

// Appends `bytes` to *out as one complete zstd frame at `level`: frames
// written one after another are one valid .zst stream.
void AppendZstdFrame(std::string_view bytes, std::string* out, int level = 1);

}  // namespace djshard::io
