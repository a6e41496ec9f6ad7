// Post-processors of tokenizer.json: special tokens, type ids, offset trimming.
#include <map>

#include "src/model/tokenizer/components.h"

namespace djshard::model::tokenizer {

void TrimByteLevelOffsets(Encoding* e, bool add_prefix_space) {
  auto is_space = [](char32_t c) { return c == 0x120 || IsWhitespace(c); };
  for (size_t i = 0; i < e->tokens.size(); ++i) {
    const std::string& t = e->tokens[i];
    size_t leading = 0, trailing = 0, k = 0;
    bool all_space = true;
    while (k < t.size()) {
      const bool space = is_space(DecodeUtf8(t, &k));
      if (all_space && space) ++leading;
      all_space = all_space && space;
      trailing = space ? trailing + 1 : 0;
    }
    if (leading == 0 && trailing == 0) continue;
    auto& [start, end] = e->offsets[i];
    if (leading > 0) {
      const bool is_first = i == 0 || start == 0;
      if (is_first && add_prefix_space && leading == 1) leading = 0;
      start = std::min<uint32_t>(start + static_cast<uint32_t>(leading), end);
    }
    if (trailing > 0 && end >= trailing) {
      end = std::max<uint32_t>(end - static_cast<uint32_t>(trailing), start);
    }
  }
}

namespace {

using nlohmann::json;

void Wrap(Encoding* e, const std::vector<std::pair<std::string, uint32_t>>& before,
          const std::vector<std::pair<std::string, uint32_t>>& after, uint32_t type_before,
          uint32_t type_after) {
  Encoding out;
  const size_t n = e->ids.size() + before.size() + after.size();
  out.ids.reserve(n);
  auto special = [&](const std::pair<std::string, uint32_t>& t, uint32_t type) {
    out.ids.push_back(t.second);
    out.tokens.push_back(t.first);
    out.type_ids.push_back(type);
    out.offsets.emplace_back(0, 0);
    out.special_tokens_mask.push_back(1);
  };
  for (const auto& t : before) special(t, type_before);
  out.ids.insert(out.ids.end(), e->ids.begin(), e->ids.end());
  for (auto& t : e->tokens) out.tokens.push_back(std::move(t));
  out.type_ids.insert(out.type_ids.end(), e->type_ids.begin(), e->type_ids.end());
  out.offsets.insert(out.offsets.end(), e->offsets.begin(), e->offsets.end());
  out.special_tokens_mask.insert(out.special_tokens_mask.end(), e->special_tokens_mask.begin(),
                                 e->special_tokens_mask.end());
  for (const auto& t : after) special(t, type_after);
  *e = std::move(out);
}

class RobertaProcessing : public PostProcessor {
 public:
  RobertaProcessing(std::pair<std::string, uint32_t> sep, std::pair<std::string, uint32_t> cls,
                    bool trim_offsets, bool add_prefix_space)
      : sep_(std::move(sep)),
        cls_(std::move(cls)),
        trim_offsets_(trim_offsets),
        add_prefix_space_(add_prefix_space) {}
  void Process(std::vector<Encoding>* encodings, bool add_special) const override {
    for (auto& e : *encodings) {
      if (trim_offsets_) TrimByteLevelOffsets(&e, add_prefix_space_);
      std::fill(e.type_ids.begin(), e.type_ids.end(), 0);
    }
    if (!add_special) return;
    for (size_t i = 0; i < encodings->size(); ++i) {
      Wrap(&(*encodings)[i], {i == 0 ? cls_ : sep_}, {sep_}, 0, 0);
    }
  }

 private:
  std::pair<std::string, uint32_t> sep_, cls_;
  bool trim_offsets_, add_prefix_space_;
};

class BertProcessing : public PostProcessor {
 public:
  BertProcessing(std::pair<std::string, uint32_t> sep, std::pair<std::string, uint32_t> cls)
      : sep_(std::move(sep)), cls_(std::move(cls)) {}
  void Process(std::vector<Encoding>* encodings, bool add_special) const override {
    if (!add_special) return;
    for (size_t i = 0; i < encodings->size(); ++i) {
      if (i == 0) {
        Wrap(&(*encodings)[i], {cls_}, {sep_}, 0, 0);
      } else {
        Wrap(&(*encodings)[i], {}, {sep_}, 1, 1);
      }
    }
  }

