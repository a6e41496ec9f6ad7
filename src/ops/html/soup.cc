// Beautiful Soup 4.14.2's tree construction for html.parser (bs4/__init__.py:
// handle_starttag, handle_endtag, endData, pushTag, popTag, _popToTag;
// builder/_htmlparser.py: BeautifulSoupHTMLParser) and the output of
// Tag.decode() with the "minimal" formatter.
#include "src/ops/html/soup.h"

#include <algorithm>
#include <unordered_map>

#include "djshard/ops/text.h"
#include "src/ops/html/entities.h"
#include "src/ops/html/html_parser.h"

namespace djshard::ops::html {

namespace {

// HTMLTreeBuilder.DEFAULT_EMPTY_ELEMENT_TAGS.
bool IsVoidElement(std::string_view name) {
  static const std::string_view kVoid[] = {
      "area",     "base",    "br",       "col",   "embed", "hr",      "img",    "input",
      "keygen",   "link",    "menuitem", "meta",  "param", "source",  "track",  "wbr",
      "basefont", "bgsound", "command",  "frame", "image", "isindex", "nextid", "spacer"};
  return std::find(std::begin(kVoid), std::end(kVoid), name) != std::end(kVoid);
}

// HTMLTreeBuilder.DEFAULT_STRING_CONTAINERS: the string class inside a tag
// named `name`, kText when it has none.
NodeKind StringContainerKind(std::string_view name) {
  if (name == "script") return NodeKind::kScript;
  if (name == "style") return NodeKind::kStylesheet;
  if (name == "template") return NodeKind::kTemplateString;
  if (name == "rt") return NodeKind::kRubyText;
  if (name == "rp") return NodeKind::kRubyParenthesis;
  return NodeKind::kText;
}

// HTMLTreeBuilder.DEFAULT_CDATA_LIST_ATTRIBUTES: attributes whose value is a
// whitespace-separated list.
bool IsListAttribute(std::string_view tag, std::string_view attr) {
  if (attr == "class" || attr == "accesskey" || attr == "dropzone") return true;
  if (tag == "a" || tag == "link") return attr == "rel" || attr == "rev";
  if (tag == "td" || tag == "th") return attr == "headers";
  if (tag == "form") return attr == "accept-charset";
  if (tag == "object") return attr == "archive";
  if (tag == "area") return attr == "rel";
  if (tag == "icon") return attr == "sizes";
  if (tag == "iframe") return attr == "sandbox";
  if (tag == "output") return attr == "for";
  return false;
}

// " ".join(re.findall(r"\S+", value)).
void AppendJoinedWords(std::string_view value, std::string* out) {
  bool pending_space = false;
  bool any = false;
  for (size_t i = 0; i < value.size();) {
    const size_t at = i;
    if (text::IsSpace(text::NextCodePoint(value, &i))) {
      pending_space = any;
      continue;
    }
    if (pending_space) out->push_back(' ');
    pending_space = false;
    any = true;
    out->append(value.substr(at, i - at));
  }
}

// BeautifulSoupHTMLParser.handle_charref: a number below 256 is a
// windows-1252 byte (its five undefined bytes stay C1 controls), a number
// past U+10FFFF is U+FFFD. Python keeps a surrogate (U+D800-DFFF) as a lone
// surrogate, which UTF-8 cannot hold: U+FFFD here.
uint32_t CharRefCodePoint(std::string_view name) {
  int base = 10;
  if (name[0] == 'x' || name[0] == 'X') {
    base = 16;
    name.remove_prefix(1);
  }
  uint32_t num = 0;
  for (const char c : name) {
    const uint32_t digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    num = std::min<uint32_t>(num * base + digit, 0x110000);
  }
  if (num >= 0x80 && num <= 0x9F) {
    const NumericReference* end = kReplacedNumbers + kReplacedNumbersSize;
    const NumericReference* ref =
        std::lower_bound(kReplacedNumbers, end, num,
                         [](const NumericReference& r, uint32_t n) { return r.number < n; });
    return ref->cp;  // the table lists every number of 0x80-0x9F
  }
  if (num > 0x10FFFF || (num >= 0xD800 && num <= 0xDFFF)) return 0xFFFD;
  return num;
}

// `s` without its first `count` code points.
std::string_view DropCodePoints(std::string_view s, size_t count) {
  size_t i = 0;
  for (; count > 0 && i < s.size(); --count) {
    i += text::SequenceLength(static_cast<unsigned char>(s[i]));
  }
  return s.substr(std::min(i, s.size()));
}

// bs4's EntitySubstitution.substitute_xml: '&', '<' and '>' as entities.
void AppendXmlEscaped(std::string_view s, std::string* out) {
  size_t done = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c != '&' && c != '<' && c != '>') continue;
    out->append(s.substr(done, i - done));
    out->append(c == '&' ? "&amp;" : c == '<' ? "&lt;" : "&gt;");
    done = i + 1;
  }
  out->append(s.substr(done));
}

