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
  std::vector<std::shared_ptr<opencc::Dict>> leaves;
  Flatten(segmentation->GetDict(), &leaves);
  segmentation_ = MakeGroup(leaves);
  for (const opencc::ConversionPtr& conversion :
       converter->GetConversionChain()->GetConversions()) {
    leaves.clear();
    Flatten(conversion->GetDict(), &leaves);
    chain_.push_back(MakeGroup(leaves));
  }
}

OpenCcConverter::Group OpenCcConverter::MakeGroup(
    const std::vector<std::shared_ptr<opencc::Dict>>& dicts) {
  Group group;
  const size_t n = group.dictionaries = dicts.size();
  std::unordered_map<std::string, int32_t> entry_of;
  std::vector<std::string> keys;
  for (size_t d = 0; d < n; ++d) {
    const opencc::LexiconPtr lexicon = dicts[d]->GetLexicon();
    for (const std::unique_ptr<opencc::DictEntry>& entry : *lexicon) {
      const auto [it, added] = entry_of.emplace(entry->Key(), static_cast<int32_t>(keys.size()));
      if (added) {
        keys.push_back(entry->Key());
        group.values.resize(keys.size() * n, -1);
      }
      int32_t& value = group.values[it->second * n + d];
      if (value < 0) {
        value = static_cast<int32_t>(group.texts.size());
        group.texts.push_back(entry->GetDefault());
      }
    }
  }
  std::vector<std::pair<std::string_view, int32_t>> index;
  for (size_t i = 0; i < keys.size(); ++i) index.emplace_back(keys[i], static_cast<int32_t>(i));
  group.keys = ByteTrie(std::move(index));
  return group;
}

size_t OpenCcConverter::Match(const Group& group, std::string_view text,
                              const std::string** value) {
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
    const size_t matched = Match(segmentation_, text.substr(pos), &value);
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
  if (!Segment(text, &ends)) {
    *out = LibraryConvert(text);  // the library's error for a byte that starts no character
    return;
  }
  // The last conversion writes into *out: alternate so that it does.
  std::string* target = out;
  std::string* spare = &buffer;
  if (chain_.size() % 2 == 0) std::swap(target, spare);
  if (chain_.empty()) out->assign(text);
  std::string_view source = text;
  for (const Group& group : chain_) {
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
