/* NCCL's documentation, "Example 2: One Device per Process or Thread" with MPI: rank 0 makes the
 * id and broadcasts it with MPI_Bcast, each process picks its device by its local rank. */
#include <mpi.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static uint64_t getHostHash(const char* string) {
  uint64_t result = 5381;
  int c;
  while ((c = *string++) != 0) result = ((result << 5) + result) ^ (uint64_t)c;
  return result;
}

int main(int argc, char* argv[]) {
  int size = 1 << 18;
  int myRank, nRanks, localRank = 0, p, wrong;
  char hostname[1024];
  uint64_t hostHashs[64];
  ncclUniqueId id;
  ncclComm_t comm;
  float *sendbuff, *recvbuff;
  cudaStream_t s;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &myRank);
  MPI_Comm_size(MPI_COMM_WORLD, &nRanks);

  gethostname(hostname, sizeof hostname);
  hostHashs[myRank] = getHostHash(hostname);
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, hostHashs, sizeof(uint64_t), MPI_BYTE,
                MPI_COMM_WORLD);
  for (p = 0; p < nRanks; p++) {
    if (p == myRank) break;
    if (hostHashs[p] == hostHashs[myRank]) localRank++;
  }

  if (myRank == 0) ncclGetUniqueId(&id);
  MPI_Bcast((void*)&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);

  CUDACHECK(cudaSetDevice(localRank));
  CUDACHECK(cudaMalloc((void**)&sendbuff, size * sizeof(float)));
  CUDACHECK(cudaMalloc((void**)&recvbuff, size * sizeof(float)));
  CUDACHECK(cudaStreamCreate(&s));
  fillFloats(sendbuff, size, 1.0f);

  NCCLCHECK(ncclCommInitRank(&comm, nRanks, id, myRank));
  NCCLCHECK(ncclAllReduce((const void*)sendbuff, (void*)recvbuff, size, ncclFloat, ncclSum, comm, s));
  CUDACHECK(cudaStreamSynchronize(s));
  wrong = checkFloats(recvbuff, size, (float)nRanks, "all-reduce");

  CUDACHECK(cudaFree(sendbuff));
  CUDACHECK(cudaFree(recvbuff));
  CUDACHECK(cudaStreamDestroy(s));
  ncclCommDestroy(comm);
  MPI_Finalize();
  printf("[MPI Rank %d] Success %s\n", myRank, wrong ? "(but wrong results)" : "");
  return wrong ? 1 : 0;
}
