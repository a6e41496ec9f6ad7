// general_field_filter: Data-Juicer's filter_condition, a Python expression
// of and/or, chained comparisons, field names with attribute chains
// (__dj__meta__.lang, meta.src.x) and constants. Parsed here by djshard's own
// parser, never by an evaluator of arbitrary code; the constructs Data-Juicer
// cannot evaluate either (not, arithmetic, in, is, calls, subscripts) are
// refused at load.
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

using nlohmann::json;

constexpr const char* kStatKey = "general_field_filter_condition";

// The expression tree.
struct Node {
  enum Kind { kOr, kAnd, kCompare, kName, kAttribute, kConstant } kind;
  std::vector<Node> children;    // kOr/kAnd: operands; kCompare: left, then comparators;
                                 // kAttribute: the value it is read from
  std::vector<std::string> ops;  // kCompare: "<", "<=", ">", ">=", "==", "!="
  std::string name;              // kName: the field; kAttribute: the attribute
  json constant;                 // kConstant
};

// A syntax or support problem at a byte of the condition.
struct ParseError {
  size_t at;
  std::string what;
};

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Node Parse() {
    Node n = Or();
    Skip();
    if (i_ < s_.size()) Unsupported("'" + s_.substr(i_, 12) + "'");
    return n;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) { throw ParseError{i_, what}; }
  [[noreturn]] void Unsupported(const std::string& what) {
    Fail(what + " is not something Data-Juicer's general_field_filter evaluates");
  }

  void Skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\f' ||
                              (depth_ > 0 && (s_[i_] == '\n' || s_[i_] == '\r')))) {
      ++i_;
    }
  }
  static bool IsNameByte(char c, bool first) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x80 || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (!first && c >= '0' && c <= '9');
  }
  // The identifier or keyword at the cursor, without consuming it ("" if none).
  std::string PeekWord() {
    Skip();
    size_t j = i_;
    while (j < s_.size() && IsNameByte(s_[j], j == i_)) ++j;
    return s_.substr(i_, j - i_);
  }
  bool TakeWord(const char* word) {
    if (PeekWord() != word) return false;
    i_ += std::strlen(word);
    return true;
  }

  Node Or() {
    return Chain(Node::kOr, "or", [this] { return And(); });
  }
  Node And() {
    return Chain(Node::kAnd, "and", [this] { return Not(); });
  }
  template <typename Next>
  Node Chain(Node::Kind kind, const char* word, const Next& next) {
    Node first = next();
    if (PeekWord() != word) return first;
    Node n{kind, {std::move(first)}, {}, {}, {}};
    while (TakeWord(word)) n.children.push_back(next());
    return n;
  }
  Node Not() {
    if (PeekWord() == "not") Unsupported("'not'");
    return Compare();
  }
  Node Compare() {
    Node left = Atom();
    Node n{Node::kCompare, {std::move(left)}, {}, {}, {}};
    for (;;) {
      Skip();
      std::string op;
      if (TakeWord("in")) {
        op = "in";
      } else if (TakeWord("is")) {
        op = TakeWord("not") ? "is not" : "is";
      } else if (TakeWord("not")) {
        if (!TakeWord("in")) Unsupported("'not'");
        op = "not in";
      }
      if (!op.empty()) {
        n.ops.push_back(op);
        n.children.push_back(Atom());
        continue;
      }
      for (const char* candidate : {"<=", ">=", "==", "!=", "<", ">"}) {
        if (s_.compare(i_, std::strlen(candidate), candidate) == 0) {
          op = candidate;
          break;
        }
      }
      if (op.empty()) break;
      i_ += op.size();
      n.ops.push_back(op);
      n.children.push_back(Atom());
    }
    return n.ops.empty() ? std::move(n.children.front()) : n;
  }
  Node Atom() {
    Node n = Primary();
    for (;;) {
      Skip();
      if (i_ >= s_.size()) return n;
      if (s_[i_] == '.') {
        ++i_;
        const std::string attr = PeekWord();
        if (attr.empty()) Fail("a name must follow '.'");
        i_ += attr.size();
        n = Node{Node::kAttribute, {std::move(n)}, {}, attr, {}};
      } else if (s_[i_] == '(' || s_[i_] == '[') {
        Unsupported(s_[i_] == '(' ? "a call" : "a subscript");
      } else {
        return n;
      }
    }
  }
  Node Primary() {
    Skip();
    if (i_ >= s_.size()) Fail("the condition ends where a value should be");
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      ++depth_;
      Node n = Or();
      Skip();
      if (i_ >= s_.size() || s_[i_] != ')') Fail("'(' is not closed");
      ++i_;
      --depth_;
      return n;
    }
    if ((c >= '0' && c <= '9') || (c == '.' && i_ + 1 < s_.size() && std::isdigit(s_[i_ + 1]))) {
      return Constant(Number());
    }
    const std::string word = PeekWord();
    if (!word.empty() && s_.size() > i_ + word.size() &&
        (s_[i_ + word.size()] == '\'' || s_[i_ + word.size()] == '"')) {
      return Constant(Strings());
    }
    if (c == '\'' || c == '"') return Constant(Strings());
    if (word.empty()) Unsupported("'" + std::string(1, c) + "'");
    i_ += word.size();
    if (word == "True" || word == "False") return Constant(json(word == "True"));
    if (word == "None") return Constant(json());
    for (const char* keyword : {"and", "or", "not", "in", "is", "if", "else", "lambda", "for"}) {
      if (word == keyword) Unsupported("'" + word + "'");
    }
    return Node{Node::kName, {}, {}, word, {}};
  }
  static Node Constant(json value) { return Node{Node::kConstant, {}, {}, {}, std::move(value)}; }

  json Number() {
    const size_t start = i_;
    std::string digits;
    int base = 10;
    if (s_[i_] == '0' && i_ + 1 < s_.size() && std::strchr("xXoObB", s_[i_ + 1]) != nullptr) {
      base = std::strchr("xX", s_[i_ + 1]) ? 16 : std::strchr("oO", s_[i_ + 1]) ? 8 : 2;
      i_ += 2;
      while (i_ < s_.size() && (std::isxdigit(s_[i_]) || s_[i_] == '_')) {
        if (s_[i_] != '_') digits.push_back(s_[i_]);
        ++i_;
      }
      return json(std::stoll(digits, nullptr, base));
    }
    bool is_float = false;
    while (i_ < s_.size()) {
      const char d = s_[i_];
      if (std::isdigit(d)) {
        digits.push_back(d);
      } else if (d == '.' || ((d == 'e' || d == 'E') && !digits.empty())) {
        is_float = true;
        digits.push_back(d);
        if ((d == 'e' || d == 'E') && i_ + 1 < s_.size() &&
            (s_[i_ + 1] == '+' || s_[i_ + 1] == '-')) {
          digits.push_back(s_[++i_]);
        }
      } else if (d != '_') {
        break;
      }
      ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'j' || s_[i_] == 'J')) Unsupported("a complex number");
    if (i_ < s_.size() && IsNameByte(s_[i_], false)) {
      i_ = start;
      Fail("a number runs into a name");
    }
    try {
      if (is_float) return json(std::stod(digits));
      return json(std::stoll(digits));
    } catch (const std::exception&) {
      i_ = start;
      Unsupported("the number '" + digits + "' (beyond 64 bits)");
    }
  }

  // One or more adjacent string literals, concatenated.
  json Strings() {
    std::string out;
    for (;;) {
      Skip();
      const std::string prefix = PeekWord();
      const size_t quote_at = i_ + prefix.size();
      if (quote_at >= s_.size() || (s_[quote_at] != '\'' && s_[quote_at] != '"')) break;
      std::string lower;
      for (char c : prefix) lower.push_back(static_cast<char>(std::tolower(c)));
      if (lower != "" && lower != "r" && lower != "u") Unsupported("a " + prefix + "'' literal");
      i_ = quote_at;
      out += StringLiteral(lower == "r");
    }
    return json(out);
  }
  std::string StringLiteral(bool raw) {
    const char q = s_[i_];
    const bool triple = s_.compare(i_, 3, std::string(3, q)) == 0;
    const std::string close = triple ? std::string(3, q) : std::string(1, q);
    i_ += close.size();
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) Fail("a string is not closed");
      if (s_.compare(i_, close.size(), close) == 0) {
        i_ += close.size();
        return out;
      }
      const char c = s_[i_++];
      if (c == '\n' && !triple) Fail("a string is not closed on its line");
      if (c != '\\' || i_ >= s_.size()) {
        out.push_back(c);
        continue;
      }
      if (raw) {
        out.push_back('\\');
        out.push_back(s_[i_++]);
        continue;
      }
      Escape(&out);
    }
  }
  void Escape(std::string* out) {
    const char e = s_[i_++];
    static const std::string kSimple = "\\'\"abfnrtv";
    static const std::string kValue = "\\'\"\a\b\f\n\r\t\v";
    if (const size_t k = kSimple.find(e); k != std::string::npos) {
      out->push_back(kValue[k]);
    } else if (e == '\n') {
      // A line continuation.
    } else if (e >= '0' && e <= '7') {
      uint32_t v = static_cast<uint32_t>(e - '0');
      for (int n = 0; n < 2 && i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '7'; ++n) {
        v = v * 8 + static_cast<uint32_t>(s_[i_++] - '0');
      }
      AppendUtf8(out, v);
    } else if (e == 'x' || e == 'u' || e == 'U') {
      const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      const std::string hex = s_.substr(i_, n);
      if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
        Fail(std::string("a truncated \\") + e + " escape");
      }
      AppendUtf8(out, static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
      i_ += n;
    } else if (e == 'N') {
      Unsupported("a \\N{...} escape");
    } else {
      out->push_back('\\');
      out->push_back(e);
    }
  }

  const std::string& s_;
  size_t i_ = 0;
  int depth_ = 0;  // inside parentheses, newlines are whitespace
};

