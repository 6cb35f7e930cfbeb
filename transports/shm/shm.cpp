#include "transports/shm/shm.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "kernels/reduce.hpp"
#include "util/futex.hpp"
#include "util/log.hpp"
#include "util/process.hpp"
#include "util/small_copy.hpp"

namespace nlccl::transport {

namespace {

constexpr auto kCheckInterval = std::chrono::milliseconds(50);

void complete(Request* req, Status s) {
  req->status = s;
  req->done.store(true, std::memory_order_release);
}

}  // namespace

ShmTransport::~ShmTransport() {
  std::lock_guard<std::mutex> lock(mu_);
  if (log::enabled(log::Level::Info, log::kShm)) {
    const auto& c = shm::singleCopyCounters();  // of the process: every communicator's
    INFO(log::kShm,
         "shm: rank %d: single copy so far: %llu sent, %llu read in place and %llu split "
         "(%llu bytes), %llu copied out unexpected",
         rank_, static_cast<unsigned long long>(c.sent.load()),
         static_cast<unsigned long long>(c.received.load()),
         static_cast<unsigned long long>(c.split.load()),
         static_cast<unsigned long long>(c.bytes.load()),
         static_cast<unsigned long long>(c.unexpected.load()));
  }
  peers_.clear();  // unmaps
  own_.unmap();
}

void ShmTransport::deliver(const RecvOp& r, size_t offset, const char* src, size_t bytes) {
  if (bytes == 0) return;
  if (r.reduce)
    r.reducer.apply(r.buf, offset, src, bytes);
  else if (bytes <= 64)
    copySmall(r.buf + offset, src, bytes);  // LL messages of a line or two: no call
  else if (r.req->streamed)
    kernels::streamCopy(r.buf + offset, src, bytes);
  else
    std::memcpy(r.buf + offset, src, bytes);
}

Status ShmTransport::postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) {
  std::lock_guard<std::mutex> lock(mu_);
  return sendLocked(peer, tag, buf, bytes, req);
}

Status ShmTransport::postRecv(int peer, uint64_t tag, void* buf, size_t bytes,
                              const Reducer* reducer, Request* req) {
  std::lock_guard<std::mutex> lock(mu_);
  return recvLocked(peer, tag, buf, bytes, reducer, req);
}

