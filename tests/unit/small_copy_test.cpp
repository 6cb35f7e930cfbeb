// copySmall: every length from 0 to 64, at every source and destination alignment in a word,
// copies exactly those bytes and writes nothing before or after them.
#include "util/small_copy.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

namespace nlccl {
namespace {

TEST(CopySmall, EveryLengthUpTo64CopiesExactlyItsBytes) {
  constexpr size_t kGuard = 16;
  for (size_t n = 0; n <= 64; ++n) {
    for (size_t so = 0; so < 8; ++so) {
      for (size_t dOff = 0; dOff < 8; ++dOff) {
        std::array<unsigned char, 64 + 2 * kGuard + 8> src{}, dst{};
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
        dst.fill(0xEE);
        copySmall(dst.data() + kGuard + dOff, src.data() + kGuard + so, n);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= kGuard + dOff && i < kGuard + dOff + n;
          const unsigned char want = inside ? src[i - dOff + so] : 0xEE;
          ASSERT_EQ(dst[i], want) << "n " << n << ", source offset " << so
                                  << ", destination offset " << dOff << ", byte " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace nlccl
