// --compare-mpi: the MPI equivalent of each collective, run on nlccl-perf's own buffers so that
// both libraries are timed on the same data, sizes and iteration counts in the same run.
#pragma once

#include <memory>

#include "data.hpp"

namespace nlccl::perf {

/// The MPI side of a comparison. The interface has no MPI types, so bench.cpp builds without MPI.
class MpiReference {
 public:
  virtual ~MpiReference() = default;
  /// False when MPI has no equivalent for the case (a reduction on half, bfloat16 or fp8, or a
  /// count above INT_MAX); such rows print N/A.
  virtual bool supports(const CheckCase& c) const = 0;
  /// One blocking call of the MPI equivalent, out of place: MPI_Allreduce, MPI_Allgather,
  /// MPI_Reduce_scatter_block, MPI_Bcast (root's send buffer, the others' receive buffer),
  /// MPI_Reduce, MPI_Alltoall, MPI_Sendrecv (to rank+1, from rank-1), MPI_Alltoallv, MPI_Gather,
  /// MPI_Scatter, MPI_Allgather for hypercube. `avg` and `mulsum` are timed as MPI_SUM (MPI has
  /// neither; the local division or scaling does not change the traffic).
  virtual void issue(const CheckCase& c, const void* send, void* recv) = 0;
  /// MPI_Barrier on MPI_COMM_WORLD.
  virtual void barrier() = 0;
};

#if NLCCL_PERF_WITH_MPI
/// The MPI_COMM_WORLD implementation; call after MPI_Init.
std::unique_ptr<MpiReference> makeMpiReference();
#endif

}  // namespace nlccl::perf