 private:
  std::pair<std::string, uint32_t> sep_, cls_;
};

class TemplateProcessing : public PostProcessor {
 public:
  struct Piece {
    bool is_sequence;
    int sequence;         // 0 = A, 1 = B
    std::string special;  // name in special_tokens
    uint32_t type_id;
  };
  struct SpecialToken {
    std::vector<uint32_t> ids;
    std::vector<std::string> tokens;
  };
  TemplateProcessing(std::vector<Piece> single, std::vector<Piece> pair,
                     std::map<std::string, SpecialToken> specials)
      : single_(std::move(single)), pair_(std::move(pair)), specials_(std::move(specials)) {}

  void Process(std::vector<Encoding>* encodings, bool add_special) const override {
    const auto& tmpl = encodings->size() == 2 ? pair_ : single_;
    Encoding out;
    for (const Piece& p : tmpl) {
      if (p.is_sequence) {
        const size_t i = static_cast<size_t>(p.sequence);
        if (i >= encodings->size()) continue;
        Encoding& e = (*encodings)[i];
        out.ids.insert(out.ids.end(), e.ids.begin(), e.ids.end());
        for (auto& t : e.tokens) out.tokens.push_back(std::move(t));
        out.type_ids.insert(out.type_ids.end(), e.ids.size(), p.type_id);
        out.offsets.insert(out.offsets.end(), e.offsets.begin(), e.offsets.end());
        out.special_tokens_mask.insert(out.special_tokens_mask.end(), e.special_tokens_mask.begin(),
                                       e.special_tokens_mask.end());
      } else if (add_special) {
        const SpecialToken& s = specials_.at(p.special);
        for (size_t k = 0; k < s.ids.size(); ++k) {
          out.ids.push_back(s.ids[k]);
          out.tokens.push_back(s.tokens[k]);
          out.type_ids.push_back(p.type_id);
          out.offsets.emplace_back(0, 0);
          out.special_tokens_mask.push_back(1);
        }
      }
    }
    encodings->clear();
    encodings->push_back(std::move(out));
  }

 private:
  std::vector<Piece> single_, pair_;
  std::map<std::string, SpecialToken> specials_;
};

class ByteLevelProcessing : public PostProcessor {
 public:
  ByteLevelProcessing(bool trim_offsets, bool add_prefix_space)
      : trim_offsets_(trim_offsets), add_prefix_space_(add_prefix_space) {}
  void Process(std::vector<Encoding>* encodings, bool) const override {
    if (!trim_offsets_) return;
    for (auto& e : *encodings) TrimByteLevelOffsets(&e, add_prefix_space_);
  }

