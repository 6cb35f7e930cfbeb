/*
 * All-reduce across MPI processes, one nlccl rank per process.
 *
 *   mpirun -np 4 02-allreduce-mpi [count]
 *
 * MPI only starts the processes and carries the unique id: rank 0 makes it with nlcclGetUniqueId,
 * MPI_Bcast hands it to the others, and every process joins with nlcclCommInitRank. The data then
 * moves through nlccl (shared memory between processes of one host).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "nlccl.h"

#define NLCHECK(call)                                                                       \
  do {                                                                                      \
    nlcclResult_t r_ = (call);                                                              \
    if (r_ != nlcclSuccess) {                                                               \
      fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, #call, nlcclGetErrorString(r_), \
              nlcclGetLastError(comm));                                                     \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                         \
    }                                                                                       \
  } while (0)

int main(int argc, char** argv) {
  int rank = 0, nranks = 1;
  nlcclComm_t comm = NULL;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  long count = argc > 1 ? atol(argv[1]) : 1 << 20;
  if (count <= 0) {
    if (rank == 0) fprintf(stderr, "usage: %s [count > 0]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }

  nlcclUniqueId id;
  if (rank == 0) NLCHECK(nlcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  NLCHECK(nlcclCommInitRank(&comm, nranks, id, rank));

  /* Shared-memory buffers let peers on this host read them directly. */
  float *send = NULL, *recv = NULL;
  NLCHECK(nlcclMemAlloc((void**)&send, count * sizeof(float)));
  NLCHECK(nlcclMemAlloc((void**)&recv, count * sizeof(float)));
  for (long i = 0; i < count; ++i) send[i] = (float)(rank + 1) + (float)(i % 7);

  nlcclStream_t stream;
  NLCHECK(nlcclStreamCreate(&stream));
  NLCHECK(nlcclAllReduce(send, recv, (size_t)count, nlcclFloat, nlcclSum, comm, stream));
  NLCHECK(nlcclStreamSynchronize(stream));

  /* Sum over ranks of (r + 1) + i % 7: small integers, so the float sum is exact. */
  long wrong = 0;
  for (long i = 0; i < count; ++i) {
    float want = (float)nranks * (nranks + 1) / 2 + (float)nranks * (float)(i % 7);
    if (recv[i] != want) ++wrong;
  }
  long total = 0;
  MPI_Reduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("all-reduce of %ld floats over %d MPI ranks: %s (%ld wrong)\n", count, nranks,
           total == 0 ? "correct" : "WRONG", total);
  }

  NLCHECK(nlcclStreamDestroy(stream));
  NLCHECK(nlcclMemFree(send));
  NLCHECK(nlcclMemFree(recv));
  NLCHECK(nlcclCommDestroy(comm));
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
