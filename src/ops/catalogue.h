#pragma once

#include <cstddef>

#include "djshard/ops/registry.h"

namespace djshard::ops {

extern const CatalogueEntry kCatalogue[];
extern const size_t kCatalogueSize;

struct AbsentReason {
  const char* name;
  const char* reason;  // "needs ..."
};
extern const AbsentReason kAbsentReasons[];
extern const size_t kAbsentReasonsSize;

}  // namespace djshard::ops
