#include "mpi_compare.hpp"

#include <climits>
#include <vector>

#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

namespace nlccl::perf {

namespace {

/// MPI's type for an nlccl type, or MPI_DATATYPE_NULL when MPI has none (half, bfloat16, fp8).
MPI_Datatype mpiType(nlcclDataType_t t) {
  switch (t) {
    case nlcclInt8: return MPI_INT8_T;
    case nlcclUint8: return MPI_UINT8_T;
    case nlcclInt32: return MPI_INT32_T;
    case nlcclUint32: return MPI_UINT32_T;
    case nlcclInt64: return MPI_INT64_T;
    case nlcclUint64: return MPI_UINT64_T;
    case nlcclFloat: return MPI_FLOAT;
    case nlcclDouble: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpiOp(int op) {
  switch (op) {
    case nlcclProd: return MPI_PROD;
    case nlcclMax: return MPI_MAX;
    case nlcclMin: return MPI_MIN;
    default: return MPI_SUM;  // sum, avg and mulsum (see the header)
  }
}

class WorldReference : public MpiReference {
 public:
  WorldReference() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  bool supports(const CheckCase& c) const override {
    size_t count = c.counts.param * (c.coll == Coll::AlltoAllv ? 2 * c.nranks : 1);
    if (!reduces(c.coll)) count *= typeSize(c.type);  // moved as bytes
    else if (mpiType(c.type) == MPI_DATATYPE_NULL) return false;
    return count <= static_cast<size_t>(INT_MAX);
  }

  void issue(const CheckCase& c, const void* send, void* recv) override {
    // Non-reducing collectives move bytes, so every type (half, fp8, ...) has an equivalent.
    MPI_Datatype t = reduces(c.coll) ? mpiType(c.type) : MPI_BYTE;
    int n = static_cast<int>(reduces(c.coll) ? c.counts.param
                                             : c.counts.param * typeSize(c.type));
    MPI_Op op = mpiOp(c.op);
    switch (c.coll) {
      case Coll::AllReduce:
        MPI_Allreduce(send, recv, n, t, op, MPI_COMM_WORLD);
        break;
      case Coll::AllGather:
        MPI_Allgather(send, n, t, recv, n, t, MPI_COMM_WORLD);
        break;
      case Coll::ReduceScatter:
        MPI_Reduce_scatter_block(send, recv, n, t, op, MPI_COMM_WORLD);
        break;
      case Coll::Broadcast:
        // MPI_Bcast has one buffer; the root only reads it.
        MPI_Bcast(rank_ == c.root ? const_cast<void*>(send) : recv, n, t, c.root, MPI_COMM_WORLD);
        break;
      case Coll::Reduce:
        MPI_Reduce(send, recv, n, t, op, c.root, MPI_COMM_WORLD);
        break;
      case Coll::AlltoAll:
        MPI_Alltoall(send, n, t, recv, n, t, MPI_COMM_WORLD);
        break;
      case Coll::SendRecv:
        MPI_Sendrecv(send, n, t, (rank_ + 1) % size_, 0, recv, n, t, (rank_ - 1 + size_) % size_,
                     0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
      case Coll::Gather:
        MPI_Gather(send, n, t, recv, n, t, c.root, MPI_COMM_WORLD);
        break;
      case Coll::Scatter:
        MPI_Scatter(send, n, t, recv, n, t, c.root, MPI_COMM_WORLD);
        break;
      case Coll::HyperCube:  // an all-gather by recursive doubling: MPI's own all-gather
        MPI_Allgather(send, n, t, recv, n, t, MPI_COMM_WORLD);
        break;
      case Coll::AlltoAllv: {
        std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
        const size_t per = c.counts.param, es = typeSize(c.type);
        for (int j = 0; j < size_; ++j) {
          sc[j] = static_cast<int>(a2avCount(rank_, j, per, size_) * es);
          sd[j] = static_cast<int>(a2avSendDispl(rank_, j, per, size_) * es);
          rc[j] = static_cast<int>(a2avCount(j, rank_, per, size_) * es);
          rd[j] = static_cast<int>(a2avRecvDispl(j, rank_, per, size_) * es);
        }
        MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                      MPI_COMM_WORLD);
        break;
      }
    }
  }

  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

 private:
  static bool reduces(Coll c) {
    return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce;
  }
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<MpiReference> makeMpiReference() { return std::make_unique<WorldReference>(); }

}  // namespace nlccl::perf
