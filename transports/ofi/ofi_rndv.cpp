// OfiTransport: control sends with credits, rendezvous grants and data fragments (ofi.hpp).
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sys/uio.h>

#include <algorithm>
#include <cinttypes>
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
    const bool eager = o.h.type == MsgType::Eager && o.h.bytes > 0;
    const bool gather = eager && o.h.bytes >= gatherFromBytes_;
    if (eager && !gather) {
      std::memcpy(op->buf + len, o.payload, o.h.bytes);
      len += o.h.bytes;
    }
    op->bytes = len;
    op->critical = true;
    const uint64_t ctrlTag = tags_.make(TagKind::Ctrl, rank_, 0);
    int rc;
    if (gather) {
      // The header from our buffer, the payload from the caller's: the send completes (and
      // with it the request) only once the provider is done with both.
      iovec iov[2] = {{op->buf, len}, {const_cast<char*>(o.payload), o.h.bytes}};
      void* desc[2] = {op->desc, nullptr};
      rc = static_cast<int>(fi_tsendv(fab_->ep, iov, desc, 2, p.addr, ctrlTag, op->fiContext));
    } else {
      rc = static_cast<int>(fi_tsend(fab_->ep, op->buf, len, op->desc, p.addr, ctrlTag,
                                     op->fiContext));
    }
    if (rc != 0) {
      freeOp(op);
      if (rc == -FI_EAGAIN) break;  // progress() tries again
      markGone(peer, "a control send", rc);
      return Status::Success;
    }
    ++txPosted_;
    ++criticalTx_;
    gatheredSends_ += gather;
    p.toReturn -= o.h.credits;
    --p.credits;
    if (o.req) {  // Eager: completes with the provider's send
      op->req = o.req;
      eagerOps_.insert(op);
      ++p.eagerInFlight;
    }
    if (o.h.type == MsgType::Eager) {
      p.eagerLog.emplace_back(o.h.seq, o.h.tag);
      if (p.eagerLog.size() > ofi::kEagerLog) p.eagerLog.pop_front();
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

// Posts receives for the next fragments of `r` from r.granted on, as far as the window, the
// bounce chunks and the rx queue allow (Grants, `pre`: their own smaller share of both);
// *stalled when something ran out before the whole message was granted.
Status OfiTransport::postFrags(int peer, RndvRecv& r, bool pre, bool* stalled) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  const size_t frag = r.r.reduce ? bounceBytes_ : fragBytes_;
  *stalled = false;
  while (r.granted < r.r.bytes) {
    if (r.granted - r.arrived >= grantWindow_ || rxPosted_ >= rxCap_ ||
        (pre && (preRx_ >= rxCap_ / 4 || (r.r.reduce && preBounce_ >= ofi::kBounceChunks / 2)))) {
      *stalled = true;
      break;
    }
    const size_t len = std::min(frag, r.r.bytes - r.granted);
    Op* op = newOp(OpKind::DataRecv, peer);
    op->recv = &r;
    op->offset = r.granted;
    op->bytes = len;
    op->pre = pre;
    if (r.r.reduce) {
      NLCHECK(takeBounce(&op->buf));
      if (!op->buf) {
        freeOp(op);
        *stalled = true;
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
        *stalled = true;
        break;
      }
      WARN("ofi: rank %d: posting a data receive from peer %d failed: %s", rank_, peer,
           fi_strerror(-rc));
      return Status::SystemError;
    }
    ++p.nextDataId;
    ++rxPosted_;
    if (pre) {
      ++preRx_;
      if (op->bounce >= 0) ++preBounce_;
    }
    r.granted += len;
  }
  return Status::Success;
}

// Posts receives for the next fragments of `peer`'s matched rendezvous receives and tells the
// sender with one Cts per receive. Fragments land in the destination, or in a bounce chunk when
// the receive reduces.
Status OfiTransport::grant(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  while (!p.granting.empty()) {
    RndvRecv& r = *p.granting.front();
    const size_t start = r.granted;
    const uint64_t firstId = p.nextDataId;
    bool stalled = false;
    NLCHECK(postFrags(peer, r, false, &stalled));
    if (r.granted > start) {
      CtrlHeader h{};
      h.magic = ofi::kWireMagic;
      h.type = MsgType::Cts;
      h.msgId = r.msgId;
      h.offset = start;
      h.bytes = r.granted - start;
      h.dataId = firstId;
      h.fragBytes = r.r.reduce ? bounceBytes_ : fragBytes_;
      p.outq.push_back(Outgoing{h, nullptr, nullptr});
    }
    if (r.granted == r.r.bytes) p.granting.pop_front();
    if (stalled) break;
  }
  return pumpCtrl(peer);
}

