// extract_tables_from_html_mapper: the <table> elements of an HTML text into
// __dj__meta__, as Data-Juicer finds them with Beautiful Soup over Python's
// html.parser (src/ops/html/soup.h): str(table) for each table when
// retain_html_tags, else each table's rows (every <tr> below it, those of
// nested tables included) as lists of their direct <td>/<th> cells'
// get_text(strip=True), rows without such cells and tables without such
// rows left out; include_header false leaves out rows with a direct <th>.
// Gumbo, which clean_html_mapper uses, cannot stand in for the parser: as an
// HTML5 parser it closes an open <td> at the next one, moves text and stray
// cells out of or into tables and drops end tags that html.parser keeps, so
// its cells differ from Data-Juicer's on malformed tables.
#include <string>

#include "djshard/io/json_text.h"
#include "src/ops/builtin.h"
#include "src/ops/html/html_parser.h"
#include "src/ops/html/soup.h"

namespace djshard::ops {

namespace {

class ExtractTablesFromHtmlMapper : public Mapper {
 public:
  ExtractTablesFromHtmlMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {
    field_ = args().GetString("tables_field_name", "html_tables");
    retain_html_tags_ = args().GetBool("retain_html_tags", false);
    include_header_ = args().GetBool("include_header", true);
  }

  void Map(Sample& sample) const override {
    if (sample.Meta(field_)) return;  // extracted already
    const std::string& text = sample.Text(text_key());
    std::string json;
    try {
      const html::Soup soup(text);
      json = retain_html_tags_ ? TablesAsHtml(soup) : TablesAsRows(soup);
    } catch (const html::MarkupRejected& e) {
      throw OpError(std::string("Beautiful Soup's html.parser rejected the markup: ") + e.what());
    }
    sample.SetMeta(field_, std::move(json));
  }

 private:
  // [str(table), ...] as JSON.
  static std::string TablesAsHtml(const html::Soup& soup) {
    std::string json = "[";
    for (size_t i = 1; i < soup.size(); ++i) {
      if (!soup.IsTag(i, "table")) continue;
      if (json.size() > 1) json.push_back(',');
      io::AppendJsonString(&json, soup.Serialize(i));
    }
    json.push_back(']');
    return json;
  }

  // [[[cell, ...], ...], ...] as JSON.
  std::string TablesAsRows(const html::Soup& soup) const {
    std::string json = "[";
    std::string rows;
    for (size_t table = 1; table < soup.size(); ++table) {
      if (!soup.IsTag(table, "table")) continue;
      rows.clear();
      for (size_t row = table + 1; row < soup.End(table); ++row) {
        if (soup.IsTag(row, "tr")) AppendRow(soup, row, &rows);
      }
      if (rows.empty()) continue;
      if (json.size() > 1) json.push_back(',');
      json.append("[").append(rows).push_back(']');
    }
    json.push_back(']');
    return json;
  }

  // The row's cells as a JSON list, after a ',' when *rows is not empty;
  // nothing for a row without direct cells or a header row left out.
  void AppendRow(const html::Soup& soup, size_t row, std::string* rows) const {
    bool header = false;
    soup.ForEachChild(row, [&](size_t c) { header = header || soup.IsTag(c, "th"); });
    if (header && !include_header_) return;
    std::string cells;
    soup.ForEachChild(row, [&](size_t c) {
      if (!soup.IsTag(c, "td") && !soup.IsTag(c, "th")) return;
      cells.push_back(cells.empty() ? '[' : ',');
      io::AppendJsonString(&cells, soup.StrippedText(c));
    });
    if (cells.empty()) return;
    if (!rows->empty()) rows->push_back(',');
    rows->append(cells).push_back(']');
  }

  std::string field_;
  bool retain_html_tags_ = false;
  bool include_header_ = true;
};

}  // namespace

std::unique_ptr<Operator> MakeExtractTablesFromHtmlMapper(const recipe::OperatorSpec& spec,
                                                          const std::string& text_key) {
  return std::make_unique<ExtractTablesFromHtmlMapper>(spec, text_key);
}

}  // namespace djshard::ops
