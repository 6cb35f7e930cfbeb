/* NCCL's documentation, point-to-point: every rank sends to the next and receives from the
 * previous one in one group (a ring), then exchanges with every peer (all-to-all by send/recv). */
#include <pthread.h>

#include "common.h"

#define NRANKS 5

static ncclComm_t comms[NRANKS];
static int wrong[NRANKS];

static void* rankMain(void* arg) {
  int rank = (int)(size_t)arg, peer;
  size_t count = 65536;
  float *sendbuff, *recvbuff, *all;
  cudaStream_t stream;
  CUDACHECK(cudaMalloc((void**)&sendbuff, count * sizeof(float)));
  CUDACHECK(cudaMalloc((void**)&recvbuff, count * sizeof(float)));
  CUDACHECK(cudaMalloc((void**)&all, NRANKS * count * sizeof(float)));
  CUDACHECK(cudaStreamCreate(&stream));
  fillFloats(sendbuff, count, (float)rank);

  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclSend(sendbuff, count, ncclFloat, (rank + 1) % NRANKS, comms[rank], stream));
  NCCLCHECK(ncclRecv(recvbuff, count, ncclFloat, (rank + NRANKS - 1) % NRANKS, comms[rank], stream));
  NCCLCHECK(ncclGroupEnd());

  NCCLCHECK(ncclGroupStart());
  for (peer = 0; peer < NRANKS; ++peer) {
    NCCLCHECK(ncclSend(sendbuff, count, ncclFloat, peer, comms[rank], stream));
    NCCLCHECK(ncclRecv(all + peer * count, count, ncclFloat, peer, comms[rank], stream));
  }
  NCCLCHECK(ncclGroupEnd());
  CUDACHECK(cudaStreamSynchronize(stream));

  wrong[rank] = checkFloats(recvbuff, count, (float)((rank + NRANKS - 1) % NRANKS), "ring");
  for (peer = 0; peer < NRANKS; ++peer)
    wrong[rank] += checkFloats(all + peer * count, count, (float)peer, "exchange");
  CUDACHECK(cudaStreamDestroy(stream));
  CUDACHECK(cudaFree(sendbuff));
  CUDACHECK(cudaFree(recvbuff));
  CUDACHECK(cudaFree(all));
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