Status ShmTransport::exchange(int peer, uint64_t tag, const void* send, size_t sendBytes,
                              bool sendReadOnly, void* recv, size_t recvBytes,
                              const Reducer* reducer, std::chrono::milliseconds timeout) {
  Request sent, received;  // they live here: every way out below leaves neither posted
  sent.readOnlySource = sendReadOnly;
  Status s = Status::Success;
  uint64_t at = 0;     // where the awaited LL record starts, when watched
  bool watch = false;  // the record is not there yet: wait for it before posting the receive
  const bool sends = send != nullptr || sendBytes != 0;  // else a step of one receive
  const bool receives = recv != nullptr || recvBytes != 0;  // else of one send
  if (!sends) complete(&sent, Status::Success);
  if (!receives) complete(&received, Status::Success);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sends) s = sendLocked(peer, tag, send, sendBytes, &sent);
    if (s == Status::Success && receives && peer != rank_) {
      const Peer& p = peers_[static_cast<size_t>(peer)];
      // Nothing else pending from the peer: the record is next in its LL FIFO (if it comes by LL).
      // With a core each, watch that one line for a while instead of posting and polling.
      watch = yieldEvery_ > 1 && recvBytes <= llMax(p) && p.unexpected.empty() &&
              p.posted.empty() && p.cur == Target::None && p.gone == Gone::No &&
              !llWholeAt(peer, p.llTail);
      at = p.llTail;
    }
    if (watch) {
      // One line, the lock kept (one acquisition per exchange; another thread using this
      // transport waits at most kSpinBeforeYield): the reply is taken a few loads after it
      // lands (most exchanges). Ends at kSpinBeforeYield, or at other activity (a slot message
      // from the peer), or when the record is there; then the receive goes the usual way
      // (recvLocked takes a record at the head directly).
      const uint32_t epoch = activityEpoch();
      std::chrono::steady_clock::time_point end{};
      for (uint32_t i = 1; !llWholeAt(peer, at); ++i) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if ((i & 63) != 0) continue;
        if (activityEpoch() != epoch) break;
        const auto now = std::chrono::steady_clock::now();
        if (i == 64) end = now + kSpinBeforeYield;
        else if (now >= end) break;
      }
    }
    if (s == Status::Success && receives)
      s = recvLocked(peer, tag, recv, recvBytes, reducer, &received);
  }
  auto done = [&] {
    return sent.done.load(std::memory_order_acquire) &&
           received.done.load(std::memory_order_acquire);
  };
  // As Runner::run waits (engine.cpp): the first wait reads no clock, the timeout starts there.
  bool waited = false;
  std::chrono::steady_clock::time_point deadline{};
  while (s == Status::Success && !done()) {
    const uint32_t epoch = activityEpoch();
    s = progress();
    if (s != Status::Success || done()) break;
    if (!waited) {
      waited = true;
      waitActivity(epoch, std::min<std::chrono::nanoseconds>(timeout, std::chrono::milliseconds(1)));
      deadline = std::chrono::steady_clock::now() + timeout;
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      WARN("rank %d: no progress for %lld ms, waiting on peer %d", rank_,
           static_cast<long long>(timeout.count()), peer);
      s = Status::Timeout;
      break;
    }
    waitActivity(epoch, std::min<std::chrono::nanoseconds>(deadline - now,
                                                           std::chrono::milliseconds(100)));
  }
  if (s == Status::Success) s = sent.status != Status::Success ? sent.status : received.status;
  if (s != Status::Success) abort(s);  // completes (and forgets) whatever still points here
  return s;
}

Status ShmTransport::sendLocked(int peer, uint64_t tag, const void* buf, size_t bytes,
                                Request* req) {
  if (failed_ != Status::Success) {
    complete(req, failed_);
    return failed_;
  }
  if (peer < 0 || peer >= nranks_ || (bytes > 0 && !buf) || !serves(peer)) {
    WARN("shm: rank %d: invalid send (peer %d of %d%s, %zu bytes from %p)", rank_, peer, nranks_,
         peer >= 0 && peer < nranks_ && !serves(peer) ? ", not on this host" : "", bytes, buf);
    complete(req, Status::InvalidArgument);
    return Status::InvalidArgument;
  }
  SendOp op{tag, static_cast<const char*>(buf), bytes, 0, false, req, false, {}, false, {}};
  // Read in place by the peer from a smaller size when the sender will not write the buffer
  // during its collective: a line the peer has just read and the sender then rewrites costs a
  // cross-core transfer (an in-place 2-rank rd all-reduce of 16-64 KiB took 2-3x as long so).
  const uint64_t direct = req->readOnlySource ? singleCopyInputBytes_ : singleCopyBytes_;
  if (peer != rank_ && direct != 0 && bytes >= direct)
    op.direct = shmem::findAllocation(buf, bytes, &op.alloc);
  if (req->pairTarget != nullptr) {  // an exchange pair's send: split when both can (shm.hpp)
    op.split = op.direct && splitBytes_ != 0 && bytes >= splitBytes_ &&
               req->pairState == Request::Pair::None &&
               shmem::findAllocation(req->pairTarget, bytes, &op.target);
    req->pairState = op.split ? Request::Pair::Offered : Request::Pair::Refused;
  }
  if (peer == rank_) {
    selfSends_.push_back(op);
    matchSelf();
    return Status::Success;
  }
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.sends.empty() && p.gone == Gone::No && !op.direct && bytes <= llMax(p) && pumpLL(p, op)) {
    // The small-message fast path: straight into the peer's lines. Waking the peer if it sleeps
    // takes a fence that waits for those lines to leave this core (a cross-core round trip), so
    // a step's sends share one (releaseWakes).
    if (!req->holdWake) {
      p.seg.wakeIfSleeping();
    } else if (!p.wakeHeld) {
      p.wakeHeld = true;
      heldWakes_.push_back(peer);
    }
    complete(req, Status::Success);
    return Status::Success;
  }
  p.sends.push_back(op);
  if (p.gone != Gone::No) return Status::Success;  // progress() reports it
  Status s = pump(peer);                           // eager: copy into free slots right away
  if (s != Status::Success) failAll(s);
  return s;
}

