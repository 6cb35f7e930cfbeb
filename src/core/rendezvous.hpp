// All-gather among the ranks of a communicator, used by init and split. Ranks that are threads of
// one process meet in memory (LocalRendezvous); processes meet through the bootstrap.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
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
  /// The meeting point of a subgroup of `n` of these ranks named `key` (nlcclCommShrink: the
  /// survivors meet without the excluded ranks). The first caller makes it; it is forgotten here
  /// once all n have taken it.
  std::shared_ptr<LocalRendezvous> subgroup(const std::string& key, int n);

 private:
  int nranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> slots_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::shared_ptr<const std::vector<std::string>> result_;
  struct Pending {
    std::shared_ptr<LocalRendezvous> group;
    int taken = 0;
  };
  std::map<std::string, Pending> subgroups_;
};

}  // namespace nlccl::core
