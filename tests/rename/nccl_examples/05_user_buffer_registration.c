/* NCCL's documentation, user buffer registration: buffers from ncclMemAlloc, registered with
 * ncclCommRegister before the collectives that use them and deregistered after. */
#include <pthread.h>

#include "common.h"

#define NRANKS 4

static ncclComm_t comms[NRANKS];
static int wrong[NRANKS];

static void* rankMain(void* arg) {
  int rank = (int)(size_t)arg;
  size_t count = 1 << 20;
  void *sendbuff, *recvbuff, *sendRegHandle, *recvRegHandle;
  cudaStream_t stream;
  CUDACHECK(cudaStreamCreate(&stream));
  NCCLCHECK(ncclMemAlloc(&sendbuff, count * sizeof(float)));
  NCCLCHECK(ncclMemAlloc(&recvbuff, count * sizeof(float)));
  NCCLCHECK(ncclCommRegister(comms[rank], sendbuff, count * sizeof(float), &sendRegHandle));
  NCCLCHECK(ncclCommRegister(comms[rank], recvbuff, count * sizeof(float), &recvRegHandle));
  fillFloats((float*)sendbuff, count, 0.5f);

  NCCLCHECK(ncclAllReduce(sendbuff, recvbuff, count, ncclFloat, ncclSum, comms[rank], stream));
  NCCLCHECK(ncclReduceScatter(sendbuff, recvbuff, count / NRANKS, ncclFloat, ncclMax, comms[rank],
                              stream));
  CUDACHECK(cudaStreamSynchronize(stream));
  wrong[rank] = checkFloats((float*)recvbuff, count / NRANKS, 0.5f, "reduce-scatter") +
                checkFloats((float*)recvbuff + count / NRANKS, count - count / NRANKS,
                            0.5f * NRANKS, "all-reduce");

  NCCLCHECK(ncclCommDeregister(comms[rank], sendRegHandle));
  NCCLCHECK(ncclCommDeregister(comms[rank], recvRegHandle));
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
