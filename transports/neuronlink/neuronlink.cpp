#include "transports/neuronlink/neuronlink.hpp"

#include <time.h>

#include <algorithm>

#include "util/log.hpp"

namespace nlccl::transport {

namespace {
int64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
}  // namespace

NeuronLinkTransport::NeuronLinkTransport(std::unique_ptr<Transport> inner,
                                         std::shared_ptr<const LinkModel> model)
    : inner_(std::move(inner)), model_(std::move(model)) {}

NeuronLinkTransport::~NeuronLinkTransport() {
  if (!pending_.empty()) abort(Status::InternalError);
}

Status NeuronLinkTransport::postSend(int peer, uint64_t tag, const void* buf, size_t bytes,
                                     Request* req) {
  Pending& p = pending_.emplace_back();
  p.isSend = true;
  p.peer = peer;
  p.bytes = bytes;
  p.user = req;
  p.header = {req->vstart, monotonicNs()};
  NLCHECK(inner_->postSend(peer, tag, &p.header, sizeof(Header), &p.headerReq));
  return inner_->postSend(peer, tag, buf, bytes, &p.dataReq);
}

Status NeuronLinkTransport::postRecv(int peer, uint64_t tag, void* buf, size_t bytes,
                                     const Reducer* reducer, Request* req) {
  Pending& p = pending_.emplace_back();
  p.isSend = false;
  p.reduce = reducer != nullptr;  // with reducer->src too: the same HBM traffic (link_model)
  p.peer = peer;
  p.bytes = bytes;
  p.user = req;
  NLCHECK(inner_->postRecv(peer, tag, &p.header, sizeof(Header), nullptr, &p.headerReq));
  return inner_->postRecv(peer, tag, buf, bytes, reducer, &p.dataReq);
}

void NeuronLinkTransport::complete(Pending& p, Status s) {
  p.user->status = s;
  p.user->vdone = s == Status::Success ? p.vdone : p.user->vstart;
  p.user->done.store(true, std::memory_order_release);
}

Status NeuronLinkTransport::progress() {
  Status st = inner_->progress();
  const int64_t now = model_->realtime() ? monotonicNs() : 0;
  nextDeadlineNs_ = 0;
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = *it;
    if (!p.headerReq.done.load(std::memory_order_acquire) ||
        !p.dataReq.done.load(std::memory_order_acquire)) {
      ++it;
      continue;
    }
    Status s = p.headerReq.status != Status::Success ? p.headerReq.status : p.dataReq.status;
    if (s != Status::Success) {
      complete(p, s);
      it = pending_.erase(it);
      continue;
    }
    if (!p.timed) {
      // Sender and receiver compute the same arrival: the send's virtual start plus the
      // transfer time of its route (the sender cannot know whether the receiver reduces, so
      // its completion ignores the receiver's HBM limit; on the trn presets it never binds).
      const int me = inner_->rank();
      const int src = p.isSend ? me : p.peer, dst = p.isSend ? p.peer : me;
      const double duration = model_->transferTime(src, dst, p.bytes, p.reduce);
      const double arrival = p.header.vsend + duration;
      p.vdone = p.isSend ? arrival : std::max(p.user->vstart, arrival);
      p.deadlineNs = p.header.wallNs + static_cast<int64_t>(duration * 1e9);
      p.timed = true;
    }
    if (model_->realtime() && now < p.deadlineNs) {
      nextDeadlineNs_ = nextDeadlineNs_ ? std::min(nextDeadlineNs_, p.deadlineNs) : p.deadlineNs;
      ++it;
      continue;
    }
    complete(p, Status::Success);
    it = pending_.erase(it);
  }
  return st;
}

void NeuronLinkTransport::waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) {
  if (nextDeadlineNs_ != 0) {
    // A message becomes deliverable at its deadline without any inner activity: wake then.
    auto untilDeadline = std::chrono::nanoseconds(std::max<int64_t>(0, nextDeadlineNs_ - monotonicNs()));
    timeout = std::min(timeout, untilDeadline);
    if (timeout.count() == 0) return;
  }
  inner_->waitActivity(seen, timeout);
}

void NeuronLinkTransport::abort(Status why) {
  inner_->abort(why);
  for (Pending& p : pending_) complete(p, why);
  pending_.clear();
}

}  // namespace nlccl::transport
