#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/io/json_text.h"

namespace djshard::store {

// Media item rule of prepare: "", absolute paths and URLs (http, https, s3,
// gs, hdfs) stay as written; anything else becomes the lexically normalized
// absolute path of `media_root`/`item`. Returns true when `item` was rewritten.
bool NormalizeMediaPath(const std::string& media_root, const std::string& item, std::string* out);

// Turns one validated input line into its normalized form: media paths made
// absolute, missing index keys added with the global row number, written
// compact with keys in their original order and added keys last. Scalars and
// strings keep their original text. Not thread-safe (reuses buffers).
class RecordNormalizer {
 public:
  RecordNormalizer(std::vector<std::string> media_keys, std::string media_root,
                   std::vector<std::string> index_keys);

  // Validates `line` (see JsonLineParser) and writes its normalized form,
  // without '\n', into *out. Returns whether the line needed more than
  // minifying (a media path or an index key). Throws Error naming file:line_no.
  bool Normalize(std::string_view line, uint64_t global_row, const std::string& file,
                 uint64_t line_no, std::string* out);

 private:
  void Rebuild(uint64_t global_row, const std::string& file, uint64_t line_no, std::string* out);

  std::vector<std::string> media_keys_;
  std::string media_root_;
  std::vector<std::string> index_keys_;
  io::JsonLineParser parser_;
  std::string compact_;
};

}  // namespace djshard::store
