#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace djshard::recipe {
struct OperatorSpec;
}

namespace djshard::ops {

class Operator;

// Builds a configured operator; `text_key` is the recipe's default.
using OperatorFactory = std::unique_ptr<Operator> (*)(const recipe::OperatorSpec& spec,
                                                      const std::string& text_key);

// One argument of an operator, for `djshard ops`.
struct ArgDoc {
  std::string name;
  std::string default_value;
  std::string doc;
};

// Data-Juicer's operator kinds. Only mappers and filters are shard-safe.
enum class OpKind { kMapper, kFilter, kDeduplicator, kSelector, kGrouper, kAggregator };

const char* OpKindName(OpKind kind);

// One operator of Data-Juicer's catalogue (src/ops/catalogue.cc).
struct CatalogueEntry {
  const char* name;
  OpKind kind;
  const char* accelerator;
};

// An operator this build implements (src/ops/builtin.cc). `args` is the one
// list of its own arguments: the operator accepts these and the common ones
// (CommonArguments()), and `djshard ops` prints them.
struct BuiltinOperator {
  std::string name;
  OperatorFactory factory;
  std::string summary;
  std::vector<ArgDoc> args;
};

// What djshard does with an argument that Data-Juicer's operator base classes
// take on every operator.
enum class CommonArgUse {
  kHonoured,  // djshard does what Data-Juicer does, or its equivalent here
  kIgnored,   // accepted so that recipes run unchanged; has no effect here
  kRefused,   // accepted by Data-Juicer but refused before a job starts
};

struct CommonArg {
  const char* name;
  CommonArgUse use;
  const char* meaning;  // what it does here, or why it is ignored or refused
};

// Every common argument, in the order `djshard ops NAME` prints them.
const std::vector<CommonArg>& CommonArguments();
// nullptr when `name` is not a common argument.
const CommonArg* FindCommonArgument(std::string_view name);

struct OperatorInfo {
  std::string name;
  OpKind kind;
  std::string accelerator;            // "cpu" or "cuda", Data-Juicer's default placement
  bool implemented;                   // djshard can run it
  OperatorFactory factory = nullptr;  // set when implemented
  std::string summary;                // what it does, when implemented
  std::vector<ArgDoc> args;           // its own arguments, when implemented
  std::string absent_reason;  // not implemented: why djshard leaves it out ("" if not built yet)
};

// Every operator of Data-Juicer's catalogue, by name, with whether djshard
// implements it. The registry is immutable after construction.
class Registry {
 public:
  // The registry of this build: Data-Juicer's catalogue and djshard's built-in
  // operators (plus the test operators when DJSHARD_ENABLE_TEST_OPERATORS=1).
  static const Registry& Global();

  // Attaches each built-in to its catalogue entry by name. Throws Error when a
  // built-in is not in the catalogue, or is listed twice: such an operator
  // would otherwise vanish from the build without a word.
  Registry(std::span<const CatalogueEntry> catalogue, std::span<const BuiltinOperator> builtins);

  // nullptr when `name` is not a known operator.
  const OperatorInfo* Find(std::string_view name) const;
  // All operators, sorted by name.
  const std::vector<OperatorInfo>& All() const { return operators_; }

 private:
  std::vector<OperatorInfo> operators_;
};

}  // namespace djshard::ops
