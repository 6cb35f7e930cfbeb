// Set-up of the neuronlink transport: its fabric model and the group's shared timeline.
#include <unistd.h>

#include "transports/neuronlink/neuronlink.hpp"
#include "util/log.hpp"
#include "util/shared_memory.hpp"

namespace nlccl::transport {

Status sharedTimeline(int rank, int nranks, const AllGatherFn& allGather,
                      std::unique_ptr<Timeline>* out) {
  struct Where {
    int32_t pid = 0, fd = -1;
    uint64_t id = 0, size = 0;
    int32_t status = 0;
  };
  Where mine;
  std::shared_ptr<void> mem;
  Status s = Status::Success;
  if (rank == 0) {
    std::chrono::milliseconds grace;
    s = timelineIdleGrace(&grace);
    const size_t bytes = Timeline::bytesFor(nranks, timelineCapacity());
    void* p = nullptr;
    if (s == Status::Success) s = shmem::memAlloc(bytes, &p);
    if (s == Status::Success) {
      mem = std::shared_ptr<void>(p, [](void* q) { shmem::memFree(q); });
      s = Timeline::format(p, bytes, nranks, timelineCapacity(), grace);
    }
    shmem::AllocationRef ref;
    if (s == Status::Success && !shmem::findAllocation(p, bytes, &ref)) s = Status::InternalError;
    mine = {static_cast<int32_t>(getpid()), ref.fd, ref.id, ref.size, static_cast<int32_t>(s)};
  }
  std::vector<Where> all(static_cast<size_t>(nranks));
  NLCHECK(allGather(&mine, sizeof(mine), all.data()));
  const Where w = all[0];
  if (w.status != 0) return static_cast<Status>(w.status);
  void* base = mem.get();
  if (rank != 0) {
    auto map = std::make_shared<shmem::RemoteMapping>();
    NLCHECK(shmem::RemoteMapping::open(w.pid, w.fd, w.id, w.size, map.get(), true));
    base = map->writableData();
    mem = std::shared_ptr<void>(map, base);  // keeps the mapping alive
  }
  // Rank 0 frees its allocation when its transport goes; the others' mappings keep the memory.
  char none = 0;
  std::vector<char> sink(static_cast<size_t>(nranks));
  NLCHECK(allGather(&none, 1, sink.data()));
  return Timeline::attach(mem, base, w.size, nranks, rank, out);
}

Status NeuronLinkTransport::create(std::unique_ptr<Transport> inner, const std::string& topology,
                                   const AllGatherFn& allGather, std::unique_ptr<Transport>* out) {
  const int rank = inner->rank(), nranks = inner->nranks();
  LinkModelOptions opts;
  NLCHECK(linkModelOptionsFromEnv(topology, &opts));
  std::shared_ptr<const LinkModel> model;
  NLCHECK(LinkModel::create(opts, nranks, &model));
  std::unique_ptr<Timeline> timeline;
  NLCHECK(sharedTimeline(rank, nranks, allGather, &timeline));
  *out = std::make_unique<NeuronLinkTransport>(std::move(inner), std::move(model),
                                               std::move(timeline));
  return Status::Success;
}

}  // namespace nlccl::transport
