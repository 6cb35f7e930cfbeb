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
  // No wait object covers several transports, so block on each in turn for a short slice and
  // return as soon as any has moved.
  constexpr auto kSlice = std::chrono::milliseconds(1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
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
