// A transport that passes every call to the one underneath: the base of the tests' transports
// that watch or count what the engine posts (they override postSend, and exchange where asked).
#pragma once

#include <chrono>
#include <memory>

#include "transports/transport.hpp"

namespace nlccl::testing {

class ForwardingTransport : public transport::Transport {
 public:
  explicit ForwardingTransport(std::unique_ptr<transport::Transport> inner)
      : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int nranks() const override { return inner_->nranks(); }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes,
                  transport::Request* req) override {
    return inner_->postSend(peer, tag, buf, bytes, req);
  }
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes,
                  const transport::Reducer* reducer, transport::Request* req) override {
    return inner_->postRecv(peer, tag, buf, bytes, reducer, req);
  }
  Status progress() override { return inner_->progress(); }
  uint32_t activityEpoch() override { return inner_->activityEpoch(); }
  const void* activityDomain() const override { return inner_->activityDomain(); }
  void waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) override {
    inner_->waitActivity(seen, timeout);
  }
  void abort(Status why) override { inner_->abort(why); }
  void wake(int r) override { inner_->wake(r); }

 private:
  std::unique_ptr<transport::Transport> inner_;
};

}  // namespace nlccl::testing