Status ShmTransport::recvLocked(int peer, uint64_t tag, void* buf, size_t bytes,
                                const Reducer* reducer, Request* req) {
  if (failed_ != Status::Success) {
    complete(req, failed_);
    return failed_;
  }
  if (peer < 0 || peer >= nranks_ || (bytes > 0 && !buf) || !serves(peer) ||
      (reducer && (!reducer->fn || reducer->elemSize == 0 || bytes % reducer->elemSize != 0))) {
    WARN("shm: rank %d: invalid receive (peer %d of %d, %zu bytes into %p%s)", rank_, peer, nranks_,
         bytes, buf, reducer ? ", with reducer" : "");
    complete(req, Status::InvalidArgument);
    return Status::InvalidArgument;
  }
  RecvOp r{tag, static_cast<char*>(buf), bytes, reducer ? *reducer : Reducer{}, reducer != nullptr,
           req};
  if (Request* ps = req->pairSend; ps != nullptr && peer != rank_) {
    // Split only what the send offered; a send not yet posted must not offer any more.
    r.split = ps->pairState == Request::Pair::Offered && reducer != nullptr && reducer->src;
    if (ps->pairState == Request::Pair::None) ps->pairState = Request::Pair::Refused;
  }
  if (peer == rank_) {
    selfRecvs_.push_back(r);
    matchSelf();
    return Status::Success;
  }
  Peer& p = peers_[static_cast<size_t>(peer)];
  // Messages already moved out of the FIFO are older than anything still in it.
  auto it = std::find_if(p.unexpected.begin(), p.unexpected.end(),
                         [&](const Unexpected& u) { return u.tag == tag; });
  if (it == p.unexpected.end()) {
    Status s = Status::Success;
    if (p.posted.empty() && p.cur == Target::None && takeLLHead(peer, r, &s)) return s;
    if (s != Status::Success) {
      failAll(s);
      return s;
    }
    p.posted.push_back(r);
    s = drain(peer);  // the message may be waiting at the FIFO's head
    if (s != Status::Success) failAll(s);
    return s;
  }
  bool inProgress = !it->complete;  // then it is the back, and p.cur == Target::Unexpected
  if (it->total != bytes) {
    WARN("shm: rank %d: message size mismatch from rank %d (tag 0x%" PRIx64
         "): sender posted %zu bytes, receiver expects %zu",
         rank_, peer, tag, it->total, bytes);
    complete(req, Status::InvalidUsage);
    if (inProgress) p.cur = Target::Discard;
  } else {
    deliver(r, 0, it->data.get(), it->have);
    if (inProgress) {
      p.cur = Target::Recv;  // the rest goes straight from the slots into the buffer
      p.curRecv = r;
    } else {
      complete(req, Status::Success);
    }
  }
  p.unexpected.erase(it);
  return Status::Success;
}

void ShmTransport::matchSelf() {
  while (true) {
    bool matched = false;
    for (auto s = selfSends_.begin(); s != selfSends_.end() && !matched; ++s)
      for (auto r = selfRecvs_.begin(); r != selfRecvs_.end(); ++r) {
        if (r->tag != s->tag) continue;
        Status st = Status::Success;
        if (r->bytes != s->bytes) {
          WARN("shm: rank %d: message size mismatch to itself: sent %zu bytes, expected %zu", rank_,
               s->bytes, r->bytes);
          st = Status::InvalidUsage;
        } else if (r->buf != s->buf) {
          deliver(*r, 0, s->buf, s->bytes);
        }
        complete(s->req, st);
        complete(r->req, st);
        selfSends_.erase(s);
        selfRecvs_.erase(r);
        matched = true;
        break;
      }
    if (!matched) return;
  }
}

