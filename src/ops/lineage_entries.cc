// The `expand` and `gather` entries: their keys, defaults and checks.
#include <cctype>
#include <stdexcept>

#include "djshard/ops/lineage.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

// A key whose value must be a mapping entry list: each item a mapping.
void RequireMappingList(const recipe::OperatorArgs& args, const std::string& key,
                        const YAML::Node& node, const std::string& example) {
  if (!node.IsSequence()) args.FailAtColumn(key, "must be a list of mappings", "e.g. " + example);
  for (const auto& item : node) {
    if (!item.IsMap()) args.FailAtColumn(key, "must be a list of mappings", "e.g. " + example);
  }
}

std::string ScalarOf(const recipe::OperatorArgs& args, const std::string& key,
                     const YAML::Node& item, const char* field, bool required) {
  const YAML::Node v = item[field];
  if (!v || v.IsNull()) {
    if (required) {
      args.FailAtColumn(key, std::string("entry needs '") + field + "'",
                        "each entry is a mapping such as {from: ..., to: ...}");
    }
    return "";
  }
  if (!v.IsScalar() || v.Scalar().empty()) {
    args.FailAtColumn(key, std::string("entry key '") + field + "' must be a non-empty string", "");
  }
  return v.Scalar();
}

void RejectUnknownKeys(const recipe::OperatorArgs& args, const std::string& key,
                       const YAML::Node& item, std::initializer_list<const char*> known) {
  for (const auto& kv : item) {
    const std::string k = kv.first.as<std::string>();
    bool ok = false;
    std::string list;
    for (const char* n : known) {
      ok = ok || k == n;
      list += (list.empty() ? "" : ", ") + std::string(n);
    }
    if (!ok) args.FailAtColumn(key, "entry key '" + k + "' is unknown", "known keys: " + list);
  }
}

std::string RequiredName(const recipe::OperatorArgs& args, const std::string& entry) {
  if (!args.Has("name") || args.Raw("name").IsNull()) {
    args.FailAtColumn("name", "is required",
                      "name the pair: an expand and the gather that closes it share one name");
  }
  const std::string name = args.GetString("name", "");
  if (name.empty()) args.FailAtColumn("name", "must be a non-empty string", entry);
  // The name is part of the region's journal file names (SPEC-lineage §6).
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      args.FailAtColumn("name", "'" + name + "' has a character other than A-Z a-z 0-9 . _ -",
                        "the name is part of file names");
    }
  }
  return name;
}

std::vector<GatherInto> ParseInto(const recipe::OperatorArgs& a) {
  std::vector<GatherInto> into;
  for (const std::string& v : a.GetStringList("into", {})) {
    if (v == "text") {
      into.push_back(GatherInto::kText);
    } else if (v == "field") {
      into.push_back(GatherInto::kField);
    } else if (v == "stats") {
      into.push_back(GatherInto::kStats);
    } else if (v == "list") {
      into.push_back(GatherInto::kList);
    } else {
      a.FailAtColumn("into", "value '" + v + "' is unknown", "any of: text, field, stats, list");
    }
  }
  return into;
}

StatOp ParseStatOp(const recipe::OperatorArgs& a, const std::string& op) {
  if (op == "mean") return StatOp::kMean;
  if (op == "min") return StatOp::kMin;
  if (op == "max") return StatOp::kMax;
  if (op == "sum") return StatOp::kSum;
  if (op == "count") return StatOp::kCount;
  a.FailAtColumn("stats", "op '" + op + "' is unknown", "mean, min, max, sum or count");
}

