#include "transports/router.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "util/log.hpp"

namespace nlccl::transport {

Router::Router(int rank, int nranks, std::vector<std::unique_ptr<Transport>> parts,
               std::vector<int> byPeer)
    : rank_(rank), nranks_(nranks), parts_(std::move(parts)), byPeer_(std::move(byPeer)) {
  for (const auto& t : parts_) name_ += (name_.empty() ? "" : "+") + std::string(t->name());
}

Transport* Router::of(int peer) const {
  if (peer < 0 || peer >= nranks_) return nullptr;
  return parts_[static_cast<size_t>(byPeer_[static_cast<size_t>(peer)])].get();
}

const char* Router::peerTransport(int peer) const {
  const Transport* t = of(peer);
  return t ? t->peerTransport(peer) : "none";
}

Status Router::postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) {
  Transport* t = of(peer);
  if (t == nullptr) {
    WARN("rank %d: send to peer %d of %d", rank_, peer, nranks_);
    return Status::InvalidArgument;
  }
  return t->postSend(peer, tag, buf, bytes, req);
}

Status Router::postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const Reducer* reducer,
                        Request* req) {
  Transport* t = of(peer);
  if (t == nullptr) {
    WARN("rank %d: receive from peer %d of %d", rank_, peer, nranks_);
    return Status::InvalidArgument;
  }
  return t->postRecv(peer, tag, buf, bytes, reducer, req);
}

Status Router::progress() {
  for (auto& t : parts_) NLCHECK(t->progress());
  return Status::Success;
}

uint32_t Router::activityEpoch() {
  uint32_t sum = 0;  // changes whenever any part's epoch does (they only move forward)
  for (auto& t : parts_) sum += t->activityEpoch();
  return sum;
}

void Router::waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) {
  // No wait object covers several transports, and a part blocked in its own wait serves none of
  // the others' traffic: over ofi a peer's rendezvous (rxm's read of our send) needs our
  // progress calls, and a shm peer's wake-up does not reach a rank blocked on the ofi
  // descriptor. So first poll every part, yielding between passes (ranks may share cores), for
  // kPollAll; only a longer wait blocks, on each part in turn for a short slice. (Blocking at
  // once cost 4 ranks on 2 hosts 5 ms per 8-byte all-reduce; docs/ofi.md.)
  constexpr auto kPollAll = std::chrono::milliseconds(2);
  constexpr auto kSlice = std::chrono::milliseconds(1);
  constexpr int kPollsBeforeYield = 4;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  const auto pollEnd = start + std::min<std::chrono::nanoseconds>(timeout, kPollAll);
  for (int i = 0;; ++i) {
    if (progress() != Status::Success) return;  // the caller's progress() reports it
    if (activityEpoch() != seen) return;
    if (std::chrono::steady_clock::now() >= pollEnd) break;
    if (i >= kPollsBeforeYield) std::this_thread::yield();
  }
  while (activityEpoch() == seen) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return;
    for (auto& t : parts_) {
      const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
      t->waitActivity(t->activityEpoch(), std::min<std::chrono::nanoseconds>(
                                              left, kSlice / static_cast<int>(parts_.size())));
      if (activityEpoch() != seen) return;
    }
  }
}

void Router::abort(Status why) {
  for (auto& t : parts_) t->abort(why);
}

void Router::releaseWakes() {
  for (auto& t : parts_) t->releaseWakes();
}

void Router::wake(int rank) {
  for (auto& t : parts_) t->wake(rank);
}

}  // namespace nlccl::transport
