// The cost of one message on the modelled NeuronLink fabric when it has the fabric to itself: route
// latency plus bytes over the route's uncontended rate (links, the sender's DMA engines, the
// receiver's HBM when it reduces on arrival), as the simulator's analytical mode charges it. The
// transport uses it as a lower bound; fabric::FlowModel adds the sharing. Ranks map to chips of the
// topology in order (NLCCL_TOPOLOGY, default trn3-us144), or by the list NLCCL_NEURONLINK_CHIPS.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fabric/flow_model.hpp"
#include "nlccl/topology.hpp"
#include "util/status.hpp"

namespace nlccl::transport {

struct LinkModelOptions {
  std::string topology = "trn3-us144";
  std::vector<int> chips;          ///< chip of each rank; empty: the topology's rank order
  double latencyUs = -1;           ///< per-message latency; < 0: the route's
  double bandwidthGBps = -1;       ///< per-message rate cap in 10^9 B/s; < 0: the route's
  bool realtime = true;            ///< delay delivery until the modelled arrival in wall time
};

/// Options from NLCCL_NEURONLINK_LATENCY_US, NLCCL_NEURONLINK_BANDWIDTH_GBPS,
/// NLCCL_NEURONLINK_REALTIME, NLCCL_NEURONLINK_CHIPS and `topology`.
Status linkModelOptionsFromEnv(const std::string& topology, LinkModelOptions* out);

class LinkModel {
 public:
  /// Loads the topology and checks that `nranks` ranks fit on it.
  static Status create(const LinkModelOptions& opts, int nranks,
                       std::shared_ptr<const LinkModel>* out);

  /// Seconds from posting a `bytes` message from rank `src` to its arrival at rank `dst`.
  double transferTime(int src, int dst, size_t bytes, bool reduce) const;
  /// Seconds a local copy (reads + writes HBM) or reduce (two reads, one write) of `bytes` takes.
  double localOpTime(size_t bytes, bool reduce) const;
  double launchOverhead() const { return topo_.launchOverheadS(); }
  /// The latency and rate-cap overrides, for the flow model that shares the fabric.
  fabric::FlowModel::Options flowOptions() const;
  bool realtime() const { return opts_.realtime; }
  int chipOfRank(int r) const { return chips_[r]; }
  const fabric::Topology& topology() const { return topo_; }

 private:
  fabric::Topology topo_;
  LinkModelOptions opts_;
  std::vector<int> chips_;
};

}  // namespace nlccl::transport
