// Loading a tokenizer.json and running its pipeline: added tokens, normalizer,
// pre-tokenizer, model, post-processor.
#include "djshard/model/tokenizer.h"

#include <sys/stat.h>

#include <unordered_map>

#include "djshard/common/error.h"
#include "djshard/io/input.h"
#include "src/model/tokenizer/components.h"

namespace djshard::model {

namespace tokenizer {

namespace {

using nlohmann::json;

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false, single_word = false, lstrip = false, rstrip = false, normalized = true;
};

// Leftmost-longest matching of a set of strings (Hugging Face builds an
// Aho-Corasick automaton with MatchKind::LeftmostLongest).
class TokenMatcher {
 public:
  void Add(std::string pattern, size_t token) {
    if (pattern.empty()) return;
    const auto b = static_cast<unsigned char>(pattern[0]);
    by_first_[b].push_back({std::move(pattern), token});
    auto& v = by_first_[b];
    std::stable_sort(v.begin(), v.end(),
                     [](const Entry& x, const Entry& y) { return x.text.size() > y.text.size(); });
    any_ = true;
  }
  bool empty() const { return !any_; }
  // Longest pattern at `pos`, or nullptr.
  const std::pair<size_t, size_t>* MatchAt(std::string_view s, size_t pos,
                                           std::pair<size_t, size_t>* out) const {
    const auto& v = by_first_[static_cast<unsigned char>(s[pos])];
    for (const Entry& e : v) {
      if (s.compare(pos, e.text.size(), e.text) == 0) {
        *out = {pos + e.text.size(), e.token};
        return out;
      }
    }
    return nullptr;
  }

 private:
  struct Entry {
    std::string text;
    size_t token;
  };
  std::array<std::vector<Entry>, 256> by_first_;
  bool any_ = false;
};

}  // namespace

class Pipeline {
 public:
  std::string source;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::vector<AddedToken> added;
  std::unordered_map<std::string, uint32_t> added_ids;
  TokenMatcher raw_matcher, normalized_matcher;

  Encoding EncodeSequence(std::string_view text, uint32_t type_id) const;
  Encoding Encode(std::string_view text, const std::string_view* pair, bool add_special) const;

 private:
  struct Found {
    bool is_token;
    size_t token;
    size_t begin, end;
  };
  std::vector<Found> FindMatches(std::string_view s, const TokenMatcher& m) const;
  void SplitAdded(NormalizedString n, const TokenMatcher& m, std::vector<Split>* out) const;
};

std::vector<Pipeline::Found> Pipeline::FindMatches(std::string_view s,
                                                   const TokenMatcher& m) const {
  std::vector<Found> splits;
  if (s.empty()) {
    splits.push_back({false, 0, 0, 0});
    return splits;
  }
  size_t start_offset = 0;
  size_t pos = 0;
  std::pair<size_t, size_t> hit;
  while (pos < s.size()) {
    if (!m.MatchAt(s, pos, &hit)) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = hit.first;
    pos = hit.first;
    const AddedToken& t = added[hit.second];
    if (t.single_word) {
      bool start_space = true, stop_space = true;
      if (start > 0) {
        size_t k = start - 1;
        while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        size_t kk = k;
        start_space = !IsWordChar(DecodeUtf8(s, &kk));
      }
      if (stop < s.size()) {
        size_t k = stop;
        stop_space = !IsWordChar(DecodeUtf8(s, &k));
      }
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t newstart = start;
      while (newstart > 0) {
        size_t k = newstart - 1;
        while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        size_t kk = k;
        if (!IsWhitespace(DecodeUtf8(s, &kk))) break;
        newstart = k;
      }
      start = std::max(newstart, start_offset);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        size_t k = stop;
        if (!IsWhitespace(DecodeUtf8(s, &k))) break;
        stop = k;
      }
    }
    if (start_offset < start) splits.push_back({false, 0, start_offset, start});
    splits.push_back({true, hit.second, start, stop});
    start_offset = stop;
  }
  if (start_offset != s.size()) splits.push_back({false, 0, start_offset, s.size()});
  return splits;
}