Status ShmTransport::pump(int dst) {
  Peer& p = peers_[static_cast<size_t>(dst)];
  if (p.sends.empty()) return Status::Success;
  // LL records ring the receiver only if it sleeps: once, when this pump stops.
  struct WakeOnce {
    const shm::Segment& seg;
    bool wrote = false;
    ~WakeOnce() {
      if (wrote) seg.wakeIfSleeping();
    }
  } ll{p.seg};
  const uint64_t llLimit = llMax(p);
  const shm::Segment& seg = p.seg;
  shm::RingControl* rc = seg.ring(rank_);
  const uint64_t slots = seg.slots(), slotBytes = seg.slotBytes();
  uint64_t head = rc->head.load(std::memory_order_relaxed);  // only we write it
  // The receiver's tail as last read: it only grows, so a stale value only underestimates the
  // free slots, and it is reread only when the FIFO looks full (the line it sits on moves between
  // the cores on every read, and the receiver writes it for every fragment).
  uint64_t& tail = p.tailSeen;
  while (!p.sends.empty()) {
    SendOp& op = p.sends.front();
    if (!op.direct && op.bytes <= llLimit) {
      if (!pumpLL(p, op)) return Status::Success;  // full: the receiver rings us on free
      ll.wrote = true;
      complete(op.req, Status::Success);  // eager: the data is in the peer's lines
      p.sends.pop_front();
      continue;
    }
    if (op.direct) {  // one slot with the descriptor; completes on the receiver's ack
      if (head - tail >= slots) {
        tail = rc->tail.load(std::memory_order_acquire);
        if (head - tail >= slots) return Status::Success;
      }
      shm::SlotHeader* h = seg.slotHeader(rank_, head);
      *h = shm::SlotHeader{op.tag, op.bytes, 0, op.bytes, shm::kSlotDirect, p.sendSeq++, 0};
      auto range = [](const shmem::AllocationRef& a) {
        return shm::AllocRange{a.id, a.size, a.offset, a.fd, 0};
      };
      shm::DirectDescriptor d{shm::kDirectMagic, range(op.alloc), op.split ? shm::kDirectSplit : 0,
                              op.split ? range(op.target) : shm::AllocRange{}};
      std::memcpy(seg.slotPayload(rank_, head), &d, sizeof d);
      ++head;
      rc->head.store(head, std::memory_order_release);
      seg.ringDoorbell();
      p.inflight.push_back(InFlight{++p.directPosted, op.req});
      shm::singleCopyCounters().sent.fetch_add(1, std::memory_order_relaxed);
      p.sends.pop_front();
      continue;
    }
    while (op.sent < op.bytes || !op.started) {
      if (head - tail >= slots) {
        tail = rc->tail.load(std::memory_order_acquire);
        if (head - tail >= slots) return Status::Success;  // full: the receiver rings us on free
      }
      size_t n = std::min<size_t>(slotBytes, op.bytes - op.sent);
      shm::SlotHeader* h = seg.slotHeader(rank_, head);
      h->tag = op.tag;
      h->total = op.bytes;
      h->offset = op.sent;
      h->bytes = n;
      h->flags = 0;
      h->seq = op.started ? p.sendSeq - 1 : p.sendSeq++;  // one number per message
      if (n) std::memcpy(seg.slotPayload(rank_, head), op.buf + op.sent, n);
      ++head;
      rc->head.store(head, std::memory_order_release);
      seg.ringDoorbell();
      op.sent += n;
      op.started = true;
    }
    complete(op.req, Status::Success);  // eager: the data is in the peer's slots
    p.sends.pop_front();
  }
  return Status::Success;
}

