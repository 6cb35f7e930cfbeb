// OfiTransport: progress (the completion queue), failure, waiting and abort (ofi.hpp).
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "transports/ofi/ofi.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "util/log.hpp"

namespace nlccl::transport {

using Clock = std::chrono::steady_clock;

void OfiTransport::bump() { epoch_.fetch_add(1, std::memory_order_release); }

uint32_t OfiTransport::activityEpoch() { return epoch_.load(std::memory_order_acquire); }

Status OfiTransport::progress() {
  std::lock_guard<std::mutex> lock(mu_);
  return progressLocked();
}

Status OfiTransport::progressLocked() {
  if (failed_ != Status::Success) return failed_;
  int handled = 0;
  Status s = pollCq(&handled);
  if (s == Status::Success) s = pumpAll();
  auto now = Clock::now();
  if (s == Status::Success && (now >= nextCheck_ || goneCount_ > 0)) {
    bool health = now >= nextCheck_ && !lingering_;
    if (health) nextCheck_ = now + ofi::kCheckInterval;
    s = checkPeers(health);
  }
  if (s != Status::Success) return fail(s);
  if (handled) bump();
  return Status::Success;
}

// Everything that waited for room or credits: control receives, grants, control messages and
// credit returns, then data sends. Control first: a provider that sends in order per peer (tcp)
// puts a grant posted after a large fragment behind that fragment, so the peer's data, which
// waits for the grant, would start only once ours has gone (both directions one after the
// other instead of at once: with grants ahead of the request and fragments sent as soon as a
// grant was handled, 2 ranks exchanging 1-4 MiB took up to 1.6x as long).
Status OfiTransport::pumpAll() {
  while (!pendingRx_.empty()) {
    Op* op = pendingRx_.front();
    pendingRx_.pop_front();
    size_t before = pendingRx_.size();
    NLCHECK(repostCtrl(op));
    if (pendingRx_.size() > before) break;  // still no room
  }
  for (int peer : active_) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (!p.granting.empty()) NLCHECK(grant(peer));
    if (!p.outq.empty() || p.creditPending || p.pongOwed || p.toReturn >= creditThreshold())
      NLCHECK(pumpCtrl(peer));
  }
  return retryTx();
}

Status OfiTransport::pollCq(int* handled) {
  fi_cq_tagged_entry ev[16];
  for (int round = 0; round < 16; ++round) {  // bounded: the caller has other work too
    ssize_t n = fi_cq_read(fab_->cq, ev, 16);
    if (n == -FI_EAGAIN) return Status::Success;
    if (n == -FI_EAVAIL) {
      NLCHECK(onError());
      ++*handled;
      continue;
    }
    if (n < 0) {
      WARN("ofi: rank %d: fi_cq_read: %s", rank_, fi_strerror(static_cast<int>(-n)));
      return Status::SystemError;
    }
    for (ssize_t i = 0; i < n; ++i) {
      Op* op = reinterpret_cast<Op*>(ev[i].op_context);
      switch (op->kind) {
        case OpKind::CtrlRecv: NLCHECK(onCtrl(op, ev[i].len)); break;
        case OpKind::DataRecv: NLCHECK(onDataRecv(op, ev[i].len)); break;
        case OpKind::DataSend: NLCHECK(onDataSend(op)); break;
        case OpKind::CtrlSend:
          --txPosted_;
          if (op->critical) --criticalTx_;
          if (op->req) {
            finish(op->req, Status::Success);
            eagerOps_.erase(op);
            --peers_[static_cast<size_t>(op->peer)].eagerInFlight;
            op->req = nullptr;
          }
          freeOp(op);
          break;
      }
    }
    *handled += static_cast<int>(n);
    if (n < 16) return Status::Success;
  }
  return Status::Success;
}

