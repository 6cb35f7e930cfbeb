#include "core/init.hpp"

#include <algorithm>
#include <cstring>

#include "core/process_init.hpp"
#include "transports/loopback/loopback.hpp"
#include "transports/neuronlink/neuronlink.hpp"
#include "util/log.hpp"

namespace nlccl::core {

namespace {
/// What the first rank of a new in-process group hands the others.
struct LocalShared {
  std::shared_ptr<transport::LoopbackFabric> fabric;
  std::shared_ptr<LocalRendezvous> rendezvous;
  std::shared_ptr<const transport::LinkModel> model;  ///< neuronlink only
  std::shared_ptr<void> timeline;                     ///< neuronlink only: its memory
  size_t timelineBytes = 0;
};

Status makeShared(int n, const CommConfig& config, LocalShared* out) {
  if (config.transport != "auto" && config.transport != "loopback" &&
      config.transport != "neuronlink") {
    WARN("transport '%s' is not available for ranks that are threads of one process (use "
         "loopback or neuronlink)",
         config.transport.c_str());
    return Status::InvalidArgument;
  }
  out->fabric = std::make_shared<transport::LoopbackFabric>(n);
  out->rendezvous = std::make_shared<LocalRendezvous>(n);
  if (config.transport == "neuronlink") {
    NLCHECK(neuronLinkModel(config, n, &out->model));
    NLCHECK(transport::makeLocalTimeline(n, &out->timeline, &out->timelineBytes));
  }
  return Status::Success;
}

Status makeComm(int rank, int n, const LocalShared& shared, const CommConfig& config,
                std::unique_ptr<Communicator>* out) {
  std::unique_ptr<transport::Transport> tp =
      std::make_unique<transport::LoopbackTransport>(shared.fabric, rank);
  if (shared.model) {
    std::unique_ptr<transport::Timeline> timeline;
    NLCHECK(transport::Timeline::attach(shared.timeline, shared.timeline.get(),
                                        shared.timelineBytes, n, rank, &timeline));
    tp = std::make_unique<transport::NeuronLinkTransport>(std::move(tp), shared.model,
                                                          std::move(timeline));
  }
  auto comm = std::make_unique<Communicator>(rank, n, std::move(tp), shared.rendezvous, config);
  NLCHECK(comm->setAlgorithms(config.algorithm));
  *out = std::move(comm);
  return Status::Success;
}
}  // namespace

Status neuronLinkModel(const CommConfig& config, int nranks,
                       std::shared_ptr<const transport::LinkModel>* out) {
  transport::LinkModelOptions opts;
  NLCHECK(transport::linkModelOptionsFromEnv(config.topology, &opts));
  return transport::LinkModel::create(opts, nranks, out);
}

Status initAll(int n, const CommConfig& config, std::vector<std::unique_ptr<Communicator>>* out) {
  LocalShared shared;
  NLCHECK(makeShared(n, config, &shared));
  out->clear();
  for (int r = 0; r < n; ++r) {
    std::unique_ptr<Communicator> c;
    NLCHECK(makeComm(r, n, shared, config, &c));
    out->push_back(std::move(c));
  }
  INFO(log::kInit, "initialised %d ranks over %s", n, shared.model ? "neuronlink" : "loopback");
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
  bool leader = !members.empty() && members.front() == me;
  LocalShared* made = nullptr;
  Status s = Status::Success;
  if (leader) {
    made = new LocalShared;
    s = makeShared(static_cast<int>(members.size()), config, made);
  }
  std::vector<LocalShared*> handed(n);
  Status g = rv->allGather(me, &made, sizeof(made), handed.data(), timeout);
  if (s == Status::Success) s = g;
  if (s == Status::Success && color >= 0 && handed[members.front()]->fabric == nullptr) {
    WARN("nlcclCommSplit: rank %d could not set up the new communicator", members.front());
    s = Status::InvalidArgument;
  }
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
