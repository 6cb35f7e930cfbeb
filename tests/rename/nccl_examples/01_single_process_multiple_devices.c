/* NCCL's documentation, "Example 1: Single Process, Single Thread, Multiple Devices": one
 * thread drives every device, with the calls of all communicators in one group. */
#include "common.h"

int main(void) {
  ncclComm_t comms[4];
  int nDev = 4;
  int size = 1 << 20;
  int devs[4] = {0, 1, 2, 3};
  float* sendbuff[4];
  float* recvbuff[4];
  cudaStream_t s[4];
  int i, wrong = 0;

  for (i = 0; i < nDev; ++i) {
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaMalloc((void**)sendbuff + i, size * sizeof(float)));
    CUDACHECK(cudaMalloc((void**)recvbuff + i, size * sizeof(float)));
    fillFloats(sendbuff[i], size, (float)(i + 1));
    CUDACHECK(cudaMemset(recvbuff[i], 0, size * sizeof(float)));
    CUDACHECK(cudaStreamCreate(s + i));
  }

  NCCLCHECK(ncclCommInitAll(comms, nDev, devs));

  NCCLCHECK(ncclGroupStart());
  for (i = 0; i < nDev; ++i)
    NCCLCHECK(ncclAllReduce((const void*)sendbuff[i], (void*)recvbuff[i], size, ncclFloat, ncclSum,
                            comms[i], s[i]));
  NCCLCHECK(ncclGroupEnd());

  for (i = 0; i < nDev; ++i) {
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaStreamSynchronize(s[i]));
  }
  for (i = 0; i < nDev; ++i) wrong += checkFloats(recvbuff[i], size, 10.0f, "all-reduce");

  for (i = 0; i < nDev; ++i) {
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaFree(sendbuff[i]));
    CUDACHECK(cudaFree(recvbuff[i]));
    CUDACHECK(cudaStreamDestroy(s[i]));
  }
  for (i = 0; i < nDev; ++i) ncclCommDestroy(comms[i]);
  printf("Success %s\n", wrong ? "(but wrong results)" : "");
  return wrong ? 1 : 0;
}
