#include "djshard/store/normalize.h"

#include <filesystem>

#include "djshard/common/error.h"

namespace djshard::store {

namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool KeptAsWritten(const std::string& item) {
  return item.empty() || item[0] == '/' || StartsWith(item, "http://") ||
         StartsWith(item, "https://") || StartsWith(item, "s3://") || StartsWith(item, "gs://") ||
         StartsWith(item, "hdfs://");
}

}  // namespace

bool NormalizeMediaPath(const std::string& media_root, const std::string& item, std::string* out) {
  if (KeptAsWritten(item)) {
    *out = item;
    return false;
  }
  std::string joined = (std::filesystem::path(media_root) / item).lexically_normal().string();
  // lexically_normal keeps a trailing separator ("a/b/" stays a directory name).
  while (joined.size() > 1 && joined.back() == '/') joined.pop_back();
  *out = std::move(joined);
  return true;
}

RecordNormalizer::RecordNormalizer(std::vector<std::string> media_keys, std::string media_root,
                                   std::vector<std::string> index_keys)
    : media_keys_(std::move(media_keys)),
      media_root_(std::move(media_root)),
      index_keys_(std::move(index_keys)) {}

bool RecordNormalizer::Normalize(std::string_view line, uint64_t global_row,
                                 const std::string& file, uint64_t line_no, std::string* out) {
  parser_.ParseObject(line, file, line_no);
  bool rebuild = false;
  for (const std::string& key : media_keys_) rebuild = rebuild || parser_.HasNonNull(key);
  for (const std::string& key : index_keys_) rebuild = rebuild || !parser_.Has(key);
  io::MinifyJson(line, rebuild ? &compact_ : out);
  if (rebuild) Rebuild(global_row, file, line_no, out);
  return rebuild;
}

void RecordNormalizer::Rebuild(uint64_t global_row, const std::string& file, uint64_t line_no,
                               std::string* out) {
  const std::vector<io::JsonMember> members = io::SplitObject(compact_);
  std::vector<bool> index_present(index_keys_.size(), false);
  std::vector<std::string> seen_media;
  out->clear();
  out->push_back('{');
  std::string item_text;
  for (const io::JsonMember& m : members) {
    if (out->size() > 1) out->push_back(',');
    out->append(m.key_literal);
    out->push_back(':');
    const std::string key = io::UnescapeJsonString(m.key_literal);
    for (size_t i = 0; i < index_keys_.size(); ++i)
      if (key == index_keys_[i]) index_present[i] = true;

    bool is_media = false;
    for (const std::string& mk : media_keys_) is_media |= (key == mk);
    // Only the first occurrence of a duplicated key counts, as for the parser.
    bool first = true;
    for (const std::string& s : seen_media) first &= (s != key);
    if (!is_media || !first || m.value == "null") {
      out->append(m.value);
      continue;
    }
    seen_media.push_back(key);
    if (m.value.empty() || m.value[0] != '[') {
      throw Error(file, line_no, "media field '" + key + "' must be a list of strings",
                  "write it as [\"path\", ...] or null");
    }
    out->push_back('[');
    bool first_item = true;
    for (std::string_view item : io::SplitArray(m.value)) {
      if (item.empty() || item[0] != '"') {
        throw Error(file, line_no, "media field '" + key + "' must be a list of strings",
                    "found a non-string item " + std::string(item.substr(0, 40)));
      }
      if (!first_item) out->push_back(',');
      first_item = false;
      if (NormalizeMediaPath(media_root_, io::UnescapeJsonString(item), &item_text)) {
        io::AppendJsonString(out, item_text);
      } else {
        out->append(item);
      }
    }
    out->push_back(']');
  }
  for (size_t i = 0; i < index_keys_.size(); ++i) {
    if (index_present[i]) continue;
    if (out->size() > 1) out->push_back(',');
    io::AppendJsonString(out, index_keys_[i]);
    out->push_back(':');
    out->append(std::to_string(global_row));
  }
  out->push_back('}');
}

}  // namespace djshard::store