void Pipeline::SplitAdded(NormalizedString n, const TokenMatcher& m,
                          std::vector<Split>* out) const {
  if (m.empty()) {
    if (!n.empty()) out->push_back({std::move(n), false, {}});
    return;
  }
  const std::vector<Found> found = FindMatches(n.get(), m);
  if (found.size() == 1 && !found[0].is_token && !n.empty()) {
    // No added token: the slice of the whole string is the string itself
    // when its original range is that of its alignments.
    const auto o = n.ToOriginal(0, n.get().size());
    if (o && o->first == n.original_start() && o->second == n.original_end()) {
      out->push_back({std::move(n), false, {}});
      return;
    }
  }
  for (const Found& f : found) {
    if (f.begin >= f.end) continue;  // empty pieces are dropped
    Split s;
    s.normalized = n.Slice(f.begin, f.end);
    if (f.is_token) {
      s.has_tokens = true;
      const std::string& value = s.normalized.get();
      s.tokens.push_back({added[f.token].id, value, 0, static_cast<uint32_t>(value.size())});
    }
    out->push_back(std::move(s));
  }
}

Encoding Pipeline::EncodeSequence(std::string_view text, uint32_t type_id) const {
  std::vector<Split> splits;
  SplitAdded(NormalizedString(text), raw_matcher, &splits);
  {
    std::vector<Split> normalized;
    normalized.reserve(splits.size());
    for (auto& s : splits) {
      if (s.has_tokens) {
        normalized.push_back(std::move(s));
        continue;
      }
      if (normalizer) normalizer->Normalize(&s.normalized);
      SplitAdded(std::move(s.normalized), normalized_matcher, &normalized);
    }
    splits = std::move(normalized);
  }
  if (pre_tokenizer) pre_tokenizer->PreTokenize(&splits);

  // Byte offsets in the original text to code point offsets.
  bool ascii = true;
  for (const char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  std::vector<uint32_t> char_of_byte;
  if (!ascii) {
    char_of_byte.resize(text.size());
    uint32_t ci = 0;
    size_t i = 0;
    while (i < text.size()) {
      const size_t n = Utf8LeadLength(static_cast<unsigned char>(text[i]));
      for (size_t k = 0; k < n && i + k < text.size(); ++k) char_of_byte[i + k] = ci;
      i += n;
      ++ci;
    }
  }
  auto to_chars = [&](std::pair<uint32_t, uint32_t> o) {
    if (ascii || o.first >= text.size()) return o;
    const uint32_t start = char_of_byte[o.first];
    if (o.second < text.size()) return std::make_pair(start, char_of_byte[o.second]);
    const uint32_t last = o.second >= 1 && o.second - 1 < text.size()
                              ? char_of_byte[o.second - 1]
                              : start;  // Hugging Face: start + 1 - 1
    return std::make_pair(start, last + 1);
  };

  Encoding e;
  std::vector<Token> tokens;
  for (auto& s : splits) {
    if (!s.has_tokens) {
      tokens.clear();
      model->Tokenize(s.normalized.get(), &tokens);
    }
    std::vector<Token>& list = s.has_tokens ? s.tokens : tokens;
    for (Token& t : list) {
      const auto orig = s.normalized.ToOriginal(t.start, t.end);
      const auto off = orig ? *orig : std::make_pair(t.start, t.end);
      e.ids.push_back(t.id);
      e.tokens.push_back(std::move(t.value));
      e.offsets.push_back(to_chars(off));
    }
  }
  e.type_ids.assign(e.ids.size(), type_id);
  e.special_tokens_mask.assign(e.ids.size(), 0);
  return e;
}

Encoding Pipeline::Encode(std::string_view text, const std::string_view* pair,
                          bool add_special) const {
  std::vector<Encoding> encodings;
  encodings.push_back(EncodeSequence(text, 0));
  if (pair) encodings.push_back(EncodeSequence(*pair, 1));
  if (post_processor) post_processor->Process(&encodings, add_special);
  if (encodings.size() == 1) return std::move(encodings[0]);
  Encoding out = std::move(encodings[0]);
  for (size_t i = 1; i < encodings.size(); ++i) {
    Encoding& e = encodings[i];
    out.ids.insert(out.ids.end(), e.ids.begin(), e.ids.end());
    for (auto& t : e.tokens) out.tokens.push_back(std::move(t));
    out.type_ids.insert(out.type_ids.end(), e.type_ids.begin(), e.type_ids.end());
    out.offsets.insert(out.offsets.end(), e.offsets.begin(), e.offsets.end());
    out.special_tokens_mask.insert(out.special_tokens_mask.end(), e.special_tokens_mask.begin(),
                                   e.special_tokens_mask.end());
  }
  return out;
}

namespace {

bool GetFlag(const json& t, const char* key, bool fallback, const LoadContext& ctx) {
  if (!t.contains(key) || t[key].is_null()) return fallback;
  if (!t[key].is_boolean())
    ctx.Fail("added_tokens", std::string("\"") + key + "\" is not a boolean");
  return t[key].get<bool>();
}

void CheckTopLevelKeys(const json& j, const LoadContext& ctx) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    static const char* kKnown[] = {"version",      "truncation",     "padding",
                                   "added_tokens", "normalizer",     "pre_tokenizer",
                                   "model",        "post_processor", "decoder"};
    bool ok = false;
    for (const char* k : kKnown) ok = ok || it.key() == k;
    if (!ok) ctx.Fail("tokenizer", "top-level key \"" + it.key() + "\" is not implemented");
  }
}

