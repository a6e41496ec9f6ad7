// Beautiful Soup's html.parser tree as djshard builds it (src/ops/html):
// behaviours that the reference vectors pin down across the whole operator,
// written here one by one.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "src/ops/html/html_parser.h"
#include "src/ops/html/soup.h"

namespace djshard::ops::html {
namespace {

std::vector<size_t> Tags(const Soup& soup, std::string_view name) {
  std::vector<size_t> out;
  for (size_t i = 1; i < soup.size(); ++i) {
    if (soup.IsTag(i, name)) out.push_back(i);
  }
  return out;
}

TEST(HtmlSoup, AnUnclosedCellHoldsTheNextOne) {
  const Soup soup("<table><tr><td>a<td>b</table>");
  const std::vector<size_t> cells = Tags(soup, "td");
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_LT(cells[1], soup.End(cells[0]));  // nested, not siblings
  EXPECT_EQ(soup.StrippedText(cells[0]), "ab");
  EXPECT_EQ(soup.Serialize(Tags(soup, "table")[0]), "<table><tr><td>a<td>b</td></td></tr></table>");
}

TEST(HtmlSoup, AnEndTagWithNoOpenTagOfItsNameIsIgnoredButEndsTheString) {
  const Soup soup("<table><tr><td> a </p> b </td></tr></table>");
  EXPECT_EQ(soup.StrippedText(Tags(soup, "td")[0]), "ab");
}

TEST(HtmlSoup, AVoidElementWrittenSelfClosingAfterAnOpenOneStaysOpen) {
  const Soup soup("<table><tr><td>a<br>b<br/>c</td></tr></table>");
  EXPECT_EQ(soup.Serialize(Tags(soup, "table")[0]),
            "<table><tr><td>a<br/>b<br>c</br></td></tr></table>");
}

TEST(HtmlSoup, ScriptStyleAndCommentTextIsNotCellText) {
  const Soup soup(
      "<table><tr><td>a<script>s</script><style>t</style><!--c-->"
      "<![CDATA[d]]><rt>r</rt></td></tr></table>");
  EXPECT_EQ(soup.StrippedText(Tags(soup, "td")[0]), "ad");
}

TEST(HtmlSoup, SerializesAttributesSortedEscapedAndQuotedAsBeautifulSoup) {
  const Soup soup(
      "<table id=x class=' b  a ' title='say \"hi\"' alt=\"it's &quot;x&quot;\" "
      "data-a=\"&lt;&amp;\" nowrap><tr><td>1 &lt; 2</td></tr></table>");
  EXPECT_EQ(soup.Serialize(Tags(soup, "table")[0]),
            "<table alt=\"it's &quot;x&quot;\" class=\"b a\" data-a=\"&lt;&amp;\" id=\"x\" "
            "nowrap=\"\" title='say \"hi\"'><tr><td>1 &lt; 2</td></tr></table>");
}

TEST(HtmlSoup, NumericReferencesFollowWindows1252AndASurrogateIsAReplacementCharacter) {
  // Python keeps &#xD800; as a lone surrogate, which UTF-8 cannot hold.
  const Soup soup("<table><tr><td>&#128;&#129;&#0;&#xD800;&#1114112;</td></tr></table>");
  EXPECT_EQ(soup.StrippedText(Tags(soup, "td")[0]),
            std::string("\u20ac\xc2\x81") + std::string(1, '\0') + "\ufffd\ufffd");
}

TEST(HtmlSoup, AnUnknownMarkedSectionIsRejectedAsBeautifulSoupDoes) {
  EXPECT_THROW(Soup("<table><![foo[x]]></table>"), MarkupRejected);
  EXPECT_THROW(Soup("<table><![ x]]></table>"), MarkupRejected);
  EXPECT_NO_THROW(Soup("<table><![if x]><![endif]></table>"));
}

TEST(HtmlSoup, MalformedMarkupThatHtmlParserRescansStaysLinear) {
  std::string text = "<table><tr><td>";
  for (int i = 0; i < 200000; ++i) text += "<a b='x>";
  for (int i = 0; i < 200000; ++i) text += "<a";
  const auto start = std::chrono::steady_clock::now();
  const Soup soup(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(Tags(soup, "td").size(), 1u);
  EXPECT_LT(seconds, 5.0);  // quadratic rescans would take minutes
}

}  // namespace
}  // namespace djshard::ops::html
