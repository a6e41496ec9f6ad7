#pragma once
// OpenCC's conversions (s2t, t2s, s2twp, ...) as libopencc 1.1.6 converts:
// the text cut by maximum matching against the segmentation dictionary, then
// each segment through the conversion chain, each conversion replacing the
// longest match of its dictionary group (the first dictionary of the group
// that matches at all) with its first value. The configuration and the
// dictionaries are read through libopencc once; the conversion itself runs on
// djshard's tries.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/common/byte_trie.h"

namespace opencc {
class Dict;
}

namespace djshard::ops {

class OpenCcConverter {
 public:
  // The converter of configuration `<mode>.json`, opened once per process and
  // shared by every thread. Not found or unreadable: an Error.
  static const OpenCcConverter& ForMode(const std::string& mode);
  ~OpenCcConverter();
  OpenCcConverter(const OpenCcConverter&) = delete;
  OpenCcConverter& operator=(const OpenCcConverter&) = delete;

  // The converted text into *out, which must not hold `text` (the library's
  // output: the text ends at its first NUL byte). A byte that starts no
  // character where OpenCC reads one: OpError with the library's message; a
  // last character cut short (which libopencc reads past): OpError saying so.
  void Convert(std::string_view text, std::string* out) const;
  // The same through libopencc itself, for tests.
  std::string LibraryConvert(std::string_view text) const;
  // Whether the segmentation and the first conversion are one walk per
  // character (SegmentAndConvert): the first conversion's group begins with
  // the segmentation dictionary, as in s2t, t2s and most of OpenCC's own.
  bool SegmentsWhileConverting() const { return fused_; }

 private:
  // A dictionary group, flattened (the first dictionary with a match wins),
  // in one trie: each key's entry says which dictionaries hold it and with
  // which value.
  struct Group {
    ByteTrie keys;
    size_t dictionaries = 0;
    std::vector<int32_t> values;     // [entry * dictionaries + d]: into `texts`, -1 if absent
    std::vector<std::string> texts;  // the values (each key's first)
  };
  struct Library;

  explicit OpenCcConverter(const std::string& mode);
  // The length of the group's match at the start of `text` (0: none) and, in
  // *value, its replacement; in *dict (when given) the index of the
  // dictionary it comes from.
  static size_t Match(const Group& group, std::string_view text, const std::string** value,
                      size_t* dict = nullptr);
  // The length of the longest key of the group's first dictionary at the
  // start of `text` (0: none).
  static size_t MatchFirst(const Group& group, std::string_view text);
  // Where each segment of `text` ends: a key of the segmentation's group
  // (the longest of its first dictionary with one at each place), or a run
  // of characters none starts. False
  // when a byte starts no character; OpError when the last one is cut short.
  bool Segment(std::string_view text, std::vector<size_t>* ends) const;
  // Each segment of `source` (ending at `ends`) converted by `group` on its
  // own, no match crossing a segment's end, into *target and *target_ends.
  // False when a byte starts no character; OpError when one is cut short.
  static bool ConvertSegments(const Group& group, std::string_view source,
                              const std::vector<size_t>& ends, std::string* target,
                              std::vector<size_t>* target_ends);
  // Segment and the first conversion in one pass, when fused_: a key of the
  // first dictionary where Segment would find one (the same dictionary: its
  // longest key, one segment), else one character converted by the group's
  // later dictionaries, within the run of characters Segment would make.
  // False when a byte starts no character; *exact false (and nothing
  // usable) when a later dictionary's key spans characters, whose match the
  // run's end could cut: the caller then segments first.
  bool SegmentAndConvert(std::string_view text, std::string* target,
                         std::vector<size_t>* target_ends, bool* exact) const;
  // The group of `dicts` (leaf dictionaries, in order).
  static Group MakeGroup(const std::vector<std::shared_ptr<opencc::Dict>>& dicts);

  std::unique_ptr<Library> library_;
  Group segmentation_;  // empty when fused_: the first of chain_ holds it
  std::vector<Group> chain_;
  bool fused_ = false;  // see SegmentsWhileConverting
};

}  // namespace djshard::ops
