#pragma once

// The tree Beautiful Soup 4.14 builds with BeautifulSoup(text, "html.parser")
// (bs4's BeautifulSoupHTMLParser over Python's html.parser, see
// html_parser.h), and the parts of its API that extract_tables_from_html_mapper
// uses: find_all by tag name, the direct children of a tag,
// get_text(strip=True) and str(tag).
//
// Beautiful Soup's html.parser builder is a plain stack: a start tag is
// pushed under the current one whatever it is (<td> inside <td>, <tr>
// straight in <table>), an end tag closes up to the most recent open tag of
// its name and is ignored when none is open, void elements (<br>, <img>...)
// close at once, and whitespace-only strings outside <pre> and <textarea>
// become a single "\n" or " ".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace djshard::ops::html {

// The class of a node: a tag or one of bs4's NavigableString classes.
enum class NodeKind : uint8_t {
  kTag,
  kText,  // NavigableString
  kCData,
  kComment,
  kProcessingInstruction,
  kDeclaration,
  kDoctype,
  kScript,  // strings inside <script>, <style>, <template>, <rt>, <rp>
  kStylesheet,
  kTemplateString,
  kRubyText,
  kRubyParenthesis,
};

class Soup {
 public:
  // Parses `text`. Throws MarkupRejected (html_parser.h) where Beautiful
  // Soup raises ParserRejectedMarkup.
  explicit Soup(std::string_view text);

  // Nodes are numbered in document order; node 0 is the document. The
  // descendants of node i are the nodes i+1 .. End(i)-1.
  size_t size() const { return nodes_.size(); }
  size_t End(size_t i) const { return nodes_[i].end; }
  NodeKind kind(size_t i) const { return nodes_[i].kind; }
  // Whether node i is a tag named `name` (names are lower case).
  bool IsTag(size_t i, std::string_view name) const {
    return nodes_[i].kind == NodeKind::kTag && Content(i) == name;
  }
  // Calls f(child) for each child of node i, in order.
  template <typename F>
  void ForEachChild(size_t i, F&& f) const {
    for (size_t c = i + 1; c < nodes_[i].end; c = nodes_[c].end) f(c);
  }

  // tag.get_text(strip=True): the NavigableString and CData strings below
  // node i, each stripped (str.strip), empty ones left out, joined.
  std::string StrippedText(size_t i) const;
  // str(tag): node i and its descendants as Beautiful Soup writes them
  // (formatter "minimal": attributes sorted, '&', '<' and '>' escaped).
  std::string Serialize(size_t i) const;

 private:
  friend class SoupBuilder;

  struct Node {
    NodeKind kind;
    bool is_void;  // a tag that HTMLTreeBuilder.empty_element_tags names
    uint32_t parent;
    uint32_t end;  // one past the last descendant
    uint32_t attr_begin = 0, attr_count = 0;
    size_t content_begin, content_size;  // in text_: a tag's name, a string's text
  };
  struct NodeAttribute {
    size_t name_begin, name_size, value_begin, value_size;  // in text_
  };

  std::string_view Content(size_t i) const {
    return std::string_view(text_).substr(nodes_[i].content_begin, nodes_[i].content_size);
  }
  std::string_view Slice(size_t begin, size_t size) const {
    return std::string_view(text_).substr(begin, size);
  }
  void AppendStartTag(size_t i, std::string* out) const;
  void AppendString(size_t i, std::string* out) const;

  std::vector<Node> nodes_;
  std::vector<NodeAttribute> attrs_;
  std::string text_;  // names, strings and attribute values of every node
};

}  // namespace djshard::ops::html
