// The simulated NeuronLink-v4 transport: real data moves through an inner transport (shm between
// processes, loopback between threads) and every message is delayed by the fabric model. Each
// rank keeps a virtual clock; a message carries its sender's virtual send time in a small header
// sent ahead of it on the same tag, and arrives at
//     max(receiver's post time, sender's send time + modelled transfer time),
// so a run reports modelled time that does not depend on how fast this host is. In real-time
// mode (the default) a message is also not delivered before its modelled arrival in wall time.
//
// Contention between concurrent messages is not modelled here (each message sees its route's
// uncontended rate, as the simulator's analytical mode does); nlccl-sim's flow mode models it.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>

#include "transports/neuronlink/link_model.hpp"
#include "transports/transport.hpp"

namespace nlccl::transport {

class NeuronLinkTransport final : public Transport {
 public:
  NeuronLinkTransport(std::unique_ptr<Transport> inner, std::shared_ptr<const LinkModel> model);
  ~NeuronLinkTransport() override;

  const char* name() const override { return "neuronlink"; }
  int rank() const override { return inner_->rank(); }
  int nranks() const override { return inner_->nranks(); }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) override;
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const Reducer* reducer,
                  Request* req) override;
  Status progress() override;
  uint32_t activityEpoch() override { return inner_->activityEpoch(); }
  const void* activityDomain() const override { return inner_->activityDomain(); }
  void waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) override;
  void abort(Status why) override;

  bool modelsTime() const override { return true; }
  double clock() const override { return clock_; }
  void setClock(double t) override { clock_ = t; }
  double localOpTime(size_t bytes, bool reduce) const override {
    return model_->localOpTime(bytes, reduce);
  }
  double launchOverhead() const override { return model_->launchOverhead(); }

 private:
  /// Sent ahead of every message on the same (peer, tag).
  struct Header {
    double vsend = 0;     ///< sender's virtual time at the send
    int64_t wallNs = 0;   ///< sender's CLOCK_MONOTONIC at the send (same host)
  };
  struct Pending {
    bool isSend = false;
    bool reduce = false;
    int peer = 0;
    size_t bytes = 0;
    Request* user = nullptr;
    Header header;
    Request headerReq;
    Request dataReq;
    bool timed = false;    ///< arrival computed
    double vdone = 0;
    int64_t deadlineNs = 0;
  };

  void complete(Pending& p, Status s);
  std::unique_ptr<Transport> inner_;
  std::shared_ptr<const LinkModel> model_;
  std::list<Pending> pending_;
  double clock_ = 0;
  int64_t nextDeadlineNs_ = 0;  ///< earliest wall deadline of a pending message (0: none)
};

}  // namespace nlccl::transport