// ContentMetaAttributeValue.substitute_encoding("utf-8"): CHARSET_RE,
// ((^|;)\s*charset=)([^;]*) with re.M, replaced by its group 1 + "utf-8".
std::string SubstituteContentCharset(std::string_view v) {
  std::string out;
  size_t done = 0;
  for (size_t p = 0; p < v.size();) {
    size_t value_begin = std::string_view::npos;
    for (const bool at_semicolon : {false, true}) {
      const bool starts = at_semicolon ? v[p] == ';' : p == 0 || v[p - 1] == '\n';
      if (!starts) continue;
      size_t q = p + (at_semicolon ? 1 : 0);
      while (q < v.size()) {
        size_t next = q;
        if (!text::IsSpace(text::NextCodePoint(v, &next))) break;
        q = next;
      }
      if (v.substr(q, 8) == "charset=") {
        value_begin = q + 8;
        break;
      }
    }
    if (value_begin == std::string_view::npos) {
      ++p;
      continue;
    }
    const size_t value_end = std::min(v.find(';', value_begin), v.size());
    out.append(v.substr(done, value_begin - done));
    out.append("utf-8");
    done = p = value_end;
  }
  out.append(v.substr(done));
  return out;
}

// Whether every character of `s` is one of BeautifulSoup.ASCII_SPACES.
bool AllAsciiSpaces(std::string_view s) {
  return s.find_first_not_of(" \n\t\f\r") == std::string_view::npos;
}

}  // namespace

// BeautifulSoup + BeautifulSoupHTMLParser: html.parser's events to a Soup.
class SoupBuilder : public HtmlEvents {
 public:
  explicit SoupBuilder(Soup* soup) : soup_(soup) {
    soup_->nodes_.push_back({NodeKind::kTag, false, 0, 0, 0, 0, 0, 0});  // "[document]"
    stack_.push_back({0, kUnknownName});
  }

  void Finish() {
    EndData(NodeKind::kText);
    while (stack_.size() > 1) PopTag();
    soup_->nodes_[0].end = static_cast<uint32_t>(soup_->nodes_.size());
  }