// An added_tokens entry without its id.
AddedToken ReadAddedToken(const json& t, const LoadContext& ctx) {
  if (!t.is_object() || !t.contains("content") || !t["content"].is_string()) {
    ctx.Fail("added_tokens", "entry " + t.dump() + " has no \"content\"");
  }
  CheckKeys(t, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"},
            "added_tokens", ctx);
  AddedToken a;
  a.content = t["content"].get<std::string>();
  a.special = GetFlag(t, "special", false, ctx);
  a.single_word = GetFlag(t, "single_word", false, ctx);
  a.lstrip = GetFlag(t, "lstrip", false, ctx);
  a.rstrip = GetFlag(t, "rstrip", false, ctx);
  a.normalized = GetFlag(t, "normalized", !a.special, ctx);
  return a;
}

// The id of added token `content` as Hugging Face's AddedVocabulary gives it:
// the model's id when the model has the token, else the next free id.
uint32_t AddedTokenId(const Model& model, const std::string& content, uint32_t vocab_size,
                      std::optional<uint32_t> max_added) {
  if (const auto model_id = model.TokenToId(content)) return *model_id;
  if (!max_added) return vocab_size;
  return (*max_added >= vocab_size || vocab_size == 0) ? *max_added + 1 : vocab_size;
}

// An entry's "id", when the file gives one, must be the id the tokenizer gives.
void CheckFileId(const json& t, const std::string& content, uint32_t id, uint32_t vocab_size,
                 size_t n_added, const LoadContext& ctx) {
  if (!t.contains("id")) return;
  if (!t["id"].is_number_unsigned()) {
    ctx.Fail("added_tokens", "the id of " + json(content).dump() + " is not a number");
  }
  const uint64_t file_id = t["id"].get<uint64_t>();
  if (file_id == id) return;
  const bool out_of_range = file_id >= uint64_t{vocab_size} + n_added;
  ctx.Fail("added_tokens",
           "token " + json(content).dump() + " has id " + std::to_string(file_id) +
               (out_of_range ? ", out of range for a vocabulary of " + std::to_string(vocab_size) +
                                   " plus " + std::to_string(n_added) + " added tokens"
                             : "") +
               ", but the tokenizer gives it id " + std::to_string(id),
           "the file is inconsistent; export it again with Hugging Face tokenizers");
}

void AddAddedTokens(const json& list, const LoadContext& ctx, Pipeline* p) {
  if (!list.is_array()) ctx.Fail("added_tokens", "is not a list");
  const auto vocab_size = static_cast<uint32_t>(p->model->VocabSize());
  const size_t n_added = list.size();
  std::optional<uint32_t> max_added;
  for (const auto& t : list) {
    AddedToken a = ReadAddedToken(t, ctx);
    if (a.content.empty() || p->added_ids.count(a.content)) continue;
    const uint32_t id = AddedTokenId(*p->model, a.content, vocab_size, max_added);
    CheckFileId(t, a.content, id, vocab_size, n_added, ctx);
    a.id = id;
    max_added = max_added ? std::max(*max_added, id) : id;
    p->added_ids[a.content] = id;
    p->added.push_back(std::move(a));
  }
}

