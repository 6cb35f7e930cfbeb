#include "transports/ofi/ofi_mr_cache.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "util/log.hpp"

namespace nlccl::transport::ofi {

namespace {
constexpr uintptr_t kPage = 4096;
}

MrCache::MrCache(fid_domain* domain, fid_ep* ep, uint64_t mrMode, size_t capacity)
    : domain_(domain),
      ep_(ep),
      needed_((mrMode & FI_MR_LOCAL) != 0),
      bindEndpoint_((mrMode & FI_MR_ENDPOINT) != 0),
      provKey_((mrMode & FI_MR_PROV_KEY) != 0),
      capacity_(capacity) {}

Status MrCache::registerRange(uintptr_t base, size_t len, Entry* e) {
  // Keys must be unique per domain unless the provider picks them.
  uint64_t key = provKey_ ? 0 : nextKey_++;
  int rc = fi_mr_reg(domain_, reinterpret_cast<void*>(base), len, FI_SEND | FI_RECV, 0, key, 0,
                     &e->mr, nullptr);
  if (rc == 0 && bindEndpoint_) {
    rc = fi_mr_bind(e->mr, &ep_->fid, 0);
    if (rc == 0) rc = fi_mr_enable(e->mr);
  }
  if (rc != 0) {
    WARN("ofi: fi_mr_reg of %zu bytes at %p failed: %s", len, reinterpret_cast<void*>(base),
         fi_strerror(-rc));
    if (e->mr) fi_close(&e->mr->fid);
    e->mr = nullptr;
    return Status::SystemError;
  }
  e->base = base;
  e->len = len;
  e->desc = fi_mr_desc(e->mr);
  return Status::Success;
}

Status MrCache::acquire(const void* buf, size_t len, void** desc, Entry** entry) {
  *desc = nullptr;
  *entry = nullptr;
  if (!needed_) return Status::Success;
  uintptr_t start = reinterpret_cast<uintptr_t>(buf) & ~(kPage - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(buf) + (len ? len : 1) + kPage - 1) & ~(kPage - 1);
  ++clock_;
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->base <= start && it->base + it->len >= end) {
      it->lastUse = clock_;
      if (!it->pinned) ++it->refs;
      *desc = it->desc;
      *entry = it->pinned ? nullptr : &*it;
      return Status::Success;
    }
  entries_.emplace_back();
  Entry& e = entries_.back();
  Status s = registerRange(start, end - start, &e);
  if (s != Status::Success) {
    entries_.pop_back();
    return s;
  }
  e.refs = 1;
  e.lastUse = clock_;
  *desc = e.desc;
  *entry = &e;
  evict();
  return Status::Success;
}

void MrCache::release(Entry* entry) {
  if (!entry) return;
  if (entry->refs > 0) --entry->refs;
  evict();
}

// Drops least recently used unreferenced user registrations beyond the capacity (all of them
// with capacity 0: register per message).
void MrCache::evict() {
  size_t users = 0;
  for (const Entry& e : entries_) users += e.pinned ? 0 : 1;
  while (users > capacity_) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (!it->pinned && it->refs == 0 && (victim == entries_.end() || it->lastUse < victim->lastUse))
        victim = it;
    if (victim == entries_.end()) return;  // all in use: over capacity until they complete
    fi_close(&victim->mr->fid);
    entries_.erase(victim);
    --users;
  }
}

Status MrCache::pin(void* buf, size_t len, void** desc) {
  *desc = nullptr;
  if (!needed_) return Status::Success;
  entries_.emplace_front();
  Entry& e = entries_.front();
  Status s = registerRange(reinterpret_cast<uintptr_t>(buf), len, &e);
  if (s != Status::Success) {
    entries_.pop_front();
    return s;
  }
  e.pinned = true;
  *desc = e.desc;
  return Status::Success;
}

void MrCache::closeAll() {
  for (Entry& e : entries_)
    if (e.mr) fi_close(&e.mr->fid);
  entries_.clear();
}

}  // namespace nlccl::transport::ofi