// A rendezvous-sized receive `r`, about to be queued in p.posted, whose Rts has not arrived:
// when it is the first receive posted for its tag and Grants have room, its first fragments are
// posted now and the sender told (Grant). r->pre then points at the granted receive.
Status OfiTransport::pregrant(Peer& p, int peer, RecvOp* r) {
  if (p.gone || r->bytes <= eagerBytes_) return Status::Success;
  for (const RecvOp& o : p.posted)
    if (o.tag == r->tag) return Status::Success;  // which message it gets depends on that one's
  auto rr = std::make_unique<RndvRecv>();
  rr->peer = peer;
  rr->msgId = 0;
  rr->r = *r;
  rr->matched = false;
  if (!r->reduce) NLCHECK(mr_->acquire(r->buf, r->bytes, &rr->desc, &rr->mr));
  const uint64_t firstId = p.nextDataId;
  bool stalled = false;
  NLCHECK(postFrags(peer, *rr, true, &stalled));
  if (rr->granted == 0) {  // no room: granted when its Rts comes
    mr_->release(rr->mr);
    return Status::Success;
  }
  CtrlHeader h{};
  h.magic = ofi::kWireMagic;
  h.type = MsgType::Grant;
  h.seq = p.expectSeq;  // every earlier message has been matched, none to this receive
  h.tag = r->tag;
  h.msgId = r->bytes;
  h.offset = 0;
  h.bytes = rr->granted;
  h.dataId = firstId;
  h.fragBytes = r->reduce ? bounceBytes_ : fragBytes_;
  p.outq.push_back(Outgoing{h, nullptr, nullptr});
  ++grantsSent_;
  ++rndvRecvs_;
  ++p.recvsActive;
  r->pre = rr.get();
  RndvRecv* key = rr.get();
  recvs_.emplace(key, std::move(rr));
  return Status::Success;
}

// The sequenced message for a receive granted ahead (`r`, just taken off p.posted) arrived: an
// Rts of the same size carries the msgId the rest of the grants need; any other is a mismatch,
// and the receive fails once the fragments it posted have been consumed (the sender answers
// the Grant with empty ones).
Status OfiTransport::matchPregranted(Peer& p, int src, const RecvOp& r, const CtrlHeader& h) {
  RndvRecv& rr = *r.pre;
  rr.matched = true;
  const bool rts = h.type == MsgType::Rts;
  if (!rts || h.bytes != r.bytes) {
    WARN("ofi: rank %d: message size mismatch from rank %d (tag 0x%" PRIx64
         "): sender posted %zu bytes, receiver expects %zu",
         rank_, src, r.tag, static_cast<size_t>(h.bytes), r.bytes);
    rr.status = Status::InvalidUsage;
    rr.r.bytes = rr.granted;  // no more grants: done once what was granted has come
    if (rts) {  // the sender drops the message
      CtrlHeader c{};
      c.magic = ofi::kWireMagic;
      c.type = MsgType::Cts;
      c.msgId = h.msgId;
      p.outq.push_back(Outgoing{c, nullptr, nullptr});
    }
  } else {
    rr.msgId = h.msgId;
    if (rr.granted < rr.r.bytes) {
      p.granting.push_back(&rr);
      NLCHECK(grant(src));
    }
  }
  finishRndv(rr);
  return Status::Success;
}

// Completes a rendezvous receive once its message was matched and everything granted arrived.
void OfiTransport::finishRndv(RndvRecv& r) {
  if (!r.matched || r.arrived < r.r.bytes) return;
  finish(r.r.req, r.status);
  mr_->release(r.mr);
  --peers_[static_cast<size_t>(r.peer)].recvsActive;
  recvs_.erase(&r);
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
  if (h.fragBytes == 0 && s.grantedTo > 0) {  // fragments out for a Grant it did not match
    WARN("ofi: rank %d: rank %d refused message %llu after granting it (mismatched sizes?)",
         rank_, src, static_cast<unsigned long long>(h.msgId));
    return Status::InternalError;
  }
  if (h.fragBytes == 0) {  // the receiver posted another size; it has logged the mismatch
    WARN("ofi: rank %d: rank %d expected another size for a %zu-byte message (tag 0x%llx)", rank_,
         src, s.bytes, static_cast<unsigned long long>(s.tag));
    finish(s.req, Status::InvalidUsage);
    mr_->release(s.mr);
    p.sends.erase(it);
    return Status::Success;
  }
  return sendFrags(src, s, h);
}

