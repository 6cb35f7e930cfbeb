// OfiTransport: control sends with credits, rendezvous grants and data fragments (ofi.hpp).
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cstring>

#include "transports/ofi/ofi.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "util/log.hpp"

namespace nlccl::transport {

using ofi::CtrlHeader;
using ofi::MsgType;
using ofi::TagKind;

// An operation towards `peer` could not be posted: its endpoint is gone (the peer exited or
// died). That is an error once something still needs the peer (checkPeers).
void OfiTransport::markGone(int peer, const char* what, int rc) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (!p.gone) {
    INFO(log::kNet, "ofi: rank %d: %s to peer %d failed (%s); the peer is gone", rank_, what, peer,
         fi_strerror(-rc));
    p.gone = true;
    ++goneCount_;
  }
}

// Sends queued control messages while credits last; each returns the credits we owe.
Status OfiTransport::pumpCtrl(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.gone) return Status::Success;
  while (!p.outq.empty() && p.credits > 0 && txPosted_ < txCap_) {
    Outgoing& o = p.outq.front();
    Op* op = nullptr;
    NLCHECK(newCtrlSendOp(peer, &op));
    o.h.credits = static_cast<uint16_t>(std::min<uint32_t>(p.toReturn, 0xffff));
    std::memcpy(op->buf, &o.h, sizeof o.h);
    size_t len = sizeof o.h;
    if (o.h.type == MsgType::Eager && o.h.bytes) {
      std::memcpy(op->buf + len, o.payload, o.h.bytes);
      len += o.h.bytes;
    }
    op->bytes = len;
    op->critical = true;
    int rc = fi_tsend(fab_->ep, op->buf, len, op->desc, p.addr,
                      tags_.make(TagKind::Ctrl, rank_, 0), op->fiContext);
    if (rc != 0) {
      freeOp(op);
      if (rc == -FI_EAGAIN) break;  // progress() tries again
      markGone(peer, "a control send", rc);
      return Status::Success;
    }
    ++txPosted_;
    ++criticalTx_;
    p.toReturn -= o.h.credits;
    --p.credits;
    if (o.req) {  // Eager: completes with the provider's send
      op->req = o.req;
      eagerOps_.insert(op);
      ++p.eagerInFlight;
    }
    p.outq.pop_front();
  }
  if (p.pongOwed) NLCHECK(sendFree(peer, MsgType::Pong));
  // Credits owed and nothing to carry them: once half are owed, a Credit message (at most two
  // are ever in flight, since each carries at least half of all credits).
  if (p.creditPending || p.toReturn >= creditThreshold()) {
    p.creditPending = true;
    NLCHECK(sendFree(peer, MsgType::Credit));
  }
  return Status::Success;
}

// A control message that needs no credit; every one returns the credits owed. Credit, Pong:
// the pending flag is cleared once posted; Ping: pingOut is set.
Status OfiTransport::sendFree(int peer, MsgType type) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (type == MsgType::Credit && p.toReturn == 0) {
    p.creditPending = false;
    return Status::Success;
  }
  if (txPosted_ >= txCap_) return Status::Success;  // tried again from progress()
  Op* op = nullptr;
  NLCHECK(newCtrlSendOp(peer, &op));
  CtrlHeader h{};
  h.magic = ofi::kWireMagic;
  h.type = type;
  h.credits = static_cast<uint16_t>(std::min<uint32_t>(p.toReturn, 0xffff));
  std::memcpy(op->buf, &h, sizeof h);
  op->bytes = sizeof h;
  int rc = fi_tsend(fab_->ep, op->buf, sizeof h, op->desc, p.addr,
                    tags_.make(TagKind::Ctrl, rank_, 0), op->fiContext);
  if (rc != 0) {
    freeOp(op);
    if (rc != -FI_EAGAIN) markGone(peer, "a control send", rc);
    return Status::Success;
  }
  ++txPosted_;
  p.toReturn -= h.credits;
  if (h.credits) p.creditPending = false;
  if (type == MsgType::Pong) p.pongOwed = false;
  if (type == MsgType::Ping) {
    p.pingOut = true;
    p.pingTrying = false;
  }
  return Status::Success;
}

// Bounce chunks for reduce on arrival, allocated (and registered) on first need.
Status OfiTransport::takeBounce(char** chunk) {
  *chunk = nullptr;
  if (!bounceReady_) {
    bounceReady_ = true;
    slabs_.push_back(std::make_unique<char[]>(ofi::kBounceChunks * bounceBytes_));
    char* base = slabs_.back().get();
    NLCHECK(mr_->pin(base, ofi::kBounceChunks * bounceBytes_, &bounceDesc_));
    for (size_t i = 0; i < ofi::kBounceChunks; ++i) bounceFree_.push_back(base + i * bounceBytes_);
  }
  if (bounceFree_.empty()) return Status::Success;
  *chunk = bounceFree_.back();
  bounceFree_.pop_back();
  return Status::Success;
}

