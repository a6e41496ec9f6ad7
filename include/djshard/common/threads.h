#pragma once

#include <cstddef>
#include <functional>

namespace djshard {

// Runs fn(0) .. fn(n - 1) at once, fn(0) on the calling thread and the others
// on new threads, and waits for all of them; the first exception one of them
// threw is rethrown once all have ended.
void RunOnThreads(size_t n, const std::function<void(size_t)>& fn);

}  // namespace djshard
