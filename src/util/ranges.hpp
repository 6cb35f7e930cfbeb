// Byte ranges in memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nlccl {

/// True when [a, a+na) and [b, b+nb) share a byte (empty or null ranges share none).
inline bool rangesOverlap(const void* a, size_t na, const void* b, size_t nb) {
  if (na == 0 || nb == 0 || a == nullptr || b == nullptr) return false;
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + nb && y < x + na;
}

}  // namespace nlccl
