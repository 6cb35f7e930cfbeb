/* NCCL's documentation, symmetric memory: every rank allocates with ncclMemAlloc and registers
 * the buffers as windows (NCCL_WIN_COLL_SYMMETRIC, collective), runs collectives on them, then
 * deregisters the windows. */
#include <pthread.h>

#include "common.h"

#define NRANKS 4

static ncclComm_t comms[NRANKS];
static int wrong[NRANKS];

static void* rankMain(void* arg) {
  int rank = (int)(size_t)arg;
  size_t count = 1 << 19, size = count * sizeof(float);
  void *sendbuff, *recvbuff, *userPtr = NULL;
  ncclWindow_t sendWin, recvWin;
  cudaStream_t stream;
  CUDACHECK(cudaStreamCreate(&stream));
  NCCLCHECK(ncclMemAlloc(&sendbuff, size));
  NCCLCHECK(ncclMemAlloc(&recvbuff, size * NRANKS));
  NCCLCHECK(ncclCommWindowRegister(comms[rank], sendbuff, size, &sendWin, NCCL_WIN_COLL_SYMMETRIC));
  NCCLCHECK(ncclCommWindowRegister(comms[rank], recvbuff, size * NRANKS, &recvWin,
                                   NCCL_WIN_COLL_SYMMETRIC));
  NCCLCHECK(ncclWinGetUserPtr(comms[rank], recvWin, &userPtr));
  fillFloats((float*)sendbuff, count, (float)(rank + 1));

  NCCLCHECK(ncclAllGather(sendbuff, recvbuff, count, ncclFloat, comms[rank], stream));
  CUDACHECK(cudaStreamSynchronize(stream));
  wrong[rank] = (userPtr != recvbuff);
  {
    int r;
    for (r = 0; r < NRANKS; ++r)
      wrong[rank] += checkFloats((float*)recvbuff + r * count, count, (float)(r + 1), "all-gather");
  }
  NCCLCHECK(ncclAllReduce(sendbuff, recvbuff, count, ncclFloat, ncclSum, comms[rank], stream));
  CUDACHECK(cudaStreamSynchronize(stream));
  wrong[rank] += checkFloats((float*)recvbuff, count, (float)(NRANKS * (NRANKS + 1) / 2), "all-reduce");

  NCCLCHECK(ncclCommWindowDeregister(comms[rank], sendWin));
  NCCLCHECK(ncclCommWindowDeregister(comms[rank], recvWin));
  NCCLCHECK(ncclMemFree(sendbuff));
  NCCLCHECK(ncclMemFree(recvbuff));
  CUDACHECK(cudaStreamDestroy(stream));
  return NULL;
}

int main(void) {
  pthread_t threads[NRANKS];
  int i, bad = 0;
  NCCLCHECK(ncclCommInitAll(comms, NRANKS, NULL));
  for (i = 0; i < NRANKS; ++i) pthread_create(&threads[i], NULL, rankMain, (void*)(size_t)i);
  for (i = 0; i < NRANKS; ++i) {
    pthread_join(threads[i], NULL);
    bad += wrong[i];
  }
  for (i = 0; i < NRANKS; ++i) NCCLCHECK(ncclCommDestroy(comms[i]));
  printf("Success %s\n", bad ? "(but wrong results)" : "");
  return bad ? 1 : 0;
}
