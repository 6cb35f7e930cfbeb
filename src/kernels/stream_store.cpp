#include "kernels/stream_store.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace nlccl::kernels {

namespace {

/// Bytes one streamReduce3 block computes in L1 before streaming them out.
constexpr size_t kBlockBytes = 8192;

#if defined(__x86_64__)
/// The streaming part of streamCopy, without the fence: dst 16-byte aligned, bytes a multiple
/// of 64. SSE2 (every x86-64): the loop is bound by memory, not by the vector width.
void streamLines(char* dst, const char* src, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 64) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), x0);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), x1);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), x2);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), x3);
  }
}

/// streamCopy without the fence.
void streamCopyUnfenced(char* dst, const char* src, size_t bytes) {
  // Ordinary stores up to dst's next line, streaming ones for the whole lines, ordinary after.
  const size_t head = std::min(bytes, (64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64);
  std::memcpy(dst, src, head);
  const size_t body = (bytes - head) / 64 * 64;
  streamLines(dst + head, src + head, body);
  std::memcpy(dst + head + body, src + head + body, bytes - head - body);
}
#endif

}  // namespace

void streamCopy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  if (bytes >= kStreamMinBytes) {
    streamCopyUnfenced(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void streamReduce3(Reduce3Fn fn3, size_t elemSize, void* dst, const void* a, const void* b,
                   size_t count, void* dst2) {
#if defined(__x86_64__)
  if (count * elemSize >= kStreamMinBytes) {  // elements are at most 8 bytes: a block holds many
    alignas(64) char block[kBlockBytes];
    const size_t per = kBlockBytes / elemSize;
    char* d = static_cast<char*>(dst);
    const char* x = static_cast<const char*>(a);
    const char* y = static_cast<const char*>(b);
    for (size_t i = 0; i < count; i += per) {
      const size_t n = std::min(per, count - i), off = i * elemSize;
      fn3(block, x + off, y + off, n);
      streamCopyUnfenced(d + off, block, n * elemSize);
      if (dst2 != nullptr) streamCopyUnfenced(static_cast<char*>(dst2) + off, block, n * elemSize);
    }
    _mm_sfence();
    return;
  }
#endif
  fn3(dst, a, b, count);
  if (dst2 != nullptr) std::memcpy(dst2, dst, count * elemSize);
}

size_t lastLevelCacheBytes() {
  static const size_t bytes = [] {
    size_t best = 0;
    for (int i = 0; i < 8; ++i) {  // the largest cache cpu0 reports
      char path[96];
      std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
      FILE* f = std::fopen(path, "r");
      if (f == nullptr) continue;
      unsigned long v = 0;
      char unit = 0;
      if (std::fscanf(f, "%lu%c", &v, &unit) >= 1)
        best = std::max<size_t>(best, v << (unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0));
      std::fclose(f);
    }
    return best != 0 ? best : size_t{32} << 20;
  }();
  return bytes;
}

}  // namespace nlccl::kernels