// Special tokens first, then the others, each in file order (refresh_added_tokens).
void BuildMatchers(Pipeline* p) {
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < p->added.size(); ++i) {
      const AddedToken& a = p->added[i];
      if (a.special != (pass == 0)) continue;
      if (!a.normalized) {
        p->raw_matcher.Add(a.content, i);
      } else {
        NormalizedString n(a.content);
        if (p->normalizer) p->normalizer->Normalize(&n);
        p->normalized_matcher.Add(n.get(), i);
      }
    }
  }
}

std::unique_ptr<Pipeline> Build(const json& j, const LoadContext& ctx) {
  if (!j.is_object()) ctx.Fail("tokenizer", "the file is not a JSON object");
  CheckTopLevelKeys(j, ctx);
  auto p = std::make_unique<Pipeline>();
  p->source = ctx.source;
  if (!j.contains("model")) ctx.Fail("model", "is missing");
  p->model = MakeModel(j["model"], ctx);
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    p->normalizer = MakeNormalizer(j["normalizer"], ctx);
  }
  if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) {
    p->pre_tokenizer = MakePreTokenizer(j["pre_tokenizer"], ctx);
  }
  if (j.contains("post_processor") && !j["post_processor"].is_null()) {
    p->post_processor = MakePostProcessor(j["post_processor"], ctx);
  }
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    AddAddedTokens(j["added_tokens"], ctx, p.get());
    BuildMatchers(p.get());
  }
  return p;
}

}  // namespace

}  // namespace tokenizer

Tokenizer::Tokenizer(std::unique_ptr<tokenizer::Pipeline> pipeline)
    : pipeline_(std::move(pipeline)) {}
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::FromJson(std::string_view text,
                                                     const std::string& source) {
  tokenizer::LoadContext ctx{source};
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(source, 0, std::string("tokenizer: not valid JSON: ") + e.what(),
                "the file is damaged or truncated; copy or download it again");
  } catch (const nlohmann::json::exception& e) {
    throw Error(source, 0, std::string("tokenizer: not valid JSON: ") + e.what(),
                "the file is damaged or truncated; copy or download it again");
  }
  try {
    return std::shared_ptr<const Tokenizer>(new Tokenizer(tokenizer::Build(j, ctx)));
  } catch (const nlohmann::json::exception& e) {
    throw Error(source, 0, std::string("tokenizer: unexpected value: ") + e.what(),
                "fix the tokenizer file");
  }
}

std::shared_ptr<const Tokenizer> Tokenizer::Load(const std::string& path) {
  std::string file = path;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    file = path + "/tokenizer.json";
    if (::stat(file.c_str(), &st) != 0 && ::stat((file + ".zst").c_str(), &st) == 0) {
      file += ".zst";
    }
  }
  if (::stat(file.c_str(), &st) != 0) {
    throw Error(file, 0, "no tokenizer file here",
                "give a tokenizer.json or a directory that holds one");
  }
  std::string text;
  auto in = io::OpenInput(file);
  char buf[1 << 16];
  size_t n;
  while ((n = in->Read(buf, sizeof buf)) > 0) text.append(buf, n);
  return FromJson(text, file);
}

Encoding Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  return pipeline_->Encode(text, nullptr, add_special_tokens);
}

Encoding Tokenizer::EncodePair(std::string_view text, std::string_view pair,
                               bool add_special_tokens) const {
  return pipeline_->Encode(text, &pair, add_special_tokens);
}

std::optional<uint32_t> Tokenizer::TokenToId(std::string_view token) const {
  const auto it = pipeline_->added_ids.find(std::string(token));
  if (it != pipeline_->added_ids.end()) return it->second;
  return pipeline_->model->TokenToId(token);
}

const std::string& Tokenizer::source() const { return pipeline_->source; }

}  // namespace djshard::model
