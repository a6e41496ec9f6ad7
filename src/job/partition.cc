#include "djshard/job/partition.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>

#include "djshard/io/checksum.h"
#include "djshard/io/input.h"

namespace djshard::job {

namespace {

constexpr size_t kScanChunkBytes = 4 << 20;
constexpr uint64_t kSampleRows = 1000;

// Feeds the whole lines of a chunk to `hash` as sha256-lines-v1: each line
// without its terminator and one trailing '\r', then '\n'. The chunker gives
// every line a '\n', so only a '\r' before one needs care.
void HashLines(const char* data, size_t size, io::ChecksumHasher& hash) {
  if (std::memchr(data, '\r', size) == nullptr) {
    hash.Update(data, size);
    return;
  }
  size_t pos = 0;
  while (pos < size) {
    const char* nl = static_cast<const char*>(std::memchr(data + pos, '\n', size - pos));
    size_t end = static_cast<size_t>(nl - data);
    size_t line_end = end;
    if (line_end > pos && data[line_end - 1] == '\r') --line_end;
    hash.Update(data + pos, line_end - pos);
    hash.Update("\n", 1);
    pos = end + 1;
  }
}

io::LineChunker MakeChunker(const std::vector<io::InputCandidate>& inputs) {
  return io::LineChunker(inputs.size(), kScanChunkBytes, 0,
                         [&inputs](size_t i) { return io::OpenInput(inputs[i].path); });
}

bool NonEmptyList(const nlohmann::json& row, const std::string& key) {
  const auto it = row.find(key);
  return it != row.end() && it->is_array() && !it->empty();
}

}  // namespace

std::vector<PartitionBounds> ExactBounds(uint64_t rows, uint64_t parts) {
  std::vector<PartitionBounds> bounds;
  if (parts == 0) return bounds;
  const uint64_t base = rows / parts, extra = rows % parts;
  uint64_t start = 0;
  for (uint64_t i = 0; i < parts; ++i) {
    const uint64_t n = base + (i < extra ? 1 : 0);
    bounds.push_back({start, start + n});
    start += n;
  }
  return bounds;
}

const char* ModalityName(Modality m) {
  switch (m) {
    case Modality::kText:
      return "text";
    case Modality::kImage:
      return "image";
    case Modality::kAudio:
      return "audio";
    case Modality::kVideo:
      return "video";
    case Modality::kMultimodal:
      return "multimodal";
  }
  return "text";
}

ModalitySizing SizingOf(Modality m) {
  switch (m) {
    case Modality::kText:
      return {10000, 50000, 1.0};
    case Modality::kImage:
      return {2000, 10000, 5.0};
    case Modality::kAudio:
      return {1000, 4000, 8.0};
    case Modality::kVideo:
      return {400, 2000, 20.0};
    case Modality::kMultimodal:
      return {1600, 6000, 10.0};
  }
  return {10000, 50000, 1.0};
}

uint64_t AutoRowsPerPartition(Modality modality, double mean_row_bytes, uint64_t target_size_mb,
                              uint64_t max_size_mb, std::optional<uint64_t> fallback_rows) {
  const ModalitySizing sizing = SizingOf(modality);
  const double est = mean_row_bytes * sizing.memory_multiplier;
  if (!(est > 0)) return fallback_rows ? *fallback_rows : sizing.default_rows;
  const double budget = static_cast<double>(std::min(target_size_mb, max_size_mb)) * 1048576.0;
  const double rows = std::floor(budget / est);
  if (rows < 1) return 1;
  if (rows >= static_cast<double>(sizing.max_rows)) return sizing.max_rows;
  return static_cast<uint64_t>(rows);
}

uint64_t AutoPartitionCount(uint64_t rows, uint64_t rows_per_partition) {
  return (rows + rows_per_partition - 1) / rows_per_partition;
}

InputScan ScanInput(const std::vector<io::InputCandidate>& inputs, const recipe::Recipe& recipe) {
  InputScan scan;
  io::LineChunker chunker = MakeChunker(inputs);
  io::LineChunk chunk;
  bool image = false, audio = false, video = false;
  while (chunker.Next(&chunk)) {
    const char* data = chunk.data.data();
    // The sample: the first rows' sizes and media lists.
    size_t pos = 0;
    while (scan.sample_rows < kSampleRows && pos < chunk.size) {
      const char* nl = static_cast<const char*>(std::memchr(data + pos, '\n', chunk.size - pos));
      const size_t end = static_cast<size_t>(nl - data);
      const nlohmann::json row = nlohmann::json::parse(data + pos, data + end, nullptr, false);
      if (row.is_object()) {
        image = image || NonEmptyList(row, recipe.image_key);
        audio = audio || NonEmptyList(row, recipe.audio_key);
        video = video || NonEmptyList(row, recipe.video_key);
      }
      scan.sample_bytes += end + 1 - pos;
      ++scan.sample_rows;
      pos = end + 1;
    }
    scan.rows += chunk.lines;
    scan.bytes += chunk.size;
  }
  const int kinds = int{image} + int{audio} + int{video};
  if (kinds >= 2) {
    scan.modality = Modality::kMultimodal;
  } else if (image) {
    scan.modality = Modality::kImage;
  } else if (audio) {
    scan.modality = Modality::kAudio;
  } else if (video) {
    scan.modality = Modality::kVideo;
  }
  return scan;
}

std::vector<PartitionDigest> HashPartitions(const std::vector<io::InputCandidate>& inputs,
                                            const std::vector<PartitionBounds>& bounds,
                                            uint64_t* total_rows, const InputHashes& hashes,
                                            io::Checksum* whole_out) {
  std::vector<PartitionDigest> digests;
  io::LineChunker chunker = MakeChunker(inputs);
  io::LineChunk chunk;
  const bool want_whole = hashes.whole.has_value() && whole_out != nullptr;
  io::ChecksumHasher whole(hashes.whole.value_or(io::ChecksumKind::kXxh3_128));
  // The whole input's hash runs on a second thread, chunk by chunk, beside
  // the partition's: the same read feeds both at the cost of one.
  auto hash_whole = [&](const io::LineChunk& c) {
    if (!want_whole) return std::future<void>();
    return std::async(std::launch::async,
                      [&whole, &c] { HashLines(c.data.data(), c.size, whole); });
  };
  *total_rows = 0;
  for (const PartitionBounds& b : bounds) {
    io::ChecksumHasher hash(hashes.partitions);
    PartitionDigest d;
    chunker.LimitLines(b.rows());
    while (chunker.Next(&chunk)) {
      std::future<void> other = hash_whole(chunk);
      HashLines(chunk.data.data(), chunk.size, hash);
      if (other.valid()) other.get();
      d.size_bytes += chunk.size;
      *total_rows += chunk.lines;
    }
    d.checksum = hash.Finish();
    digests.push_back(std::move(d));
  }
  // Rows past the last partition (the input grew) still count.
  chunker.LimitLines(UINT64_MAX);
  while (chunker.Next(&chunk)) {
    std::future<void> other = hash_whole(chunk);
    if (other.valid()) other.get();
    *total_rows += chunk.lines;
  }
  if (want_whole) *whole_out = whole.Finish();
  return digests;
}

}  // namespace djshard::job
