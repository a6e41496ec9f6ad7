#include "src/ops/opencc_converter.h"

#include <Config.hpp>
#include <Conversion.hpp>
#include <ConversionChain.hpp>
#include <Converter.hpp>
#include <DictEntry.hpp>
#include <DictGroup.hpp>
#include <Exception.hpp>
#include <Lexicon.hpp>
#include <MaxMatchSegmentation.hpp>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

#include "djshard/common/error.h"
#include "djshard/ops/sample.h"

namespace djshard::ops {

namespace {

// OpenCC's UTF8Util::NextCharLengthNoException: the length its lead byte
// announces, 0 for a byte that cannot start a character.
size_t NextCharLength(unsigned char c) {
  if ((c & 0xf0) == 0xe0) return 3;
  if ((c & 0x80) == 0) return 1;
  if ((c & 0xe0) == 0xc0) return 2;
  if ((c & 0xf8) == 0xf0) return 4;
  if ((c & 0xfc) == 0xf8) return 5;
  if ((c & 0xfe) == 0xfc) return 6;
  return 0;
}

// The dictionaries of `dict`, a group's in order (nested groups flattened:
// a group's match is its first dictionary's that matches).
void Flatten(const opencc::DictPtr& dict, std::vector<std::shared_ptr<opencc::Dict>>* leaves) {
  if (const auto* group = dynamic_cast<const opencc::DictGroup*>(dict.get())) {
    for (const opencc::DictPtr& d : group->GetDicts()) Flatten(d, leaves);
  } else {
    leaves->push_back(dict);
  }
}

// Whether two dictionaries hold the same keys with the same first values, in
// the same order (OpenCC's configurations name one file for both the
// segmentation and a conversion: the library may load it twice).
bool SameDictionary(const opencc::Dict& a, const opencc::Dict& b) {
  if (&a == &b) return true;
  const opencc::LexiconPtr x = a.GetLexicon(), y = b.GetLexicon();
  if (x->Length() != y->Length()) return false;
  for (size_t i = 0; i < x->Length(); ++i) {
    if (x->At(i)->Key() != y->At(i)->Key() || x->At(i)->GetDefault() != y->At(i)->GetDefault()) {
      return false;
    }
  }
  return true;
}

// A text whose last character is cut short. libopencc would read past the
// text's end (and report the bytes it found there): djshard says what it is.
[[noreturn]] void ThrowCutShort() {
  throw OpError("OpenCC failed: the text ends inside a UTF-8 character");
}

}  // namespace

struct OpenCcConverter::Library {
  opencc::ConverterPtr converter;
};

const OpenCcConverter& OpenCcConverter::ForMode(const std::string& mode) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<OpenCcConverter>> open;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = open[mode];
  if (!slot) slot.reset(new OpenCcConverter(mode));
  return *slot;
}

OpenCcConverter::~OpenCcConverter() = default;

OpenCcConverter::OpenCcConverter(const std::string& mode) : library_(std::make_unique<Library>()) {
  const std::string config = mode + ".json";
  const std::string hint = "scripts/setup.sh installs libopencc-dev and its dictionaries";
  try {
    library_->converter = opencc::Config().NewFromFile(config);
  } catch (const opencc::Exception& e) {  // not a std::exception
    throw Error("OpenCC cannot open its configuration " + config + ": " + e.what(), hint);
  } catch (const std::exception& e) {
    throw Error("OpenCC cannot open its configuration " + config + ": " + e.what(), hint);
  }
  const opencc::ConverterPtr& converter = library_->converter;
  const auto* segmentation =
      dynamic_cast<const opencc::MaxMatchSegmentation*>(converter->GetSegmentation().get());
  if (segmentation == nullptr) {
    throw Error("OpenCC configuration " + config + " does not segment by maximum matching",
                "use one of OpenCC's own configurations");
  }
  std::vector<std::shared_ptr<opencc::Dict>> segmentation_leaves, leaves;
  Flatten(segmentation->GetDict(), &segmentation_leaves);
  for (const opencc::ConversionPtr& conversion :
       converter->GetConversionChain()->GetConversions()) {
    leaves.clear();
    Flatten(conversion->GetDict(), &leaves);
    if (chain_.empty() && segmentation_leaves.size() == 1 && !leaves.empty()) {
      fused_ = SameDictionary(*segmentation_leaves.front(), *leaves.front());
    }
    chain_.push_back(MakeGroup(leaves));
  }
  // Fused, the first conversion's group holds the segmentation dictionary
  // (its first): Segment walks that group's trie, and no second is built.
  if (!fused_) segmentation_ = MakeGroup(segmentation_leaves);
}

