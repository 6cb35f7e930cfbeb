// Runs one function per rank on its own thread and rethrows the first failure on the test thread
// (gloo's spawnThreads). GoogleTest assertions inside rank threads are recorded as usual.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nlccl::testing {

inline void runRanks(int n, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  std::exception_ptr first;
  std::mutex mu;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace nlccl::testing