// Python's comparisons and truthiness over JSON values (bool counts as int).
bool IsNumber(const json& v) { return v.is_number() || v.is_boolean(); }
long double NumberOf(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_unsigned()) return static_cast<long double>(v.get<uint64_t>());
  if (v.is_number_integer()) return static_cast<long double>(v.get<int64_t>());
  return static_cast<long double>(v.get<double>());
}
const char* PythonType(const json& v) {
  if (v.is_boolean()) return "bool";
  if (v.is_number_float()) return "float";
  if (v.is_number()) return "int";
  if (v.is_string()) return "str";
  if (v.is_array()) return "list";
  if (v.is_object()) return "dict";
  return "NoneType";
}
bool Truthy(const json& v) {
  if (v.is_null()) return false;
  if (IsNumber(v)) return NumberOf(v) != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

bool Equal(const json& a, const json& b) {
  if (IsNumber(a) && IsNumber(b)) return NumberOf(a) == NumberOf(b);
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k) {
      if (!Equal(a[k], b[k])) return false;
    }
    return true;
  }
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items()) {
      if (!b.contains(key) || !Equal(value, b[key])) return false;
    }
    return true;
  }
  return a.type() == b.type() && a == b;
}

// a < b, or an error where Python has none.
bool Less(const json& a, const json& b, const std::string& op) {
  if (IsNumber(a) && IsNumber(b)) return NumberOf(a) < NumberOf(b);
  if (a.is_string() && b.is_string()) return a.get<std::string>() < b.get<std::string>();
  if (a.is_array() && b.is_array()) {
    for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
      if (!Equal(a[k], b[k])) return Less(a[k], b[k], op);
    }
    return a.size() < b.size();
  }
  throw OpError("TypeError: '" + op + "' not supported between instances of '" + PythonType(a) +
                "' and '" + PythonType(b) + "'");
}

