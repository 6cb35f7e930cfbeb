/* NCCL's documentation, "one device per thread": the main thread makes the unique id, every
 * thread selects its device, joins with ncclCommInitRank and runs a broadcast and an all-reduce
 * on its own stream. */
#include <pthread.h>

#include "common.h"

#define NTHREADS 4

static ncclUniqueId id;
static int wrong[NTHREADS];

static void* rankMain(void* arg) {
  int rank = (int)(size_t)arg, dev = -1;
  size_t count = 100000;
  ncclComm_t comm;
  cudaStream_t stream;
  float *buff, *sum;
  CUDACHECK(cudaSetDevice(rank));
  CUDACHECK(cudaMalloc((void**)&buff, count * sizeof(float)));
  CUDACHECK(cudaMalloc((void**)&sum, count * sizeof(float)));
  CUDACHECK(cudaStreamCreate(&stream));
  NCCLCHECK(ncclCommInitRank(&comm, NTHREADS, id, rank));
  NCCLCHECK(ncclCommCuDevice(comm, &dev));
  fillFloats(buff, count, rank == 2 ? 7.0f : 0.0f);
  NCCLCHECK(ncclBroadcast(buff, buff, count, ncclFloat, 2, comm, stream));
  NCCLCHECK(ncclAllReduce(buff, sum, count, ncclFloat, ncclSum, comm, stream));
  CUDACHECK(cudaStreamSynchronize(stream));
  wrong[rank] = checkFloats(buff, count, 7.0f, "broadcast") +
                checkFloats(sum, count, 7.0f * NTHREADS, "all-reduce") + (dev != rank);
  NCCLCHECK(ncclCommDestroy(comm));
  CUDACHECK(cudaStreamDestroy(stream));
  CUDACHECK(cudaFree(buff));
  CUDACHECK(cudaFree(sum));
  return NULL;
}

int main(void) {
  pthread_t threads[NTHREADS];
  int i, bad = 0;
  NCCLCHECK(ncclGetUniqueId(&id));
  for (i = 0; i < NTHREADS; ++i) pthread_create(&threads[i], NULL, rankMain, (void*)(size_t)i);
  for (i = 0; i < NTHREADS; ++i) {
    pthread_join(threads[i], NULL);
    bad += wrong[i];
  }
  printf("Success %s\n", bad ? "(but wrong results)" : "");
  return bad ? 1 : 0;
}
