#include "core/rendezvous.hpp"

#include <cstring>

#include "util/log.hpp"

namespace nlccl::core {

Status LocalRendezvous::allGather(int rank, const void* mine, size_t bytes, void* all,
                                  std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t gen = generation_;
  slots_[rank].assign(static_cast<const char*>(mine), bytes);
  if (++arrived_ == nranks_) {
    result_ = std::make_shared<const std::vector<std::string>>(slots_);
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  } else if (!cv_.wait_for(lock, timeout, [&] { return generation_ != gen; })) {
    WARN("rank %d: timed out after %lld ms waiting for %d of %d ranks to join", rank,
         static_cast<long long>(timeout.count()), nranks_ - arrived_, nranks_);
    --arrived_;
    return Status::Timeout;
  }
  auto result = result_;
  lock.unlock();
  for (int r = 0; r < nranks_; ++r) {
    const std::string& s = (*result)[r];
    if (s.size() != bytes) {
      WARN("rank %d: rank %d contributed %zu bytes to an all-gather of %zu", rank, r, s.size(),
           bytes);
      return Status::InvalidUsage;
    }
    std::memcpy(static_cast<char*>(all) + r * bytes, s.data(), bytes);
  }
  return Status::Success;
}

std::shared_ptr<LocalRendezvous> LocalRendezvous::subgroup(const std::string& key, int n) {
  std::lock_guard<std::mutex> lock(mu_);
  Pending& p = subgroups_[key];
  if (!p.group) p.group = std::make_shared<LocalRendezvous>(n);
  std::shared_ptr<LocalRendezvous> g = p.group;
  if (++p.taken >= n) subgroups_.erase(key);
  return g;
}

}  // namespace nlccl::core
