#include "src/model/sentencepiece/normalizer.h"

#include <cstring>

#include "djshard/common/error.h"

namespace djshard::model::sentencepiece {

namespace {

constexpr std::string_view kSpaceSymbol = "\xe2\x96\x81";  // U+2581
constexpr std::string_view kReplacementCharacter = "\xef\xbf\xbd";

// darts-clone's unit: a label, a leaf flag and the offset to its children,
// or (with bit 31 set) a value.
bool HasLeaf(uint32_t unit) { return (unit >> 8) & 1; }
uint32_t Value(uint32_t unit) { return unit & ((1u << 31) - 1); }
uint32_t Label(uint32_t unit) { return unit & ((1u << 31) | 0xff); }
uint32_t Offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

bool IsTrailByte(unsigned char c) { return (c & 0xc0) == 0x80; }
bool IsValidCodepoint(uint32_t c) { return c < 0xd800 || (c >= 0xe000 && c <= 0x10ffff); }

// The length of the UTF-8 character at the start of `s` as sentencepiece's
// DecodeUTF8 checks it (minimal encodings of scalar values); 0 if it is not one.
size_t ValidCharLength(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  if (p[0] < 0x80) return 1;
  if (n >= 2 && (p[0] & 0xe0) == 0xc0) {
    const uint32_t c = ((p[0] & 0x1fu) << 6) | (p[1] & 0x3fu);
    return IsTrailByte(p[1]) && c >= 0x80 && IsValidCodepoint(c) ? 2 : 0;
  }
  if (n >= 3 && (p[0] & 0xf0) == 0xe0) {
    const uint32_t c = ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
    return IsTrailByte(p[1]) && IsTrailByte(p[2]) && c >= 0x800 && IsValidCodepoint(c) ? 3 : 0;
  }
  if (n >= 4 && (p[0] & 0xf8) == 0xf0) {
    const uint32_t c =
        ((p[0] & 0x07u) << 18) | ((p[1] & 0x3fu) << 12) | ((p[2] & 0x3fu) << 6) | (p[3] & 0x3fu);
    return IsTrailByte(p[1]) && IsTrailByte(p[2]) && IsTrailByte(p[3]) && c >= 0x10000 &&
                   IsValidCodepoint(c)
               ? 4
               : 0;
  }
  return 0;
}

}  // namespace

Normalizer::Normalizer(const ModelProto& model, const std::string& path)
    : treat_whitespace_as_suffix_(model.treat_whitespace_as_suffix),
      add_dummy_prefix_(model.add_dummy_prefix),
      remove_extra_whitespaces_(model.remove_extra_whitespaces),
      escape_whitespaces_(model.escape_whitespaces) {
  const std::string_view blob = model.precompiled_charsmap;
  if (blob.empty()) return;
  // <size of the double array, 4 bytes little-endian><double array><replacements>
  uint32_t trie_size = 0;
  if (blob.size() > 4) std::memcpy(&trie_size, blob.data(), 4);
  if (blob.size() <= 4 || trie_size >= blob.size() - 4 || trie_size < 4 || trie_size % 4 != 0) {
    throw Error(path, 0,
                "its normalization rules are not a double array followed by replacement texts",
                "copy the model file again if the sentencepiece library refuses it too");
  }
  units_.resize(trie_size / 4);
  std::memcpy(units_.data(), blob.data() + 4, trie_size);
  replacements_ = std::string(blob.substr(4 + trie_size));
}

std::string_view Normalizer::Replacement(uint32_t offset) const {
  if (offset >= replacements_.size()) return {};
  const char* begin = replacements_.data() + offset;
  const void* nul = std::memchr(begin, '\0', replacements_.size() - offset);
  const size_t size = nul ? static_cast<const char*>(nul) - begin : replacements_.size() - offset;
  return {begin, size};
}

std::pair<std::string_view, size_t> Normalizer::NormalizePrefix(std::string_view input) const {
  // The longest rule: darts-clone's commonPrefixSearch over the whole input.
  size_t longest = 0;
  uint32_t value = 0;
  if (!units_.empty()) {
    const size_t n_units = units_.size();
    size_t node = Offset(units_[0]);
    for (size_t i = 0; i < input.size(); ++i) {
      const auto c = static_cast<unsigned char>(input[i]);
      node ^= c;
      if (node >= n_units) break;
      const uint32_t unit = units_[node];
      if (Label(unit) != c) break;
      node ^= Offset(unit);
      if (HasLeaf(unit)) {
        if (node >= n_units) break;
        longest = i + 1;
        value = Value(units_[node]);
      }
    }
  }
  if (longest > 0) return {Replacement(value), longest};
  const size_t length = ValidCharLength(input);
  if (length == 0) return {kReplacementCharacter, 1};  // a malformed byte, as U+FFFD
  return {input.substr(0, length), length};
}

void Normalizer::AppendSpace(std::string* out) const {
  if (escape_whitespaces_) {
    out->append(kSpaceSymbol);
  } else {
    out->push_back(' ');
  }
}

void Normalizer::Normalize(std::string_view input, std::string* out) const {
  out->clear();
  if (remove_extra_whitespaces_) {
    while (!input.empty()) {
      const auto [text, consumed] = NormalizePrefix(input);
      if (text != " ") break;
      input.remove_prefix(consumed);
    }
  }
  if (input.empty()) return;
  out->reserve(input.size() * 3);
  if (!treat_whitespace_as_suffix_ && add_dummy_prefix_) AppendSpace(out);
  bool is_prev_space = remove_extra_whitespaces_;
  while (!input.empty()) {
    auto [text, consumed] = NormalizePrefix(input);
    while (is_prev_space && !text.empty() && text[0] == ' ') text.remove_prefix(1);
    if (!text.empty()) {
      for (const char c : text) {
        if (escape_whitespaces_ && c == ' ') {
          out->append(kSpaceSymbol);
        } else {
          out->push_back(c);
        }
      }
      is_prev_space = text.back() == ' ';
    }
    input.remove_prefix(consumed);
    if (!remove_extra_whitespaces_) is_prev_space = false;
  }
  if (remove_extra_whitespaces_) {
    const std::string_view space = escape_whitespaces_ ? kSpaceSymbol : " ";
    while (out->size() >= space.size() &&
           std::string_view(*out).substr(out->size() - space.size()) == space) {
      out->resize(out->size() - space.size());
    }
  }
  if (treat_whitespace_as_suffix_ && add_dummy_prefix_) AppendSpace(out);
}

}  // namespace djshard::model::sentencepiece