OpenCcConverter::Group OpenCcConverter::MakeGroup(
    const std::vector<std::shared_ptr<opencc::Dict>>& dicts) {
  Group group;
  const size_t n = group.dictionaries = dicts.size();
  std::deque<std::string> keys;  // stable: the map and the index view them
  std::unordered_map<std::string_view, int32_t> entry_of;
  std::vector<std::pair<std::string_view, int32_t>> index;
  for (size_t d = 0; d < n; ++d) {
    const opencc::LexiconPtr lexicon = dicts[d]->GetLexicon();
    entry_of.reserve(entry_of.size() + lexicon->Length());
    for (const std::unique_ptr<opencc::DictEntry>& entry : *lexicon) {
      std::string key = entry->Key();  // a copy: DictEntry returns it by value
      auto it = entry_of.find(key);
      if (it == entry_of.end()) {
        const auto id = static_cast<int32_t>(index.size());
        it = entry_of.emplace(keys.emplace_back(std::move(key)), id).first;
        index.emplace_back(keys.back(), id);
        group.values.resize(index.size() * n, -1);
      }
      int32_t& value = group.values[static_cast<size_t>(it->second) * n + d];
      if (value < 0) {
        value = static_cast<int32_t>(group.texts.size());
        group.texts.push_back(entry->GetDefault());
      }
    }
  }
  group.keys = ByteTrie(std::move(index));
  return group;
}

size_t OpenCcConverter::MatchFirst(const Group& group, std::string_view text) {
  size_t length = 0;
  int32_t node = ByteTrie::kRoot;
  for (size_t i = 0; i < text.size(); ++i) {
    node = group.keys.Child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    const int32_t entry = group.keys.Value(node);
    if (entry >= 0 && group.values[static_cast<size_t>(entry) * group.dictionaries] >= 0) {
      length = i + 1;
    }
  }
  return length;
}

size_t OpenCcConverter::Match(const Group& group, std::string_view text, const std::string** value,
                              size_t* dict_out) {
  // The lowest dictionary with a key here, and its longest: keys lengthen
  // along the walk, so its last key seen is its longest.
  const size_t n = group.dictionaries;
  size_t dict = n, length = 0;
  int32_t node = ByteTrie::kRoot;
  for (size_t i = 0; i < text.size(); ++i) {
    node = group.keys.Child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    const int32_t entry = group.keys.Value(node);
    if (entry < 0) continue;
    const int32_t* values = &group.values[static_cast<size_t>(entry) * n];
    for (size_t d = 0; d < n && d <= dict; ++d) {
      if (values[d] < 0) continue;
      dict = d;
      length = i + 1;
      *value = &group.texts[values[d]];
      break;
    }
  }
  if (dict_out != nullptr) *dict_out = dict;
  return length;
}

std::string OpenCcConverter::LibraryConvert(std::string_view text) const {
  // What opencc_convert_utf8 does, without its process-wide last-error string.
  try {
    return library_->converter->Convert(std::string(text));
  } catch (const opencc::Exception& e) {  // not a std::exception
    throw OpError(std::string("OpenCC failed: ") + e.what());
  }
}

bool OpenCcConverter::Segment(std::string_view text, std::vector<size_t>* ends) const {
  ends->clear();
  const std::string* value = nullptr;
  size_t run_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    // Fused, the segmentation dictionary is the first of the first
    // conversion's group; else the segmentation's own group (several
    // dictionaries: the first that matches).
    const size_t matched = fused_ ? MatchFirst(chain_.front(), text.substr(pos))
                                  : Match(segmentation_, text.substr(pos), &value);
    if (matched == 0) {
      const size_t length = NextCharLength(static_cast<unsigned char>(text[pos]));
      if (length == 0) return false;
      if (pos + length > text.size()) ThrowCutShort();
      pos += length;
      continue;
    }
    if (pos > run_start) ends->push_back(pos);  // the run before the match
    pos += matched;
    ends->push_back(pos);
    run_start = pos;
  }
  if (text.size() > run_start) ends->push_back(text.size());
  return true;
}

