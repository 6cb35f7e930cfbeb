// Public C++ API of the tuner (DESIGN.md 2, "tuner ---- cost model"): picks the algorithm, the
// per-level algorithms of `hier` and the slice size of a collective on a fabric. Its cost model
// is the simulator itself (nlccl/sim.hpp), so the library's choice, nlccl-sim --algo auto and
// nlcclGroupSimulateEnd rest on one model:
//   1. every candidate is simulated in analytical mode (no sharing); its bound is that time or,
//      if larger, the launch overhead plus the busiest link's bytes over its bandwidth (no shared
//      fabric can do better), so the bound never exceeds the candidate's flow-mode time;
//   2. candidates are taken in order of bound and simulated in flow mode (max-min sharing of
//      links, DMA and HBM) until the next bound is no better than the best flow time found, so
//      the choice is the flow-best candidate; a candidate whose flow simulation would exceed
//      Options::flowBudget transfers keeps its bound as its time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nlccl/export.hpp"
#include "nlccl/sim.hpp"
#include "nlccl/status.hpp"
#include "nlccl/topology.hpp"
#include "nlccl/types.hpp"

namespace nlccl::tuner {

/// One way to run a collective.
struct Candidate {
  std::string algorithm;                     ///< a registered name ("ring", "hier", ...)
  std::vector<std::string> levelAlgorithms;  ///< hier only, innermost first
  int64_t sliceBytes = -1;                   ///< -1: the fabric's chunk_bytes
  /// "ring", "hier(ring,rhd,ring)", with "/slice=1M" when the slice is not the fabric's.
  NLCCL_MODEL_API std::string label() const;
};

/// What is to be run: nccl-tests' S (total bytes) of `collective` over `nranks` ranks.
struct Query {
  Collective collective = Collective::AllReduce;
  size_t bytes = 0;
  int nranks = 0;  ///< 0: every rank of the topology
  int root = 0;
  DataType dtype = DataType::Float32;
  bool inPlace = false;     ///< in place (sim::CollectiveRun::inPlace): staging copies count
  std::vector<int> groups;  ///< hier's levels; empty: Topology::levelGroups(nranks)
};

struct Options {
  /// Largest flow simulation (transfers x loops, as the analytical run counted them) the tuner
  /// runs for one candidate; beyond it the candidate's bound stands for its time.
  size_t flowBudget = 200'000;
  bool tuneSlice = true;   ///< try the fabric's slice / 4 and x 4 for the chosen algorithm
  bool reduce = true;      ///< the simulator's reduced form (sim::Options::reduce)
  double launchOverheadS = -1;  ///< < 0: the topology's
};

/// One candidate as the tuner saw it.
struct Estimate {
  Candidate candidate;
  double analyticalS = 0;  ///< the simulator's analytical mode
  double boundS = 0;       ///< max(analytical, launch + busiest link's bytes / bandwidth)
  double flowS = -1;       ///< flow mode, when the tuner ran it (< 0: not run)
  double timeS = 0;        ///< what the choice compared: flowS when run, else boundS
  size_t work = 0;         ///< transfers x loops of the analytical run
};

struct Choice {
  Candidate best;
  std::vector<int> groups;  ///< hier's levels the choice was simulated with (innermost first)
  double predictedS = 0;  ///< best's timeS
  std::vector<Estimate> considered;  ///< in the order they were estimated
};

/// The candidates of the first round: every registered algorithm for the collective, `hier`
/// with ring at every level (left out when the fabric has one level: there it is a flat
/// algorithm with staging copies). (choose() then varies hier's levels and the slice.)
NLCCL_MODEL_API std::vector<Candidate> baseCandidates(const fabric::Topology& topo,
                                                      const Query& q);

/// Every candidate choose() may consider (base candidates, each hier level's alternatives, the
/// slice variants): what a test compares the choice against.
NLCCL_MODEL_API std::vector<Candidate> allCandidates(const fabric::Topology& topo, const Query& q);

/// Simulates one candidate in `mode` (the sim::CollectiveRun it stands for).
NLCCL_MODEL_API Status simulateCandidate(const fabric::Topology& topo, const Query& q,
                                         const Candidate& c, sim::Mode mode, const Options& opts,
                                         sim::Result* out, std::string* error);

/// Picks the candidate with the least predicted time (see the file comment).
NLCCL_MODEL_API Status choose(const fabric::Topology& topo, const Query& q, const Options& opts,
                              Choice* out, std::string* error);

}  // namespace nlccl::tuner