  void StartTag(const std::string& name, const std::vector<Attribute>& attrs) override {
    HandleStartTag(name, attrs, true);
  }
  void StartEndTag(const std::string& name, const std::vector<Attribute>& attrs) override {
    HandleStartTag(name, attrs, false);
    EndTag(name);
  }
  void EndTag(const std::string& name) override {
    const auto known = name_ids_.find(name);
    if (known != name_ids_.end()) {
      auto it = std::find(already_closed_.begin(), already_closed_.end(), known->second);
      if (it != already_closed_.end()) {
        already_closed_.erase(it);
        return;
      }
    }
    CloseTag(known == name_ids_.end() ? kUnknownName : known->second);
  }
  void Data(std::string_view data) override {
    data_.append(data);
    has_data_ = true;
  }
  void CharRef(std::string_view name) override {
    text::AppendUtf8(&data_, CharRefCodePoint(name));
    has_data_ = true;
  }
  void EntityRef(std::string_view name) override {
    if (auto value = FindNamedReference(std::string(name) + ";")) {
      data_.append(*value);
    } else {
      data_.push_back('&');
      data_.append(name);
    }
    has_data_ = true;
  }
  void Comment(std::string_view data) override { AddSpecialString(data, NodeKind::kComment); }
  void Decl(std::string_view decl) override {
    AddSpecialString(DropCodePoints(decl, 8), NodeKind::kDoctype);  // decl[len("DOCTYPE "):]
  }
  void Pi(std::string_view data) override {
    AddSpecialString(data, NodeKind::kProcessingInstruction);
  }
  void UnknownDecl(std::string_view data) override {
    if (data.size() >= 6 && data[5] == '[' && text::Lower(data.substr(0, 5)) == "cdata") {
      AddSpecialString(data.substr(6), NodeKind::kCData);
    } else {
      AddSpecialString(data, NodeKind::kDeclaration);
    }
  }

 private:
  // BeautifulSoupHTMLParser.handle_starttag: attributes without a value
  // become "", a repeated attribute keeps its last value; a void element is
  // closed at once unless it was written "<x/>" (then the "/>" closes it).
  void HandleStartTag(const std::string& name, const std::vector<Attribute>& attrs,
                      bool close_void) {
    EndData(NodeKind::kText);
    Soup::Node node{NodeKind::kTag,
                    false,
                    stack_.back().index,
                    0,
                    static_cast<uint32_t>(soup_->attrs_.size()),
                    0,
                    0,
                    0};
    node.content_begin = Append(name);
    node.content_size = name.size();
    for (size_t a = 0; a < attrs.size(); ++a) {
      bool repeated = false;
      for (size_t later = a + 1; later < attrs.size() && !repeated; ++later) {
        repeated = attrs[later].name == attrs[a].name;
      }
      if (repeated) continue;  // the last one is kept (its value replaces the first's)
      Soup::NodeAttribute out;
      out.name_begin = Append(attrs[a].name);
      out.name_size = attrs[a].name.size();
      out.value_begin = soup_->text_.size();
      const std::string_view value = attrs[a].value ? *attrs[a].value : std::string_view();
      if (IsListAttribute(name, attrs[a].name)) {
        AppendJoinedWords(value, &soup_->text_);
      } else {
        soup_->text_.append(value);
      }
      out.value_size = soup_->text_.size() - out.value_begin;
      soup_->attrs_.push_back(out);
    }
    node.attr_count = static_cast<uint32_t>(soup_->attrs_.size() - node.attr_begin);
    const uint32_t id = NameId(name);
    node.is_void = names_[id].is_void;
    PushTag(node, id);
    if (close_void && node.is_void) {
      CloseTag(id);
      already_closed_.push_back(id);
    }
  }

  // The number of tag name `name`, given at its first sight.
  uint32_t NameId(const std::string& name) {
    auto [it, added] = name_ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
    if (added) {
      names_.push_back(
          {IsVoidElement(name), name == "pre" || name == "textarea", StringContainerKind(name), 0});
    }
    return it->second;
  }

  size_t Append(std::string_view s) {
    const size_t at = soup_->text_.size();
    soup_->text_.append(s);
    return at;
  }

  void PushTag(const Soup::Node& node, uint32_t id) {
    const uint32_t index = static_cast<uint32_t>(soup_->nodes_.size());
    soup_->nodes_.push_back(node);
    stack_.push_back({index, id});
    NameInfo& info = names_[id];
    ++info.open;
    if (info.preserves_whitespace) preserve_whitespace_.push_back(index);
    if (info.strings != NodeKind::kText) containers_.push_back({index, info.strings});
  }

