// The one-way latency of a cache line between ranks 0 and 1 of an mpirun launch (when they share
// a host), printed in nlccl-perf's header: on a VM the two cores may share a cache one launch
// and sit on different dies the next (48 against 166-250 ns here), and every shared-memory
// figure of that launch moves with it. Labelling each launch tells the two states apart.
#pragma once

#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

namespace nlccl::perf {

/// Collective over `world`: ranks 0 and 1 of world rank 0's host bounce a counter in one cache
/// line of an MPI shared-memory window (3 runs of at most 20000 round trips or 20 ms; the median
/// run's one-way time), the other ranks sleep meanwhile. Ranks that share a core get through
/// by yielding, at microseconds. Returns nanoseconds on every rank, or -1 when fewer than two
/// ranks share that host (or one stopped answering for 2 s).
double shmLatencyNs(MPI_Comm world);

}  // namespace nlccl::perf
