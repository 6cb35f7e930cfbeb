// One rank's part of an nlcclAllReduce check on nlcclMemAlloc buffers (memalloc_test,
// shm_split_test): a sum of exact integers in float, out of place and then in place.
#pragma once

#include <cstdio>
#include <functional>

#include "nlccl.h"

namespace nlccl::transport::test {

/// Rank `r` of `n`: allocates `count` floats for input and output, all-reduces out of place and
/// in place, calls `afterCall` after each call (may be empty), and checks every element. False
/// (with a line on stderr) on any failure.
inline bool memAllocAllReduce(int n, int r, nlcclComm_t comm, size_t count,
                              const std::function<void()>& afterCall = {}) {
  float* send = nullptr;
  float* recv = nullptr;
  if (nlcclMemAlloc(reinterpret_cast<void**>(&send), count * 4) != nlcclSuccess ||
      nlcclMemAlloc(reinterpret_cast<void**>(&recv), count * 4) != nlcclSuccess)
    return false;
  bool ok = true;
  for (bool inPlace : {false, true}) {
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((i * 7 + r * 13) % 1001);
    float* out = inPlace ? send : recv;
    if (nlcclAllReduce(send, out, count, nlcclFloat, nlcclSum, comm, nullptr) != nlcclSuccess) {
      fprintf(stderr, "rank %d: %s\n", r, nlcclGetLastError(comm));
      return false;
    }
    if (afterCall) afterCall();
    for (size_t i = 0; i < count && ok; ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<float>((i * 7 + q * 13) % 1001);
      if (out[i] != want) {
        fprintf(stderr, "rank %d: element %zu of %zu (%s): %g, want %g\n", r, i, count,
                inPlace ? "in place" : "out of place", static_cast<double>(out[i]),
                static_cast<double>(want));
        ok = false;
      }
    }
    if (!ok) return false;
  }
  nlcclMemFree(send);
  nlcclMemFree(recv);
  return true;
}

}  // namespace nlccl::transport::test
