#include "core/reshape.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/init.hpp"
#include "core/process_init.hpp"
#include "util/log.hpp"

namespace nlccl::core {

Status shrink(Communicator* parent, const std::vector<int>& excluded, bool abortFirst,
              const CommConfig& config, std::unique_ptr<Communicator>* out) {
  const int n = parent->nranks();
  std::vector<int> sorted = excluded;
  std::sort(sorted.begin(), sorted.end());
  // Every survivor counts this shrink alike: it is collective over them.
  const uint64_t index = parent->nextReshape();
  if (abortFirst) parent->abort();  // pending work fails at the transport; the parent stays
  const int survivors = n - static_cast<int>(sorted.size());
  int newRank = 0;
  for (int r = 0; r < parent->rank(); ++r)
    newRank += !std::binary_search(sorted.begin(), sorted.end(), r);
  INFO(log::kInit, "shrink: rank %d of %d becomes rank %d of %d", parent->rank(), n, newRank,
       survivors);
  if (auto* local = dynamic_cast<LocalRendezvous*>(parent->rendezvous())) {
    std::string key = "shrink/" + std::to_string(index);
    for (int r : sorted) key += "/" + std::to_string(r);
    std::shared_ptr<LocalRendezvous> group = local->subgroup(key, survivors);
    NLCHECK(checkTransportChoice(config.transport));
    return makeThreadComm(newRank, survivors, group, config, out);
  }
  auto* rv = dynamic_cast<BootstrapRendezvous*>(parent->rendezvous());
  if (rv == nullptr) {
    WARN("nlcclCommShrink: the communicator has no bootstrap");
    return Status::InternalError;
  }
  std::unique_ptr<bootstrap::Bootstrap> sub;
  NLCHECK(rv->bootstrap().shrink(sorted, &sub));
  return connectProcesses(std::move(sub), config, out);
}

Status makeGrowId(Communicator* comm, bootstrap::UniqueId* out) {
  std::vector<char>& pending = comm->pendingGrowId();
  if (!pending.empty()) {
    WARN("nlcclCommGetUniqueId: rank %d already made an id that no nlcclCommGrow has used yet",
         comm->rank());
    return Status::InvalidUsage;
  }
  NLCHECK(makeUniqueId(out));
  pending.assign(out->bytes, out->bytes + sizeof(out->bytes));
  return Status::Success;
}

Status grow(Communicator* parent, int nRanks, const bootstrap::UniqueId* id, int newRank,
            const CommConfig& config, std::unique_ptr<Communicator>* out) {
  bootstrap::UniqueId use;
  int rank = newRank;
  if (parent != nullptr) {
    // The old ranks learn the id from the one that has it.
    struct Offer {
      int32_t has;
      char bytes[sizeof(bootstrap::UniqueId::bytes)];
    };
    Offer mine{};
    mine.has = id != nullptr;
    if (id) std::memcpy(mine.bytes, id->bytes, sizeof(mine.bytes));
    std::vector<Offer> all(static_cast<size_t>(parent->nranks()));
    NLCHECK(parent->rendezvous()->allGather(parent->rank(), &mine, sizeof(mine), all.data(),
                                           parent->config().timeout));
    int holders = 0;
    for (const Offer& o : all) {
      if (!o.has) continue;
      if (holders++ == 0) std::memcpy(use.bytes, o.bytes, sizeof(use.bytes));
    }
    if (holders != 1) {
      WARN("nlcclCommGrow: %d ranks of the old communicator passed a uniqueId; exactly one "
           "(the one that called nlcclCommGetUniqueId) must",
           holders);
      return Status::InvalidUsage;
    }
    parent->pendingGrowId().clear();
    rank = parent->rank();
  } else {
    use = *id;
  }
  return initRank(use, rank, nRanks, config, out);
}

}  // namespace nlccl::core
