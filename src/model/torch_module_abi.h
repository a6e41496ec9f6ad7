#pragma once

// The C interface between libdjshard and the libtorch module. Plain C types
// only, so the two sides may be built with different C++ flags.
extern "C" {

struct DjshardTorchInfo {
  char torch_version[64];
  int cuda_available;
  int cuda_device_count;
};

// Exported by libdjshard_torch.so.
typedef void (*DjshardQueryTorchFn)(DjshardTorchInfo* out);
#define DJSHARD_QUERY_TORCH_SYMBOL "djshard_query_torch"
}
