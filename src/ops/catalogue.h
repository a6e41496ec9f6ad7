#pragma once

#include <cstddef>

#include "djshard/ops/registry.h"

namespace djshard::ops {

extern const CatalogueEntry kCatalogue[];
extern const size_t kCatalogueSize;

}  // namespace djshard::ops
