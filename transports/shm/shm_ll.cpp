// ShmTransport's LL FIFO (see shm.hpp): writing a small message as one record of cache lines
// that carry their own flags, consuming records in the pair's message order, and telling waits
// about records that have arrived.
#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "transports/shm/shm.hpp"
#include "util/log.hpp"

namespace nlccl::transport {

namespace {

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
    std::memcpy(l->data, op.buf + off, k);
    off += k;
    l->flag.store(p.llHead + i + 1, std::memory_order_release);
  }
  shm::LLLine* l = seg.llLine(rank_, p.llHead);
  const shm::LLHead h{op.tag, p.sendSeq++, static_cast<uint32_t>(op.bytes)};
  std::memcpy(l->data, &h, sizeof h);
  if (op.bytes) std::memcpy(l->data + sizeof h, op.buf, std::min<size_t>(op.bytes, shm::kLLFirst));
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

Status ShmTransport::drainLL(int src, bool* moved) {
  Peer& p = peers_[static_cast<size_t>(src)];
  shm::RingControl* rc = own_.ring(src);
  const uint64_t lines = own_.llLines();
  bool freed = false;
  uint64_t look = p.llTail;  // where a waiter watches for news: past what we have looked at
  while (true) {
    const uint64_t t = p.llTail;
    look = t;
    const shm::LLLine* l0 = own_.llLine(src, t);
    if (l0->flag.load(std::memory_order_acquire) != t + 1) break;
    shm::LLHead h;
    std::memcpy(&h, l0->data, sizeof h);  // copy: the peer owns the memory
    const uint64_t n = shm::llLinesFor(h.bytes);
    if (h.bytes > shm::kLLMaxBytes || n > lines / 2) {
      WARN("shm: rank %d: corrupt LL record from rank %d (tag 0x%" PRIx64 ", %" PRIu32 " bytes)",
           rank_, src, h.tag, h.bytes);
      return Status::InternalError;
    }
    bool whole = true;  // the sender writes the first line last, so this is nearly always so
    for (uint64_t i = 1; i < n && whole; ++i)  // in address order, as the prefetcher likes
      whole = own_.llLine(src, t + i)->flag.load(std::memory_order_acquire) == t + i + 1;
    if (!whole) break;
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
    const char* data = reinterpret_cast<const char*>(l0->data) + sizeof h;
    if (n > 1) {  // gather the lines' data into one run
      char* stage = llStage_.get();
      std::memcpy(stage, data, shm::kLLFirst);
      size_t off = shm::kLLFirst;
      for (uint64_t i = 1; i < n; ++i) {
        const size_t k = std::min<size_t>(shm::LLLine::kData, h.bytes - off);
        std::memcpy(stage + off, own_.llLine(src, t + i)->data, k);
        off += k;
      }
      data = stage;
    }
    if (!posted) {
      p.unexpected.push_back(
          Unexpected{h.tag, h.bytes, h.bytes, true, std::unique_ptr<char[]>(new char[h.bytes + 1])});
      if (h.bytes) std::memcpy(p.unexpected.back().data.get(), data, h.bytes);
    } else if (!mismatch) {
      deliver(r, 0, data, h.bytes);
      complete(r.req, Status::Success);
    }
    p.llTail = t + n;
    rc->llTail.store(p.llTail, std::memory_order_release);
    ++p.recvSeq;
    *moved = freed = true;
  }
  llLook_[static_cast<size_t>(src)].store(look, std::memory_order_relaxed);
  if (freed) {
    // Pairs with the sender's llSenderWaits store before its second look at llTail (Dekker).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (rc->llSenderWaits.load(std::memory_order_relaxed) != 0) {
      rc->llSenderWaits.store(0, std::memory_order_relaxed);
      p.seg.ringDoorbell();
    }
  }
  return Status::Success;
}

// Per peer: the line drainLL has looked up to, plus one if a whole record waits there. It never
// goes down (drain moves the look past a record of n >= 1 lines, so look + 1 becomes at least
// look + n), and it goes up whenever a record arrives. A count of the peers with news alone (what
// this was) dropped when drain looked at a record and rose again with the next one, so a wait
// whose `seen` was read before that progress() call took the new record for the old one: it
// spun out its 50 us, then slept until the 1 ms timeout (the sender had looked for sleepers
// before it slept). 4 ranks of ring broadcast, 8 B: dozens of such timeouts per 4,000 calls.
uint32_t ShmTransport::llNews() const {
  uint64_t n = 0;
  for (int p : served_) {
    const uint64_t look = llLook_[static_cast<size_t>(p)].load(std::memory_order_relaxed);
    n += look + (llWholeAt(p, look) ? 1 : 0);
  }
  return static_cast<uint32_t>(n);
}

}  // namespace nlccl::transport
