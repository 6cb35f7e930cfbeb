// Memory registration for providers whose mr_mode asks for it (FI_MR_LOCAL: every buffer given to
// a send or receive needs a descriptor; efa does, tcp and shm do not).
//
// The transport's own buffers (control messages, bounce chunks) are registered once ("pinned")
// and live as long as the cache. User buffers of rendezvous messages are registered on first use
// and kept in a small LRU cache of `capacity` entries, keyed by page range; an entry is only
// evicted when no posted operation uses it. With FI_MR_ENDPOINT each registration is bound to the
// endpoint and enabled; without FI_MR_PROV_KEY the transport picks unique keys. Registrations
// ask for FI_SEND | FI_RECV only: the transport does no RMA, so FI_MR_VIRT_ADDR and the keys never
// reach a peer.
//
// Caveat (as with any registration cache without a memory monitor): a cached range that the
// application frees and maps again at the same address keeps the old registration. Providers
// that pin pages (efa) would then move data from the old pages; NLCCL_OFI_MR_CACHE=0 registers
// per message instead (libfabric's own efa cache still applies, with its memory monitor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>

#include "util/status.hpp"

struct fid_domain;
struct fid_ep;
struct fid_mr;

namespace nlccl::transport::ofi {

class MrCache {
 public:
  /// One registration (a page range, or a pinned buffer of the transport's).
  struct Entry {
    uintptr_t base = 0;
    size_t len = 0;
    fid_mr* mr = nullptr;
    void* desc = nullptr;
    int refs = 0;
    bool pinned = false;
    uint64_t lastUse = 0;
  };

  /// `mrMode` is the provider's domain_attr->mr_mode. Nothing is registered unless it has
  /// FI_MR_LOCAL. `ep` is bound to each registration when mrMode has FI_MR_ENDPOINT.
  MrCache(fid_domain* domain, fid_ep* ep, uint64_t mrMode, size_t capacity);
  ~MrCache() { closeAll(); }
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  /// True when buffers need descriptors (FI_MR_LOCAL).
  bool needed() const { return needed_; }
  /// A descriptor for [buf, buf + len); *entry must be handed to release() once no operation
  /// uses it. Both are null when registration is not needed.
  Status acquire(const void* buf, size_t len, void** desc, Entry** entry);
  void release(Entry* entry);
  /// Registers memory the transport owns until closeAll (never evicted).
  Status pin(void* buf, size_t len, void** desc);
  /// Closes every registration (at destroy and abort, after the endpoint is closed).
  void closeAll();

  size_t entries() const { return entries_.size(); }

 private:
  Status registerRange(uintptr_t base, size_t len, Entry* e);
  void evict();

  fid_domain* domain_;
  fid_ep* ep_;
  bool needed_;
  bool bindEndpoint_;
  bool provKey_;
  size_t capacity_;
  uint64_t nextKey_ = 1;
  uint64_t clock_ = 0;
  std::list<Entry> entries_;
};

}  // namespace nlccl::transport::ofi
