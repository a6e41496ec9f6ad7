#include "djshard/ops/registry.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "djshard/common/error.h"
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

namespace {

bool ByName(const OperatorInfo& op, std::string_view name) { return op.name < name; }

}  // namespace

Registry::Registry(std::span<const CatalogueEntry> catalogue,
                   std::span<const BuiltinOperator> builtins) {
  for (const CatalogueEntry& e : catalogue) {
    OperatorInfo info;
    info.name = e.name;
    info.kind = e.kind;
    info.accelerator = e.accelerator;
    info.implemented = false;
    operators_.push_back(std::move(info));
  }
  std::sort(operators_.begin(), operators_.end(),
            [](const OperatorInfo& a, const OperatorInfo& b) { return a.name < b.name; });
  for (size_t i = 0; i < kAbsentReasonsSize; ++i) {
    auto it =
        std::lower_bound(operators_.begin(), operators_.end(), kAbsentReasons[i].name, ByName);
    if (it != operators_.end() && it->name == kAbsentReasons[i].name) {
      it->absent_reason = kAbsentReasons[i].reason;
    }
  }
  for (const BuiltinOperator& b : builtins) {
    auto it = std::lower_bound(operators_.begin(), operators_.end(), b.name, ByName);
    if (it == operators_.end() || it->name != b.name) {
      throw Error("built-in operator '" + b.name + "' is not in Data-Juicer's operator catalogue",
                  "add it to src/ops/catalogue.cc or fix its name in src/ops/builtin.cc");
    }
    if (it->implemented) {
      throw Error("built-in operator '" + b.name + "' is listed twice",
                  "keep one entry in src/ops/builtin.cc");
    }
    it->implemented = true;
    it->factory = b.factory;
    it->summary = b.summary;
    it->args = b.args;
  }
}

const Registry& Registry::Global() {
  static const Registry registry = [] {
    std::vector<CatalogueEntry> catalogue(kCatalogue, kCatalogue + kCatalogueSize);
    std::vector<BuiltinOperator> builtins = BuiltinOperators();
    catalogue.insert(catalogue.end(), LineageCatalogue().begin(), LineageCatalogue().end());
    builtins.insert(builtins.end(), LineageEntries().begin(), LineageEntries().end());
    const char* test_ops = std::getenv("DJSHARD_ENABLE_TEST_OPERATORS");
    if (test_ops != nullptr && std::strcmp(test_ops, "1") == 0) {
      const std::vector<CatalogueEntry>& extra = TestOperatorCatalogue();
      catalogue.insert(catalogue.end(), extra.begin(), extra.end());
      builtins.insert(builtins.end(), TestOperators().begin(), TestOperators().end());
    }
    return Registry(catalogue, builtins);
  }();
  return registry;
}

const OperatorInfo* Registry::Find(std::string_view name) const {
  auto it = std::lower_bound(operators_.begin(), operators_.end(), name, ByName);
  if (it == operators_.end() || it->name != name) return nullptr;
  return &*it;
}

}  // namespace djshard::ops
