// Public C++ API of MoE studies on the fabric model: the dispatch and combine all-to-all-v of a
// routing (nlccl/moe.hpp) simulated in flow mode with a chosen algorithm, beside the lower bound
// the traffic matrix sets on the fabric. nlccl-sim moe and examples/moe_study are built on it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nlccl/export.hpp"
#include "nlccl/moe.hpp"
#include "nlccl/sim.hpp"
#include "nlccl/status.hpp"
#include "nlccl/topology.hpp"

namespace nlccl::moe {

/// What the matrix alone says about one phase (no simulation).
struct PhaseStats {
  uint64_t bytes = 0;        ///< the matrix total, a rank's copy to itself included
  uint64_t fabricBytes = 0;  ///< between different chips
  uint64_t maxRowBytes = 0;  ///< largest bytes a rank sends to other chips
  uint64_t maxColBytes = 0;  ///< largest bytes a rank receives from other chips
  /// Largest rank load (max of what it sends and receives, local copy included) over the mean.
  double imbalance = 0;
  /// Lower bound on the phase's time: launch overhead + the smallest route latency among the
  /// pairs that exchange data + max over cuts of bytes across the cut / the cut's bandwidth. The
  /// cuts are every chip (row sum / injection bandwidth, column sum / ejection bandwidth: the
  /// bandwidth of its own links, at most its DMA rate) and every unit of every level (a server,
  /// an UltraServer of a cluster: bytes leaving or entering it / the bandwidth of its links out),
  /// so it holds for any algorithm that sends each byte at least once.
  double boundS = 0;
  double transferBoundS = 0;  ///< the cut term alone
  std::string boundAt;        ///< the cut that binds: "chip 12 ingress", "efa unit 3 egress"
};

/// PhaseStats of the dispatch matrix (or combine, its transpose) on `topo` (rank r on chip
/// topo.chipOfRank(r)); `launchS` < 0 takes the topology's launch overhead.
NLCCL_MODEL_API PhaseStats phaseStats(const fabric::Topology& topo, const Routing& routing,
                                      bool combine, double launchS = -1);

struct StudyOptions {
  /// "direct", "hier", "hier-across" or "auto": the fastest of them by simulating each (direct
  /// only while its messages fit directMessageBudget, hier-across only when topologySpec is set;
  /// the tuner will replace this choice). `hier` exchanges inside the group first, then across
  /// groups between ranks of the same local index; `hier-across` is DeepSeek-V3's order, across
  /// groups first (to the same local index), then inside: the same Plan on ranks relabelled so
  /// that the inner group is one local index of every group.
  std::string algorithm = "auto";
  /// The spec and overrides `topo` was loaded from (Topology::load): hier-across reloads it
  /// with a rank_to_chip list. Empty: hier-across is not available.
  std::string topologySpec;
  std::vector<std::string> overrides;
  /// hier's groups (innermost first); empty takes studyGroups().
  std::vector<int> groups;
  sim::Options sim;  ///< mode, launch overhead, window...; dtype is set from the routing
  size_t directMessageBudget = 2'000'000;
};

/// hier's default groups for MoE: on a fabric whose top level is a slower scale-out network
/// (cluster:<preset>xN) the NeuronLink domain below it, then the domains ({144, N}: DeepSeek-V3's
/// node-limited dispatch with UltraServers as nodes); otherwise Topology::levelGroups.
NLCCL_MODEL_API std::vector<int> studyGroups(const fabric::Topology& topo, int nranks);

struct PhaseResult {
  std::string phase;      ///< "dispatch" or "combine"
  std::string algorithm;  ///< what ran (auto resolved)
  /// auto: each candidate and its time (a candidate over budget is listed with time -1)
  std::vector<std::pair<std::string, double>> candidates;
  PhaseStats stats;
  double timeS = 0;
  double efficiency = 0;  ///< boundS / timeS
  sim::Result sim;        ///< the run itself (links, trace, wall time)
};

/// Simulates one phase of `routing` on `topo`.
NLCCL_MODEL_API Status simulatePhase(const fabric::Topology& topo, const Routing& routing,
                                     bool combine, const StudyOptions& opts, PhaseResult* out,
                                     std::string* error);

}  // namespace nlccl::moe
