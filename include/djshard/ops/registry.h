#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace djshard::ops {

// Data-Juicer's operator kinds. Only mappers and filters are shard-safe.
enum class OpKind { kMapper, kFilter, kDeduplicator, kSelector, kGrouper, kAggregator };

const char* OpKindName(OpKind kind);

struct OperatorInfo {
  std::string name;
  OpKind kind;
  std::string accelerator;  // "cpu" or "cuda", Data-Juicer's default placement
  bool implemented;         // djshard can run it
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