bool OpenCcConverter::SegmentAndConvert(std::string_view text, std::string* target,
                                        std::vector<size_t>* target_ends, bool* exact) const {
  const Group& group = chain_.front();
  target->clear();
  target_ends->clear();
  *exact = true;
  const std::string* value = nullptr;
  size_t copy_from = 0;  // characters no key matched, copied as a run
  bool in_run = false;   // a run of characters where no segmentation key starts
  for (size_t pos = 0; pos < text.size();) {
    size_t dict = 0;
    const size_t matched = Match(group, text.substr(pos), &value, &dict);
    if (matched > 0 && dict == 0) {
      // Segment's key here (the same dictionary's longest): a segment of
      // its own, converted whole.
      target->append(text.substr(copy_from, pos - copy_from));
      if (in_run) target_ends->push_back(target->size());
      in_run = false;
      target->append(*value);
      pos += matched;
      copy_from = pos;
      target_ends->push_back(target->size());
      continue;
    }
    const size_t length = NextCharLength(static_cast<unsigned char>(text[pos]));
    if (length == 0) return false;
    if (pos + length > text.size()) ThrowCutShort();
    in_run = true;
    if (matched > length) {
      *exact = false;
      return true;
    }
    if (matched > 0) {
      target->append(text.substr(copy_from, pos - copy_from));
      target->append(*value);
      copy_from = pos + matched;
    }
    pos += length;
  }
  target->append(text.substr(copy_from));
  if (in_run) target_ends->push_back(target->size());
  return true;
}

bool OpenCcConverter::ConvertSegments(const Group& group, std::string_view source,
                                      const std::vector<size_t>& ends, std::string* target,
                                      std::vector<size_t>* target_ends) {
  target->clear();
  target_ends->clear();
  const std::string* value = nullptr;
  size_t start = 0;
  for (const size_t end : ends) {
    size_t copy_from = start;  // characters no key matched, copied as a run
    for (size_t pos = start; pos < end;) {
      const size_t matched = Match(group, source.substr(pos, end - pos), &value);
      if (matched > 0) {
        target->append(source.substr(copy_from, pos - copy_from));
        target->append(*value);
        pos += matched;
        copy_from = pos;
        continue;
      }
      const size_t length = NextCharLength(static_cast<unsigned char>(source[pos]));
      if (length == 0) return false;
      if (pos + length > end) ThrowCutShort();
      pos += length;
    }
    target->append(source.substr(copy_from, end - copy_from));
    target_ends->push_back(target->size());
    start = end;
  }
  return true;
}

void OpenCcConverter::Convert(std::string_view text, std::string* out) const {
  text = text.substr(0, text.find('\0'));  // OpenCC reads a C string
  thread_local std::vector<size_t> ends, next_ends;
  thread_local std::string buffer;
  // The last conversion writes into *out: alternate so that it does.
  std::string* target = out;
  std::string* spare = &buffer;
  if (chain_.size() % 2 == 0) std::swap(target, spare);
  std::string_view source = text;
  size_t first = 0;  // the chain's conversions still to run
  bool exact = false;
  if (fused_) {
    if (!SegmentAndConvert(text, target, &ends, &exact)) {
      *out = LibraryConvert(text);  // the library's error for a byte that starts no character
      return;
    }
  }
  if (exact) {
    source = *target;
    std::swap(target, spare);
    first = 1;
  } else if (!Segment(text, &ends)) {
    *out = LibraryConvert(text);  // the library's error for a byte that starts no character
    return;
  }
  if (chain_.empty()) out->assign(text);
  for (size_t c = first; c < chain_.size(); ++c) {
    const Group& group = chain_[c];
    if (!ConvertSegments(group, source, ends, target, &next_ends)) {
      *out = LibraryConvert(text);
      return;
    }
    ends.swap(next_ends);
    source = *target;
    std::swap(target, spare);
  }
}

}  // namespace djshard::ops
