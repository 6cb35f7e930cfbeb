// The fabric of a real run over shm / ofi, for the tuner: ranks per host and hosts (from the
// bootstrap), the host's cores and NUMA nodes (hwloc), and the transports' cost figures
// (NLCCL_TUNER_* parameters, whose defaults the README states). NLCCL_TUNER_TOPOLOGY replaces it
// with a preset or file.
#pragma once

#include <string>
#include <vector>

#include "nlccl/topology.hpp"
#include "util/status.hpp"

namespace nlccl::tuner {

/// What hwloc says about this host (1 NUMA node and as many cores as the hardware reports
/// concurrency when hwloc is not built in).
struct HostShape {
  int cores = 1;
  int pus = 1;
  int numaNodes = 1;
};
HostShape hostShape();

/// The topology document of `hosts` hosts of `ranksPerHost` ranks each (rank r on host
/// r / ranksPerHost): a switch per host at the shm figures (split per NUMA node when the ranks
/// divide evenly over several), one across hosts at the ofi figures (the host's bandwidth shared
/// by its ranks). Ranks beyond the host's processing units time-share them: the host latency is
/// scaled by the oversubscription.
/// `ofiInsideHosts`: the ranks of a host talk over ofi too (NLCCL_TRANSPORT=ofi). The host level
/// then has the ofi latency, and each rank's sends and reductions share one engine (its thread
/// copies into the provider's sockets and reduces what arrives; ChipEngine::sharedEngine), so
/// algorithms that reduce less (ring, rhd: (p-1)/p of the vector, rd: lg p times it) win at
/// large sizes.
std::string hostFabricJson(int ranksPerHost, int hosts, size_t sliceBytes, const HostShape& shape,
                           bool ofiInsideHosts = false);

/// The fabric of a real run: NLCCL_TUNER_TOPOLOGY when set, else hostFabricJson. `groups` is
/// {ranks per host, hosts} (empty: one host of `nranks`); `ofiInsideHosts` as hostFabricJson's.
Status hostFabric(int nranks, const std::vector<int>& groups, size_t sliceBytes,
                  bool ofiInsideHosts, fabric::Topology* out, std::string* error);

}  // namespace nlccl::tuner
