// Copies and out-of-place reductions that write around the cache (x86 non-temporal stores), for
// collectives whose buffers do not fit in the last-level cache. An ordinary store first reads the
// line it writes (read for ownership) and then evicts a line the collective still needs; out of
// place, a 2-rank all-reduce touches four buffers of its size, so from about a quarter of the
// cache every output line cost a read and a write of memory. Streaming stores write the line
// once. Elsewhere (not x86-64) these are memcpy and the plain kernel.
//
// Every function ends with a store fence: a flag published after it is seen after the data.
#pragma once

#include <cstddef>

#include "kernels/reduce.hpp"

namespace nlccl::kernels {

/// memcpy(dst, src, bytes), writing dst with streaming stores. Below kStreamMinBytes, memcpy.
void streamCopy(void* dst, const void* src, size_t bytes);

/// fn3(dst, a, b, count) (elements of `elemSize` bytes), writing dst with streaming stores: the
/// kernel computes each block into a buffer that stays in L1, which is then streamed out. With
/// `dst2`, each block is streamed to both (a split exchange's two outputs: one computation).
void streamReduce3(Reduce3Fn fn3, size_t elemSize, void* dst, const void* a, const void* b,
                   size_t count, void* dst2 = nullptr);

/// Smaller copies gain nothing (and a fence each).
inline constexpr size_t kStreamMinBytes = 4096;

/// The last-level cache's size (sysfs), or 32 MiB when the system does not say.
size_t lastLevelCacheBytes();

}  // namespace nlccl::kernels
