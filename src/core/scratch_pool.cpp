#include "core/scratch_pool.hpp"

#include <algorithm>

namespace nlccl::core {

std::shared_ptr<char> ScratchPool::lease(size_t bytes) {
  if (bytes == 0) return nullptr;
  Buffer b{0, nullptr};
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest idle buffer that fits.
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it)
      if (it->bytes >= bytes && (best == idle_.end() || it->bytes < best->bytes)) best = it;
    if (best != idle_.end()) {
      b = std::move(*best);
      idle_.erase(best);
    }
  }
  if (!b.data) b = {bytes, std::unique_ptr<char[]>(new char[bytes])};
  char* p = b.data.get();
  // The deleter owns the buffer until it goes back; the pool may be gone by then.
  auto holder = std::make_shared<Buffer>(std::move(b));
  std::weak_ptr<ScratchPool> pool = weak_from_this();
  return std::shared_ptr<char>(p, [holder, pool](char*) {
    if (auto pl = pool.lock()) pl->giveBack(std::move(*holder));
  });
}

void ScratchPool::giveBack(Buffer b) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(b));
  if (idle_.size() > kMaxIdle) {  // drop the smallest: the large ones are the costly ones
    auto smallest = std::min_element(idle_.begin(), idle_.end(), [](const Buffer& x, const Buffer& y) {
      return x.bytes < y.bytes;
    });
    idle_.erase(smallest);
  }
}

size_t ScratchPool::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

size_t ScratchPool::idleBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Buffer& b : idle_) n += b.bytes;
  return n;
}

void ScratchPool::trim() {
  std::vector<Buffer> freed;
  std::lock_guard<std::mutex> lock(mu_);
  freed.swap(idle_);
}

}  // namespace nlccl::core
