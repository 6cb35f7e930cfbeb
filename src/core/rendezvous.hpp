// All-gather among the ranks of a communicator, used by init and split. Ranks that are threads of
// one process meet in memory (LocalRendezvous); processes meet through the bootstrap.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "util/status.hpp"

namespace nlccl::core {

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  /// Every rank contributes `bytes` bytes; `all` receives nranks*bytes in rank order.
  virtual Status allGather(int rank, const void* mine, size_t bytes, void* all,
                           std::chrono::milliseconds timeout) = 0;
};

/// Threads of one process: a generation-counted meeting point.
class LocalRendezvous final : public Rendezvous {
 public:
  explicit LocalRendezvous(int nranks) : nranks_(nranks), slots_(nranks) {}
  Status allGather(int rank, const void* mine, size_t bytes, void* all,
                   std::chrono::milliseconds timeout) override;

 private:
  int nranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> slots_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::shared_ptr<const std::vector<std::string>> result_;
};

}  // namespace nlccl::core
