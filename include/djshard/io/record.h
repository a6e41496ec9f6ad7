#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace djshard::io {

// One JSONL record on the hot path: the raw line, an index of its top-level
// members (key and raw value range), and an overlay of replaced, added and
// removed members. Serialize() copies untouched values byte for byte, in
// their original order, and writes the line unchanged when nothing changed.
// A Record is reused across lines to avoid allocations; not thread-safe.
class Record {
 public:
  // Takes a copy of `line`, which must be one valid JSON object.
  void Assign(std::string_view line);
  // Like Assign, without the copy: `line` must outlive every use of the record.
  void AssignView(std::string_view line);

  // Raw JSON of top-level `key` (its first occurrence); nullopt when absent.
  // Reflects the overlay.
  std::optional<std::string_view> Find(std::string_view key) const;
  // Replaces top-level `key` in place, or appends it, with raw JSON `value`.
  void Set(std::string_view key, std::string value);
  // Leaves `key` out of the output.
  void Remove(std::string_view key);
  // Sets top-level `key` to raw JSON `value` as the record's last member,
  // moving it there when it is already present.
  void SetLast(std::string_view key, std::string value);

  // Appends the record, without '\n', to *out.
  void Serialize(std::string* out) const;

  std::string_view line() const { return line_; }

 private:
  struct Member {
    std::string key;               // decoded
    std::string_view key_literal;  // as written, into line_
    std::string_view value;        // as written, into line_
    int replacement = -1;          // index into replacements_, or -1
    bool removed = false;
  };
  Member* FindMember(std::string_view key);
  const Member* FindMember(std::string_view key) const;

  std::string owned_;      // the line, when Assign copied it
  std::string_view line_;  // the line, owned_ or the caller's
  std::vector<Member> members_;
  std::vector<std::string> replacements_;
  std::vector<std::pair<std::string, std::string>> appended_;
  bool modified_ = false;
};

}  // namespace djshard::io
