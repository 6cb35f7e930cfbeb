// Streaming-store copies and reductions give memcpy's and the plain kernel's bytes, whatever the
// alignment of the destination and the size (head, whole lines, tail; below and above
// kStreamMinBytes), and write nothing outside the destination (or the two destinations).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/stream_store.hpp"

namespace nlccl::kernels {
namespace {

constexpr size_t kSizes[] = {0, 1, 63, 64, 4095, 4096, 4097, 8192 + 24, 65536 + 8, 1 << 20};

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed) >> 3);
  return v;
}

TEST(StreamStoreTest, CopyMatchesMemcpyAtEveryAlignment) {
  for (size_t n : kSizes) {
    for (size_t shift : {0, 1, 8, 16, 40, 63}) {
      const auto src = pattern(n + 64, 7);
      std::vector<unsigned char> dst(n + 192, 0xA5);
      unsigned char* d = dst.data() + 64 + shift;
      streamCopy(d, src.data() + 3, n);
      ASSERT_EQ(0, std::memcmp(d, src.data() + 3, n)) << n << " bytes, shift " << shift;
      for (unsigned char* p = dst.data(); p < d; ++p) ASSERT_EQ(0xA5, *p) << "before, " << n;
      for (unsigned char* p = d + n; p < dst.data() + dst.size(); ++p)
        ASSERT_EQ(0xA5, *p) << "after, " << n;
    }
  }
}

TEST(StreamStoreTest, Reduce3MatchesThePlainKernel) {
  for (DataType t : {DataType::Float32, DataType::Float64, DataType::Int8, DataType::Bfloat16}) {
    const size_t es = dataTypeSize(t);
    const Reduce3Fn fn3 = reduce3Kernel(t, RedOp::Sum);
    for (size_t bytes : kSizes) {
      const size_t count = bytes / es;
      const auto a = pattern(count * es, 1), b = pattern(count * es, 2);
      std::vector<unsigned char> want(count * es + 1), got(count * es + 64 + 1, 0x5A);
      fn3(want.data(), a.data(), b.data(), count);
      unsigned char* g = got.data() + es;  // an element's alignment, not a line's
      streamReduce3(fn3, es, g, a.data(), b.data(), count);
      ASSERT_EQ(0, std::memcmp(g, want.data(), count * es)) << count << " elements";
      ASSERT_EQ(0x5A, g[count * es]) << "wrote past the end, " << count << " elements";
    }
  }
}

// A split exchange's form: each block computed once, streamed to two destinations whose
// alignments differ from each other's.
TEST(StreamStoreTest, Reduce3WritesBothDestinations) {
  for (DataType t : {DataType::Float32, DataType::Int8}) {
    const size_t es = dataTypeSize(t);
    const Reduce3Fn fn3 = reduce3Kernel(t, RedOp::Max);
    for (size_t bytes : kSizes) {
      const size_t count = bytes / es;
      const auto a = pattern(count * es, 3), b = pattern(count * es, 4);
      std::vector<unsigned char> want(count * es + 1);
      std::vector<unsigned char> one(count * es + 128, 0x5A), two(count * es + 128, 0x5A);
      fn3(want.data(), a.data(), b.data(), count);
      unsigned char* g1 = one.data() + 64;
      unsigned char* g2 = two.data() + 64 + 3 * es;
      streamReduce3(fn3, es, g1, a.data(), b.data(), count, g2);
      ASSERT_EQ(0, std::memcmp(g1, want.data(), count * es)) << count << " elements";
      ASSERT_EQ(0, std::memcmp(g2, want.data(), count * es)) << count << " elements, second";
      ASSERT_EQ(0x5A, g1[count * es]) << "wrote past the end, " << count << " elements";
      ASSERT_EQ(0x5A, g2[count * es]) << "wrote past the second's end, " << count;
      ASSERT_EQ(0x5A, g2[-1]) << "wrote before the second, " << count << " elements";
    }
  }
}

TEST(StreamStoreTest, LastLevelCacheIsKnown) { EXPECT_GE(lastLevelCacheBytes(), size_t{1} << 16); }

}  // namespace
}  // namespace nlccl::kernels