// A Grant: for our first message with its tag and a seq at least h.seq. When that send is not
// posted yet, it waits for it (postSend calls takeGrant).
Status OfiTransport::onGrant(int src, const CtrlHeader& h) {
  Peer& p = peers_[static_cast<size_t>(src)];
  if (h.offset != 0 || h.fragBytes == 0 || h.bytes == 0 || h.bytes > h.msgId) {
    WARN("ofi: rank %d: malformed grant from rank %d", rank_, src);
    return Status::InternalError;
  }
  SendOp* best = nullptr;
  for (auto& [id, s] : p.sends)
    if (s->tag == h.tag && s->seq >= h.seq && !s->preMatched && (!best || s->seq < best->seq))
      best = s.get();
  // An Eager message before it with the tag is the one the receive gets (of another size).
  uint64_t eager = UINT64_MAX;
  auto from = std::lower_bound(p.eagerLog.begin(), p.eagerLog.end(), h.seq,
                               [](const std::pair<uint64_t, uint64_t>& e, uint64_t seq) {
                                 return e.first < seq;
                               });
  for (auto e = from; e != p.eagerLog.end(); ++e)
    if (e->second == h.tag) {
      eager = e->first;
      break;
    }
  for (const Outgoing& o : p.outq)
    if (eager == UINT64_MAX && o.h.type == MsgType::Eager && o.h.tag == h.tag && o.h.seq >= h.seq)
      eager = o.h.seq;
  if (best && best->seq < eager) return applyGrant(src, best, h);
  if (eager != UINT64_MAX) return applyGrant(src, nullptr, h);
  p.grants.push_back(h);
  return Status::Success;
}

// A send was just posted (`s`, or an Eager message when `eager`): a Grant that came first for
// its tag is its.
Status OfiTransport::takeGrant(int src, SendOp* s, bool eager, uint64_t tag) {
  Peer& p = peers_[static_cast<size_t>(src)];
  auto it = std::find_if(p.grants.begin(), p.grants.end(),
                         [&](const CtrlHeader& g) { return g.tag == tag; });
  if (it == p.grants.end()) return Status::Success;
  CtrlHeader h = *it;
  p.grants.erase(it);
  return applyGrant(src, eager ? nullptr : s, h);
}

// Sends what a Grant asked for: the fragments of `s`, or (another size, or an Eager message:
// s null) empty messages to each fragment's tag, so the receiver's posted buffers are consumed.
Status OfiTransport::applyGrant(int src, SendOp* s, const CtrlHeader& h) {
  if (s) s->preMatched = true;
  if (s && s->bytes == h.msgId) return sendFrags(src, *s, h);
  const uint64_t frags = (h.bytes + h.fragBytes - 1) / h.fragBytes;
  for (uint64_t i = 0; i < frags; ++i) {
    Op* op = newOp(OpKind::DataSend, src);
    op->buf = nullptr;
    op->bytes = 0;
    op->tag = tags_.make(TagKind::Data, rank_, h.dataId + i);
    op->critical = true;
    pendingTx_.push_back(op);
  }
  return Status::Success;  // sent from pumpAll, after the control messages (see there)
}

// Queues the fragments of [h.offset, h.offset + h.bytes) of `s`, tagged from h.dataId.
Status OfiTransport::sendFrags(int src, SendOp& s, const CtrlHeader& h) {
  if (h.offset != s.grantedTo || h.bytes > s.bytes - s.grantedTo) {
    WARN("ofi: rank %d: grant from rank %d for bytes %llu.. of message %llu, which has %zu "
         "granted",
         rank_, src, static_cast<unsigned long long>(h.offset),
         static_cast<unsigned long long>(s.msgId), s.grantedTo);
    return Status::InternalError;
  }
  s.grantedTo += h.bytes;
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
  return Status::Success;  // sent from pumpAll, after the control messages (see there)
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
  if (!op->send) {  // an empty fragment answering a Grant of another size
    freeOp(op);
    return Status::Success;
  }
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
  if (op->pre) {
    --preRx_;
    if (op->bounce >= 0) --preBounce_;
  }
  if (len != op->bytes && !(len == 0 && op->pre)) {
    WARN("ofi: rank %d: fragment of %zu bytes from rank %d, %zu expected", rank_, len, op->peer,
         op->bytes);
    return Status::InternalError;
  }
  if (len != op->bytes) r.status = Status::InvalidUsage;  // the sender's answer to a wrong Grant
  if (op->bounce >= 0) {
    if (len == op->bytes && r.status == Status::Success) deliver(r.r, op->offset, op->buf, len);
    bounceFree_.push_back(op->buf);
  }
  r.arrived += op->bytes;
  peers_[static_cast<size_t>(r.peer)].lastHeard = std::chrono::steady_clock::now();
  freeOp(op);
  finishRndv(r);
  return Status::Success;
}

}  // namespace nlccl::transport
