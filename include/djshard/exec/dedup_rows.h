#pragma once
// The rows a deduplicator reads and their signing, shared by `djshard run`'s
// dedup pipeline (exec/dedup_run.h) and the dedup stage of elastic jobs
// (store/dedup_stage.h).

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "djshard/exec/executor.h"
#include "djshard/io/checksum.h"
#include "djshard/io/discover.h"
#include "djshard/io/input.h"
#include "djshard/ops/dedup.h"

namespace djshard::exec {

// Where an input row came from: an index into a run's file names and its
// 1-based line there.
struct LineOrigin {
  uint64_t line = 0;
  uint32_t file = 0;
};

// The file names origins point into, shared by every stage of a run.
class OriginNames {
 public:
  explicit OriginNames(const std::vector<io::InputCandidate>& inputs) {
    for (const io::InputCandidate& in : inputs) Index(in.display_path);
  }
  uint32_t Index(const std::string& name);
  const std::string& Name(uint32_t i) const { return names_[i]; }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> index_;
};

// The rows a stage reads: the lines of `files`, all of them or those listed.
// A row's position is its rank among the set's rows; the first row of a
// duplicate cluster is the first by position (docs/dedup-stage.md).
struct RowSet {
  std::vector<io::InputCandidate> files;
  // The files are the run's inputs: a row's origin is its own file and line
  // (`origins` is filled by the first pass that reads them all).
  bool raw = true;
  std::vector<LineOrigin> origins;  // per line of `files`, once known
  bool all = true;                  // every line; else the lines `rows` lists
  std::vector<uint64_t> rows;       // ascending line indexes over `files`
  // Opens files[i] with every byte read fed to the hasher (may be null);
  // unset: io::OpenInput of its path.
  std::function<std::unique_ptr<io::ByteSource>(size_t, io::ChecksumHasher*)> open;

  uint64_t SourceRow(uint64_t position) const { return all ? position : rows[position]; }
};

// Reads a RowSet as chunks of whole lines, numbered by position: a chunk's
// first_line is its first row's position + 1. With `hasher`, every byte of
// the files (listed or not) goes through it as it is read. Not thread-safe.
class RowReader {
 public:
  RowReader(RowSet& set, size_t chunk_bytes, size_t max_lines,
            io::ChecksumHasher* hasher = nullptr);

  bool Next(io::LineChunk* out);
  // Reads what is left of the files without returning it (so that `hasher`
  // has seen every byte); returns how many lines the files hold. Next
  // returns nothing afterwards.
  uint64_t ReadToEnd();
  uint64_t positions() const { return positions_; }
  uint64_t bytes() const { return bytes_; }

 private:
  bool NextAll(io::LineChunk* out);
  bool NextListed(io::LineChunk* out);

  RowSet& set_;
  const size_t chunk_bytes_, max_lines_;
  io::LineChunker chunker_;
  const bool fill_origins_;
  io::LineChunk in_;  // listed rows: the chunk being picked from
  size_t in_pos_ = 0;
  uint64_t in_row_ = 0;  // line index (over the files) of the line at in_pos_
  size_t next_listed_ = 0;
  uint64_t positions_ = 0;
  uint64_t bytes_ = 0;
};

// A row a deduplicator could not sign (Data-Juicer's compute_hash raised).
struct UnsignedRow {
  uint64_t position;
  std::string message;
};

struct SignedRows {
  std::vector<ops::dedup::GroupKey> keys;  // GroupKey::row: the row's position
  // A simhash deduplicator's rows as (position, simhash) instead of keys:
  // its keys follow from the simhash (ops::dedup::EmitSimhashEdges).
  std::vector<std::pair<uint64_t, uint64_t>> simhashes;
  std::vector<UnsignedRow> unsigned_rows;  // by position
  double seconds = 0;                      // summed over threads

  // Adds the row at `position`: its keys (a simhash deduplicator's simhash)
  // when it was signed, else the row and why it could not be.
  void Add(const ops::dedup::DedupConfig& config, uint64_t position, bool signed_ok,
           const ops::dedup::Signature& signature, std::string error);
};

// Signs every row `reader` gives on `threads` threads (one Signer each,
// chunks handed out in order). `where(position)` names a row in the error
// of a line that is not a JSON object.
SignedRows SignRows(const ops::dedup::DedupConfig& config, RowReader& reader,
                    const std::function<RowOrigin(uint64_t position)>& where, int threads);

}  // namespace djshard::exec