bool ShmTransport::takePosted(Peer& p, int src, uint64_t tag, uint64_t total, RecvOp* out,
                             bool* mismatch) {
  auto it = std::find_if(p.posted.begin(), p.posted.end(),
                         [&](const RecvOp& r) { return r.tag == tag; });
  if (it == p.posted.end()) return false;
  *out = *it;
  p.posted.erase(it);
  *mismatch = out->bytes != total;
  if (*mismatch) {
    WARN("shm: rank %d: message size mismatch from rank %d (tag 0x%" PRIx64
         "): sender posted %" PRIu64 " bytes, receiver expects %zu",
         rank_, src, tag, total, out->bytes);
    complete(out->req, Status::InvalidUsage);
  }
  return true;
}

Status ShmTransport::drain(int src) {
  // The two FIFOs take turns: each stops at a message whose number is not next.
  Peer& p = peers_[static_cast<size_t>(src)];
  while (true) {
    NLCHECK(drainSlots(src));
    bool moved = false;
    NLCHECK(drainLL(src, &moved));
    if (!moved || p.cur != Target::None) return Status::Success;
  }
}

Status ShmTransport::drainSlots(int src) {
  Peer& p = peers_[static_cast<size_t>(src)];
  shm::RingControl* rc = own_.ring(src);
  const uint64_t slotBytes = own_.slotBytes();
  uint64_t tail = rc->tail.load(std::memory_order_relaxed);  // only we write it
  uint64_t head = rc->head.load(std::memory_order_acquire);
  bool directWaits = false, seqWaits = false;
  while (tail != head) {
    const shm::SlotHeader h = *own_.slotHeader(src, tail);  // copy: the peer owns the memory
    const char* payload = own_.slotPayload(src, tail);
    if (p.cur == Target::None && h.seq != p.recvSeq) {  // an earlier one is in the LL FIFO
      seqWaits = true;
      break;
    }
    if (p.cur == Target::None && h.flags == shm::kSlotDirect) {
      bool consumed = false;
      NLCHECK(drainDirect(src, h, payload, tail, head, &consumed));
      if (!consumed) {
        directWaits = true;
        break;
      }
      ++p.recvSeq;
      ++tail;
      rc->tail.store(tail, std::memory_order_release);
      p.seg.ringDoorbell();  // the ack, and a free slot
      if (tail == head) head = rc->head.load(std::memory_order_acquire);
      continue;
    }
    bool sane = h.flags == 0 && h.bytes <= slotBytes && h.offset <= h.total &&
                h.bytes <= h.total - h.offset;
    if (p.cur == Target::None) {
      sane = sane && h.offset == 0;
      if (!sane) break;
      RecvOp r{};
      bool mismatch = false;
      if (takePosted(p, src, h.tag, h.total, &r, &mismatch)) {
        if (mismatch) {
          p.cur = Target::Discard;
        } else {
          p.cur = Target::Recv;
          p.curRecv = r;
        }
      } else {
        // No receive for it yet. It stays in its slot (the sender just waits for space) unless
        // a posted receive may be waiting behind it: then it moves out so the FIFO flows.
        if (p.posted.empty()) break;
        if (head - tail == 1) head = rc->head.load(std::memory_order_acquire);
        if (head - tail == 1 && !llReady(src)) break;  // nothing behind it yet
        p.unexpected.push_back(
            Unexpected{h.tag, h.total, 0, false, std::unique_ptr<char[]>(new char[h.total + 1])});
        p.cur = Target::Unexpected;
      }
      p.curTag = h.tag;
      p.curTotal = h.total;
      p.curNext = 0;
      ++p.recvSeq;
    } else if (!sane || h.offset != p.curNext || h.tag != p.curTag || h.total != p.curTotal) {
      sane = false;
      break;
    }
    switch (p.cur) {
      case Target::Recv:
        deliver(p.curRecv, h.offset, payload, h.bytes);
        break;
      case Target::Unexpected: {
        Unexpected& u = p.unexpected.back();
        if (h.bytes) std::memcpy(u.data.get() + h.offset, payload, h.bytes);
        u.have += h.bytes;
        break;
      }
      default:
        break;
    }
    p.curNext += h.bytes;
    ++tail;
    rc->tail.store(tail, std::memory_order_release);
    p.seg.ringDoorbell();  // the sender may be waiting for a free slot
    if (p.curNext == p.curTotal) {
      if (p.cur == Target::Recv)
        complete(p.curRecv.req, Status::Success);
      else if (p.cur == Target::Unexpected)
        p.unexpected.back().complete = true;
      p.cur = Target::None;
    }
    if (tail == head) head = rc->head.load(std::memory_order_acquire);
    continue;
  }
  if (tail != head && !directWaits && !seqWaits) {
    // Stopped early: either a message waits for its receive (fine) or the header was bad.
    const shm::SlotHeader h = *own_.slotHeader(src, tail);
    bool waiting = p.cur == Target::None && h.flags == 0 && h.offset == 0 &&
                   h.bytes <= slotBytes && h.bytes <= h.total;
    if (!waiting) {
      WARN("shm: rank %d: corrupt fragment from rank %d (tag 0x%" PRIx64 ", offset %" PRIu64
           ", %" PRIu64 " of %" PRIu64 " bytes)",
           rank_, src, h.tag, h.offset, h.bytes, h.total);
      return Status::InternalError;
    }
  }
  return Status::Success;
}

