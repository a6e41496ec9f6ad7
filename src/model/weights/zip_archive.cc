// The zip reader, after PKWARE's APPNOTE.TXT (sections 4.3.7, 4.3.12, 4.3.14-16
// and 4.5.3). Every offset and length comes from the file, so each is checked
// against the archive's size before it is used.
#include "src/model/weights/zip_archive.h"

#include <utility>

#include "djshard/common/error.h"
#include "src/model/weights/formats.h"

namespace djshard::model::weights {

namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndRecord = 0x06054b50;
constexpr uint32_t kZip64EndRecord = 0x06064b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kEndRecordSize = 22;
constexpr size_t kZip64EndRecordSize = 56;
constexpr size_t kZip64EndLocatorSize = 20;
constexpr uint16_t kZip64ExtraId = 0x0001;

// A bounds-checked reader of little-endian fields.
class Cursor {
 public:
  Cursor(std::string_view bytes, const std::string& file, std::string what)
      : bytes_(bytes), file_(file), what_(std::move(what)) {}
  template <typename T>
  T Read() {
    Need(sizeof(T));
    const T v = LoadLittleEndian<T>(bytes_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::string_view Take(size_t n) {
    Need(n);
    const std::string_view v = bytes_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  void Skip(size_t n) { Take(n); }
  bool AtEnd() const { return pos_ == bytes_.size(); }

 private:
  void Need(size_t n) const {
    if (n > bytes_.size() - pos_) {
      throw Error(file_, 0, "zip archive: truncated " + what_,
                  "the file is damaged or was cut short; download it again");
    }
  }
  std::string_view bytes_;
  size_t pos_ = 0;
  const std::string& file_;
  std::string what_;  // the record being read, for the error
};

[[noreturn]] void Fail(const std::string& file, const std::string& what) {
  throw Error(file, 0, "zip archive: " + what,
              "the file is damaged or is not a torch.save archive; download it again");
}

struct Directory {
  uint64_t entries = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

Directory FindDirectory(std::string_view archive, const std::string& file) {
  if (archive.size() < kEndRecordSize) Fail(file, "too short for a zip archive");
  // The end record is the last 22 bytes plus a comment of up to 65535 bytes.
  const size_t lowest =
      archive.size() > kEndRecordSize + 0xffff ? archive.size() - kEndRecordSize - 0xffff : 0;
  size_t end = archive.size() - kEndRecordSize;
  for (;; --end) {
    if (LoadLittleEndian<uint32_t>(archive.data() + end) == kEndRecord) break;
    if (end == lowest) Fail(file, "no end of central directory record");
  }
  Cursor c(archive.substr(end), file, "end of central directory record");
  c.Skip(4);
  const uint16_t disk = c.Read<uint16_t>();
  const uint16_t directory_disk = c.Read<uint16_t>();
  c.Skip(2);  // entries on this disk
  Directory d;
  d.entries = c.Read<uint16_t>();
  d.size = c.Read<uint32_t>();
  d.offset = c.Read<uint32_t>();
  const bool zip64 = d.entries == 0xffff || d.size == 0xffffffff || d.offset == 0xffffffff;
  if (!zip64) {
    if (disk != 0 || directory_disk != 0) Fail(file, "multi-disk archives are not supported");
    return d;
  }
  if (end < kZip64EndLocatorSize) Fail(file, "no zip64 end of central directory locator");
  Cursor locator(archive.substr(end - kZip64EndLocatorSize, kZip64EndLocatorSize), file,
                 "zip64 end of central directory locator");
  if (locator.Read<uint32_t>() != kZip64EndLocator) {
    Fail(file, "no zip64 end of central directory locator");
  }
  locator.Skip(4);
  const uint64_t record = locator.Read<uint64_t>();
  if (record > archive.size() || archive.size() - record < kZip64EndRecordSize) {
    Fail(file, "the zip64 end of central directory record lies outside the file");
  }
  Cursor r(archive.substr(record), file, "zip64 end of central directory record");
  if (r.Read<uint32_t>() != kZip64EndRecord) {
    Fail(file, "no zip64 end of central directory record where its locator points");
  }
  r.Skip(8 + 2 + 2);  // record size, versions
  const uint32_t disk64 = r.Read<uint32_t>();
  const uint32_t directory_disk64 = r.Read<uint32_t>();
  if (disk64 != 0 || directory_disk64 != 0) Fail(file, "multi-disk archives are not supported");
  r.Skip(8);  // entries on this disk
  d.entries = r.Read<uint64_t>();
  d.size = r.Read<uint64_t>();
  d.offset = r.Read<uint64_t>();
  return d;
}

// Replaces the fields that the central header set to their maximum with the
// values of the zip64 extra field (APPNOTE 4.5.3: in this order, only those).
void ApplyZip64Extra(std::string_view extra, uint64_t* size, uint64_t* compressed, uint64_t* offset,
                     const std::string& file, const std::string& entry) {
  Cursor c(extra, file, "extra field");
  while (!c.AtEnd()) {
    const uint16_t id = c.Read<uint16_t>();
    const uint16_t length = c.Read<uint16_t>();
    const std::string_view body = c.Take(length);
    if (id != kZip64ExtraId) continue;
    Cursor z(body, file, "zip64 extra field of " + entry);
    if (*size == 0xffffffff) *size = z.Read<uint64_t>();
    if (*compressed == 0xffffffff) *compressed = z.Read<uint64_t>();
    if (*offset == 0xffffffff) *offset = z.Read<uint64_t>();
    return;
  }
}

}  // namespace

std::vector<ZipEntry> ReadZipEntries(std::string_view archive, const std::string& file) {
  const Directory d = FindDirectory(archive, file);
  if (d.offset > archive.size() || d.size > archive.size() - d.offset) {
    Fail(file, "the central directory lies outside the file");
  }
  Cursor c(archive.substr(d.offset, d.size), file, "central directory");
  std::vector<ZipEntry> entries;
  for (uint64_t i = 0; i < d.entries; ++i) {
    if (c.Read<uint32_t>() != kCentralHeader) Fail(file, "bad central directory header");
    c.Skip(2 + 2);  // versions
    const uint16_t flags = c.Read<uint16_t>();
    const uint16_t method = c.Read<uint16_t>();
    c.Skip(2 + 2 + 4);  // time, date, crc-32
    uint64_t compressed = c.Read<uint32_t>();
    uint64_t size = c.Read<uint32_t>();
    const uint16_t name_length = c.Read<uint16_t>();
    const uint16_t extra_length = c.Read<uint16_t>();
    const uint16_t comment_length = c.Read<uint16_t>();
    c.Skip(2 + 2 + 4);  // disk, attributes
    uint64_t offset = c.Read<uint32_t>();
    ZipEntry e;
    e.name = std::string(c.Take(name_length));
    ApplyZip64Extra(c.Take(extra_length), &size, &compressed, &offset, file, e.name);
    c.Skip(comment_length);
    if (flags & 0x1) Fail(file, "entry " + e.name + " is encrypted");
    if (method != 0) {
      throw Error(file, 0,
                  "zip archive: entry " + e.name + " is compressed (method " +
                      std::to_string(method) + "); torch.save stores its entries uncompressed",
                  "save the weights again with torch.save, or convert them to safetensors");
    }
    if (compressed != size) Fail(file, "stored entry " + e.name + " has two sizes");
    if (offset > archive.size() || archive.size() - offset < kLocalHeaderSize) {
      Fail(file, "the local header of " + e.name + " lies outside the file");
    }
    // The data follows the local header, whose extra field (torch.save pads
    // it to align the data) may differ from the central one.
    Cursor local(archive.substr(offset, kLocalHeaderSize), file, "local header");
    if (local.Read<uint32_t>() != kLocalHeader) Fail(file, "bad local header of " + e.name);
    local.Skip(22);
    const uint16_t local_name_length = local.Read<uint16_t>();
    const uint16_t local_extra_length = local.Read<uint16_t>();
    const uint64_t start = offset + kLocalHeaderSize + local_name_length + local_extra_length;
    if (start > archive.size() || size > archive.size() - start) {
      Fail(file, "entry " + e.name + " runs past the end of the file");
    }
    e.data = archive.substr(start, size);
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace djshard::model::weights
