#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "djshard/io/record.h"

namespace djshard::ops {

inline constexpr const char* kStatsKey = "__dj__stats__";
inline constexpr const char* kMetaKey = "__dj__meta__";

// An operator's failure on one record (missing field, wrong type, regex
// limit). The executor drops the record and reports the message.
class OpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // `type` classifies the error in the errors file ("too_long").
  OpError(const std::string& what, std::string type)
      : std::runtime_error(what), type_(std::move(type)) {}
  const std::string& type() const { return type_; }

 private:
  std::string type_;
};

// What an operator sees of one record: decoded text fields, the stats of
// Data-Juicer's __dj__stats__, and nested fields by dotted path. Changes are
// kept here and written into the record by Commit().
class Sample {
 public:
  explicit Sample(io::Record* record) : record_(record) {}
  // Starts over on another record, keeping allocated memory.
  void Reset(io::Record* record);

  // The decoded string at top-level `key`. Throws OpError when it is missing
  // or not a string. The reference is valid until the next Text or SetText
  // call on this sample (copy it to hold two texts at once).
  const std::string& Text(const std::string& key);
  // Whether the record has top-level `key` (a text set by SetText counts).
  bool Has(const std::string& key) const;
  // The raw JSON of top-level `key` as the record holds it (a text set by
  // SetText is not there), without a copy; nullopt when absent.
  std::optional<std::string_view> Raw(const std::string& key) const;
  void SetText(const std::string& key, std::string value);
  // Seeds the decoded text of `key` (already decoded by the parser), unchanged.
  void PreloadText(const std::string& key, std::string value);

  // The raw JSON of a stat, nullopt when absent (existing stats of the input
  // count: Data-Juicer reuses them).
  std::optional<std::string_view> Stat(std::string_view key);
  // Sets a stat to raw JSON text.
  void SetStat(std::string_view key, std::string raw_json);
  // A numeric stat as double; throws OpError when it is not a number.
  double StatNumber(std::string_view key);

  // Raw JSON of a field by dotted path ("meta.lang"); nullopt when any part is
  // missing or a parent is not an object.
  std::optional<std::string> Field(std::string_view dotted_path) const;

  // A dotted path looked up part by part, saying where it stopped.
  struct FieldLookup {
    std::optional<std::string> value;  // raw JSON, when every part was found
    // When not found: whether the last part is what is missing (its parent is
    // an object, the record counts as one) rather than a parent that is
    // missing, null or not an object.
    bool only_last_part_missing = false;
  };
  FieldLookup LookupField(std::string_view dotted_path) const;

  // The raw JSON of `key` in the record's __dj__meta__, nullopt when absent.
  std::optional<std::string_view> Meta(std::string_view key);
  // Sets `key` of __dj__meta__ to raw JSON text.
  void SetMeta(std::string_view key, std::string raw_json);
  // The record as this sample stands now (changed texts, stats and meta
  // written), serialized; the sample's record stays as it is.
  std::string CurrentRecord() const;
  // Writes changed text fields and, when `write_stats`, the stats into the record.
  void Commit(bool write_stats);
  // Writes what Commit would into `record` (a copy of this sample's record),
  // leaving this sample and its record as they are.
  void CommitTo(io::Record* record, bool write_stats) const;

 private:
  void LoadStats();
  // Writes the changes into `record`; `last` lets the encoded texts go.
  void WriteChanges(io::Record* record, bool write_stats, bool last) const;

  io::Record* record_;
  std::vector<std::pair<std::string, std::string>> texts_;  // key -> decoded
  std::vector<bool> text_changed_;
  // JSON encoding of each changed text, once made (empty: not yet).
  mutable std::vector<std::string> encoded_;
  std::vector<std::pair<std::string, std::string>> stats_;  // key -> raw JSON
  bool stats_loaded_ = false;
  std::vector<std::pair<std::string, std::string>> meta_;  // key -> raw JSON
  bool meta_loaded_ = false;
  bool meta_changed_ = false;
};

}  // namespace djshard::ops