  // Pops the innermost open tag; returns its name's number.
  uint32_t PopTag() {
    const OpenTag top = stack_.back();
    stack_.pop_back();
    soup_->nodes_[top.index].end = static_cast<uint32_t>(soup_->nodes_.size());
    --names_[top.name].open;
    if (!preserve_whitespace_.empty() && preserve_whitespace_.back() == top.index) {
      preserve_whitespace_.pop_back();
    }
    if (!containers_.empty() && containers_.back().index == top.index) containers_.pop_back();
    return top.name;
  }

  // BeautifulSoup.handle_endtag: closes the most recent open tag named
  // `id` and every tag opened after it; nothing when none is open.
  void CloseTag(uint32_t id) {
    EndData(NodeKind::kText);
    if (id == kUnknownName || names_[id].open == 0) return;
    while (stack_.size() > 1 && PopTag() != id) {
    }
  }

  // BeautifulSoup.endData: the data gathered so far becomes a string of
  // class `kind` (kText: the class of the innermost string container).
  void EndData(NodeKind kind) {
    if (!has_data_) return;
    if (preserve_whitespace_.empty() && AllAsciiSpaces(data_)) {
      const char collapsed = data_.find('\n') != std::string::npos ? '\n' : ' ';
      data_.assign(1, collapsed);
    }
    if (kind == NodeKind::kText && !containers_.empty()) kind = containers_.back().strings;
    Soup::Node node{kind, false, stack_.back().index, 0, 0, 0, 0, 0};
    node.content_begin = Append(data_);
    node.content_size = data_.size();
    node.end = static_cast<uint32_t>(soup_->nodes_.size() + 1);
    soup_->nodes_.push_back(node);
    data_.clear();
    has_data_ = false;
  }

  // A comment, doctype, declaration, processing instruction or CDATA
  // section: a string of its own, even when empty.
  void AddSpecialString(std::string_view data, NodeKind kind) {
    EndData(NodeKind::kText);
    data_.assign(data);
    has_data_ = true;
    EndData(kind);
  }

  // What Beautiful Soup's builder knows of a tag name, and how many tags of
  // that name are open (BeautifulSoup.open_tag_counter).
  struct NameInfo {
    bool is_void;
    bool preserves_whitespace;  // <pre>, <textarea>
    NodeKind strings;           // the class of the strings inside (kText: none)
    int open;
  };
  struct OpenTag {
    uint32_t index, name;
  };
  struct OpenContainer {
    uint32_t index;
    NodeKind strings;
  };
  static constexpr uint32_t kUnknownName = ~0u;

  Soup* soup_;
  std::vector<OpenTag> stack_;                          // open tags, the document first
  std::unordered_map<std::string, uint32_t> name_ids_;  // tag names seen, numbered
  std::vector<NameInfo> names_;                         // by number
  std::vector<uint32_t> preserve_whitespace_;           // open <pre> and <textarea>
  std::vector<OpenContainer> containers_;               // open string containers
  std::vector<uint32_t> already_closed_;  // void elements closed at their start, by name
  std::string data_;                      // BeautifulSoup.current_data
  bool has_data_ = false;
};

Soup::Soup(std::string_view text) {
  SoupBuilder builder(this);
  ParseHtml(text, &builder);
  builder.Finish();
}

std::string Soup::StrippedText(size_t i) const {
  std::string out;
  for (size_t d = i + 1; d < nodes_[i].end; ++d) {
    if (nodes_[d].kind != NodeKind::kText && nodes_[d].kind != NodeKind::kCData) continue;
    out.append(text::Strip(Content(d)));
  }
  return out;
}