std::vector<GatherStat> ParseStats(const recipe::OperatorArgs& a) {
  std::vector<GatherStat> out;
  if (!a.Has("stats") || a.Raw("stats").IsNull()) return out;
  const YAML::Node stats = a.Raw("stats");
  RequireMappingList(a, "stats", stats, "[{from: text_len, op: mean, to: para_len_mean}]");
  for (const auto& item : stats) {
    RejectUnknownKeys(a, "stats", item, {"from", "op", "to"});
    GatherStat s;
    s.from = ScalarOf(a, "stats", item, "from", true);
    s.to = ScalarOf(a, "stats", item, "to", true);
    s.op = ParseStatOp(a, ScalarOf(a, "stats", item, "op", true));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<GatherList> ParseLists(const recipe::OperatorArgs& a) {
  std::vector<GatherList> out;
  if (!a.Has("list") || a.Raw("list").IsNull()) return out;
  const YAML::Node lists = a.Raw("list");
  RequireMappingList(a, "list", lists, "[{from: __dj__meta__.label, to: labels}]");
  for (const auto& item : lists) {
    RejectUnknownKeys(a, "list", item, {"from", "to", "keep_positions"});
    GatherList l;
    l.from = ScalarOf(a, "list", item, "from", true);
    l.to = ScalarOf(a, "list", item, "to", true);
    if (item["keep_positions"] && !item["keep_positions"].IsNull()) {
      try {
        l.keep_positions = item["keep_positions"].as<bool>();
      } catch (const YAML::Exception&) {
        a.FailAtColumn("list", "entry key 'keep_positions' must be true or false", "");
      }
    }
    out.push_back(std::move(l));
  }
  return out;
}

// `into` names stats (list) exactly when a stats (list) list is given.
void CheckIntoMatchesLists(const recipe::OperatorArgs& a, const GatherConfig& c) {
  if (c.Has(GatherInto::kStats) && c.stats.empty()) {
    a.FailAtColumn("into", "stats needs a 'stats' list",
                   "stats: [{from: text_len, op: mean, to: x}]");
  }
  if (c.Has(GatherInto::kList) && c.lists.empty()) {
    a.FailAtColumn("into", "list needs a 'list' list", "list: [{from: field, to: parent_field}]");
  }
  if (!c.stats.empty() && !c.Has(GatherInto::kStats)) {
    a.FailAtColumn("stats", "is given but 'into' does not name stats", "add stats to into");
  }
  if (!c.lists.empty() && !c.Has(GatherInto::kList)) {
    a.FailAtColumn("list", "is given but 'into' does not name list", "add list to into");
  }
}

// Which parents survive the gather: min_present, min_present_ratio, on_empty,
// on_child_error and suppress_siblings.
void ParseSurvival(const recipe::OperatorArgs& a, GatherConfig* c) {
  c->min_present = a.GetInt("min_present", 1);
  if (c->min_present < 0) {
    a.FailAtColumn("min_present", "must be 0 or more", "got " + std::to_string(c->min_present));
  }
  c->min_present_ratio = a.GetDouble("min_present_ratio", 0.0);
  if (!(c->min_present_ratio >= 0.0 && c->min_present_ratio <= 1.0)) {
    a.FailAtColumn("min_present_ratio", "must be between 0 and 1", "");
  }
  const std::string on_empty = a.GetString("on_empty", "drop");
  if (on_empty == "drop") {
    c->on_empty = OnEmpty::kDrop;
  } else if (on_empty == "keep") {
    c->on_empty = OnEmpty::kKeep;
  } else if (on_empty == "keep_original") {
    c->on_empty = OnEmpty::kKeepOriginal;
  } else {
    a.FailAtColumn("on_empty", "'" + on_empty + "' is unknown", "drop, keep or keep_original");
  }
  const std::string on_error = a.GetString("on_child_error", "fail_parent");
  if (on_error == "fail_parent") {
    c->on_child_error = OnChildError::kFailParent;
  } else if (on_error == "drop_child") {
    c->on_child_error = OnChildError::kDropChild;
  } else {
    a.FailAtColumn("on_child_error", "'" + on_error + "' is unknown", "fail_parent or drop_child");
  }
  c->suppress_siblings = a.GetBool("suppress_siblings", true);
}

void ParseJournalFlush(const recipe::OperatorArgs& a, GatherConfig* c) {
  c->journal_flush_parents = a.GetInt("journal_flush_parents", 256);
  if (c->journal_flush_parents < 1) {
    a.FailAtColumn("journal_flush_parents", "must be at least 1",
                   "got " + std::to_string(c->journal_flush_parents));
  }
  c->journal_flush_secs = a.GetDouble("journal_flush_secs", 30.0);
  if (!(c->journal_flush_secs > 0.0)) {
    a.FailAtColumn("journal_flush_secs", "must be more than 0", "seconds, e.g. 30");
  }
}

}  // namespace

bool GatherConfig::Has(GatherInto what) const {
  for (GatherInto i : into) {
    if (i == what) return true;
  }
  return false;
}

const char* StatOpName(StatOp op) {
  switch (op) {
    case StatOp::kMean:
      return "mean";
    case StatOp::kMin:
      return "min";
    case StatOp::kMax:
      return "max";
    case StatOp::kSum:
      return "sum";
    case StatOp::kCount:
      return "count";
  }
  return "";
}

ExpandEntry::ExpandEntry(const recipe::OperatorSpec& spec, const std::string& text_key)
    : Mapper(spec, text_key) {
  config_.name = RequiredName(args(), "expand");
  if (!args().Has("by")) {
    args().FailAtColumn("by", "is required", "paragraph, sentence, lines, chars:N or field:KEY");
  }
  std::string why;
  if (!ParseSplitBy(args().GetString("by", ""), &config_.by, &why)) {
    args().FailAtColumn("by", "'" + args().GetString("by", "") + "' is not a split mode", why);
  }
  config_.text_key = this->text_key();
  config_.keep_fields = args().GetStringList("keep_fields", {});
  config_.max_children = args().GetInt("max_children", 100000);
  if (config_.max_children < 1) {
    args().FailAtColumn("max_children", "must be at least 1",
                        "got " + std::to_string(config_.max_children));
  }
  config_.max_inflight_parents = args().GetInt("max_inflight_parents", 4096);
  config_.max_inflight_children = args().GetInt("max_inflight_children", 262144);
  for (const char* key : {"max_inflight_parents", "max_inflight_children"}) {
    if (args().GetInt(key, 1) < 1) args().FailAtColumn(key, "must be at least 1", "");
  }
}

void ExpandEntry::Map(Sample&) const {
  throw std::logic_error("expand is run by the executor, not as a mapper");
}

GatherEntry::GatherEntry(const recipe::OperatorSpec& spec, const std::string& text_key)
    : Mapper(spec, text_key) {
  const recipe::OperatorArgs& a = args();
  config_.name = RequiredName(a, "gather");
  config_.into = ParseInto(a);
  const std::string sep = a.GetString("separator", "original");
  if (sep != "original") config_.separator = sep;
  config_.stats = ParseStats(a);
  config_.lists = ParseLists(a);
  CheckIntoMatchesLists(a, config_);
  ParseSurvival(a, &config_);
  ParseJournalFlush(a, &config_);
}

void GatherEntry::Map(Sample&) const {
  throw std::logic_error("gather is run by the executor, not as a mapper");
}

std::unique_ptr<Operator> MakeExpandEntry(const recipe::OperatorSpec& spec,
                                          const std::string& text_key) {
  return std::make_unique<ExpandEntry>(spec, text_key);
}

std::unique_ptr<Operator> MakeGatherEntry(const recipe::OperatorSpec& spec,
                                          const std::string& text_key) {
  return std::make_unique<GatherEntry>(spec, text_key);
}

const std::vector<BuiltinOperator>& LineageEntries() {
  static const std::vector<BuiltinOperator> entries = {
      {kExpandName,
       MakeExpandEntry,
       "Lineage: splits each record (the parent) into ordered children; the entries up to the "
       "gather of the same name run on the children (SPEC-lineage)",
       {{"name", "(required)",
         "pairs this expand with the gather of the same name; unique; letters, digits, . _ - "
         "(it names the region's journal files)"},
        {"by", "(required)",
         "paragraph (blank-line runs), sentence (. ! ? … 。！？ then closers, or a line break), "
         "lines (each \\n), chars:N (N code points), field:KEY (one child per element of list "
         "KEY, holding KEY: [element])"},
        {"text_key", "recipe text_key", "the parent field that text modes split"},
        {"keep_fields", "[]",
         "parent fields copied (raw bytes) into every child; children carry only these, the "
         "split field and their own stats and meta, so an operator in the region whose "
         "input_columns name another parent field (not in an earlier operator's output_columns) "
         "is an error at load"},
        {"max_children", "100000",
         "a parent with more children fails with expand_limit (splitting stops at "
         "max_children + 1)"},
        {"max_inflight_parents", "4096",
         "parents expanded at once; a batch's parents go through the region in groups"},
        {"max_inflight_children", "262144",
         "a group of parents closes once its children reach this many (memory bound)"}}},
      {kGatherName,
       MakeGatherEntry,
       "Lineage: rebuilds each parent from its PRESENT children, by ordinal, as soon as all its "
       "children are done; closes the innermost open expand (SPEC-lineage)",
       {{"name", "(required)", "the name of the expand this gather closes"},
        {"into", "text or field",
         "any of text (rejoin the split text), field (rebuild the list of field:KEY), stats "
         "(aggregate child stats), list (collect a child value per child)"},
        {"separator", "original",
         "into text: original (each child's own separator) or a literal joined between children"},
        {"stats", "[]",
         "[{from: child stat, op: mean|min|max|sum|count, to: parent stat}] over PRESENT children "
         "(count and sum of nothing are 0; mean, min and max of nothing are left out)"},
        {"list", "[]",
         "[{from: child path, to: parent field, keep_positions: false}]; keep_positions writes "
         "null for dropped children; a path a child lacks gives null, a path through a value "
         "that is not an object fails the parent with gather_error; when every operator in the "
         "region declares output_columns, from must be one of them, a kept field or the split "
         "field (checked at load)"},
        {"min_present", "1", "the parent survives only with at least this many PRESENT children"},
        {"min_present_ratio", "0.0", "... and at least this share of its children PRESENT"},
        {"on_empty", "drop",
         "a parent with zero children: drop, keep (rebuilt from no children) or keep_original (the "
         "parent exactly as read from the input: what operators before the expand changed is not "
         "kept)"},
        {"on_child_error", "fail_parent",
         "fail_parent: a failing child fails its parent (one errors-file line, siblings not yet "
         "dispatched are suppressed); drop_child: the child is dropped and reported"},
        {"suppress_siblings", "true",
         "false lets the siblings of a failed parent run anyway, results discarded "
         "(measurement)"},
        {"journal_flush_parents", "256",
         "with checkpointing on, gathered parents are committed to the region's journal in "
         "segments of this many, so a resumed partition does not expand them again"},
        {"journal_flush_secs", "30",
         "... or, when parents complete, once this many seconds passed since the last segment"}}},
  };
  return entries;
}

const std::vector<CatalogueEntry>& LineageCatalogue() {
  static const std::vector<CatalogueEntry> entries = {
      {kExpandName, OpKind::kMapper, "cpu"},
      {kGatherName, OpKind::kMapper, "cpu"},
  };
  return entries;
}

}  // namespace djshard::ops
