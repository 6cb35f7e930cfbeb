// ShmTransport's LL FIFO (see shm.hpp): writing a small message as one record of cache lines
// that carry their own flags, consuming records in the pair's message order, and telling waits
// about records that have arrived.
#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "transports/shm/shm.hpp"
#include "util/log.hpp"
#include "util/small_copy.hpp"

namespace nlccl::transport {

namespace {

static_assert(shm::LLLine::kData <= 64, "copySmall copies a line's data");

void complete(Request* req, Status s) {
  req->status = s;
  req->done.store(true, std::memory_order_release);
}

}  // namespace

bool ShmTransport::pumpLL(Peer& p, const SendOp& op) {
  const shm::Segment& seg = p.seg;
  const uint64_t lines = seg.llLines(), n = shm::llLinesFor(op.bytes);
  if (p.llHead + n - p.llTailSeen > lines) {  // looks full: reread the receiver's tail
    shm::RingControl* rc = seg.ring(rank_);
    p.llTailSeen = rc->llTail.load(std::memory_order_acquire);
    if (p.llHead + n - p.llTailSeen > lines) {
      // Say we wait, then look again: the receiver checks the flag after freeing (Dekker).
      rc->llSenderWaits.store(1);
      p.llTailSeen = rc->llTail.load();
      if (p.llHead + n - p.llTailSeen > lines) return false;
    }
  }
  // Data lines first, the head line last, so a receiver that sees the head line mostly finds
  // the whole record there.
  size_t off = std::min<size_t>(op.bytes, shm::kLLFirst);
  for (uint64_t i = 1; i < n; ++i) {
    shm::LLLine* l = seg.llLine(rank_, p.llHead + i);
    const size_t k = std::min<size_t>(shm::LLLine::kData, op.bytes - off);
    copySmall(l->data, op.buf + off, k);
    off += k;
    l->flag.store(p.llHead + i + 1, std::memory_order_release);
  }
  shm::LLLine* l = seg.llLine(rank_, p.llHead);
  const shm::LLHead h{op.tag, p.sendSeq++, static_cast<uint32_t>(op.bytes)};
  std::memcpy(l->data, &h, sizeof h);
  copySmall(l->data + sizeof h, op.buf, std::min<size_t>(op.bytes, shm::kLLFirst));
  l->flag.store(p.llHead + 1, std::memory_order_release);
  p.llHead += n;
  return true;
}

bool ShmTransport::llNew(int src) const {
  return llWholeAt(src, llLook_[static_cast<size_t>(src)].load(std::memory_order_relaxed));
}

bool ShmTransport::llWholeAt(int src, uint64_t t) const {
  const shm::LLLine* l = own_.llLine(src, t);
  if (l->flag.load(std::memory_order_acquire) != t + 1) return false;
  shm::LLHead h;
  std::memcpy(&h, l->data, sizeof h);
  const uint64_t last = t + shm::llLinesFor(std::min<uint64_t>(h.bytes, shm::kLLMaxBytes)) - 1;
  return own_.llLine(src, last)->flag.load(std::memory_order_acquire) == last + 1;
}

Status ShmTransport::llRecordAt(int src, uint64_t t, shm::LLHead* h, uint64_t* n) const {
  const shm::LLLine* l0 = own_.llLine(src, t);
  *n = 0;
  if (l0->flag.load(std::memory_order_acquire) != t + 1) return Status::Success;
  std::memcpy(h, l0->data, sizeof *h);  // copy: the peer owns the memory
  const uint64_t lines = shm::llLinesFor(h->bytes);
  if (h->bytes > shm::kLLMaxBytes || lines > own_.llLines() / 2) {
    WARN("shm: rank %d: corrupt LL record from rank %d (tag 0x%" PRIx64 ", %" PRIu32 " bytes)",
         rank_, src, h->tag, h->bytes);
    return Status::InternalError;
  }
  // The sender writes the first line last, so the others are nearly always there.
  for (uint64_t i = 1; i < lines; ++i)  // in address order, as the prefetcher likes
    if (own_.llLine(src, t + i)->flag.load(std::memory_order_acquire) != t + i + 1)
      return Status::Success;
  *n = lines;
  return Status::Success;
}

void ShmTransport::llConsume(int src, uint64_t t, uint64_t n, const shm::LLHead& h,
                             const RecvOp* r) {
  Peer& p = peers_[static_cast<size_t>(src)];
  const char* data = reinterpret_cast<const char*>(own_.llLine(src, t)->data) + sizeof h;
  if (n > 1) {  // gather the lines' data into one run
    char* stage = llStage_.get();
    std::memcpy(stage, data, shm::kLLFirst);
    size_t off = shm::kLLFirst;
    for (uint64_t i = 1; i < n; ++i) {
      const size_t k = std::min<size_t>(shm::LLLine::kData, h.bytes - off);
      copySmall(stage + off, own_.llLine(src, t + i)->data, k);
      off += k;
    }
    data = stage;
  }
  if (r == nullptr) {
    p.unexpected.push_back(
        Unexpected{h.tag, h.bytes, h.bytes, true, std::unique_ptr<char[]>(new char[h.bytes + 1])});
    if (h.bytes) std::memcpy(p.unexpected.back().data.get(), data, h.bytes);
  } else {
    deliver(*r, 0, data, h.bytes);
    complete(r->req, Status::Success);
  }
  p.llTail = t + n;
  own_.ring(src)->llTail.store(p.llTail, std::memory_order_release);
  ++p.recvSeq;
}

void ShmTransport::llFreed(int src) {
  // Pairs with the sender's llSenderWaits store before its second look at llTail (Dekker).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  shm::RingControl* rc = own_.ring(src);
  if (rc->llSenderWaits.load(std::memory_order_relaxed) != 0) {
    rc->llSenderWaits.store(0, std::memory_order_relaxed);
    peers_[static_cast<size_t>(src)].seg.ringDoorbell();
  }
}

bool ShmTransport::takeLLHead(int src, const RecvOp& r, Status* s) {
  Peer& p = peers_[static_cast<size_t>(src)];
  shm::LLHead h;
  uint64_t n = 0;
  const uint64_t t = p.llTail;
  *s = llRecordAt(src, t, &h, &n);
  // Anything but the very message wanted, next in the pair's order, goes the general way.
  if (*s != Status::Success || n == 0 || h.seq != p.recvSeq || h.tag != r.tag ||
      h.bytes != r.bytes)
    return false;
  llConsume(src, t, n, h, &r);
  // Never backwards: the activity epoch's LL term must only grow (llProgress).
  std::atomic<uint64_t>& look = llLook_[static_cast<size_t>(src)];
  look.store(std::max(look.load(std::memory_order_relaxed), t + n), std::memory_order_relaxed);
  llFreed(src);
  return true;
}

Status ShmTransport::drainLL(int src, bool* moved) {
  Peer& p = peers_[static_cast<size_t>(src)];
  shm::RingControl* rc = own_.ring(src);
  bool freed = false;
  uint64_t look = p.llTail;  // where a waiter watches for news: past what we have looked at
  while (true) {
    const uint64_t t = p.llTail;
    look = t;
    shm::LLHead h;
    uint64_t n = 0;
    NLCHECK(llRecordAt(src, t, &h, &n));
    if (n == 0) break;
    look = t + n;
    // An earlier message (in the slot FIFO) goes first, and so does one in progress there.
    if (p.cur != Target::None || h.seq != p.recvSeq) break;
    RecvOp r{};
    bool mismatch = false;
    const bool posted = takePosted(p, src, h.tag, h.bytes, &r, &mismatch);
    if (!posted) {
      // No receive for it yet: it stays in its lines unless a posted receive may be waiting for
      // what is behind it (as in drainSlots).
      if (p.posted.empty()) break;
      const bool behind =
          own_.llLine(src, t + n)->flag.load(std::memory_order_acquire) == t + n + 1 ||
          rc->head.load(std::memory_order_acquire) != rc->tail.load(std::memory_order_relaxed);
      if (!behind) break;
    }
    if (posted && mismatch) {  // completed with InvalidUsage: the record is dropped
      p.llTail = t + n;
      rc->llTail.store(p.llTail, std::memory_order_release);
      ++p.recvSeq;
    } else {
      llConsume(src, t, n, h, posted ? &r : nullptr);
    }
    *moved = freed = true;
  }
  llLook_[static_cast<size_t>(src)].store(look, std::memory_order_relaxed);
  if (freed) llFreed(src);
  return Status::Success;
}

uint32_t ShmTransport::llProgress() const {
  uint64_t n = 0;
  for (int p : served_) {
    const uint64_t look = llLook_[static_cast<size_t>(p)].load(std::memory_order_relaxed);
    n += look + (llWholeAt(p, look) ? 1 : 0);
  }
  return static_cast<uint32_t>(n);
}

}  // namespace nlccl::transport