// Posts receives for the next fragments of `peer`'s matched rendezvous receives, as far as the
// window, the bounce chunks and the rx queue allow, and tells the sender with one Cts per
// receive. Fragments land in the destination, or in a bounce chunk when the receive reduces.
Status OfiTransport::grant(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  while (!p.granting.empty()) {
    RndvRecv& r = *p.granting.front();
    const size_t frag = r.r.reduce ? bounceBytes_ : fragBytes_;
    const size_t start = r.granted;
    const uint64_t firstId = p.nextDataId;
    bool stalled = false;
    while (r.granted < r.r.bytes) {
      if (r.granted - r.arrived >= grantWindow_ || rxPosted_ >= rxCap_) {
        stalled = true;
        break;
      }
      const size_t len = std::min(frag, r.r.bytes - r.granted);
      Op* op = newOp(OpKind::DataRecv, peer);
      op->recv = &r;
      op->offset = r.granted;
      op->bytes = len;
      if (r.r.reduce) {
        NLCHECK(takeBounce(&op->buf));
        if (!op->buf) {
          freeOp(op);
          stalled = true;
          break;
        }
        op->bounce = 1;
        op->desc = bounceDesc_;
      } else {
        op->buf = r.r.buf + r.granted;
        op->desc = r.desc;
      }
      int rc = fi_trecv(fab_->ep, op->buf, len, op->desc, FI_ADDR_UNSPEC,
                        tags_.make(TagKind::Data, peer, p.nextDataId), 0, op->fiContext);
      if (rc != 0) {
        if (op->bounce >= 0) bounceFree_.push_back(op->buf);
        freeOp(op);
        if (rc == -FI_EAGAIN) {
          stalled = true;
          break;
        }
        WARN("ofi: rank %d: posting a data receive from peer %d failed: %s", rank_, peer,
             fi_strerror(-rc));
        return Status::SystemError;
      }
      ++p.nextDataId;
      ++rxPosted_;
      r.granted += len;
    }
    if (r.granted > start) {
      CtrlHeader h{};
      h.magic = ofi::kWireMagic;
      h.type = MsgType::Cts;
      h.msgId = r.msgId;
      h.offset = start;
      h.bytes = r.granted - start;
      h.dataId = firstId;
      h.fragBytes = frag;
      p.outq.push_back(Outgoing{h, nullptr, nullptr});
    }
    if (r.granted == r.r.bytes) p.granting.pop_front();
    if (stalled) break;
  }
  return pumpCtrl(peer);
}

// The receiver granted [offset, offset + bytes) of one of our rendezvous sends.
Status OfiTransport::onCts(int src, const CtrlHeader& h) {
  Peer& p = peers_[static_cast<size_t>(src)];
  auto it = p.sends.find(h.msgId);
  if (it == p.sends.end() || h.offset > it->second->bytes ||
      h.bytes > it->second->bytes - h.offset) {
    WARN("ofi: rank %d: clear-to-send from rank %d for unknown message %llu or range", rank_, src,
         static_cast<unsigned long long>(h.msgId));
    return Status::InternalError;
  }
  SendOp& s = *it->second;
  if (h.fragBytes == 0) {  // the receiver posted another size; it has logged the mismatch
    WARN("ofi: rank %d: rank %d expected another size for a %zu-byte message (tag 0x%llx)", rank_,
         src, s.bytes, static_cast<unsigned long long>(s.tag));
    finish(s.req, Status::InvalidUsage);
    mr_->release(s.mr);
    p.sends.erase(it);
    return Status::Success;
  }
  if (mr_->needed() && !s.mr) NLCHECK(mr_->acquire(s.buf, s.bytes, &s.desc, &s.mr));
  uint64_t id = h.dataId;
  for (size_t off = h.offset; off < h.offset + h.bytes; off += h.fragBytes, ++id) {
    Op* op = newOp(OpKind::DataSend, src);
    op->send = &s;
    op->buf = const_cast<char*>(s.buf) + off;
    op->bytes = std::min<size_t>(h.fragBytes, h.offset + h.bytes - off);
    op->desc = s.desc;
    op->tag = tags_.make(TagKind::Data, rank_, id);
    op->critical = true;
    pendingTx_.push_back(op);
  }
  return retryTx();
}

Status OfiTransport::retryTx() {
  while (!pendingTx_.empty() && txPosted_ < txCap_) {
    Op* op = pendingTx_.front();
    Peer& p = peers_[static_cast<size_t>(op->peer)];
    int rc = p.gone ? -FI_ENOTCONN
                    : fi_tsend(fab_->ep, op->buf, op->bytes, op->desc, p.addr, op->tag,
                               op->fiContext);
    if (rc == -FI_EAGAIN) break;
    pendingTx_.pop_front();
    if (rc != 0) {  // the send stays incomplete: an error, since it needs the peer
      markGone(op->peer, "a data send", rc);
      freeOp(op);
      continue;
    }
    ++txPosted_;
    ++criticalTx_;
  }
  return Status::Success;
}

Status OfiTransport::onDataSend(Op* op) {
  --txPosted_;
  --criticalTx_;
  SendOp& s = *op->send;
  s.done += op->bytes;
  const int peer = op->peer;
  freeOp(op);
  if (s.done == s.bytes) {
    finish(s.req, Status::Success);
    mr_->release(s.mr);
    peers_[static_cast<size_t>(peer)].sends.erase(s.msgId);
  }
  return Status::Success;
}

Status OfiTransport::onDataRecv(Op* op, size_t len) {
  --rxPosted_;
  RndvRecv& r = *op->recv;
  if (len != op->bytes) {
    WARN("ofi: rank %d: fragment of %zu bytes from rank %d, %zu expected", rank_, len, op->peer,
         op->bytes);
    return Status::InternalError;
  }
  if (op->bounce >= 0) {
    deliver(r.r, op->offset, op->buf, op->bytes);
    bounceFree_.push_back(op->buf);
  }
  r.arrived += op->bytes;
  peers_[static_cast<size_t>(r.peer)].lastHeard = std::chrono::steady_clock::now();
  freeOp(op);
  if (r.arrived == r.r.bytes) {
    finish(r.r.req, Status::Success);
    mr_->release(r.mr);
    --peers_[static_cast<size_t>(r.peer)].recvsActive;
    recvs_.erase(&r);
  }
  return Status::Success;
}

}  // namespace nlccl::transport
