// clean_html_mapper: HTML to plain text, as Data-Juicer does it: "<li>" and
// "<ol>" become "\n*", "</li>" and "</ol>" go, then the text is parsed as an
// HTML5 document and replaced by the concatenated text nodes under <body>
// (src/ops/html/body_text.h).
#include <string>
#include <string_view>

#include "src/ops/builtin.h"
#include "src/ops/html/body_text.h"

namespace djshard::ops {

namespace {

// Python's str.replace(from, to): every non-overlapping occurrence, left to right.
void ReplaceAll(std::string* text, std::string_view from, std::string_view to) {
  size_t at = text->find(from);
  if (at == std::string::npos) return;
  std::string out;
  out.reserve(text->size());
  size_t done = 0;
  for (; at != std::string::npos; at = text->find(from, done)) {
    out.append(*text, done, at - done);
    out.append(to);
    done = at + from.size();
  }
  out.append(*text, done, std::string::npos);
  text->swap(out);
}

std::string HtmlToText(std::string html) {
  ReplaceAll(&html, "<li>", "\n*");
  ReplaceAll(&html, "</li>", "");
  ReplaceAll(&html, "<ol>", "\n*");
  ReplaceAll(&html, "</ol>", "");
  return html::BodyText(html);
}

class CleanHtmlMapper : public Mapper {
 public:
  using Mapper::Mapper;

  void Map(Sample& sample) const override {
    const std::string& html = sample.Text(text_key());
    std::string text = HtmlToText(html);
    if (text != html) sample.SetText(text_key(), std::move(text));
  }
};

}  // namespace

std::unique_ptr<Operator> MakeCleanHtmlMapper(const recipe::OperatorSpec& spec,
                                              const std::string& text_key) {
  return std::make_unique<CleanHtmlMapper>(spec, text_key);
}

}  // namespace djshard::ops
