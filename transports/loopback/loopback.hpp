// Loopback transport: ranks are threads of one process. A send and its matching receive meet in the
// pair's mailbox; whichever is posted second copies (or reduces) straight from the sender's buffer
// into the receiver's, so data moves once.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "transports/transport.hpp"
#include "util/futex.hpp"

namespace nlccl::transport {

/// The state shared by the n ranks of one in-process communicator.
class LoopbackFabric {
 public:
  explicit LoopbackFabric(int nranks);
  int nranks() const { return nranks_; }

 private:
  friend class LoopbackTransport;
  struct Pending {
    uint64_t tag;
    void* buf;  // const for sends
    size_t bytes;
    Reducer reducer;  // receives only
    bool reduce;
    Request* req;
  };
  struct Mailbox {  // messages from one rank to another
    std::mutex mu;
    std::deque<Pending> sends;
    std::deque<Pending> recvs;
  };
  Mailbox& box(int src, int dst) { return *boxes_[static_cast<size_t>(src) * nranks_ + dst]; }

  int nranks_;
  std::vector<std::unique_ptr<Mailbox>> boxes_;
  Notifier activity_;  // one for all ranks: a single thread may drive several ranks (groups)
  std::atomic<int> abortStatus_{0};
};

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank)
      : fabric_(std::move(fabric)), rank_(rank) {}
  /// Collective over the threads of one group: rank 0 makes the fabric and `allGather` (which
  /// must run in this process) hands it to the others.
  static Status create(int rank, int nranks, const AllGatherFn& allGather,
                       std::unique_ptr<LoopbackTransport>* out);
  const char* name() const override { return "loopback"; }
  int rank() const override { return rank_; }
  int nranks() const override { return fabric_->nranks(); }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) override;
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const Reducer* reducer,
                  Request* req) override;
  Status progress() override;
  uint32_t activityEpoch() override { return fabric_->activity_.epoch(); }
  const void* activityDomain() const override { return fabric_.get(); }
  void waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) override {
    fabric_->activity_.wait(seen, timeout);
  }
  void abort(Status why) override;
  void wake(int) override { fabric_->activity_.notify(); }
  const std::shared_ptr<LoopbackFabric>& fabric() const { return fabric_; }

 private:
  void deliver(const LoopbackFabric::Pending& send, const LoopbackFabric::Pending& recv);
  std::shared_ptr<LoopbackFabric> fabric_;
  int rank_;
};

}  // namespace nlccl::transport
