// The simulator below its public API (nlccl/sim.hpp): runs any compiled Plan, for the library's
// own tools and tests (the neuronlink cross-checks, the formula tests).
#pragma once

#include <string>

#include "nlccl/sim.hpp"
#include "plan/compiled.hpp"

namespace nlccl::sim {

/// Runs `plan` on `topo` (rank r on chip topo.chipOfRank(r)). The Plan's ranks must fit in the
/// topology. Options::totalBytes is the S used for algbw/busbw (0: derived from the Plan).
Status simulate(const fabric::Topology& topo, const plan::CompiledPlan& plan, const Options& opts,
                Result* out, std::string* error);
/// Compiles `plan` first (a malformed Plan is InvalidArgument with the compiler's message).
Status simulate(const fabric::Topology& topo, const plan::Plan& plan, const Options& opts,
                Result* out, std::string* error);

/// nccl-tests' S for a Request's count: the total size in bytes (all-gather / reduce-scatter /
/// all-to-all: count x nranks elements; all-to-all-v: a rank's buffer as nccl-tests' alltoallv
/// has it, the matrix total over nranks).
size_t totalBytes(const plan::Request& req, size_t elemSize);

/// The Request a CollectiveRun builds (count from bytes: S / elemSize, divided by nranks for
/// all-gather, reduce-scatter and all-to-all).
plan::Request requestFor(const fabric::Topology& topo, const CollectiveRun& run, size_t elemSize);

}  // namespace nlccl::sim
