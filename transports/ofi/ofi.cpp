// OfiTransport: posting and matching. Sends queue a control message (Eager or Rts) per peer;
// arriving ones are matched against posted receives in sequence order (ofi.hpp).
#include "transports/ofi/ofi.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "kernels/reduce.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "util/log.hpp"

namespace nlccl::transport {

using ofi::CtrlHeader;
using ofi::MsgType;

void OfiTransport::finish(Request* req, Status s) {
  req->status = s;
  req->done.store(true, std::memory_order_release);
  bump();
}

void OfiTransport::deliver(const RecvOp& r, size_t offset, const char* src, size_t bytes) {
  if (bytes == 0) return;
  if (r.reduce)
    r.reducer.apply(r.buf, offset, src, bytes);
  else
    std::memcpy(r.buf + offset, src, bytes);
}

Status OfiTransport::postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_ != Status::Success) {
    finish(req, failed_);
    return failed_;
  }
  if (peer < 0 || peer >= nranks_ || (bytes > 0 && !buf)) {
    WARN("ofi: rank %d: invalid send (peer %d of %d, %zu bytes from %p)", rank_, peer, nranks_,
         bytes, buf);
    finish(req, Status::InvalidArgument);
    return Status::InvalidArgument;
  }
  if (peer == rank_) {
    selfSends_.push_back(SelfSend{tag, static_cast<const char*>(buf), bytes, req});
    matchSelf();
    return Status::Success;
  }
  Status s = activate(peer);
  if (s == Status::Success) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    CtrlHeader h{};
    h.magic = ofi::kWireMagic;
    h.seq = p.nextSeq++;
    h.tag = tag;
    h.bytes = bytes;
    SendOp* rndv = nullptr;
    if (bytes <= eagerBytes_) {
      h.type = MsgType::Eager;
      p.outq.push_back(Outgoing{h, static_cast<const char*>(buf), req});
    } else {
      h.type = MsgType::Rts;
      h.msgId = p.nextMsgId++;
      auto op = std::make_unique<SendOp>();
      op->tag = tag;
      op->msgId = h.msgId;
      op->buf = static_cast<const char*>(buf);
      op->bytes = bytes;
      op->req = req;
      op->seq = h.seq;
      rndv = op.get();
      p.sends.emplace(h.msgId, std::move(op));
      p.outq.push_back(Outgoing{h, nullptr, nullptr});
    }
    s = pumpCtrl(peer);
    if (s == Status::Success && !p.grants.empty())  // the receive was posted first
      s = takeGrant(peer, rndv, rndv == nullptr, tag);
  }
  return s == Status::Success ? s : fail(s);
}

Status OfiTransport::postRecv(int peer, uint64_t tag, void* buf, size_t bytes,
                              const Reducer* reducer, Request* req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_ != Status::Success) {
    finish(req, failed_);
    return failed_;
  }
  if (peer < 0 || peer >= nranks_ || (bytes > 0 && !buf) ||
      (reducer && (!reducer->fn || reducer->elemSize == 0 || bytes % reducer->elemSize != 0))) {
    WARN("ofi: rank %d: invalid receive (peer %d of %d, %zu bytes into %p%s)", rank_, peer, nranks_,
         bytes, buf, reducer ? ", with reducer" : "");
    finish(req, Status::InvalidArgument);
    return Status::InvalidArgument;
  }
  RecvOp r{tag, static_cast<char*>(buf), bytes, reducer ? *reducer : Reducer{}, reducer != nullptr,
           req};
  if (peer == rank_) {
    selfRecvs_.push_back(r);
    matchSelf();
    return Status::Success;
  }
  Status s = activate(peer);
  if (s == Status::Success) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    // Messages that already arrived are older than anything still to come.
    auto it = std::find_if(p.unexpected.begin(), p.unexpected.end(),
                           [&](const Unexpected& u) { return u.tag == tag; });
    if (it == p.unexpected.end()) {
      s = pregrant(p, peer, &r);
      p.posted.push_back(r);
      if (s == Status::Success && r.pre) s = pumpCtrl(peer);
    } else {
      Unexpected u = std::move(*it);
      p.unexpected.erase(it);
      if (u.bytes != bytes)
        s = sizeMismatch(p, peer, r, u.bytes, u.rts, u.msgId);
      else if (u.rts)
        s = startRndv(p, peer, r, u.msgId);
      else {
        deliver(r, 0, u.data.get(), bytes);
        finish(req, Status::Success);
      }
      if (s == Status::Success) s = pumpCtrl(peer);
    }
  }
  return s == Status::Success ? s : fail(s);
}

void OfiTransport::matchSelf() {
  while (true) {
    bool matched = false;
    for (auto s = selfSends_.begin(); s != selfSends_.end() && !matched; ++s)
      for (auto r = selfRecvs_.begin(); r != selfRecvs_.end(); ++r) {
        if (r->tag != s->tag) continue;
        Status st = Status::Success;
        if (r->bytes != s->bytes) {
          WARN("ofi: rank %d: message size mismatch to itself: sent %zu bytes, expected %zu",
               rank_, s->bytes, r->bytes);
          st = Status::InvalidUsage;
        } else if (r->buf != s->buf) {  // as the shm transport does
          deliver(*r, 0, s->buf, s->bytes);
        }
        finish(s->req, st);
        finish(r->req, st);
        selfSends_.erase(s);
        selfRecvs_.erase(r);
        matched = true;
        break;
      }
    if (!matched) return;
  }
}

