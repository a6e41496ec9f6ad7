// The entries of a zip archive held in memory, as torch.save writes them:
// stored (uncompressed) entries, zip64 records for archives over 4 GiB.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace djshard::model::weights {

struct ZipEntry {
  std::string name;
  std::string_view data;  // the entry's bytes, inside the archive
};

// Reads the central directory of `archive` and locates every entry's bytes.
// Throws Error naming `file` for anything that is not a well-formed archive
// of stored entries: no end record, a directory or local header outside the
// bytes, a compressed or encrypted entry, an entry past the end.
std::vector<ZipEntry> ReadZipEntries(std::string_view archive, const std::string& file);

}  // namespace djshard::model::weights
