#include "core/resources.hpp"

namespace nlccl::core {

void* Resources::add(const Registration& r) {
  auto owned = std::make_unique<Registration>(r);
  void* handle = owned.get();
  std::lock_guard<std::mutex> lock(mu_);
  regions_.emplace(handle, std::move(owned));
  return handle;
}

bool Resources::remove(void* handle, bool window) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(handle);
  if (it == regions_.end() || it->second->window != window) return false;
  regions_.erase(it);
  return true;
}

std::optional<Registration> Resources::find(void* handle, bool window) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(handle);
  if (it == regions_.end() || it->second->window != window) return std::nullopt;
  return *it->second;
}

size_t Resources::registered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.size();
}

Status Resources::addOp(const PreMulSum& op, int* value) {
  std::lock_guard<std::mutex> lock(mu_);
  // The lowest free value, so that ranks creating operators in the same order agree on them.
  int v = kFirstOp;
  for (const auto& [used, unused] : ops_) {
    if (used != v) break;
    if (v == kMaxOp) return Status::InvalidUsage;
    ++v;
  }
  ops_.emplace(v, op);
  *value = v;
  return Status::Success;
}

bool Resources::removeOp(int value) {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_.erase(value) > 0;
}

std::optional<PreMulSum> Resources::op(int value) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ops_.find(value);
  if (it == ops_.end()) return std::nullopt;
  return it->second;
}

}  // namespace nlccl::core
