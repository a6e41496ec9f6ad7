// Fuzzes clean_html_mapper's text of <body>: wherever the path without a tree
// (BodyTextOfSimpleDocument) answers, its text must be the one Gumbo, a full
// HTML5 parser, gives. Operators only see valid UTF-8.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "src/model/tokenizer/components.h"
#include "src/ops/html/body_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace djshard;
  const std::string_view html(reinterpret_cast<const char*>(data), size);
  if (!model::tokenizer::IsValidUtf8(html)) return 0;
  // U+10FE00-10FEEF: the Gumbo path's stand-ins, where it is documented to
  // give U+FFFD for control characters that MyHTML (and the simple path) keep
  for (size_t at = html.find("\xF4\x8F"); at != std::string_view::npos;
       at = html.find("\xF4\x8F", at + 1)) {
    const auto third = static_cast<unsigned char>(at + 2 < size ? html[at + 2] : 0);
    if (third >= 0xB8 && third <= 0xBB) return 0;
  }
  // "</>" and references in raw text: the simple path keeps MyHTML's reading, Gumbo HTML5's
  if (ops::html::MayReadAsMyHtml(html)) return 0;
  const std::optional<std::string> simple = ops::html::BodyTextOfSimpleDocument(html);
  if (!simple) return 0;
  const std::string full = ops::html::BodyTextThroughGumbo(std::string(html));
  if (*simple != full) {
    std::fprintf(stderr, "simple path: [%s]\nGumbo:       [%s]\n", simple->c_str(), full.c_str());
    std::abort();
  }
  return 0;
}