// An error completion. A failed send means the peer's endpoint is gone; a failed or truncated
// receive means something is wrong here.
Status OfiTransport::onError() {
  fi_cq_err_entry err{};
  ssize_t rc = fi_cq_readerr(fab_->cq, &err, 0);
  if (rc == -FI_EAGAIN) return Status::Success;
  if (rc < 0) {
    WARN("ofi: rank %d: fi_cq_readerr: %s", rank_, fi_strerror(static_cast<int>(-rc)));
    return Status::SystemError;
  }
  Op* op = reinterpret_cast<Op*>(err.op_context);
  char text[256];
  const char* why = fi_cq_strerror(fab_->cq, err.prov_errno, err.err_data, text, sizeof text);
  if (!op) {
    WARN("ofi: rank %d: error completion without context: %s", rank_, why ? why : "?");
    return Status::SystemError;
  }
  const int peer = op->peer;
  switch (op->kind) {
    case OpKind::CtrlSend:
    case OpKind::DataSend:
      --txPosted_;
      if (op->critical) --criticalTx_;
      INFO(log::kNet, "ofi: rank %d: send to rank %d failed: %s (%s)", rank_, peer,
           fi_strerror(err.err), why ? why : "");
      if (err.err != FI_ECANCELED) markGone(peer, "a send", -err.err);
      if (op->req) {  // an Eager message: the peer will never have it
        finish(op->req, Status::RemoteError);
        eagerOps_.erase(op);
        --peers_[static_cast<size_t>(op->peer)].eagerInFlight;
        op->req = nullptr;
      }
      freeOp(op);
      return Status::Success;
    case OpKind::CtrlRecv:
    case OpKind::DataRecv:
      --rxPosted_;
      if (err.err == FI_ECANCELED) return Status::Success;
      WARN("ofi: rank %d: receive from rank %d failed: %s (%s)", rank_, peer,
           fi_strerror(err.err), why ? why : "");
      return err.err == FI_ETRUNC ? Status::InternalError : Status::RemoteError;
  }
  return Status::InternalError;
}

// A gone peer is no error until something needs it: a rank that exited after its last send has
// delivered everything.
bool OfiTransport::needs(const Peer& p) const {
  return !p.outq.empty() || !p.sends.empty() || !p.posted.empty() || p.recvsActive > 0 ||
         p.eagerInFlight > 0;
}

Status OfiTransport::checkPeers(bool health) {
  if (health && health_) {
    Status s = health_();
    if (s != Status::Success) {
      WARN("ofi: rank %d: health check failed (%s)", rank_, statusName(s));
      return s;
    }
  }
  const auto now = Clock::now();
  for (int peer : active_) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (health && probePeers_ && !p.gone && !p.pingOut && needs(p) &&
        (p.pingTrying || now - p.lastHeard > ofi::kProbeAfter)) {
      if (!p.pingTrying) {
        TRACE(log::kNet, "ofi: rank %d: pinging silent peer %d", rank_, peer);
        p.pingTrying = true;
        p.pingSince = now;
      }
      NLCHECK(sendFree(peer, ofi::MsgType::Ping));
      if (p.pingTrying && now - p.pingSince > ofi::kUnreachableAfter)
        markGone(peer, "reaching it", -FI_EHOSTUNREACH);
    }
    if (p.gone && needs(p)) {
      WARN("ofi: rank %d: peer rank %d is unreachable (its endpoint closed); failing all pending "
           "operations",
           rank_, peer);
      return Status::RemoteError;
    }
  }
  return Status::Success;
}

void OfiTransport::failAll(Status why) {
  if (failed_ == Status::Success) failed_ = why;
  for (int i = 0; i < nranks_ && peers_; ++i) {
    Peer& p = peers_[static_cast<size_t>(i)];
    for (Outgoing& o : p.outq)
      if (o.req) finish(o.req, why);
    for (auto& [id, s] : p.sends) finish(s->req, why);
    for (RecvOp& r : p.posted)
      if (!r.pre) finish(r.req, why);  // granted ahead: in recvs_
    p.outq.clear();
    p.sends.clear();
    p.posted.clear();
    p.unexpected.clear();
    p.granting.clear();
    p.grants.clear();
    p.eagerLog.clear();
    p.early.clear();
    p.recvsActive = 0;
    p.eagerInFlight = 0;
  }
  for (auto& [key, r] : recvs_) finish(r->r.req, why);
  recvs_.clear();
  for (Op* op : eagerOps_) {
    finish(op->req, why);
    op->req = nullptr;
  }
  eagerOps_.clear();
  for (SelfSend& s : selfSends_) finish(s.req, why);
  for (RecvOp& r : selfRecvs_) finish(r.req, why);
  selfSends_.clear();
  selfRecvs_.clear();
  signalWaiters();
}