Status ShmTransport::checkPeers() {
  if (health_) {
    Status s = health_();
    if (s != Status::Success) {
      WARN("shm: rank %d: health check failed (%s)", rank_, statusName(s));
      return s;
    }
  }
  for (int p : served_) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    if (peer.gone != Gone::No || !peer.seg.valid()) continue;
    if (processDead(peer.pid, peer.startTime)) {
      INFO(log::kShm, "shm: rank %d: peer rank %d (pid %d) is gone", rank_, p,
           static_cast<int>(peer.pid));
      peer.gone = Gone::Died;
    }
  }
  return Status::Success;
}

// A peer that exited (or aborted) after its last send is no error: its data sits in our own
// segment. It is one as soon as something still needs that peer.
Status ShmTransport::checkGone(int p) {
  const Peer& peer = peers_[static_cast<size_t>(p)];
  if (peer.gone == Gone::No) return Status::Success;
  bool pending = !peer.sends.empty() || !peer.posted.empty() || !peer.inflight.empty() ||
                 peer.cur == Target::Recv || peer.cur == Target::Discard;
  if (!pending) return Status::Success;
  if (peer.gone == Gone::Died)
    WARN("shm: rank %d: peer rank %d (pid %d) died; failing all pending operations", rank_, p,
         static_cast<int>(peer.pid));
  else
    WARN("shm: rank %d: peer rank %d aborted (%s); failing all pending operations", rank_, p,
         statusName(static_cast<Status>(peer.seg.header()->aborted.load())));
  return Status::RemoteError;
}

Status ShmTransport::progress() {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_ != Status::Success) return failed_;
  Status s = Status::Success;
  // The clock is read every 64th call, or on the first after a wait that blocked (a busy rank
  // calls this more than once per microsecond; each read costs ~25 ns).
  if (checkSoon_.exchange(false, std::memory_order_relaxed) || (++progressCalls_ & 63) == 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= nextCheck_) {
      nextCheck_ = now + kCheckInterval;
      s = checkPeers();
    }
  }
  for (size_t i = 0; i < served_.size() && s == Status::Success; ++i) {
    const int p = served_[i];
    Peer& peer = peers_[static_cast<size_t>(p)];
    // The abort flag is checked on every call: it is one load and lets abort() act at once.
    if (peer.gone == Gone::No && peer.seg.header()->aborted.load() != 0) peer.gone = Gone::Aborted;
    s = drain(p);
    if (s == Status::Success && peer.gone == Gone::No) s = pump(p);
    if (s == Status::Success) reapAcks(p);  // a peer that acked, then died, did read our data
    if (s == Status::Success) s = checkGone(p);
  }
  if (s != Status::Success) failAll(s);
  return s;
}

