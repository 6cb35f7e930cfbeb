// Communicators whose ranks are processes: the bootstrap (TCP, Asio) forms the group, then each
// pair of ranks gets a transport (same host -> shm). Also the bootstrap-backed Rendezvous.
#pragma once

#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "core/comm.hpp"

namespace nlccl::core {

/// Rendezvous over a Bootstrap (owned: it also carries the liveness of every rank).
class BootstrapRendezvous final : public Rendezvous {
 public:
  explicit BootstrapRendezvous(std::unique_ptr<bootstrap::Bootstrap> bs) : bs_(std::move(bs)) {}
  Status allGather(int rank, const void* mine, size_t bytes, void* all,
                   std::chrono::milliseconds timeout) override {
    return bs_->allGather(mine, bytes, all);
  }
  bootstrap::Bootstrap& bootstrap() { return *bs_; }

 private:
  std::unique_ptr<bootstrap::Bootstrap> bs_;
};

/// Builds the communicator of one rank over `bs` (a fresh bootstrap, a split or a shrink of one):
/// every pair of ranks gets the transport the registry chooses for it. Collective over `bs`.
Status connectProcesses(std::unique_ptr<bootstrap::Bootstrap> bs, const CommConfig& config,
                        std::unique_ptr<Communicator>* out);

/// nlcclGetUniqueId: starts the bootstrap root in this process.
Status makeUniqueId(bootstrap::UniqueId* id);

/// nlcclCommInitRank: joins the group of `id` and connects transports.
Status initRank(const bootstrap::UniqueId& id, int rank, int nranks, const CommConfig& config,
                std::unique_ptr<Communicator>* out);

/// nlcclCommSplit of a process communicator.
Status splitProcesses(Communicator* parent, int color, int key, const CommConfig& config,
                      std::unique_ptr<Communicator>* out);

}  // namespace nlccl::core