// After a failure nothing may touch user memory any more: everything is closed at once.
Status OfiTransport::fail(Status why) {
  failAll(why);
  closeFabric();
  return why;
}

void OfiTransport::signalWaiters() {
  bump();
  if (eventFd_ >= 0) {
    uint64_t one = 1;
    ssize_t n = write(eventFd_, &one, sizeof one);
    (void)n;
  }
}

void OfiTransport::abort(Status why) {
  if (why == Status::Success) why = Status::InternalError;
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_ == Status::Success && log::enabled(log::Level::Info, log::kNet)) logState();
  fail(why);
}

// What each peer waits for (INFO, NET), for "no progress" diagnoses.
void OfiTransport::logState() const {
  INFO(log::kNet, "ofi: rank %d: %zu sends and %zu receives posted (%zu carry data), %zu + %zu waiting",
       rank_, txPosted_, rxPosted_, criticalTx_, pendingTx_.size(), pendingRx_.size());
  for (int peer : active_) {
    const Peer& p = peers_[static_cast<size_t>(peer)];
    INFO(log::kNet,
         "ofi: rank %d: peer %d: credits %d, owed %u, queued %zu, seq out %llu / expected %llu, "
         "early %zu, posted %zu, unexpected %zu, eager in flight %d, rendezvous sends %zu, "
         "receives %d (%zu to grant)%s",
         rank_, peer, p.credits, p.toReturn, p.outq.size(),
         static_cast<unsigned long long>(p.nextSeq), static_cast<unsigned long long>(p.expectSeq),
         p.early.size(), p.posted.size(), p.unexpected.size(), p.eagerInFlight, p.sends.size(),
         p.recvsActive, p.granting.size(), p.gone ? ", gone" : "");
  }
}

void OfiTransport::wake(int rank) {
  if (rank == rank_) signalWaiters();  // peers cannot be woken from here; nothing needs it
}

// Polls (each poll is a progress step: with manual progress nothing moves otherwise), yields,
// then blocks on the completion queue's descriptor or, without one, sleeps in short steps.
void OfiTransport::waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) {
  // A few polls, then polls with a yield between them: ranks that share cores (4 on 2 here) get
  // the CPU the data they wait for needs (64 polls first cost 4 ranks 255 instead of 135 us per
  // 8-byte all-reduce), and a lone rank still sees its data within microseconds. Then block on
  // the descriptor or, without one (shm, efa, NLCCL_OFI_WAIT=poll), sleep in steps of at most 200 us.
  constexpr int kPolls = 4;
  const int kYields = fab_ && fab_->waitFd < 0 ? 256 : 128;
  const auto deadline = Clock::now() + std::min<std::chrono::nanoseconds>(timeout, ofi::kCheckInterval);
  long sleepNs = 20000;
  for (int i = 0;; ++i) {
    if (epoch_.load(std::memory_order_acquire) != seen) return;
    int fd = -1;
    bool polled = false;  // no wait object: sleep between polls
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_ != Status::Success) return;
      polled = fab_->waitFd < 0;
      progressLocked();
      if (epoch_.load(std::memory_order_acquire) != seen || failed_ != Status::Success) return;
      if (i >= kPolls + kYields && fab_->waitFd >= 0) {
        fid* f = &fab_->cq->fid;
        if (fi_trywait(fab_->fabric, &f, 1) == FI_SUCCESS) fd = fab_->waitFd;
      }
    }
    auto now = Clock::now();
    if (now >= deadline) return;
    if (i < kPolls) continue;
    if (i < kPolls + kYields) {
      sched_yield();
      continue;
    }
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now).count();
    if (fd >= 0) {
      pollfd pf[2] = {{fd, POLLIN, 0}, {eventFd_, POLLIN, 0}};
      timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
      if (ppoll(pf, 2, &ts, nullptr) > 0 && (pf[1].revents & POLLIN)) {
        uint64_t v;
        ssize_t n = read(eventFd_, &v, sizeof v);
        (void)n;
      }
    } else if (polled) {
      timespec ts{0, std::min<long>(sleepNs, left)};
      nanosleep(&ts, nullptr);
      sleepNs = std::min<long>(sleepNs * 2, 200000);
    }
  }
}

}  // namespace nlccl::transport
