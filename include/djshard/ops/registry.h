#pragma once

#include <memory>
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

struct OperatorInfo {
  std::string name;
  OpKind kind;
  std::string accelerator;            // "cpu" or "cuda", Data-Juicer's default placement
  bool implemented;                   // djshard can run it
  OperatorFactory factory = nullptr;  // set when implemented
  std::string summary;                // what it does, when implemented
  std::vector<ArgDoc> args;           // its own arguments, when implemented
};

// Every operator of Data-Juicer's catalogue, by name, with whether djshard
// implements it. The registry is immutable after start-up.
class Registry {
 public:
  // The registry of this build.
  static const Registry& Global();

  // nullptr when `name` is not a known operator.
  const OperatorInfo* Find(std::string_view name) const;
  // All operators, sorted by name.
  const std::vector<OperatorInfo>& All() const { return operators_; }

 private:
  Registry();
  std::vector<OperatorInfo> operators_;
};

}  // namespace djshard::ops
