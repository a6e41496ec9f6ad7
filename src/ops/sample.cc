#include "djshard/ops/sample.h"

#include <cstdlib>

#include "djshard/io/json_text.h"

namespace djshard::ops {

namespace {

std::vector<std::pair<std::string, std::string>> ObjectMembers(
    std::optional<std::string_view> raw) {
  std::vector<std::pair<std::string, std::string>> members;
  if (!raw || raw->empty() || raw->front() != '{') return members;
  for (const io::JsonMember& m : io::SplitObject(*raw)) {
    members.emplace_back(io::UnescapeJsonString(m.key_literal), std::string(m.value));
  }
  return members;
}

std::string ObjectJson(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string raw = "{";
  for (const auto& [k, v] : members) {
    if (raw.size() > 1) raw.push_back(',');
    io::AppendJsonString(&raw, k);
    raw.push_back(':');
    raw.append(v);
  }
  raw.push_back('}');
  return raw;
}

}  // namespace

const std::string& Sample::Text(const std::string& key) {
  for (const auto& [k, v] : texts_) {
    if (k == key) return v;
  }
  const std::optional<std::string_view> raw = record_->Find(key);
  if (!raw) throw OpError("field '" + key + "' not found");
  if (raw->empty() || raw->front() != '"') throw OpError("field '" + key + "' is not a string");
  std::string decoded = raw->find('\\') == std::string_view::npos
                            ? std::string(raw->substr(1, raw->size() - 2))
                            : io::UnescapeJsonString(*raw);
  texts_.emplace_back(key, std::move(decoded));
  text_changed_.push_back(false);
  encoded_.emplace_back();
  return texts_.back().second;
}

std::string Sample::CurrentRecord() const {
  io::Record copy = *record_;
  CommitTo(&copy, true);
  std::string out;
  copy.Serialize(&out);
  return out;
}

bool Sample::Has(const std::string& key) const {
  for (const auto& [k, v] : texts_) {
    if (k == key) return true;
  }
  return record_->Find(key).has_value();
}

std::optional<std::string_view> Sample::Raw(const std::string& key) const {
  return record_->Find(key);
}

void Sample::Reset(io::Record* record) {
  record_ = record;
  texts_.clear();
  text_changed_.clear();
  encoded_.clear();
  stats_.clear();
  stats_loaded_ = false;
  meta_.clear();
  meta_loaded_ = false;
  meta_changed_ = false;
}

void Sample::PreloadText(const std::string& key, std::string value) {
  texts_.emplace_back(key, std::move(value));
  text_changed_.push_back(false);
  encoded_.emplace_back();
}

void Sample::SetText(const std::string& key, std::string value) {
  for (size_t i = 0; i < texts_.size(); ++i) {
    if (texts_[i].first == key) {
      if (texts_[i].second != value) {
        text_changed_[i] = true;
        encoded_[i].clear();
      }
      texts_[i].second = std::move(value);
      return;
    }
  }
  texts_.emplace_back(key, std::move(value));
  text_changed_.push_back(true);
  encoded_.emplace_back();
}

void Sample::LoadStats() {
  stats_loaded_ = true;
  stats_ = ObjectMembers(record_->Find(kStatsKey));
}

std::optional<std::string_view> Sample::Meta(std::string_view key) {
  if (!meta_loaded_) {
    meta_ = ObjectMembers(record_->Find(kMetaKey));
    meta_loaded_ = true;
  }
  for (const auto& [k, v] : meta_) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

void Sample::SetMeta(std::string_view key, std::string raw_json) {
  if (!Meta(key)) {
    meta_.emplace_back(std::string(key), std::move(raw_json));
  } else {
    for (auto& [k, v] : meta_) {
      if (k == key) v = std::move(raw_json);
    }
  }
  meta_changed_ = true;
}

std::optional<std::string_view> Sample::Stat(std::string_view key) {
  if (!stats_loaded_) LoadStats();
  for (const auto& [k, v] : stats_) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

void Sample::SetStat(std::string_view key, std::string raw_json) {
  if (!stats_loaded_) LoadStats();
  for (auto& [k, v] : stats_) {
    if (k == key) {
      v = std::move(raw_json);
      return;
    }
  }
  stats_.emplace_back(std::string(key), std::move(raw_json));
}

double Sample::StatNumber(std::string_view key) {
  const std::optional<std::string_view> raw = Stat(key);
  if (!raw) throw OpError("stat '" + std::string(key) + "' is missing");
  const std::string text(*raw);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) {
    throw OpError("stat '" + std::string(key) + "' is not a number: " + text.substr(0, 40));
  }
  return v;
}

std::optional<std::string> Sample::Field(std::string_view dotted_path) const {
  return LookupField(dotted_path).value;
}

Sample::FieldLookup Sample::LookupField(std::string_view dotted_path) const {
  FieldLookup result;
  size_t dot = dotted_path.find('.');
  const std::string_view head = dotted_path.substr(0, dot);
  std::optional<std::string_view> raw = record_->Find(head);
  if (!raw) {
    result.only_last_part_missing = dot == std::string_view::npos;
    return result;
  }
  std::string_view current = *raw;
  while (dot != std::string_view::npos) {
    const size_t next = dotted_path.find('.', dot + 1);
    const std::string_view part = dotted_path.substr(
        dot + 1, next == std::string_view::npos ? std::string_view::npos : next - dot - 1);
    if (current.empty() || current.front() != '{') return result;
    bool found = false;
    for (const io::JsonMember& m : io::SplitObject(current)) {
      if (io::UnescapeJsonString(m.key_literal) == part) {
        current = m.value;
        found = true;
        break;
      }
    }
    if (!found) {
      result.only_last_part_missing = next == std::string_view::npos;
      return result;
    }
    dot = next;
  }
  result.value = std::string(current);
  return result;
}

void Sample::WriteChanges(io::Record* record, bool write_stats, bool last) const {
  for (size_t i = 0; i < texts_.size(); ++i) {
    if (!text_changed_[i]) continue;
    // Encoded once: a tap's copy and the final commit share the encoding.
    if (encoded_[i].empty()) {
      encoded_[i].reserve(texts_[i].second.size() + 16);
      io::AppendJsonString(&encoded_[i], texts_[i].second);
    }
    record->Set(texts_[i].first, last ? std::move(encoded_[i]) : encoded_[i]);
  }
  if (meta_changed_) {
    // A new __dj__meta__ goes before __dj__stats__, wherever the stats came
    // from (this run's filters, the input, or a checkpoint the run resumed
    // from), so the field order never depends on where a run was resumed.
    const bool new_meta = !record->Find(kMetaKey);
    record->Set(kMetaKey, ObjectJson(meta_));
    if (new_meta) {
      if (const auto stats = record->Find(kStatsKey)) {
        record->SetLast(kStatsKey, std::string(*stats));
      }
    }
  }
  if (!write_stats) return;
  record->Set(kStatsKey,
              ObjectJson(stats_loaded_ ? stats_ : ObjectMembers(record_->Find(kStatsKey))));
}

void Sample::CommitTo(io::Record* record, bool write_stats) const {
  WriteChanges(record, write_stats, /*last=*/false);
}

void Sample::Commit(bool write_stats) {
  if (write_stats && !stats_loaded_) LoadStats();
  WriteChanges(record_, write_stats, /*last=*/true);
  for (std::string& e : encoded_) e.clear();
}

}  // namespace djshard::ops
