// copySmall: memcpy for at most 64 bytes without a call. The LL protocol moves messages in
// pieces of a cache line (up to 56 bytes a line): a libc memcpy of a run-time size costs 35-50
// instructions for each, more than the rest of writing the line. Two fixed-size copies that
// overlap in the middle cover any length in their range (NCCL's and glibc's small-copy trick).
#pragma once

#include <cstddef>
#include <cstring>

namespace nlccl {

/// Copies n <= 64 bytes from src to dst (which do not overlap).
inline void copySmall(void* dst, const void* src, size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (n >= 32) {
    std::memcpy(d, s, 32);
    std::memcpy(d + n - 32, s + n - 32, 32);
  } else if (n >= 16) {
    std::memcpy(d, s, 16);
    std::memcpy(d + n - 16, s + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(d, s, 8);
    std::memcpy(d + n - 8, s + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(d, s, 4);
    std::memcpy(d + n - 4, s + n - 4, 4);
  } else if (n > 0) {
    d[0] = s[0];
    d[n / 2] = s[n / 2];  // n = 2 or 3: the middle byte
    d[n - 1] = s[n - 1];
  }
}

}  // namespace nlccl
