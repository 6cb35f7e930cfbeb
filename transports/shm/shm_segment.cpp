#include "transports/shm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <new>

#include "util/futex.hpp"
#include "util/log.hpp"

namespace nlccl::transport::shm {

namespace {

constexpr size_t kPage = 4096;

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

size_t ctrlStrideFor(uint32_t slots) {
  return roundUp(sizeof(RingControl) + size_t{slots} * sizeof(SlotHeader), kCacheLine);
}

// Header, then one control block per source, then the payloads (page aligned, so large copies
// start on page boundaries).
size_t payloadOffsetFor(int nranks, uint32_t slots) {
  size_t rings = nranks > 1 ? static_cast<size_t>(nranks - 1) : 0;
  return roundUp(sizeof(SegmentHeader) + rings * ctrlStrideFor(slots), kPage);
}

size_t llOffsetFor(int nranks, uint32_t slots, uint64_t slotBytes) {
  size_t rings = nranks > 1 ? static_cast<size_t>(nranks - 1) : 0;
  return payloadOffsetFor(nranks, slots) + rings * slots * slotBytes;
}

}  // namespace

size_t Segment::sizeFor(int nranks, uint32_t slots, uint64_t slotBytes, uint32_t llLines) {
  size_t rings = nranks > 1 ? static_cast<size_t>(nranks - 1) : 0;
  return llOffsetFor(nranks, slots, slotBytes) + rings * size_t{llLines} * kCacheLine;
}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    unmap();
    base_ = o.base_;
    size_ = o.size_;
    owned_ = o.owned_;
    where_ = o.where_;
    nranks_ = o.nranks_;
    owner_ = o.owner_;
    ctrlStride_ = o.ctrlStride_;
    payloadOffset_ = o.payloadOffset_;
    llOffset_ = o.llOffset_;
    llStride_ = o.llStride_;
    llLines_ = o.llLines_;
    o.base_ = nullptr;
    o.size_ = 0;
    o.owned_ = false;
  }
  return *this;
}

void Segment::unmap() {
  if (base_ && owned_) shmem::memFree(base_);
  else if (base_) munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
  owned_ = false;
}

Status Segment::create(int nranks, int owner, uint32_t slots, uint64_t slotBytes,
                       uint32_t llLines, Segment* out) {
  const size_t size = sizeFor(nranks, slots, slotBytes, llLines);
  void* p = nullptr;
  if (shmem::memAlloc(size, &p, true) != Status::Success) {
    WARN("shm: rank %d: cannot allocate its %zu-byte segment", owner, size);
    return Status::SystemError;
  }
  Segment s;
  s.base_ = static_cast<char*>(p);
  s.owned_ = true;
  if (!shmem::findAllocation(p, size, &s.where_)) return Status::InternalError;
  s.size_ = s.where_.size;  // page granular
  auto* h = new (p) SegmentHeader();
  h->magic = 0;  // published last
  h->nranks = static_cast<uint32_t>(nranks);
  h->owner = static_cast<uint32_t>(owner);
  h->slots = slots;
  h->slotBytes = slotBytes;
  h->llLines = llLines;
  h->totalBytes = size;
  h->epoch.store(0);
  h->sleepers.store(0);
  h->mapped.store(0);
  h->aborted.store(0);
  s.nranks_ = nranks;
  s.owner_ = owner;
  s.ctrlStride_ = ctrlStrideFor(slots);
  s.payloadOffset_ = payloadOffsetFor(nranks, slots);
  s.llOffset_ = llOffsetFor(nranks, slots, slotBytes);
  s.llStride_ = size_t{llLines} * kCacheLine;
  s.llLines_ = llLines;
  for (int src = 0; src < nranks; ++src) {
    if (src == owner) continue;
    RingControl* rc2 = new (s.ring(src)) RingControl();
    rc2->head.store(0);
    rc2->tail.store(0);
    rc2->acked.store(0);
    rc2->llTail.store(0);
    rc2->llSenderWaits.store(0);
    for (uint32_t i = 0; i < llLines; ++i) new (s.llLine(src, i)) LLLine();  // flags 0: empty
  }
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegmentMagic;
  *out = std::move(s);
  return Status::Success;
}

Status Segment::open(int pid, const shmem::AllocationRef& where, int nranks, int owner,
                     Segment* out) {
  if (where.size < sizeof(SegmentHeader)) {
    WARN("shm: rank %d's segment is truncated (%" PRIu64 " bytes)", owner, where.size);
    return Status::SystemError;
  }
  shmem::RemoteMapping map;
  NLCHECK(shmem::RemoteMapping::open(pid, where.fd, where.id, where.size, &map, true));
  Segment s;
  s.base_ = map.writableData();
  s.size_ = map.size();
  map.release();  // the Segment unmaps it from now on
  auto* h = s.header();
  std::atomic_thread_fence(std::memory_order_acquire);
  const size_t want = sizeFor(nranks, h->slots, h->slotBytes, h->llLines);
  if (h->magic != kSegmentMagic || h->nranks != static_cast<uint32_t>(nranks) ||
      h->owner != static_cast<uint32_t>(owner) || h->slots < 2 || h->slotBytes == 0 ||
      h->llLines < 2 || (h->llLines & (h->llLines - 1)) != 0 ||
      h->totalBytes != want || want > s.size_) {
    WARN("shm: the segment of process %d does not look like rank %d's of %d ranks", pid, owner,
         nranks);
    return Status::InternalError;
  }
  s.nranks_ = nranks;
  s.owner_ = owner;
  s.ctrlStride_ = ctrlStrideFor(h->slots);
  s.payloadOffset_ = payloadOffsetFor(nranks, h->slots);
  s.llOffset_ = llOffsetFor(nranks, h->slots, h->slotBytes);
  s.llStride_ = size_t{h->llLines} * kCacheLine;
  s.llLines_ = h->llLines;
  *out = std::move(s);
  return Status::Success;
}

RingControl* Segment::ring(int src) const {
  return reinterpret_cast<RingControl*>(base_ + sizeof(SegmentHeader) +
                                        ringIndex(src) * ctrlStride_);
}

SlotHeader* Segment::slotHeader(int src, uint64_t index) const {
  auto* first =
      reinterpret_cast<SlotHeader*>(reinterpret_cast<char*>(ring(src)) + sizeof(RingControl));
  return first + index % slots();
}

char* Segment::slotPayload(int src, uint64_t index) const {
  size_t perRing = size_t{slots()} * slotBytes();
  return base_ + payloadOffset_ + ringIndex(src) * perRing + (index % slots()) * slotBytes();
}

void Segment::ringDoorbell() const {
  SegmentHeader* h = header();
  h->epoch.fetch_add(1);  // seq_cst: pairs with the waiter's sleepers increment (Dekker)
  if (h->sleepers.load() > 0) futexWakeAll(&h->epoch, true);
}

}  // namespace nlccl::transport::shm
