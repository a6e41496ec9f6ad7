#include "djshard/ops/registry.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "src/ops/builtin.h"
#include "src/ops/catalogue.h"

namespace djshard::ops {

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kMapper:
      return "mapper";
    case OpKind::kFilter:
      return "filter";
    case OpKind::kDeduplicator:
      return "deduplicator";
    case OpKind::kSelector:
      return "selector";
    case OpKind::kGrouper:
      return "grouper";
    case OpKind::kAggregator:
      return "aggregator";
  }
  return "unknown";
}

Registry::Registry() {
  for (size_t i = 0; i < kCatalogueSize; ++i) {
    const CatalogueEntry& e = kCatalogue[i];
    OperatorInfo info;
    info.name = e.name;
    info.kind = e.kind;
    info.accelerator = e.accelerator;
    info.implemented = false;
    operators_.push_back(std::move(info));
  }
  std::sort(operators_.begin(), operators_.end(),
            [](const OperatorInfo& a, const OperatorInfo& b) { return a.name < b.name; });
  for (const BuiltinOperator& b : BuiltinOperators()) {
    auto it =
        std::lower_bound(operators_.begin(), operators_.end(), b.name,
                         [](const OperatorInfo& op, const std::string& n) { return op.name < n; });
    if (it == operators_.end() || it->name != b.name) continue;  // not in the catalogue
    it->implemented = true;
    it->factory = b.factory;
    it->summary = b.summary;
    it->args = b.args;
  }
  const char* test_ops = std::getenv("DJSHARD_ENABLE_TEST_OPERATORS");
  if (test_ops != nullptr && std::strcmp(test_ops, "1") == 0) {
    OperatorInfo sleep;
    sleep.name = "djshard_test_sleep_mapper";
    sleep.kind = OpKind::kMapper;
    sleep.accelerator = "cpu";
    sleep.implemented = true;
    sleep.factory = MakeTestSleepMapper;
    sleep.summary = "Test only: sleeps `seconds` per record";
    sleep.args = {{"seconds", "1.0", "seconds to sleep per record"},
                  {"fail_while_exists", "''", "fails every record while this file exists"}};
    operators_.insert(
        std::lower_bound(operators_.begin(), operators_.end(), sleep.name,
                         [](const OperatorInfo& op, const std::string& n) { return op.name < n; }),
        std::move(sleep));
  }
}

const Registry& Registry::Global() {
  static const Registry registry;
  return registry;
}

const OperatorInfo* Registry::Find(std::string_view name) const {
  auto it =
      std::lower_bound(operators_.begin(), operators_.end(), name,
                       [](const OperatorInfo& op, std::string_view n) { return op.name < n; });
  if (it == operators_.end() || it->name != name) return nullptr;
  return &*it;
}

}  // namespace djshard::ops
