#include "core/process_init.hpp"

#include <unistd.h>

#include "bootstrap/root.hpp"
#include "core/init.hpp"
#include "transports/registry.hpp"
#include "util/log.hpp"

namespace nlccl::core {

namespace {

/// {ranks per host, hosts} when the ranks sit host by host in equal blocks, else {} (one level).
std::vector<int> hostGroupsOf(const bootstrap::Bootstrap& bs) {
  const int n = bs.nranks();
  int perHost = 1;
  while (perHost < n && bs.peerHostIdentity(perHost) == bs.peerHostIdentity(0)) ++perHost;
  if (perHost == n || n % perHost != 0) return {};
  for (int r = 0; r < n; ++r)
    if (bs.peerHostIdentity(r) != bs.peerHostIdentity(r - r % perHost)) return {};
  for (int h = perHost; h < n; h += perHost)
    if (bs.peerHostIdentity(h) == bs.peerHostIdentity(h - perHost)) return {};
  return {perHost, n / perHost};
}

}  // namespace

Status connectProcesses(std::unique_ptr<bootstrap::Bootstrap> bs, const CommConfig& config,
                        std::unique_ptr<Communicator>* out) {
  const int rank = bs->rank(), nranks = bs->nranks();
  NLCHECK(checkTransportChoice(config.transport));
  auto rv = std::make_shared<BootstrapRendezvous>(std::move(bs));
  bootstrap::Bootstrap* b = &rv->bootstrap();
  transport::Context ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  for (int r = 0; r < nranks; ++r) ctx.hosts.push_back(b->peerHostIdentity(r));
  ctx.threads = false;
  ctx.allGather = [b](const void* mine, size_t bytes, void* all) {
    return b->allGather(mine, bytes, all);
  };
  ctx.timeout = config.timeout;
  ctx.health = [b]() { return b->health(); };
  ctx.topology = config.topology;
  std::unique_ptr<transport::Transport> tp;
  NLCHECK(transport::connect(ctx, config.transport, &tp));
  auto comm = std::make_unique<Communicator>(rank, nranks, std::move(tp), rv, config);
  comm->setHostGroups(hostGroupsOf(*b));
  int local = 0;
  for (int r = 0; r < rank; ++r) local += b->peerHostIdentity(r) == b->peerHostIdentity(rank);
  comm->setLocalRank(local);
  NLCHECK(comm->setAlgorithms(config.algorithm));
  // Ready only when every rank is: a rank that failed above makes the others fail here, not later.
  NLCHECK(b->barrier());
  INFO(log::kInit, "rank %d of %d connected over %s", rank, nranks, comm->transport()->name());
  *out = std::move(comm);
  return Status::Success;
}

Status makeUniqueId(bootstrap::UniqueId* id) { return bootstrap::createUniqueId(id); }

Status initRank(const bootstrap::UniqueId& id, int rank, int nranks, const CommConfig& config,
                std::unique_ptr<Communicator>* out) {
  std::unique_ptr<bootstrap::Bootstrap> bs;
  NLCHECK(bootstrap::Bootstrap::init(id, rank, nranks, config.timeout, &bs));
  log::setThreadRank(rank);
  return connectProcesses(std::move(bs), config, out);
}

Status splitProcesses(Communicator* parent, int color, int key, const CommConfig& config,
                      std::unique_ptr<Communicator>* out) {
  auto* rv = dynamic_cast<BootstrapRendezvous*>(parent->rendezvous());
  if (rv == nullptr) {
    WARN("nlcclCommSplit: the communicator has no bootstrap");
    return Status::InternalError;
  }
  std::unique_ptr<bootstrap::Bootstrap> sub;
  NLCHECK(rv->bootstrap().split(color, key, &sub));
  if (!sub) {
    out->reset();
    return Status::Success;
  }
  return connectProcesses(std::move(sub), config, out);
}

}  // namespace nlccl::core