// The doorbell's count plus llProgress(): LL records ring nothing, so a record arriving changes
// the epoch this way. Both terms only grow. (A count of the peers whose FIFO holds a record not
// looked at, as this was, went down when progress() looked at one after the caller read the
// epoch, and back up when the record the caller waits for arrived: the same value, so a wait
// that had not yet blocked missed it and slept until its timeout. Four ranks on two cores lost
// half a second per 20,000 8-byte all-reduces that way.)
uint32_t ShmTransport::activityEpoch() {
  return own_.header()->epoch.load(std::memory_order_acquire) + llProgress();
}

void ShmTransport::waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) {
  shm::SegmentHeader* h = own_.header();
  // Both read at the first clock read: most waits end sooner.
  std::chrono::steady_clock::time_point spinEnd{}, yieldFrom{};
  for (uint32_t i = 1;; ++i) {  // spin, yielding every yieldEvery_ checks (util/futex.hpp)
    if (activityEpoch() != seen) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & (yieldEvery_ - 1)) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (i == yieldEvery_) {
        spinEnd = now + std::min<std::chrono::nanoseconds>(timeout, kSpinBeforeBlock);
        // With a core each, the first kSpinBeforeYield is pure polling: a yield costs ~0.5 us
        // here, more than a small all-reduce, and the peer's answer waits for it to return.
        if (yieldEvery_ > 1) yieldFrom = now + kSpinBeforeYield;
      } else if (now >= spinEnd) {
        break;
      }
      if (now >= yieldFrom) sched_yield();
    }
  }
  checkSoon_.store(true, std::memory_order_relaxed);  // the next progress() checks the peers
  // Bounded so that the caller's progress() keeps checking the peers' liveness.
  timeout = std::min<std::chrono::nanoseconds>(timeout, kCheckInterval);
  h->sleepers.fetch_add(1);  // seq_cst: pairs with ringDoorbell and wakeIfSleeping
  const uint32_t e = h->epoch.load();
  if (e + llProgress() == seen) futexWait(&h->epoch, e, timeout, true);
  h->sleepers.fetch_sub(1);
}

void ShmTransport::failAll(Status why) {
  if (failed_ == Status::Success) failed_ = why;
  for (Peer& p : peers_) {
    for (SendOp& op : p.sends) complete(op.req, why);
    for (RecvOp& r : p.posted) complete(r.req, why);
    for (InFlight& f : p.inflight) complete(f.req, why);
    if (p.cur == Target::Recv) complete(p.curRecv.req, why);
    p.sends.clear();
    p.inflight.clear();
    p.posted.clear();
    p.unexpected.clear();
    p.cur = Target::None;
  }
  for (SendOp& op : selfSends_) complete(op.req, why);
  for (RecvOp& r : selfRecvs_) complete(r.req, why);
  selfSends_.clear();
  selfRecvs_.clear();
  if (own_.valid()) own_.ringDoorbell();  // wake our own waiters
}

void ShmTransport::abort(Status why) {
  if (why == Status::Success) why = Status::InternalError;
  std::lock_guard<std::mutex> lock(mu_);
  failAll(why);
  if (!own_.valid()) return;
  // Tell the peers, so they fail at once instead of waiting for their timeout.
  int expected = 0;
  own_.header()->aborted.compare_exchange_strong(expected, static_cast<int>(why));
  for (Peer& p : peers_)
    if (p.seg.valid()) p.seg.ringDoorbell();
}

void ShmTransport::releaseWakes() {
  std::lock_guard<std::mutex> lock(mu_);
  if (heldWakes_.empty()) return;
  // One fence for all (Segment::wakeIfSleeping's pairing with the receiver's sleepers count).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int peer : heldWakes_) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    p.wakeHeld = false;
    if (p.seg.sleeping()) p.seg.ringDoorbell();
  }
  heldWakes_.clear();
}

void ShmTransport::wake(int rank) {
  // Segments are mapped at create and unmapped only in the destructor: no lock needed.
  if (rank == rank_) {
    if (own_.valid()) own_.ringDoorbell();
  } else if (rank >= 0 && rank < nranks_ && peers_[rank].seg.valid()) {
    peers_[rank].seg.ringDoorbell();
  }
}

}  // namespace nlccl::transport