void Soup::AppendStartTag(size_t i, std::string* out) const {
  const Node& node = nodes_[i];
  const std::string_view name = Content(i);
  std::vector<const NodeAttribute*> sorted;
  sorted.reserve(node.attr_count);
  for (uint32_t a = 0; a < node.attr_count; ++a) sorted.push_back(&attrs_[node.attr_begin + a]);
  std::sort(sorted.begin(), sorted.end(), [this](const NodeAttribute* a, const NodeAttribute* b) {
    return Slice(a->name_begin, a->name_size) < Slice(b->name_begin, b->name_size);
  });
  // HTMLTreeBuilder.set_up_substitutions: a <meta> tag's charset, or the
  // charset in its content when http-equiv is content-type, becomes the
  // output encoding, utf-8.
  const NodeAttribute* charset = nullptr;
  const NodeAttribute* content = nullptr;
  bool content_type = false;
  if (name == "meta") {
    for (const NodeAttribute* a : sorted) {
      const std::string_view key = Slice(a->name_begin, a->name_size);
      if (key == "charset") charset = a;
      if (key == "content") content = a;
      if (key == "http-equiv") {
        content_type = text::Lower(Slice(a->value_begin, a->value_size)) == "content-type";
      }
    }
  }
  out->push_back('<');
  out->append(name);
  for (const NodeAttribute* a : sorted) {
    std::string value(Slice(a->value_begin, a->value_size));
    if (a == charset) {
      value = "utf-8";
    } else if (a == content && charset == nullptr && content_type) {
      value = SubstituteContentCharset(value);
    }
    std::string escaped;
    AppendXmlEscaped(value, &escaped);
    out->push_back(' ');
    out->append(Slice(a->name_begin, a->name_size));
    out->push_back('=');
    // EntitySubstitution.quoted_attribute_value
    char quote = '"';
    if (escaped.find('"') != std::string::npos) {
      if (escaped.find('\'') != std::string::npos) {
        std::string replaced;
        for (const char c : escaped) {
          if (c == '"') {
            replaced.append("&quot;");
          } else {
            replaced.push_back(c);
          }
        }
        escaped.swap(replaced);
      } else {
        quote = '\'';
      }
    }
    out->push_back(quote);
    out->append(escaped);
    out->push_back(quote);
  }
  if (node.end == i + 1 && node.is_void) out->push_back('/');
  out->push_back('>');
}

void Soup::AppendString(size_t i, std::string* out) const {
  const std::string_view s = Content(i);
  switch (nodes_[i].kind) {
    case NodeKind::kCData:
      out->append("<![CDATA[").append(s).append("]]>");
      return;
    case NodeKind::kComment:
      out->append("<!--").append(s).append("-->");
      return;
    case NodeKind::kProcessingInstruction:
      out->append("<?").append(s).append(">");
      return;
    case NodeKind::kDeclaration:
      out->append("<?").append(s).append("?>");
      return;
    case NodeKind::kDoctype:
      out->append("<!DOCTYPE ").append(s).append(">\n");
      return;
    default: {
      // HTMLFormatter.cdata_containing_tags: no escaping directly inside
      // <script> and <style>.
      const std::string_view parent = Content(nodes_[i].parent);
      if (nodes_[i].parent != 0 && (parent == "script" || parent == "style")) {
        out->append(s);
      } else {
        AppendXmlEscaped(s, out);
      }
    }
  }
}

std::string Soup::Serialize(size_t i) const {
  std::string out;
  std::vector<size_t> open;
  for (size_t d = i; d < nodes_[i].end; ++d) {
    while (!open.empty() && nodes_[open.back()].end <= d) {
      out.append("</").append(Content(open.back())).push_back('>');
      open.pop_back();
    }
    if (nodes_[d].kind != NodeKind::kTag) {
      AppendString(d, &out);
      continue;
    }
    AppendStartTag(d, &out);
    if (!(nodes_[d].end == d + 1 && nodes_[d].is_void)) open.push_back(d);
  }
  while (!open.empty()) {
    out.append("</").append(Content(open.back())).push_back('>');
    open.pop_back();
  }
  return out;
}

}  // namespace djshard::ops::html
