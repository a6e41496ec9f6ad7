#pragma once

// Python 3.11's html.parser.HTMLParser with convert_charrefs=False, the
// tokenizer under Beautiful Soup's "html.parser" tree builder: the same
// events for the same input, malformed markup included (a start tag whose
// quote never closes becomes text up to the next '>', an unclosed <script>
// loses its content, a second bad "&#" turns the rest of the text into
// data...). Not an HTML5 tokenizer. Text is valid UTF-8; \s and str.strip
// mean Python's Unicode whitespace.
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace djshard::ops::html {

// What html.parser raises as AssertionError (an unknown marked section
// "<![foo[", a "<![" without a name); Beautiful Soup turns it into
// ParserRejectedMarkup.
class MarkupRejected : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An attribute of a start tag: its name lower-cased, its value unescaped
// (html.unescape), nullopt for an attribute written without '='.
struct Attribute {
  std::string name;
  std::optional<std::string> value;
};

// HTMLParser's handle_* methods. Views are valid for the call only.
class HtmlEvents {
 public:
  virtual ~HtmlEvents() = default;
  virtual void StartTag(const std::string& name, const std::vector<Attribute>& attrs) = 0;
  // "<name .../>".
  virtual void StartEndTag(const std::string& name, const std::vector<Attribute>& attrs) = 0;
  virtual void EndTag(const std::string& name) = 0;
  virtual void Data(std::string_view data) = 0;
  virtual void CharRef(std::string_view name) = 0;    // "x263A" or "169"
  virtual void EntityRef(std::string_view name) = 0;  // "amp"
  virtual void Comment(std::string_view data) = 0;
  virtual void Decl(std::string_view decl) = 0;  // "DOCTYPE html"
  virtual void Pi(std::string_view data) = 0;
  virtual void UnknownDecl(std::string_view data) = 0;  // "CDATA[text" of "<![CDATA[text]]>"
};

// Runs HTMLParser.feed(text) then close() over `text`, calling `events`.
// Throws MarkupRejected where html.parser raises AssertionError.
void ParseHtml(std::string_view text, HtmlEvents* events);

}  // namespace djshard::ops::html
