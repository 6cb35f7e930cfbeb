// ShmTransport's single-copy path (see shm.hpp): the receiving side of a direct message (map the
// sender's allocation, copy or reduce from it, ack) and the sending side's ack reaping.
#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "kernels/stream_store.hpp"
#include "transports/shm/shm.hpp"
#include "util/log.hpp"
#include "util/process.hpp"

namespace nlccl::transport {

namespace shm {
SingleCopyCounters& singleCopyCounters() {
  static SingleCopyCounters c;
  return c;
}

}  // namespace shm

namespace {

// How long a descriptor may wait at the head of a FIFO, with no receive for it, before its data
// is copied out to the unexpected queue (and the sender released). Long enough that a receiver
// merely busy with an earlier step does not pay the extra copy, short enough that a sender that
// waits for the send before sending more is not stuck for long.
constexpr auto kDirectGrace = std::chrono::milliseconds(100);
constexpr int kDirectGraceCalls = 3;  // and seen by this many drains (not one late look)
constexpr size_t kMaxMapsPerPeer = 16;

void complete(Request* req, Status s) {
  req->status = s;
  req->done.store(true, std::memory_order_release);
}

}  // namespace

Status ShmTransport::mapDirect(int src, const shm::AllocRange& at, uint64_t bytes, bool writable,
                               char** data) {
  Peer& p = peers_[static_cast<size_t>(src)];
  auto it = p.maps.find(at.allocId);
  if (it == p.maps.end() || it->second.map.size() != at.allocSize ||
      (writable && !it->second.writable)) {
    if (it == p.maps.end() && p.maps.size() >= kMaxMapsPerPeer) {
      // Allocation ids never repeat, so old entries may be of freed buffers: drop the coldest.
      auto cold = std::min_element(p.maps.begin(), p.maps.end(), [](const auto& a, const auto& b) {
        return a.second.lastUse < b.second.lastUse;
      });
      p.maps.erase(cold);
    }
    shmem::RemoteMapping m;
    Status s = shmem::RemoteMapping::open(p.pid, at.fd, at.allocId, at.allocSize, &m, writable);
    if (s != Status::Success) {
      if (processDead(p.pid, p.startTime)) {
        WARN("shm: rank %d: peer rank %d died before its single-copy send was read", rank_, src);
        return Status::RemoteError;
      }
      return s;
    }
    INFO(log::kShm, "shm: rank %d: mapped rank %d's allocation %016" PRIx64 " (%" PRIu64 " bytes%s)",
         rank_, src, at.allocId, at.allocSize, writable ? ", writable" : "");
    it = p.maps.insert_or_assign(at.allocId, Mapped{std::move(m), 0, writable}).first;
  }
  it->second.lastUse = ++p.mapClock;
  it->second.map.populate(at.offset, bytes);
  *data = it->second.map.writableData() + at.offset;
  return Status::Success;
}

Status ShmTransport::splitDeliver(int src, const shm::DirectDescriptor& d, uint64_t bytes,
                                  const RecvOp& r) {
  // The target first: mapping it writable may replace a read-only mapping of the same
  // allocation (the peer's send and target may lie in one), which `data` would use.
  char* theirs = nullptr;
  char* data = nullptr;
  NLCHECK(mapDirect(src, d.target, bytes, true, &theirs));
  NLCHECK(mapDirect(src, d.data, bytes, false, &data));
  // Halves on a boundary both ranks compute alike: whole elements, and whole cache lines where
  // the element size divides one.
  const Reducer& red = r.reducer;
  const size_t es = red.elemSize;
  const size_t unit = 64 % es == 0 ? 64 : es;
  const size_t mid = bytes / 2 / unit * unit;
  const size_t lo = rank_ < src ? 0 : mid, hi = rank_ < src ? mid : bytes;
  if (red.streamed) {
    // Buffers larger than this rank's share of the cache: each block is computed in L1 and
    // streamed to both outputs, which then take no room the inputs need.
    kernels::streamReduce3(red.fn3, es, r.buf + lo, static_cast<const char*>(red.src) + lo,
                           data + lo, (hi - lo) / es, theirs + lo);
  } else {
    // Reduce a piece that stays in the first-level cache, then copy it out to the peer: nearly
    // one sweep that writes two destinations. Plain stores: the copy reads the piece back.
    constexpr size_t kPiece = 2048;
    for (size_t off = lo; off < hi; off += kPiece) {
      const size_t n = std::min(kPiece, hi - off);
      red.apply(r.buf, off, data + off, n);
      std::memcpy(theirs + off, r.buf + off, n);
    }
  }
  auto& counters = shm::singleCopyCounters();
  counters.split.fetch_add(1, std::memory_order_relaxed);
  counters.bytes.fetch_add(hi - lo, std::memory_order_relaxed);
  return Status::Success;
}

Status ShmTransport::drainDirect(int src, const shm::SlotHeader& h, const char* payload,
                                 uint64_t tail, uint64_t head, bool* consumed) {
  *consumed = false;
  Peer& p = peers_[static_cast<size_t>(src)];
  shm::RingControl* rc = own_.ring(src);
  shm::DirectDescriptor d;
  std::memcpy(&d, payload, sizeof d);  // copy: the peer owns the memory
  auto holds = [&](const shm::AllocRange& a) {
    return a.offset <= a.allocSize && h.total <= a.allocSize - a.offset && a.fd >= 0;
  };
  const bool split = d.flags == shm::kDirectSplit;
  if (h.offset != 0 || h.bytes != h.total || d.magic != shm::kDirectMagic || !holds(d.data) ||
      (d.flags != 0 && !split) || (split && !holds(d.target))) {
    WARN("shm: rank %d: corrupt single-copy descriptor from rank %d (tag 0x%" PRIx64
         ", %" PRIu64 " bytes at offset %" PRIu64 " of %" PRIu64 ", flags %" PRIu64 ")",
         rank_, src, h.tag, h.total, d.data.offset, d.data.allocSize, d.flags);
    return Status::InternalError;
  }
  // A sender that died or aborted never saw its send complete (no ack yet), and after an abort
  // its buffer may be reused: do not read it.
  if (p.gone != Gone::No) {
    WARN("shm: rank %d: peer rank %d %s with a single-copy send not yet read", rank_, src,
         p.gone == Gone::Died ? "died" : "aborted");
    return Status::RemoteError;
  }
  auto ack = [&] {
    rc->acked.store(rc->acked.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    p.stallIndex = ~uint64_t{0};
    *consumed = true;
  };
  auto& counters = shm::singleCopyCounters();
  RecvOp r{};
  bool mismatch = false;
  if (takePosted(p, src, h.tag, h.total, &r, &mismatch)) {
    if (!mismatch) {
      Status s = Status::Success;
      if (split && r.split) {
        s = splitDeliver(src, d, h.total, r);
      } else {
        char* data = nullptr;
        s = mapDirect(src, d.data, h.total, false, &data);
        if (s == Status::Success) {
          deliver(r, 0, data, h.total);  // the one copy (or the reduction) of this message
          counters.received.fetch_add(1, std::memory_order_relaxed);
          counters.bytes.fetch_add(h.total, std::memory_order_relaxed);
        }
      }
      if (s != Status::Success) {
        complete(r.req, s);
        return s;
      }
      complete(r.req, Status::Success);
    }
    ack();
    return Status::Success;
  }
  // No receive for it yet. Normally it waits at the head (the sender holds its buffer meanwhile).
  // An offered split always does (see DirectDescriptor): its receive is the next one the pair
  // posts from this peer.
  if (split) return Status::Success;
  bool move = false;
  if (!p.posted.empty()) {  // a posted receive may be waiting for what is behind it
    if (head - tail == 1) head = rc->head.load(std::memory_order_acquire);
    move = head - tail > 1 || llReady(src);  // later messages may be in the LL FIFO
  }
  if (!move) {
    auto now = std::chrono::steady_clock::now();
    if (p.stallIndex != tail) {
      p.stallIndex = tail;
      p.stallSince = now;
      p.stallSeen = 0;
    }
    move = ++p.stallSeen >= kDirectGraceCalls && now - p.stallSince >= kDirectGrace;
    if (!move) return Status::Success;
  }
  char* data = nullptr;
  NLCHECK(mapDirect(src, d.data, h.total, false, &data));
  std::unique_ptr<char[]> copy(new char[h.total + 1]);
  std::memcpy(copy.get(), data, h.total);
  p.unexpected.push_back(Unexpected{h.tag, h.total, h.total, true, std::move(copy)});
  counters.unexpected.fetch_add(1, std::memory_order_relaxed);
  ack();
  return Status::Success;
}

void ShmTransport::reapAcks(int dst) {
  Peer& p = peers_[static_cast<size_t>(dst)];
  if (p.inflight.empty()) return;
  uint64_t acked = p.seg.ring(rank_)->acked.load(std::memory_order_acquire);
  while (!p.inflight.empty() && p.inflight.front().seq <= acked) {
    complete(p.inflight.front().req, Status::Success);
    p.inflight.pop_front();
  }
}

}  // namespace nlccl::transport
