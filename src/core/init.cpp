#include "core/init.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "bootstrap/unique_id.hpp"
#include "bootstrap/wire.hpp"
#include "core/process_init.hpp"
#include "transports/registry.hpp"
#include "util/log.hpp"

namespace nlccl::core {

static_assert(kMaxRanks == bootstrap::wire::kMaxRanks, "the API's limit is the bootstrap's");

namespace {

}  // namespace

Status makeThreadComm(int rank, int n, const std::shared_ptr<LocalRendezvous>& rv,
                      const CommConfig& config, std::unique_ptr<Communicator>* out) {
  transport::Context ctx;
  ctx.rank = rank;
  ctx.nranks = n;
  ctx.hosts.assign(static_cast<size_t>(n), bootstrap::hostIdentity());
  ctx.threads = true;
  ctx.timeout = config.timeout;
  ctx.topology = config.topology;
  LocalRendezvous* meet = rv.get();
  const auto timeout = config.timeout;
  ctx.allGather = [meet, rank, timeout](const void* mine, size_t bytes, void* all) {
    return meet->allGather(rank, mine, bytes, all, timeout);
  };
  std::unique_ptr<transport::Transport> tp;
  NLCHECK(transport::connect(ctx, config.transport, &tp));
  auto comm = std::make_unique<Communicator>(rank, n, std::move(tp), rv, config);
  comm->setLocalRank(rank);  // threads of one process: one host
  NLCHECK(comm->setAlgorithms(config.algorithm));
  *out = std::move(comm);
  return Status::Success;
}

namespace {

/// Makes the communicators of ranks `ranks` (indices into the group of n at `rv`) on threads of
/// their own, since their set-up is collective. The first failure wins.
Status makeComms(int n, const std::shared_ptr<LocalRendezvous>& rv, const CommConfig& config,
                 std::vector<std::unique_ptr<Communicator>>* out) {
  out->clear();
  out->resize(static_cast<size_t>(n));
  std::vector<Status> status(static_cast<size_t>(n), Status::Success);
  std::vector<std::string> why(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      status[r] = makeThreadComm(r, n, rv, config, &(*out)[r]);
      if (status[r] != Status::Success) why[r] = log::lastError();  // per thread: hand it back
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (status[r] != Status::Success) {
      out->clear();
      log::setLastError(why[r]);
      return status[r];
    }
  return Status::Success;
}

}  // namespace

Status checkTransportChoice(const std::string& choice) {
  if (choice == "auto") return Status::Success;
  for (const transport::Entry& e : transport::entries())
    if (choice == e.name) return Status::Success;
  for (const transport::Decorator& d : transport::decorators())
    if (choice == d.name) return Status::Success;
  WARN("transport '%s' is not built into this library (valid: %s)", choice.c_str(),
       transport::choices().c_str());
  return Status::InvalidArgument;
}

Status initAll(int n, const CommConfig& config, std::vector<std::unique_ptr<Communicator>>* out) {
  NLCHECK(checkTransportChoice(config.transport));
  NLCHECK(makeComms(n, std::make_shared<LocalRendezvous>(n), config, out));
  INFO(log::kInit, "initialised %d ranks over %s", n, (*out)[0]->transport()->name());
  return Status::Success;
}

Status split(Communicator* parent, int color, int key, const CommConfig& config,
             std::unique_ptr<Communicator>* out) {
  if (dynamic_cast<LocalRendezvous*>(parent->rendezvous()) == nullptr)
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
  // The group's leader makes its meeting point and hands it to the members; every rank (in
  // its own thread, as the parent's ranks are) then builds its communicator there.
  const bool leader = !members.empty() && members.front() == me;
  std::shared_ptr<LocalRendezvous> made;
  if (leader) made = std::make_shared<LocalRendezvous>(static_cast<int>(members.size()));
  const std::shared_ptr<LocalRendezvous>* handle = leader ? &made : nullptr;
  std::vector<const std::shared_ptr<LocalRendezvous>*> handed(n);
  NLCHECK(rv->allGather(me, &handle, sizeof(handle), handed.data(), timeout));
  std::shared_ptr<LocalRendezvous> group = color >= 0 ? *handed[members.front()] : nullptr;
  // Everyone has copied what its leader made before the leader's handle goes.
  char none = 0;
  std::vector<char> sink(n);
  NLCHECK(rv->allGather(me, &none, 1, sink.data(), timeout));
  if (color < 0) {
    out->reset();
    return Status::Success;
  }
  const int newRank =
      static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  NLCHECK(checkTransportChoice(config.transport));
  return makeThreadComm(newRank, static_cast<int>(members.size()), group, config, out);
}

}  // namespace nlccl::core