 private:
  bool trim_offsets_, add_prefix_space_;
};

class SequenceProcessing : public PostProcessor {
 public:
  explicit SequenceProcessing(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  void Process(std::vector<Encoding>* encodings, bool add_special) const override {
    for (const auto& p : parts_) p->Process(encodings, add_special);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

bool GetBool(const json& j, const char* key, bool fallback, const std::string& component,
             const LoadContext& ctx) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) ctx.Fail(component, std::string("\"") + key + "\" is not a boolean");
  return j[key].get<bool>();
}

std::pair<std::string, uint32_t> TokenPair(const json& j, const char* key,
                                           const std::string& component, const LoadContext& ctx) {
  if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2 || !j[key][0].is_string() ||
      !j[key][1].is_number_unsigned()) {
    ctx.Fail(component, std::string("\"") + key + "\" is not [token, id]");
  }
  return {j[key][0].get<std::string>(), j[key][1].get<uint32_t>()};
}

std::vector<TemplateProcessing::Piece> ParseTemplate(
    const json& j, const char* key,
    const std::map<std::string, TemplateProcessing::SpecialToken>& s, const std::string& component,
    const LoadContext& ctx) {
  if (!j.contains(key) || !j[key].is_array()) {
    ctx.Fail(component, std::string("\"") + key + "\" is not a list of template pieces");
  }
  std::vector<TemplateProcessing::Piece> out;
  for (const auto& p : j[key]) {
    const bool seq = p.is_object() && p.size() == 1 && p.contains("Sequence");
    const bool special = p.is_object() && p.size() == 1 && p.contains("SpecialToken");
    if (!seq && !special) ctx.Fail(component, "template piece " + p.dump() + " is not understood");
    const json& body = seq ? p["Sequence"] : p["SpecialToken"];
    if (!body.is_object() || !body.contains("id") || !body["id"].is_string() ||
        !body.contains("type_id") || !body["type_id"].is_number_unsigned()) {
      ctx.Fail(component, "template piece " + p.dump() + " is malformed");
    }
    const std::string id = body["id"].get<std::string>();
    TemplateProcessing::Piece piece{seq, 0, "", body["type_id"].get<uint32_t>()};
    if (seq) {
      if (id != "A" && id != "B") ctx.Fail(component, "sequence \"" + id + "\" is not A or B");
      piece.sequence = id == "A" ? 0 : 1;
    } else {
      if (!s.count(id)) ctx.Fail(component, "special token \"" + id + "\" is not defined");
      piece.special = id;
    }
    out.push_back(std::move(piece));
  }
  return out;
}

}  // namespace

std::unique_ptr<PostProcessor> MakePostProcessor(const json& j, const LoadContext& ctx) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    ctx.Fail("post_processor", "has no \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  const std::string component = "post_processor " + type;
  if (type == "RobertaProcessing") {
    CheckKeys(j, {"sep", "cls", "trim_offsets", "add_prefix_space"}, component, ctx);
    return std::make_unique<RobertaProcessing>(
        TokenPair(j, "sep", component, ctx), TokenPair(j, "cls", component, ctx),
        GetBool(j, "trim_offsets", true, component, ctx),
        GetBool(j, "add_prefix_space", true, component, ctx));
  }
  if (type == "BertProcessing") {
    CheckKeys(j, {"sep", "cls"}, component, ctx);
    return std::make_unique<BertProcessing>(TokenPair(j, "sep", component, ctx),
                                            TokenPair(j, "cls", component, ctx));
  }
  if (type == "TemplateProcessing") {
    CheckKeys(j, {"single", "pair", "special_tokens"}, component, ctx);
    std::map<std::string, TemplateProcessing::SpecialToken> specials;
    if (j.contains("special_tokens")) {
      if (!j["special_tokens"].is_object()) {
        ctx.Fail(component, "\"special_tokens\" is not an object");
      }
      for (auto it = j["special_tokens"].begin(); it != j["special_tokens"].end(); ++it) {
        const json& v = it.value();
        if (!v.is_object() || !v.contains("ids") || !v["ids"].is_array() || !v.contains("tokens") ||
            !v["tokens"].is_array() || v["ids"].size() != v["tokens"].size()) {
          ctx.Fail(component, "special token \"" + it.key() + "\" is malformed");
        }
        TemplateProcessing::SpecialToken t;
        for (const auto& id : v["ids"]) {
          if (!id.is_number_unsigned()) ctx.Fail(component, "special token ids must be numbers");
          t.ids.push_back(id.get<uint32_t>());
        }
        for (const auto& tok : v["tokens"]) {
          if (!tok.is_string()) ctx.Fail(component, "special token tokens must be strings");
          t.tokens.push_back(tok.get<std::string>());
        }
        specials[it.key()] = std::move(t);
      }
    }
    auto single = ParseTemplate(j, "single", specials, component, ctx);
    auto pair = ParseTemplate(j, "pair", specials, component, ctx);
    return std::make_unique<TemplateProcessing>(std::move(single), std::move(pair),
                                                std::move(specials));
  }
  if (type == "ByteLevel") {
    CheckKeys(j, {"add_prefix_space", "trim_offsets", "use_regex"}, component, ctx);
    return std::make_unique<ByteLevelProcessing>(
        GetBool(j, "trim_offsets", true, component, ctx),
        GetBool(j, "add_prefix_space", true, component, ctx));
  }
  if (type == "Sequence") {
    CheckKeys(j, {"processors"}, component, ctx);
    if (!j.contains("processors") || !j["processors"].is_array()) {
      ctx.Fail(component, "\"processors\" is not a list");
    }
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const auto& p : j["processors"]) parts.push_back(MakePostProcessor(p, ctx));
    return std::make_unique<SequenceProcessing>(std::move(parts));
  }
  ctx.Fail(component, "is not implemented");
}

}  // namespace djshard::model::tokenizer
