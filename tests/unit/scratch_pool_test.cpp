// Scratch reuse across collectives (core/scratch_pool.hpp).
#include "core/scratch_pool.hpp"

#include <gtest/gtest.h>

namespace nlccl::core {
namespace {

TEST(ScratchPoolTest, ReleasedBuffersAreReusedAndLiveOnesAreNeverShared) {
  auto pool = std::make_shared<ScratchPool>();
  EXPECT_EQ(pool->lease(0), nullptr);
  char* first = nullptr;
  {
    std::shared_ptr<char> a = pool->lease(1 << 20);
    first = a.get();
    std::shared_ptr<char> b = pool->lease(1 << 20);  // `a` is still in use
    EXPECT_NE(b.get(), first);
  }
  EXPECT_EQ(pool->idle(), 2u);
  // A smaller request takes a buffer that fits; a larger one cannot reuse them.
  std::shared_ptr<char> c = pool->lease(4096);
  EXPECT_EQ(pool->idle(), 1u);
  std::shared_ptr<char> d = pool->lease(2 << 20);
  EXPECT_EQ(pool->idle(), 1u);
  c.reset();
  d.reset();
  EXPECT_EQ(pool->idle(), 3u);
}

TEST(ScratchPoolTest, KeepsFewBuffersAndOutlivingLeasesAreFreed) {
  auto pool = std::make_shared<ScratchPool>();
  std::vector<std::shared_ptr<char>> many;
  for (int i = 0; i < 8; ++i) many.push_back(pool->lease(4096 * (i + 1)));
  many.clear();
  EXPECT_LE(pool->idle(), 4u);
  std::shared_ptr<char> late = pool->lease(64);
  pool.reset();  // the communicator went away first: the lease frees its buffer itself
  late.reset();
}

}  // namespace
}  // namespace nlccl::core
