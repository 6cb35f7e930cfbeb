// ShmTransport's single-copy path (see shm.hpp): the receiving side of a direct message (map the
// sender's allocation, copy or reduce from it, ack) and the sending side's ack reaping.
#include <algorithm>
#include <cinttypes>
#include <cstring>

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

Status ShmTransport::mapDirect(int src, const shm::DirectDescriptor& d, uint64_t bytes,
                               const char** data) {
  Peer& p = peers_[static_cast<size_t>(src)];
  auto it = p.maps.find(d.allocId);
  if (it == p.maps.end() || it->second.map.size() != d.allocSize) {
    if (it == p.maps.end() && p.maps.size() >= kMaxMapsPerPeer) {
      // Allocation ids never repeat, so old entries may be of freed buffers: drop the coldest.
      auto cold = std::min_element(p.maps.begin(), p.maps.end(), [](const auto& a, const auto& b) {
        return a.second.lastUse < b.second.lastUse;
      });
      p.maps.erase(cold);
    }
    shmem::RemoteMapping m;
    Status s = shmem::RemoteMapping::open(p.pid, d.fd, d.allocId, d.allocSize, &m);
    if (s != Status::Success) {
      if (processDead(p.pid, p.startTime)) {
        WARN("shm: rank %d: peer rank %d died before its single-copy send was read", rank_, src);
        return Status::RemoteError;
      }
      return s;
    }
    INFO(log::kShm, "shm: rank %d: mapped rank %d's allocation %016" PRIx64 " (%" PRIu64 " bytes)",
         rank_, src, d.allocId, d.allocSize);
    it = p.maps.insert_or_assign(d.allocId, Mapped{std::move(m), 0}).first;
  }
  it->second.lastUse = ++p.mapClock;
  it->second.map.populate(d.offset, bytes);
  *data = it->second.map.data() + d.offset;
  return Status::Success;
}

Status ShmTransport::drainDirect(int src, const shm::SlotHeader& h, const char* payload,
                                 uint64_t tail, uint64_t head, bool* consumed) {
  *consumed = false;
  Peer& p = peers_[static_cast<size_t>(src)];
  shm::RingControl* rc = own_.ring(src);
  shm::DirectDescriptor d;
  std::memcpy(&d, payload, sizeof d);  // copy: the peer owns the memory
  if (h.offset != 0 || h.bytes != h.total || d.magic != shm::kDirectMagic ||
      d.offset > d.allocSize || h.total > d.allocSize - d.offset || d.fd < 0) {
    WARN("shm: rank %d: corrupt single-copy descriptor from rank %d (tag 0x%" PRIx64
         ", %" PRIu64 " bytes at offset %" PRIu64 " of %" PRIu64 ")",
         rank_, src, h.tag, h.total, d.offset, d.allocSize);
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
      const char* data = nullptr;
      Status s = mapDirect(src, d, h.total, &data);
      if (s != Status::Success) {
        complete(r.req, s);
        return s;
      }
      deliver(r, 0, data, h.total);  // the one copy (or the reduction) of this message
      counters.received.fetch_add(1, std::memory_order_relaxed);
      counters.bytes.fetch_add(h.total, std::memory_order_relaxed);
      complete(r.req, Status::Success);
    }
    ack();
    return Status::Success;
  }
  // No receive for it yet. Normally it waits at the head (the sender holds its buffer meanwhile).
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
  const char* data = nullptr;
  NLCHECK(mapDirect(src, d, h.total, &data));
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
