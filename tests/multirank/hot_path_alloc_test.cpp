// The hot path allocates nothing (issue 14): after warm-up, 8-byte all-reduces over loopback
// (ranks as threads) and over shm (ranks as forked processes), on the NULL stream and on a
// stream, make no heap allocation. Counted, not timed: this binary replaces the global
// operator new and malloc family, and counts every call made while `gArmed` is set (in any
// thread of the process, so work handed to a stream's thread or to a peer's progress counts too).
// Negative controls: the counter sees an allocation made while armed, and the first call of a
// new size (which prepares its collective) is seen to allocate.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

#include "common/threads.hpp"
#include "multirank/fork_ranks.hpp"
#include "nlccl.h"

extern "C" void* __libc_malloc(size_t);
extern "C" void* __libc_calloc(size_t, size_t);
extern "C" void* __libc_realloc(void*, size_t);
extern "C" void* __libc_memalign(size_t, size_t);
extern "C" void __libc_free(void*);

namespace {
std::atomic<bool> gArmed{false};
std::atomic<long> gAllocs{0};
inline void count() {
  if (gArmed.load(std::memory_order_relaxed)) gAllocs.fetch_add(1, std::memory_order_relaxed);
}
void* allocOrThrow(size_t n) {
  count();
  void* p = __libc_malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void* alignedOrThrow(size_t n, std::align_val_t a) {
  count();
  void* p = __libc_memalign(static_cast<size_t>(a), n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  count();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
}

void* operator new(size_t n) { return allocOrThrow(n); }
void* operator new[](size_t n) { return allocOrThrow(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  count();
  return __libc_malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  count();
  return __libc_malloc(n ? n : 1);
}
void* operator new(size_t n, std::align_val_t a) { return alignedOrThrow(n, a); }
void* operator new[](size_t n, std::align_val_t a) { return alignedOrThrow(n, a); }
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }

namespace nlccl::testing {
namespace {

constexpr int kWarmup = 200;
constexpr int kCalls = 2000;

/// Rank `rank` starts every `every`th call `us` microseconds late, so its peers post their
/// receives before its message arrives (the LL path takes a small message that is there
/// already without posting anything).
struct Lateness {
  int rank = -1;
  int every = 1;
  unsigned us = 0;
};

/// 8-byte float sums on `comm` (rank `r` of `p`), checked; false on any error or wrong sum.
bool allReduces(nlcclComm_t comm, int r, int p, int calls, nlcclStream_t stream,
                Lateness late = {}) {
  for (int i = 0; i < calls; ++i) {
    if (r == late.rank && i % late.every == 0) usleep(late.us);
    float in[2] = {static_cast<float>(r + 1), static_cast<float>(i % 7)};
    float out[2] = {0, 0};
    if (nlcclAllReduce(in, out, 2, nlcclFloat, nlcclSum, comm, stream) != nlcclSuccess)
      return false;
    if (stream && nlcclStreamSynchronize(stream) != nlcclSuccess) return false;
    if (out[0] != static_cast<float>(p * (p + 1) / 2) ||
        out[1] != static_cast<float>(p * (i % 7)))
      return false;
  }
  return true;
}

/// Rank r's part: warm up, then count the allocations of kCalls all-reduces. With `barrier`
/// (threads: every rank must have warmed up before any arms the counter) called in between.
long countedAllReduces(nlcclComm_t comm, int r, int p, nlcclStream_t stream, bool* ok,
                       const std::function<void()>& barrier) {
  *ok = allReduces(comm, r, p, kWarmup, stream);
  barrier();
  if (r == 0) gArmed.store(true);
  barrier();
  *ok = *ok && allReduces(comm, r, p, kCalls, stream);
  barrier();
  if (r == 0) gArmed.store(false);
  return gAllocs.load();
}

TEST(HotPathAlloc, TheCounterSeesAllocations) {
  gAllocs.store(0);
  gArmed.store(true);
  auto* v = new std::vector<int>(100);
  void* m = std::malloc(10);
  gArmed.store(false);
  std::free(m);
  delete v;
  EXPECT_GE(gAllocs.load(), 3);  // the vector, its storage, the malloc
}

/// A barrier of n threads that spins (the ranks are busy anyway) and allocates nothing.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  void wait() {
    const int gen = gen_.load();
    if (arrived_.fetch_add(1) + 1 == n_) {
      arrived_.store(0);
      gen_.fetch_add(1);
    } else {
      while (gen_.load() == gen) std::this_thread::yield();
    }
  }

 private:
  const int n_;
  std::atomic<int> arrived_{0}, gen_{0};
};

class LoopbackHotPath : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(LoopbackHotPath, EightByteAllReduceAllocatesNothingAfterWarmup) {
  const auto [p, onStream] = GetParam();
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  std::vector<nlcclStream_t> streams(p, nullptr);
  if (onStream) {
    for (auto& s : streams) ASSERT_EQ(nlcclStreamCreate(&s), nlcclSuccess);
  }
  gAllocs.store(0);
  SpinBarrier bar(p);
  std::vector<int> oks(p, 0);
  runRanks(p, [&](int r) {
    bool ok = false;
    countedAllReduces(comms[r], r, p, streams[r], &ok, [&] { bar.wait(); });
    oks[r] = ok;
  });
  const long counted = gAllocs.load();
  for (int r = 0; r < p; ++r) EXPECT_TRUE(oks[r]) << "rank " << r;
  EXPECT_EQ(counted, 0) << "heap allocations in " << kCalls << " all-reduces of " << p
                        << " ranks" << (onStream ? " on streams" : "");

  // Negative control: the first call of a new size prepares its collective, which allocates.
  gAllocs.store(0);
  gArmed.store(true);
  runRanks(p, [&](int r) {
    float in[3] = {1, 2, 3}, out[3];
    EXPECT_EQ(nlcclAllReduce(in, out, 3, nlcclFloat, nlcclSum, comms[r], streams[r]),
              nlcclSuccess);
    if (streams[r]) {
      EXPECT_EQ(nlcclStreamSynchronize(streams[r]), nlcclSuccess);
    }
  });
  gArmed.store(false);
  EXPECT_GT(gAllocs.load(), 0) << "the counter does not see the library's allocations";
  for (auto s : streams)
    if (s) nlcclStreamDestroy(s);
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Ranks, LoopbackHotPath,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()));

/// Over shm each process counts its own allocations; the children report through exit codes
/// (0: none, 1: some, printed) after also checking the negative control.
/// `warmLate` and `late` delay a rank in the warm-up and in the counted calls.
void shmHotPath(int p, bool onStream, Lateness warmLate = {}, Lateness late = {}) {
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  config.transport = "shm";
  auto status = forkRanks(
      p,
      [p, onStream, warmLate, late](int r, nlcclComm_t comm) {
        nlcclStream_t stream = nullptr;
        if (onStream && nlcclStreamCreate(&stream) != nlcclSuccess) return false;
        bool ok = allReduces(comm, r, p, kWarmup, stream, warmLate);
        gAllocs.store(0);
        gArmed.store(true);
        ok = ok && allReduces(comm, r, p, kCalls, stream, late);
        gArmed.store(false);
        const long counted = gAllocs.load();
        gAllocs.store(0);
        gArmed.store(true);
        float in[3] = {1, 2, 3}, out[3];
        ok = ok && nlcclAllReduce(in, out, 3, nlcclFloat, nlcclSum, comm, stream) == nlcclSuccess;
        if (stream) ok = ok && nlcclStreamSynchronize(stream) == nlcclSuccess;
        gArmed.store(false);
        const long control = gAllocs.load();
        if (stream) nlcclStreamDestroy(stream);
        if (counted != 0 || control == 0)
          std::fprintf(stderr, "rank %d: %ld allocations in %d all-reduces; first call: %ld\n",
                       r, counted, kCalls, control);
        return ok && counted == 0 && control > 0;
      },
      60, &config);
  for (int r = 0; r < p; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

TEST(ShmHotPath, EightByteAllReduceAllocatesNothingAfterWarmup) { shmHotPath(2, false); }
TEST(ShmHotPath, OnAStreamToo) { shmHotPath(2, true); }
TEST(ShmHotPath, FourRanks) { shmHotPath(4, false); }
// Rank 0 is late to every warm-up call, so its message from rank 1 is always there already and
// it posts no receive ahead; then rank 1 is late now and then, and rank 0 posts its first
// receives ahead of their messages among the counted calls.
TEST(ShmHotPath, FirstReceivesPostedAheadOfTheirMessagesAfterWarmup) {
  shmHotPath(2, false, {0, 1, 500}, {1, 100, 2000});
}

}  // namespace
}  // namespace nlccl::testing
