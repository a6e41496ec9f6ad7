#pragma once

#include <cstddef>

#include "djshard/ops/registry.h"

namespace djshard::ops {

struct CatalogueEntry {
  const char* name;
  OpKind kind;
  const char* accelerator;
};

extern const CatalogueEntry kCatalogue[];
extern const size_t kCatalogueSize;

}  // namespace djshard::ops