// A control message arrived in `op`'s buffer (`len` bytes) from op->peer.
Status OfiTransport::onCtrl(Op* op, size_t len) {
  --rxPosted_;
  const int src = op->peer;
  Peer& p = peers_[static_cast<size_t>(src)];
  CtrlHeader h;
  bool sane = len >= sizeof h;
  if (sane) {
    std::memcpy(&h, op->buf, sizeof h);
    sane = h.magic == ofi::kWireMagic && h.credits <= credits_ - p.credits;
  }
  if (sane) {
    p.credits += h.credits;
    p.lastHeard = std::chrono::steady_clock::now();
    switch (h.type) {
      case MsgType::Credit:
      case MsgType::Ping:
      case MsgType::Pong:
        if (len != sizeof h) break;
        if (h.type == MsgType::Ping) p.pongOwed = true;
        if (h.type == MsgType::Pong) p.pingOut = false;  // lastHeard is now: next Ping later
        return repostCtrl(op);
      case MsgType::Cts:
      case MsgType::Grant:
        if (len != sizeof h) break;
        NLCHECK(h.type == MsgType::Cts ? onCts(src, h) : onGrant(src, h));
        ++p.toReturn;
        return repostCtrl(op);
      case MsgType::Eager:
      case MsgType::Rts: {
        size_t want = sizeof h + (h.type == MsgType::Eager ? h.bytes : 0);
        if (len != want || (h.type == MsgType::Eager && h.bytes > eagerBytes_) ||
            (h.type == MsgType::Rts && h.bytes <= eagerBytes_))
          break;
        if (h.seq == p.expectSeq) {
          NLCHECK(onSequenced(p, src, op));
          // Later messages that overtook this one go now, in order.
          while (!p.early.empty() && p.early.begin()->first == p.expectSeq) {
            Op* next = p.early.begin()->second;
            p.early.erase(p.early.begin());
            NLCHECK(onSequenced(p, src, next));
          }
          return Status::Success;
        }
        if (h.seq > p.expectSeq && h.seq < p.expectSeq + static_cast<uint64_t>(credits_) &&
            p.early.emplace(h.seq, op).second)
          return Status::Success;  // keeps its buffer (and credit) until its turn
        break;
      }
    }
  }
  WARN("ofi: rank %d: malformed control message from rank %d (%zu bytes)", rank_, src, len);
  return Status::InternalError;
}

// Handles the Eager or Rts message in `op` whose turn it is.
Status OfiTransport::onSequenced(Peer& p, int src, Op* op) {
  CtrlHeader h;
  std::memcpy(&h, op->buf, sizeof h);
  ++p.expectSeq;
  const bool rts = h.type == MsgType::Rts;
  auto it = std::find_if(p.posted.begin(), p.posted.end(),
                         [&](const RecvOp& r) { return r.tag == h.tag; });
  if (it != p.posted.end()) {
    RecvOp r = *it;
    p.posted.erase(it);
    if (r.pre) {
      NLCHECK(matchPregranted(p, src, r, h));
    } else if (r.bytes != h.bytes) {
      NLCHECK(sizeMismatch(p, src, r, h.bytes, rts, h.msgId));
    } else if (rts) {
      NLCHECK(startRndv(p, src, r, h.msgId));
    } else {
      deliver(r, 0, op->buf + sizeof h, h.bytes);
      finish(r.req, Status::Success);
    }
  } else {
    Unexpected u{h.tag, h.bytes, rts, h.msgId, nullptr};
    if (!rts) {
      u.data.reset(new char[h.bytes + 1]);
      std::memcpy(u.data.get(), op->buf + sizeof h, h.bytes);
    }
    p.unexpected.push_back(std::move(u));
  }
  ++p.toReturn;
  return repostCtrl(op);
}

// The receive fails; a rendezvous sender is told to drop the message (Cts without fragments).
Status OfiTransport::sizeMismatch(Peer& p, int src, const RecvOp& r, size_t sent, bool rts,
                                  uint64_t msgId) {
  WARN("ofi: rank %d: message size mismatch from rank %d (tag 0x%" PRIx64
       "): sender posted %zu bytes, receiver expects %zu",
       rank_, src, r.tag, sent, r.bytes);
  finish(r.req, Status::InvalidUsage);
  if (rts) {
    CtrlHeader h{};
    h.magic = ofi::kWireMagic;
    h.type = MsgType::Cts;
    h.msgId = msgId;
    p.outq.push_back(Outgoing{h, nullptr, nullptr});
  }
  return Status::Success;
}

Status OfiTransport::startRndv(Peer& p, int src, const RecvOp& r, uint64_t msgId) {
  ++rndvRecvs_;
  auto rr = std::make_unique<RndvRecv>();
  rr->peer = src;
  rr->msgId = msgId;
  rr->r = r;
  if (!r.reduce) NLCHECK(mr_->acquire(r.buf, r.bytes, &rr->desc, &rr->mr));
  p.granting.push_back(rr.get());
  ++p.recvsActive;
  RndvRecv* key = rr.get();
  recvs_.emplace(key, std::move(rr));
  return grant(src);
}

}  // namespace nlccl::transport
