// The text nodes under <body> through Gumbo (Debian's libgumbo), a full
// HTML5 parser: the documents that BodyTextOfSimpleDocument leaves. Gumbo
// builds the tree MyHTML (selectolax, Data-Juicer's parser) builds for
// well-formed and most malformed markup; where they differ is listed in
// clean_html_mapper's summary (builtin.cc).
#include <gumbo.h>

#include <string>
#include <string_view>
#include <vector>

#include "djshard/ops/text.h"
#include "src/ops/html/body_text.h"

namespace djshard::ops::html {
namespace {

const GumboNode* FindBody(const GumboOutput& doc) {
  const GumboVector& children = doc.root->v.element.children;
  for (unsigned i = 0; i < children.length; ++i) {
    const auto* child = static_cast<const GumboNode*>(children.data[i]);
    if (child->type == GUMBO_NODE_ELEMENT && child->v.element.tag == GUMBO_TAG_BODY) return child;
  }
  return nullptr;
}

// Whether a text node is the text of a raw text element whose references
// MyHTML may decode (AppendMyHtmlRawText).
bool InMyHtmlRawText(const GumboNode* node) {
  const GumboNode* parent = node->parent;
  if (parent == nullptr || parent->type != GUMBO_NODE_ELEMENT) return false;
  switch (parent->v.element.tag) {
    case GUMBO_TAG_XMP:
    case GUMBO_TAG_IFRAME:
    case GUMBO_TAG_NOEMBED:
    case GUMBO_TAG_NOFRAMES:
    case GUMBO_TAG_STYLE:
      return true;
    default:
      return false;
  }
}

// The text nodes below `root` in document order (selectolax's
// Node.text(deep=True), separator "" and no strip): text, whitespace and
// CDATA, including those of <script>, <style> and <template>; no comments.
std::string TextBelow(const GumboNode* root) {
  std::string out;
  std::vector<const GumboNode*> stack;
  auto push_children = [&stack](const GumboNode* node) {
    const GumboVector& children = node->v.element.children;
    for (unsigned i = children.length; i-- > 0;) {
      stack.push_back(static_cast<const GumboNode*>(children.data[i]));
    }
  };
  push_children(root);
  while (!stack.empty()) {
    const GumboNode* node = stack.back();
    stack.pop_back();
    switch (node->type) {
      case GUMBO_NODE_TEXT:
        if (!InMyHtmlRawText(node) || !AppendMyHtmlRawText(node->v.text.text, &out)) {
          out += node->v.text.text;
        }
        break;
      case GUMBO_NODE_WHITESPACE:
      case GUMBO_NODE_CDATA:
        out += node->v.text.text;
        break;
      case GUMBO_NODE_ELEMENT:
      case GUMBO_NODE_TEMPLATE:
        push_children(node);
        break;
      default:
        break;
    }
  }
  return out;
}

// Gumbo replaces control characters (U+0001-0008, 000B, 000E-001F,
// 007F-009F) and noncharacters (U+FDD0-FDEF, U+xFFFE, U+xFFFF) with U+FFFD;
// MyHTML, like the HTML5 specification, keeps them. The tokenizer treats them
// as it treats any other character, so before parsing each becomes one of
// 256 supplementary private-use code points, and the text gets them back.
constexpr uint32_t kStandInBase = 0x10FE00;

bool GumboReplaces(uint32_t c) {
  return (c >= 0x1 && c <= 0x8) || c == 0xB || (c >= 0xE && c <= 0x1F) ||
         (c >= 0x7F && c <= 0x9F) || (c >= 0xFDD0 && c <= 0xFDEF) || (c & 0xFFFE) == 0xFFFE;
}

// The stand-in's offset from kStandInBase: the code point itself for the
// controls, 0xA0 + plane for U+xFFFE, 0xB1 + plane for U+xFFFF and
// 0xD0 + (c - 0xFDD0) for U+FDD0-FDEF.
uint32_t StandInFor(uint32_t c) {
  if (c <= 0x9F) return kStandInBase + c;
  if ((c & 0xFFFF) == 0xFFFE) return kStandInBase + 0xA0 + (c >> 16);
  if ((c & 0xFFFF) == 0xFFFF) return kStandInBase + 0xB1 + (c >> 16);
  return kStandInBase + 0xD0 + (c - 0xFDD0);
}

uint32_t FromStandIn(uint32_t s) {
  const uint32_t k = s - kStandInBase;
  if (k <= 0x9F) return k;
  if (k < 0xB1) return ((k - 0xA0) << 16) | 0xFFFE;
  if (k < 0xD0) return ((k - 0xB1) << 16) | 0xFFFF;
  return 0xFDD0 + (k - 0xD0);
}

bool IsStandIn(uint32_t c) { return c >= kStandInBase && c <= kStandInBase + 0xEF; }

// Whether `text` may hold a code point that GumboReplaces or IsStandIn: a
// control byte other than \t \n \f \r, or the first byte of U+0080-00BF,
// U+F000-FFFF or a supplementary code point.
bool MayNeedStandIns(std::string_view text) {
  for (const char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    if ((b < 0x20 && b != '\t' && b != '\n' && b != '\f' && b != '\r') || b == 0x7F || b == 0xC2 ||
        b == 0xEF || b >= 0xF0) {
      return true;
    }
  }
  return false;
}

// Rewrites the code points of `text` that `pick` selects with `map`; false
// (and `text` untouched) when none is selected.
template <typename Pick, typename Map>
bool Rewrite(std::string* text, Pick pick, Map map) {
  bool any = false;
  std::string out;
  size_t done = 0;
  for (size_t i = 0; i < text->size();) {
    const size_t at = i;
    const uint32_t c = text::NextCodePoint(*text, &i);
    if (!pick(c)) continue;
    if (!any) out.reserve(text->size() + 16);
    any = true;
    out.append(*text, done, at - done);
    text::AppendUtf8(&out, map(c));
    done = i;
  }
  if (!any) return false;
  out.append(*text, done, std::string::npos);
  text->swap(out);
  return true;
}

}  // namespace

std::string BodyTextThroughGumbo(std::string html) {
  // A text that already holds stand-ins keeps Gumbo's U+FFFD instead.
  bool stand_ins = false;
  if (MayNeedStandIns(html) && !Rewrite(&html, IsStandIn, [](uint32_t c) { return c; })) {
    stand_ins = Rewrite(&html, GumboReplaces, StandInFor);
  }
  GumboOptions options = kGumboDefaultOptions;
  options.max_errors = 0;  // parse errors are not used
  GumboOutput* doc = gumbo_parse_with_options(&options, html.data(), html.size());
  const GumboNode* body = FindBody(*doc);
  std::string text = body == nullptr ? std::string() : TextBelow(body);
  gumbo_destroy_output(&options, doc);
  if (stand_ins) Rewrite(&text, IsStandIn, FromStandIn);
  return text;
}

std::string BodyText(std::string_view html) {
  if (std::optional<std::string> text = BodyTextOfSimpleDocument(html)) return std::move(*text);
  return BodyTextThroughGumbo(std::string(html));
}

}  // namespace djshard::ops::html
