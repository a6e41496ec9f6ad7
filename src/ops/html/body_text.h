#pragma once

// The text nodes under <body> of an HTML5 document, in document order (what
// selectolax's Node.text() joins), found by the HTML5 tokenizer and the part
// of tree construction that decides where text goes, without building the
// tree. It covers the documents whose text the tree keeps in token order:
// head, body, raw text elements, and tables whose text is in cells or
// captions. For anything else (U+0000, <select>, <template>, <noscript>,
// foreign content, framesets, text or stray tags that a table would move in
// front of itself, scripts holding "<!--", character references that the
// tokenizer replaces or reports) it returns nullopt, and the caller parses
// the document with a full HTML5 parser.
#include <optional>
#include <string>
#include <string_view>

namespace djshard::ops::html {

std::optional<std::string> BodyTextOfSimpleDocument(std::string_view html);

// Whether BodyTextOfSimpleDocument may read `html` as MyHTML (selectolax's
// parser, Data-Juicer's) does where HTML5 differs: "</>" is text after
// <head>, and a raw text element other than <script> (<xmp>, <iframe>,
// <noembed>, <noframes>, a <style> in the body) whose text holds an end tag
// of letters has its character references decoded. Gumbo reads such
// documents as HTML5 does; comparisons with it leave them out.
bool MayReadAsMyHtml(std::string_view html);

// The text of a raw text element other than <script> as MyHTML gives it,
// appended to *out: when it holds an end tag of letters ("</b>", "</p "),
// `text` with every character reference decoded as in HTML5's data state
// (legacy names and numbers without ';' too), and true; otherwise nothing is
// appended (the text is itself) and false.
bool AppendMyHtmlRawText(std::string_view text, std::string* out);

// The same text through Gumbo, a full HTML5 parser, for any document.
std::string BodyTextThroughGumbo(std::string html);

// BodyTextOfSimpleDocument where it applies, else BodyTextThroughGumbo.
std::string BodyText(std::string_view html);

}  // namespace djshard::ops::html
