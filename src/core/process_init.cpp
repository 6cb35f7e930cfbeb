#include "core/process_init.hpp"

#include <unistd.h>

#include "bootstrap/root.hpp"
#include "core/init.hpp"
#include "transports/neuronlink/neuronlink.hpp"
#include "transports/shm/shm.hpp"
#include "transports/shm/shm_memory.hpp"
#ifdef NLCCL_HAVE_OFI
#include "transports/ofi/ofi.hpp"
#endif
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

/// The neuronlink transport's shared timeline for ranks that are processes: rank 0 allocates it
/// as a memfd (nlcclMemAlloc's kind: no name, so nothing outlives the processes) and every other
/// rank maps it through /proc/<pid>/fd.
Status sharedTimeline(bootstrap::Bootstrap& bs, std::unique_ptr<transport::Timeline>* out) {
  struct Where {
    int32_t pid = 0, fd = -1;
    uint64_t id = 0, size = 0;
    int32_t status = 0;
  };
  const int rank = bs.rank(), nranks = bs.nranks();
  Where mine;
  std::shared_ptr<void> mem;
  Status s = Status::Success;
  if (rank == 0) {
    std::chrono::milliseconds grace;
    s = transport::timelineIdleGrace(&grace);
    const size_t bytes = transport::Timeline::bytesFor(nranks, transport::timelineCapacity());
    void* p = nullptr;
    if (s == Status::Success) s = transport::shm::memAlloc(bytes, &p);
    if (s == Status::Success) {
      mem = std::shared_ptr<void>(p, [](void* q) { transport::shm::memFree(q); });
      s = transport::Timeline::format(p, bytes, nranks, transport::timelineCapacity(), grace);
    }
    transport::shm::AllocationRef ref;
    if (s == Status::Success && !transport::shm::findAllocation(p, bytes, &ref))
      s = Status::InternalError;
    mine = {static_cast<int32_t>(getpid()), ref.fd, ref.id, ref.size, static_cast<int32_t>(s)};
  }
  std::vector<Where> all(static_cast<size_t>(nranks));
  NLCHECK(bs.allGather(&mine, sizeof(mine), all.data()));
  const Where w = all[0];
  if (w.status != 0) return static_cast<Status>(w.status);
  void* base = mem.get();
  if (rank != 0) {
    auto map = std::make_shared<transport::shm::RemoteMapping>();
    NLCHECK(transport::shm::RemoteMapping::open(w.pid, w.fd, w.id, w.size, map.get(), true));
    base = map->writableData();
    mem = std::shared_ptr<void>(map, base);  // keeps the mapping alive
  }
  return transport::Timeline::attach(mem, base, w.size, nranks, rank, out);
}

/// Builds the communicator of one rank over `bs` (a fresh bootstrap or a split of one).
Status connect(std::unique_ptr<bootstrap::Bootstrap> bs, const CommConfig& config,
               std::unique_ptr<Communicator>* out) {
  const int rank = bs->rank(), nranks = bs->nranks();
  bool allLocal = true;
  for (int r = 0; r < nranks; ++r) allLocal = allLocal && bs->sameHost(r);
  const std::string& want = config.transport;
  if (want == "loopback") {
    WARN("transport 'loopback' joins threads of one process; ranks made by nlcclCommInitRank are "
         "processes (use shm, or nlcclCommInitAll for threads)");
    return Status::InvalidArgument;
  }
#ifdef NLCCL_HAVE_OFI
  constexpr bool kHaveOfi = true;
#else
  constexpr bool kHaveOfi = false;
#endif
  if ((want == "ofi" && !kHaveOfi) || ((want == "auto" || want == "neuronlink") && !allLocal)) {
    WARN("rank %d: transport '%s' is not available in this build (ranks on %s host%s)", rank,
         want.c_str(), allLocal ? "one" : "several", allLocal ? "" : "s");
    return Status::InvalidUsage;
  }
  auto rv = std::make_shared<BootstrapRendezvous>(std::move(bs));
  bootstrap::Bootstrap* b = &rv->bootstrap();
  auto allGather = [b](const void* mine, size_t bytes, void* all) {
    return b->allGather(mine, bytes, all);
  };
  std::unique_ptr<transport::Transport> tp;
#ifdef NLCCL_HAVE_OFI
  if (want == "ofi") {  // forced for every pair (per-pair choice comes with the registry)
    std::unique_ptr<transport::OfiTransport> ofi;
    NLCHECK(transport::OfiTransport::create(rank, nranks, allGather, config.timeout,
                                            [b]() { return b->health(); }, &ofi));
    tp = std::move(ofi);
  }
#endif
  if (!tp) {
    std::unique_ptr<transport::ShmTransport> shm;
    NLCHECK(transport::ShmTransport::create(rank, nranks, allGather, config.timeout,
                                            [b]() { return b->health(); }, &shm));
    tp = std::move(shm);
  }
  if (want == "neuronlink") {
    std::shared_ptr<const transport::LinkModel> model;
    NLCHECK(neuronLinkModel(config, nranks, &model));
    std::unique_ptr<transport::Timeline> timeline;
    NLCHECK(sharedTimeline(*b, &timeline));
    tp = std::make_unique<transport::NeuronLinkTransport>(std::move(tp), model,
                                                          std::move(timeline));
  }
  auto comm = std::make_unique<Communicator>(rank, nranks, std::move(tp), rv, config);
  comm->setHostGroups(hostGroupsOf(*b));
  NLCHECK(comm->setAlgorithms(config.algorithm));
  // Ready only when every rank is: a rank that failed above makes the others fail here, not later.
  NLCHECK(b->barrier());
  INFO(log::kInit, "rank %d of %d connected over %s", rank, nranks, comm->transport()->name());
  *out = std::move(comm);
  return Status::Success;
}

}  // namespace

Status makeUniqueId(bootstrap::UniqueId* id) { return bootstrap::createUniqueId(id); }

Status initRank(const bootstrap::UniqueId& id, int rank, int nranks, const CommConfig& config,
                std::unique_ptr<Communicator>* out) {
  std::unique_ptr<bootstrap::Bootstrap> bs;
  NLCHECK(bootstrap::Bootstrap::init(id, rank, nranks, config.timeout, &bs));
  log::setThreadRank(rank);
  return connect(std::move(bs), config, out);
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
  return connect(std::move(sub), config, out);
}

}  // namespace nlccl::core
