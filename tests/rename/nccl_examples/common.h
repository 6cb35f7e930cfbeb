/* Checks shared by the examples, as NCCL's documentation writes them. */
#ifndef EXAMPLES_COMMON_H_
#define EXAMPLES_COMMON_H_

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include "nccl.h"

#define CUDACHECK(cmd)                                                                  \
  do {                                                                                  \
    cudaError_t e = cmd;                                                                \
    if (e != cudaSuccess) {                                                             \
      printf("Failed: Cuda error %s:%d '%s'\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      exit(EXIT_FAILURE);                                                               \
    }                                                                                   \
  } while (0)

#define NCCLCHECK(cmd)                                                                  \
  do {                                                                                  \
    ncclResult_t r = cmd;                                                               \
    if (r != ncclSuccess) {                                                             \
      printf("Failed, NCCL error %s:%d '%s' (%s)\n", __FILE__, __LINE__,                \
             ncclGetErrorString(r), ncclGetLastError(NULL));                            \
      exit(EXIT_FAILURE);                                                               \
    }                                                                                   \
  } while (0)

/* Copies a device buffer back and checks that every element is `want`. */
static inline int checkFloats(const float* dev, size_t count, float want, const char* what) {
  float* host = (float*)malloc(count * sizeof(float));
  size_t i;
  int wrong = 0;
  CUDACHECK(cudaMemcpy(host, dev, count * sizeof(float), cudaMemcpyDeviceToHost));
  for (i = 0; i < count; ++i)
    if (host[i] != want) wrong++;
  if (wrong) printf("%s: %d of %zu elements wrong (element 0 is %g, want %g)\n", what, wrong,
                    count, host[0], want);
  free(host);
  return wrong;
}

/* Fills a device buffer with `value`. */
static inline void fillFloats(float* dev, size_t count, float value) {
  float* host = (float*)malloc(count * sizeof(float));
  size_t i;
  for (i = 0; i < count; ++i) host[i] = value;
  CUDACHECK(cudaMemcpy(dev, host, count * sizeof(float), cudaMemcpyHostToDevice));
  free(host);
}

#endif
