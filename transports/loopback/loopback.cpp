#include "transports/loopback/loopback.hpp"

#include <cstring>

#include "kernels/reduce.hpp"
#include "util/log.hpp"

namespace nlccl::transport {

LoopbackFabric::LoopbackFabric(int nranks) : nranks_(nranks) {
  boxes_.reserve(static_cast<size_t>(nranks) * nranks);
  for (int i = 0; i < nranks * nranks; ++i) boxes_.push_back(std::make_unique<Mailbox>());
}

Status LoopbackTransport::create(int rank, int nranks, const AllGatherFn& allGather,
                                 std::unique_ptr<LoopbackTransport>* out) {
  // The ranks are threads of this process, so a pointer to rank 0's handle is valid in all of
  // them; a second exchange keeps it alive until every rank has copied the fabric.
  std::shared_ptr<LoopbackFabric> fabric;
  if (rank == 0) fabric = std::make_shared<LoopbackFabric>(nranks);
  const std::shared_ptr<LoopbackFabric>* mine = rank == 0 ? &fabric : nullptr;
  std::vector<const std::shared_ptr<LoopbackFabric>*> all(static_cast<size_t>(nranks));
  NLCHECK(allGather(&mine, sizeof(mine), all.data()));
  if (rank != 0) fabric = *all[0];
  char none = 0;
  std::vector<char> sink(static_cast<size_t>(nranks));
  NLCHECK(allGather(&none, 1, sink.data()));
  *out = std::make_unique<LoopbackTransport>(std::move(fabric), rank);
  return Status::Success;
}

namespace {
void complete(Request* req, Status s) {
  req->status = s;
  req->done.store(true, std::memory_order_release);
}
}  // namespace

void LoopbackTransport::deliver(const LoopbackFabric::Pending& send,
                                const LoopbackFabric::Pending& recv) {
  Status s = Status::Success;
  if (send.bytes != recv.bytes) {
    WARN("loopback: message size mismatch: sender posted %zu bytes, receiver expects %zu",
         send.bytes, recv.bytes);
    s = Status::InvalidUsage;
  } else if (recv.reduce) {
    recv.reducer.apply(static_cast<char*>(recv.buf), 0, send.buf, recv.bytes);
  } else if (recv.buf != send.buf && recv.bytes > 0) {
    std::memcpy(recv.buf, send.buf, recv.bytes);
  }
  complete(send.req, s);
  complete(recv.req, s);
  fabric_->activity_.notify();
}

Status LoopbackTransport::postSend(int peer, uint64_t tag, const void* buf, size_t bytes,
                                   Request* req) {
  if (int a = fabric_->abortStatus_.load()) {
    complete(req, static_cast<Status>(a));
    return static_cast<Status>(a);
  }
  LoopbackFabric::Pending me{tag, const_cast<void*>(buf), bytes, {}, false, req};
  auto& box = fabric_->box(rank_, peer);
  std::unique_lock<std::mutex> lock(box.mu);
  for (auto it = box.recvs.begin(); it != box.recvs.end(); ++it) {
    if (it->tag != tag) continue;
    LoopbackFabric::Pending recv = *it;
    box.recvs.erase(it);
    // The copy runs under the pair's lock: only this pair waits for it, and it keeps FIFO order.
    deliver(me, recv);
    return Status::Success;
  }
  box.sends.push_back(me);
  return Status::Success;
}

Status LoopbackTransport::postRecv(int peer, uint64_t tag, void* buf, size_t bytes,
                                   const Reducer* reducer, Request* req) {
  if (int a = fabric_->abortStatus_.load()) {
    complete(req, static_cast<Status>(a));
    return static_cast<Status>(a);
  }
  LoopbackFabric::Pending me{tag, buf, bytes, reducer ? *reducer : Reducer{}, reducer != nullptr,
                             req};
  auto& box = fabric_->box(peer, rank_);
  std::unique_lock<std::mutex> lock(box.mu);
  for (auto it = box.sends.begin(); it != box.sends.end(); ++it) {
    if (it->tag != tag) continue;
    LoopbackFabric::Pending send = *it;
    box.sends.erase(it);
    deliver(send, me);
    return Status::Success;
  }
  box.recvs.push_back(me);
  return Status::Success;
}

Status LoopbackTransport::progress() {
  int a = fabric_->abortStatus_.load();
  return a ? static_cast<Status>(a) : Status::Success;
}

void LoopbackTransport::abort(Status why) {
  int expected = 0;
  fabric_->abortStatus_.compare_exchange_strong(expected, static_cast<int>(why));
  // Fail everything still waiting in any mailbox that involves this fabric.
  int n = fabric_->nranks();
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      auto& box = fabric_->box(s, d);
      std::lock_guard<std::mutex> lock(box.mu);
      for (auto& p : box.sends) complete(p.req, why);
      for (auto& p : box.recvs) complete(p.req, why);
      box.sends.clear();
      box.recvs.clear();
    }
  fabric_->activity_.notify();
}

}  // namespace nlccl::transport
