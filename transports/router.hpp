// A data path made of several transports: each peer's messages go to the transport the registry
// chose for that pair. Progress, abort and wake reach all of them; a wait polls all of them for
// a while (a part such as ofi over tcp moves its peers' traffic only inside its progress calls),
// then blocks on each in turn for short slices.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transports/transport.hpp"

namespace nlccl::transport {

class Router final : public Transport {
 public:
  /// `byPeer[p]` indexes `parts` (the transport of peer p, this rank included).
  Router(int rank, int nranks, std::vector<std::unique_ptr<Transport>> parts,
         std::vector<int> byPeer);

  const char* name() const override { return name_.c_str(); }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const char* peerTransport(int peer) const override;
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) override;
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const Reducer* reducer,
                  Request* req) override;
  Status progress() override;
  uint32_t activityEpoch() override;
  void waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) override;
  void abort(Status why) override;
  void wake(int rank) override;
  void releaseWakes() override;

 private:
  Transport* of(int peer) const;

  int rank_, nranks_;
  std::vector<std::unique_ptr<Transport>> parts_;
  std::vector<int> byPeer_;
  std::string name_;  ///< "shm+ofi"
};

}  // namespace nlccl::transport