bool Apply(const std::string& op, const json& a, const json& b) {
  if (op == "in" || op == "not in" || op == "is" || op == "is not") {
    // Data-Juicer parses these and cannot apply them (None aside).
    std::string name = op == "in" ? "In" : op == "not in" ? "NotIn" : op == "is" ? "Is" : "IsNot";
    throw OpError("ValueError: Unsupported comparison operator: " + name);
  }
  if (op == "==") return Equal(a, b);
  if (op == "!=") return !Equal(a, b);
  if (op == "<") return Less(a, b, op);
  if (op == ">") return Less(b, a, op);
  // a <= b is not (b < a) only for totally ordered values; Python asks each
  // type for <=, which for lists compares the first unequal pair.
  if (op == "<=") return Equal(a, b) || Less(a, b, op);
  return Equal(a, b) || Less(b, a, op);
}

// The attributes Python 3.11's str, list, int and float have (dir()), for an
// attribute chain that reaches a value that is not an object.
const std::pair<const char*, const char*> kAttributes[] = {
    {"str",
     "__add__ __class__ __contains__ __delattr__ __dir__ __doc__ __eq__ __format__ __ge__ "
     "__getattribute__ __getitem__ __getnewargs__ __getstate__ __gt__ __hash__ __init__ "
     "__init_subclass__ __iter__ __le__ __len__ __lt__ __mod__ __mul__ __ne__ __new__ "
     "__reduce__ __reduce_ex__ __repr__ __rmod__ __rmul__ __setattr__ __sizeof__ __str__ "
     "__subclasshook__ capitalize casefold center count encode endswith expandtabs find format "
     "format_map index isalnum isalpha isascii isdecimal isdigit isidentifier islower "
     "isnumeric isprintable isspace istitle isupper join ljust lower lstrip maketrans "
     "partition removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip "
     "split splitlines startswith strip swapcase title translate upper zfill "},
    {"list",
     "__add__ __class__ __class_getitem__ __contains__ __delattr__ __delitem__ __dir__ __doc__ "
     "__eq__ __format__ __ge__ __getattribute__ __getitem__ __getstate__ __gt__ __hash__ "
     "__iadd__ __imul__ __init__ __init_subclass__ __iter__ __le__ __len__ __lt__ __mul__ "
     "__ne__ __new__ __reduce__ __reduce_ex__ __repr__ __reversed__ __rmul__ __setattr__ "
     "__setitem__ __sizeof__ __str__ __subclasshook__ append clear copy count extend index "
     "insert pop remove reverse sort "},
    {"int",
     "__abs__ __add__ __and__ __bool__ __ceil__ __class__ __delattr__ __dir__ __divmod__ "
     "__doc__ __eq__ __float__ __floor__ __floordiv__ __format__ __ge__ __getattribute__ "
     "__getnewargs__ __getstate__ __gt__ __hash__ __index__ __init__ __init_subclass__ __int__ "
     "__invert__ __le__ __lshift__ __lt__ __mod__ __mul__ __ne__ __neg__ __new__ __or__ "
     "__pos__ __pow__ __radd__ __rand__ __rdivmod__ __reduce__ __reduce_ex__ __repr__ "
     "__rfloordiv__ __rlshift__ __rmod__ __rmul__ __ror__ __round__ __rpow__ __rrshift__ "
     "__rshift__ __rsub__ __rtruediv__ __rxor__ __setattr__ __sizeof__ __str__ __sub__ "
     "__subclasshook__ __truediv__ __trunc__ __xor__ as_integer_ratio bit_count bit_length "
     "conjugate denominator from_bytes imag numerator real to_bytes "},
    {"float",
     "__abs__ __add__ __bool__ __ceil__ __class__ __delattr__ __dir__ __divmod__ __doc__ "
     "__eq__ __float__ __floor__ __floordiv__ __format__ __ge__ __getattribute__ __getformat__ "
     "__getnewargs__ __getstate__ __gt__ __hash__ __init__ __init_subclass__ __int__ __le__ "
     "__lt__ __mod__ __mul__ __ne__ __neg__ __new__ __pos__ __pow__ __radd__ __rdivmod__ "
     "__reduce__ __reduce_ex__ __repr__ __rfloordiv__ __rmod__ __rmul__ __round__ __rpow__ "
     "__rsub__ __rtruediv__ __setattr__ __sizeof__ __str__ __sub__ __subclasshook__ "
     "__truediv__ __trunc__ as_integer_ratio conjugate fromhex hex imag is_integer real "},
};

