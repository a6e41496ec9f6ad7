#include "djshard/common/threads.h"

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace djshard {

void RunOnThreads(size_t n, const std::function<void(size_t)>& fn) {
  std::exception_ptr failure;
  std::mutex mu;
  const auto guarded = [&](size_t t) {
    try {
      fn(t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(guarded, t);
  guarded(0);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace djshard
