#include "core/init.hpp"

#include <algorithm>
#include <cstring>

#include "core/process_init.hpp"
#include "transports/loopback/loopback.hpp"
#include "util/log.hpp"

namespace nlccl::core {

namespace {
/// What the first rank of a new in-process group hands the others.
struct LocalShared {
  std::shared_ptr<transport::LoopbackFabric> fabric;
  std::shared_ptr<LocalRendezvous> rendezvous;
};

Status makeComm(int rank, int n, const LocalShared& shared, const CommConfig& config,
                std::unique_ptr<Communicator>* out) {
  auto comm = std::make_unique<Communicator>(
      rank, n, std::make_unique<transport::LoopbackTransport>(shared.fabric, rank),
      shared.rendezvous, config);
  NLCHECK(comm->setAlgorithms(config.algorithm));
  *out = std::move(comm);
  return Status::Success;
}
}  // namespace

Status initAll(int n, const CommConfig& config, std::vector<std::unique_ptr<Communicator>>* out) {
  if (config.transport != "auto" && config.transport != "loopback") {
    WARN("nlcclCommInitAll: transport '%s' is not available for ranks that are threads; use "
         "loopback",
         config.transport.c_str());
    return Status::InvalidArgument;
  }
  LocalShared shared{std::make_shared<transport::LoopbackFabric>(n),
                     std::make_shared<LocalRendezvous>(n)};
  out->clear();
  for (int r = 0; r < n; ++r) {
    std::unique_ptr<Communicator> c;
    NLCHECK(makeComm(r, n, shared, config, &c));
    out->push_back(std::move(c));
  }
  INFO(log::kInit, "initialised %d ranks over loopback", n);
  return Status::Success;
}

Status split(Communicator* parent, int color, int key, const CommConfig& config,
             std::unique_ptr<Communicator>* out) {
  if (std::strcmp(parent->transport()->name(), "loopback") != 0)
    return splitProcesses(parent, color, key, config, out);
  const int n = parent->nranks(), me = parent->rank();
  Rendezvous* rv = parent->rendezvous();
  auto timeout = parent->config().timeout;
  struct Entry {
    int color, key;
  };
  std::vector<Entry> all(n);
  Entry mine{color, key};
  NLCHECK(rv->allGather(me, &mine, sizeof(mine), all.data(), timeout));
  std::vector<int> members;  // old ranks of my group, in new-rank order
  for (int r = 0; r < n; ++r)
    if (color >= 0 && all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[a].key < all[b].key; });
  bool leader = !members.empty() && members.front() == me;
  LocalShared* made = leader ? new LocalShared{
                                   std::make_shared<transport::LoopbackFabric>(members.size()),
                                   std::make_shared<LocalRendezvous>(members.size())}
                             : nullptr;
  std::vector<LocalShared*> handed(n);
  Status s = rv->allGather(me, &made, sizeof(made), handed.data(), timeout);
  if (s == Status::Success && color >= 0) {
    int newRank = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
    s = makeComm(newRank, static_cast<int>(members.size()), *handed[members.front()], config, out);
  } else if (color < 0) {
    out->reset();
  }
  // Everyone has copied what its leader made before the leader frees it.
  char none = 0;
  std::vector<char> sink(n);
  Status b = rv->allGather(me, &none, 1, sink.data(), timeout);
  delete made;
  return s != Status::Success ? s : b;
}

}  // namespace nlccl::core