// Python's getattr(value, name) for a value that is not an object: a
// number's real, imag, numerator and denominator; None where the type has no
// such attribute; an error for a method (Data-Juicer keeps the bound method,
// which no output can hold).
json AttributeOf(const json& value, const std::string& name) {
  if (value.is_null()) return json();
  if (IsNumber(value) && (name == "real" || name == "numerator")) {
    return value.is_boolean() ? json(value.get<bool>() ? 1 : 0) : value;
  }
  if (IsNumber(value) && name == "imag") return value.is_number_float() ? json(0.0) : json(0);
  if (IsNumber(value) && name == "denominator" && !value.is_number_float()) return json(1);
  const char* type = value.is_string()         ? "str"
                     : value.is_array()        ? "list"
                     : value.is_number_float() ? "float"
                                               : "int";
  for (const auto& [t, names] : kAttributes) {
    if (std::strcmp(t, type) != 0) continue;
    if ((" " + std::string(names) + " ").find(" " + name + " ") == std::string::npos) return json();
  }
  throw OpError(std::string("'") + name + "' of a " + type +
                " is a method or an object, not a value (Data-Juicer keeps it and cannot write "
                "it out)");
}

class GeneralFieldFilter : public Filter {
 public:
  GeneralFieldFilter(const recipe::OperatorSpec& spec, const std::string& key) : Filter(spec, key) {
    const std::string condition = args().GetString("filter_condition", "");
    if (condition.empty()) return;
    if (std::isspace(static_cast<unsigned char>(condition.front()))) {
      args().Fail("filter_condition", "starts with whitespace, which Python's parser refuses",
                  "remove the leading spaces (Data-Juicer fails at load too)");
    }
    try {
      tree_ = Parser(condition).Parse();
    } catch (const ParseError& e) {
      args().Fail("filter_condition",
                  "cannot be evaluated at byte " + std::to_string(e.at) + ": " + e.what,
                  "it takes and/or, chained comparisons (<, <=, >, >=, ==, !=), field names "
                  "with attribute chains (__dj__meta__.lang, meta.src.x) and constants");
    }
  }

