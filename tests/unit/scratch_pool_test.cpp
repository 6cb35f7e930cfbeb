// Scratch reuse across collectives (core/scratch_pool.hpp). The pool allocates with new[]; this
// binary replaces the array operators to count the live buffers of the sizes the tests lease, so
// "freed" and "kept" are observed, not assumed.
#include "core/scratch_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

// Array allocations of at least kTracked bytes (only the tests' leases are that large).
constexpr size_t kTracked = 3000;
std::atomic<long> gLive{0};

struct Header {  // in front of every array allocation: whether it is tracked
  size_t tracked;
  size_t pad;
};

void* allocate(size_t n) {
  auto* h = static_cast<Header*>(std::malloc(sizeof(Header) + n));
  if (h == nullptr) throw std::bad_alloc();
  h->tracked = n >= kTracked;
  if (h->tracked) gLive.fetch_add(1);
  return h + 1;
}

void release(void* p) {
  if (p == nullptr) return;
  Header* h = static_cast<Header*>(p) - 1;
  if (h->tracked) gLive.fetch_sub(1);
  std::free(h);
}

}  // namespace

void* operator new[](size_t n) { return allocate(n); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }

namespace nlccl::core {
namespace {

TEST(ScratchPoolTest, ReleasedBuffersAreReusedAndLiveOnesAreNeverShared) {
  const long live0 = gLive.load();
  auto pool = std::make_shared<ScratchPool>();
  EXPECT_EQ(pool->lease(0), nullptr);
  char* first = nullptr;
  {
    std::shared_ptr<char> a = pool->lease(1 << 20);
    first = a.get();
    std::shared_ptr<char> b = pool->lease(1 << 20);  // `a` is still in use
    EXPECT_NE(b.get(), first);
    EXPECT_EQ(gLive.load() - live0, 2);
  }
  EXPECT_EQ(pool->idle(), 2u);
  EXPECT_EQ(gLive.load() - live0, 2) << "returned buffers are kept, not freed";
  // A smaller request takes a buffer that fits; a larger one cannot reuse them.
  std::shared_ptr<char> c = pool->lease(4096);
  EXPECT_EQ(pool->idle(), 1u);
  EXPECT_EQ(gLive.load() - live0, 2) << "a reused buffer is not a new allocation";
  std::shared_ptr<char> d = pool->lease(2 << 20);
  EXPECT_EQ(pool->idle(), 1u);
  EXPECT_EQ(gLive.load() - live0, 3);
  c.reset();
  d.reset();
  EXPECT_EQ(pool->idle(), 3u);
  pool.reset();
  EXPECT_EQ(gLive.load(), live0) << "the pool's idle buffers are freed with it";
}

TEST(ScratchPoolTest, KeepsFewBuffersAndOutlivingLeasesAreFreed) {
  const long live0 = gLive.load();
  auto pool = std::make_shared<ScratchPool>();
  std::vector<std::shared_ptr<char>> many;
  for (int i = 0; i < 8; ++i) many.push_back(pool->lease(4096 * (i + 1)));
  EXPECT_EQ(gLive.load() - live0, 8);
  many.clear();
  EXPECT_LE(pool->idle(), 4u);
  EXPECT_EQ(gLive.load() - live0, static_cast<long>(pool->idle())) << "buffers past the cap leak";
  // The largest are the ones kept: a request for the largest size reuses one.
  const long before = gLive.load();
  std::shared_ptr<char> big = pool->lease(4096 * 8);
  EXPECT_EQ(gLive.load(), before);
  big.reset();
  std::shared_ptr<char> late = pool->lease(4096);
  pool.reset();  // the communicator went away first: the lease frees its buffer itself
  EXPECT_EQ(gLive.load() - live0, 1) << "only the outstanding lease is still allocated";
  late.reset();
  EXPECT_EQ(gLive.load(), live0) << "a lease that outlives its pool frees its buffer";
}

}  // namespace
}  // namespace nlccl::core
