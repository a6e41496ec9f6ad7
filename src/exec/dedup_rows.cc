#include "djshard/exec/dedup_rows.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/common/threads.h"
#include "djshard/io/json_text.h"
#include "djshard/io/record.h"

namespace djshard::exec {

uint32_t OriginNames::Index(const std::string& name) {
  auto [it, added] = index_.emplace(name, static_cast<uint32_t>(names_.size()));
  if (added) names_.push_back(name);
  return it->second;
}

RowReader::RowReader(RowSet& set, size_t chunk_bytes, size_t max_lines, io::ChecksumHasher* hasher)
    : set_(set),
      chunk_bytes_(chunk_bytes),
      max_lines_(max_lines),
      chunker_(set.files.size(), chunk_bytes, max_lines,
               [&set, hasher](size_t i) {
                 return set.open ? set.open(i, hasher) : io::OpenInput(set.files[i].path, hasher);
               }),
      fill_origins_(set.raw && set.all && set.origins.empty()) {}

bool RowReader::Next(io::LineChunk* out) {
  const bool got = set_.all ? NextAll(out) : NextListed(out);
  if (!got) return false;
  out->first_line = positions_ + 1;
  positions_ += out->lines;
  return true;
}

uint64_t RowReader::ReadToEnd() {
  uint64_t lines = set_.all ? positions_ : in_row_;
  if (!set_.all) {
    // The rest of the chunk being picked from was read already.
    for (size_t pos = in_pos_; pos < in_.size; ++pos) lines += in_.data[pos] == '\n';
    in_pos_ = in_.size;
  }
  io::LineChunk chunk;
  while (chunker_.Next(&chunk)) lines += chunk.lines;
  return lines;
}

bool RowReader::NextAll(io::LineChunk* out) {
  if (!chunker_.Next(out)) return false;
  if (fill_origins_) {
    for (uint64_t k = 0; k < out->lines; ++k) {
      set_.origins.push_back({out->first_line + k, static_cast<uint32_t>(out->file)});
    }
  }
  bytes_ += out->size;
  return true;
}

bool RowReader::NextListed(io::LineChunk* out) {
  out->data.clear();
  out->size = 0;
  out->lines = 0;
  while (next_listed_ < set_.rows.size() && out->size < chunk_bytes_ &&
         (max_lines_ == 0 || out->lines < max_lines_)) {
    if (in_pos_ >= in_.size) {
      if (!chunker_.Next(&in_)) break;
      in_pos_ = 0;
    }
    const char* base = in_.data.data();
    const char* nl =
        static_cast<const char*>(std::memchr(base + in_pos_, '\n', in_.size - in_pos_));
    const size_t end = static_cast<size_t>(nl - base) + 1;
    if (set_.rows[next_listed_] == in_row_) {
      if (out->lines == 0) out->file = in_.file;
      out->data.append(base + in_pos_, end - in_pos_);
      ++out->lines;
      ++next_listed_;
    }
    ++in_row_;
    in_pos_ = end;
  }
  if (out->lines == 0) return false;
  out->size = out->data.size();
  out->data.append(io::LineReader::kPadding, '\0');
  bytes_ += out->size;
  return true;
}

namespace {

// The value of `key` in a parsed line, as the signature functions see it.
ops::dedup::TextValue ValueOf(const io::JsonLineParser& parser, std::string_view line,
                              const std::string& key, std::string* text, io::Record* record) {
  using Type = ops::dedup::TextValue::Type;
  if (parser.GetString(key, text)) return ops::dedup::TextValue::String(*text);
  ops::dedup::TextValue v;
  if (!parser.Has(key)) {
    v.type = Type::kMissing;
    return v;
  }
  record->AssignView(line);
  return ops::dedup::TextValue::OfJson(record->Find(key).value_or("null"));
}

// Parses one line; a line that is not a JSON object is an Error naming the
// row where `where` says it came from (looked up only then).
void ParseRow(io::JsonLineParser& parser, std::string_view line, uint64_t position,
              const std::function<RowOrigin(uint64_t)>& where) {
  static const std::string kUnnamed;
  try {
    parser.ParseObject(line, kUnnamed, 0);
  } catch (const Error&) {
    const RowOrigin origin = where(position);
    parser.ParseObject(line, origin.file, origin.line);
    throw;
  }
}

}  // namespace

void SignedRows::Add(const ops::dedup::DedupConfig& config, uint64_t position, bool signed_ok,
                     const ops::dedup::Signature& signature, std::string error) {
  if (!signed_ok) {
    unsigned_rows.push_back({position, std::move(error)});
  } else if (config.kind == ops::dedup::Kind::kSimhash) {
    simhashes.emplace_back(position, signature.simhash);
  } else {
    ops::dedup::AppendKeys(config, signature, position, &keys);
  }
}

SignedRows SignRows(const ops::dedup::DedupConfig& config, RowReader& reader,
                    const std::function<RowOrigin(uint64_t position)>& where, int threads) {
  std::mutex mu;
  std::atomic<bool> failed{false};  // a thread failed: the others stop
  std::vector<SignedRows> outs(static_cast<size_t>(std::max(1, threads)));
  auto work = [&](SignedRows& out) {
    ops::dedup::Signer signer(config);
    io::JsonLineParser parser;
    io::Record record;
    io::LineChunk chunk;
    // Rows are signed kMany at a time (the exact deduplicator hashes them
    // together, 32 at once, longest first: fewer lanes idle at the end of a
    // batch): their texts, values and positions until then.
    constexpr size_t kMany = 256;
    std::vector<std::string> texts(kMany), errors(kMany);
    std::vector<ops::dedup::TextValue> values;
    std::vector<uint64_t> positions;
    std::vector<ops::dedup::Signature> sigs(kMany);
    bool ok[kMany];
    const auto sign = [&] {
      signer.SignMany(values.data(), values.size(), sigs.data(), ok, errors.data());
      for (size_t k = 0; k < values.size(); ++k) {
        out.Add(config, positions[k], ok[k], sigs[k], errors[k]);
      }
      values.clear();
      positions.clear();
    };
    // The reader may be filling the set's origins: look them up under its lock.
    const std::function<RowOrigin(uint64_t)> locked_where = [&](uint64_t position) {
      std::lock_guard<std::mutex> lock(mu);
      return where(position);
    };
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (failed || !reader.Next(&chunk)) return;
      }
      ThrowIfStopRequested();
      const double t0 = MonotonicSeconds();
      size_t pos = 0;
      for (uint64_t k = 0; k < chunk.lines; ++k) {
        const char* nl =
            static_cast<const char*>(std::memchr(chunk.data.data() + pos, '\n', chunk.size - pos));
        const size_t end = static_cast<size_t>(nl - chunk.data.data());
        const std::string_view line(chunk.data.data() + pos, end - pos);
        pos = end + 1;
        const uint64_t position = chunk.first_line - 1 + k;
        ParseRow(parser, line, position, locked_where);
        values.push_back(ValueOf(parser, line, config.text_key, &texts[values.size()], &record));
        positions.push_back(position);
        if (values.size() == kMany) sign();
      }
      sign();
      out.seconds += MonotonicSeconds() - t0;
    }
  };
  RunOnThreads(outs.size(), [&](size_t t) {
    try {
      work(outs[t]);
    } catch (...) {
      failed = true;
      throw;
    }
  });
  SignedRows all = std::move(outs[0]);
  for (size_t t = 1; t < outs.size(); ++t) {
    all.keys.insert(all.keys.end(), std::make_move_iterator(outs[t].keys.begin()),
                    std::make_move_iterator(outs[t].keys.end()));
    outs[t].keys = {};
    all.simhashes.insert(all.simhashes.end(), outs[t].simhashes.begin(), outs[t].simhashes.end());
    outs[t].simhashes = {};
    all.unsigned_rows.insert(all.unsigned_rows.end(),
                             std::make_move_iterator(outs[t].unsigned_rows.begin()),
                             std::make_move_iterator(outs[t].unsigned_rows.end()));
    all.seconds += outs[t].seconds;
  }
  std::sort(all.simhashes.begin(), all.simhashes.end());
  std::sort(all.unsigned_rows.begin(), all.unsigned_rows.end(),
            [](const UnsignedRow& a, const UnsignedRow& b) { return a.position < b.position; });
  return all;
}

}  // namespace djshard::exec