  std::vector<std::string> stat_keys() const override { return {kStatKey}; }

  bool Process(Sample& sample) const override {
    if (!tree_ && !sample.Stat(kStatKey)) return true;
    if (!sample.Stat(kStatKey)) {
      Fields fields{sample, {}};
      sample.SetStat(kStatKey, Evaluate(*tree_, fields).dump());
    }
    const std::optional<std::string_view> raw = sample.Stat(kStatKey);
    return Truthy(json::parse(*raw, nullptr, false));
  }

 private:
  // The record's fields as the sample stands now (texts changed by earlier
  // mappers included): a field named in the condition is parsed from its own
  // raw value, never the whole record; stats and meta, which the sample keeps
  // apart until it is written, from the record serialized as it stands.
  struct Fields {
    Sample& sample;
    std::optional<json> record;
    json Get(const std::string& name) {
      if (name == kStatsKey || name == kMetaKey) return FromCurrentRecord(name);
      const std::optional<std::string> raw = sample.Field(name);
      if (raw && !raw->empty() && raw->front() == '"') return json(sample.Text(name));
      if (raw) return json::parse(*raw, nullptr, false);
      if (sample.Has(name)) return json(sample.Text(name));  // set by a mapper, not yet written
      return json();
    }
    json FromCurrentRecord(const std::string& name) {
      if (!record) record = json::parse(sample.CurrentRecord(), nullptr, false);
      return record->is_object() && record->contains(name) ? (*record)[name] : json();
    }
  };

  static json Evaluate(const Node& n, Fields& fields) {
    switch (n.kind) {
      case Node::kConstant:
        return n.constant;
      case Node::kName:
        return fields.Get(n.name);
      case Node::kAttribute: {
        const json base = Evaluate(n.children.front(), fields);
        if (base.is_object()) return base.contains(n.name) ? base[n.name] : json();
        return AttributeOf(base, n.name);
      }
      case Node::kOr:
      case Node::kAnd: {
        // all() and any(): each operand in turn, until one decides.
        const bool is_and = n.kind == Node::kAnd;
        for (const Node& child : n.children) {
          if (Truthy(Evaluate(child, fields)) != is_and) return json(!is_and);
        }
        return json(is_and);
      }
      case Node::kCompare:
        return json(Compare(n, fields));
    }
    return json();
  }

  // Every operand first, then each link in turn; a None on either side of a
  // link makes the chain false.
  static bool Compare(const Node& n, Fields& fields) {
    std::vector<json> values;
    for (const Node& child : n.children) values.push_back(Evaluate(child, fields));
    for (size_t k = 0; k < n.ops.size(); ++k) {
      if (values[k].is_null() || values[k + 1].is_null()) return false;
      if (!Apply(n.ops[k], values[k], values[k + 1])) return false;
    }
    return true;
  }

  std::optional<Node> tree_;
};

}  // namespace

std::unique_ptr<Operator> MakeGeneralFieldFilter(const recipe::OperatorSpec& spec,
                                                 const std::string& text_key) {
  return std::make_unique<GeneralFieldFilter>(spec, text_key);
}

}  // namespace djshard::ops
