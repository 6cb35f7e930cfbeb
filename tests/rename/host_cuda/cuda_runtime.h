/*
 * A host stand-in for the few CUDA runtime calls NCCL's examples make, for the rename test
 * (tests/rename): programs written for NCCL, renamed with rename.sed, include this instead of the
 * real cuda_runtime.h. "Devices" are host memory; streams are nlccl streams (rename.sed turns
 * cudaStream_t into nlcclStream_t). Not part of nlccl: ported programs bring their own.
 */
#ifndef NLCCL_TEST_HOST_CUDA_RUNTIME_H_
#define NLCCL_TEST_HOST_CUDA_RUNTIME_H_

#include <stdlib.h>
#include <string.h>

#include "nlccl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1 } cudaError_t;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

static inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "host stand-in error";
}
static inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 8;
  return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int dev) {
  (void)dev;
  return cudaSuccess;
}
static inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = malloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaFree(void* p) {
  free(p);
  return cudaSuccess;
}
static inline cudaError_t cudaMemset(void* p, int v, size_t bytes) {
  memset(p, v, bytes);
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes,
                                     enum cudaMemcpyKind kind) {
  (void)kind;
  memcpy(dst, src, bytes);
  return cudaSuccess;
}
static inline cudaError_t cudaStreamCreate(nlcclStream_t* s) {
  return nlcclStreamCreate(s) == nlcclSuccess ? cudaSuccess : cudaErrorInvalidValue;
}
static inline cudaError_t cudaStreamSynchronize(nlcclStream_t s) {
  return nlcclStreamSynchronize(s) == nlcclSuccess ? cudaSuccess : cudaErrorInvalidValue;
}
static inline cudaError_t cudaStreamDestroy(nlcclStream_t s) {
  return nlcclStreamDestroy(s) == nlcclSuccess ? cudaSuccess : cudaErrorInvalidValue;
}

#ifdef __cplusplus
}
#endif

#endif
