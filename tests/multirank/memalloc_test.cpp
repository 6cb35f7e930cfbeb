// nlcclMemAlloc's shareable memory and the shm transport's single-copy path: allocation and
// argument checks, forked ranks exchanging (and reducing) large messages from nlcclMemAlloc
// buffers through the transport and through nlcclAllReduce, counters proving the single-copy path
// ran, a rank SIGKILLed mid-exchange, and the bandwidth with and without single copy (printed).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "kernels/reduce.hpp"
#include "multirank/fork_ranks.hpp"
#include "multirank/memalloc_allreduce.hpp"
#include "multirank/shm_harness.hpp"
#include "nlccl.h"
#include "transports/shm/shm.hpp"
#include "util/shared_memory.hpp"

namespace nlccl::transport::test {
namespace {

constexpr size_t kThreshold = 64 << 10;  // NLCCL_SHM_SINGLE_COPY_BYTES default

/// runForked as this file needs it: ranks get up to 60 s (16 and 256 MiB messages).
std::vector<int> runRanks(int n, const RankFn& fn, const ParentFn& parent = {}) {
  return runForked(n, fn, parent, ForkOptions{std::chrono::seconds(60)});
}

/// The memfd name of allocation `id` (what /proc shows for it: memfd:nlccl-mem-<hex id>).
std::string memfdName(uint64_t id) {
  char buf[64];
  snprintf(buf, sizeof buf, "nlccl-mem-%016llx", static_cast<unsigned long long>(id));
  return buf;
}

/// True while this process maps or holds allocation `id`.
bool held(uint64_t id) { return testing::memfdsOf(getpid()).count(memfdName(id)) > 0; }

// ---- allocation ----

TEST(MemAlloc, AllocFreeAndArgumentChecks) {
  void* p = nullptr;
  ASSERT_EQ(nlcclMemAlloc(&p, 100000), nlcclSuccess);
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x5a, 100000);
  EXPECT_EQ(static_cast<unsigned char*>(p)[99999], 0x5a);
  // Registered: the transport finds buffers inside it, not ones that run past its end.
  shmem::AllocationRef ref;
  ASSERT_TRUE(shmem::findAllocation(static_cast<char*>(p) + 4096, 50000, &ref));
  EXPECT_EQ(ref.offset, 4096u);
  EXPECT_GE(ref.size, 100000u);
  EXPECT_FALSE(shmem::findAllocation(static_cast<char*>(p) + 4096, ref.size, &ref));
  int dummy = 0;
  EXPECT_FALSE(shmem::findAllocation(&dummy, sizeof dummy, &ref));
  ASSERT_TRUE(shmem::findAllocation(p, 1, &ref));
  struct stat st;
  ASSERT_EQ(fstat(ref.fd, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const uint64_t idP = ref.id;
  EXPECT_TRUE(held(idP)) << memfdName(idP) << " is neither mapped nor open";

  void* q = nullptr;
  ASSERT_EQ(nlcclMemAlloc(&q, 1), nlcclSuccess);
  EXPECT_NE(p, q);
  ASSERT_TRUE(shmem::findAllocation(q, 1, &ref));
  uint64_t idQ = ref.id;
  ASSERT_TRUE(shmem::findAllocation(p, 1, &ref));
  EXPECT_NE(ref.id, idQ);

  // Pointers nlcclMemAlloc did not return are refused, with a message naming `ptr`.
  std::vector<char> heap(64);
  for (void* bad : {static_cast<void*>(&dummy), static_cast<void*>(heap.data()),
                    static_cast<void*>(static_cast<char*>(p) + 4096)}) {
    EXPECT_EQ(nlcclMemFree(bad), nlcclInvalidArgument);
    EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("ptr"), std::string::npos)
        << nlcclGetLastError(nullptr);
  }
  EXPECT_EQ(nlcclMemFree(nullptr), nlcclSuccess);
  EXPECT_EQ(nlcclMemFree(p), nlcclSuccess);
  EXPECT_FALSE(held(idP)) << "a freed allocation is still mapped or open";
  EXPECT_TRUE(held(idQ));
  EXPECT_EQ(nlcclMemFree(p), nlcclInvalidArgument);  // twice
  EXPECT_FALSE(shmem::findAllocation(p, 1, &ref));
  EXPECT_EQ(nlcclMemFree(q), nlcclSuccess);
  EXPECT_FALSE(held(idQ));

  EXPECT_EQ(nlcclMemAlloc(nullptr, 10), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("ptr"), std::string::npos);
  EXPECT_EQ(nlcclMemAlloc(&p, 0), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("size"), std::string::npos);
  EXPECT_EQ(nlcclMemAlloc(&p, SIZE_MAX - 10), nlcclInvalidArgument);
}

TEST(MemAlloc, ManyAllocationsLeaveNothingBehind) {
  std::vector<void*> ptrs;
  std::set<std::string> names;
  for (int i = 0; i < 200; ++i) {
    void* p = nullptr;
    ASSERT_EQ(nlcclMemAlloc(&p, 4096 * (i % 7 + 1)), nlcclSuccess);
    static_cast<char*>(p)[0] = static_cast<char>(i);
    ptrs.push_back(p);
    shmem::AllocationRef ref;
    ASSERT_TRUE(shmem::findAllocation(p, 1, &ref));
    names.insert(memfdName(ref.id));
  }
  EXPECT_EQ(names.size(), 200u) << "allocations share an id";
  std::set<std::string> mine = testing::memfdsOf(getpid());
  for (const std::string& n : names) EXPECT_TRUE(mine.count(n)) << n << " is not mapped";
  for (size_t i = 0; i < ptrs.size(); ++i) {
    EXPECT_EQ(static_cast<char*>(ptrs[i])[0], static_cast<char>(i));
    EXPECT_EQ(nlcclMemFree(ptrs[i]), nlcclSuccess);
  }
  // Freed means unmapped and closed: no descriptor or mapping of any of them is left.
  EXPECT_EQ(testing::memfdHolders(names), std::vector<std::string>{});
}

// ---- transport exchange ----

struct Buf {  // an nlcclMemAlloc buffer with the message at `offset` inside it
  char* base = nullptr;
  size_t offset = 0;
  char* data() const { return base + offset; }
  ~Buf() {
    if (base) shmem::memFree(base);
  }
};

/// Every rank sends each peer messages on both sides of the threshold from nlcclMemAlloc buffers
/// (some at an offset inside the allocation, one from the heap), copied or reduced on arrival.
/// `late`: the receives are posted after the sends, behind other receives (the unexpected path).
int exchangeRank(int n, bool reduce, bool late, int rank, Shared* sh) {
  auto t = makeTransport(sh, rank, n);
  CHILD_CHECK(t);
  CHILD_CHECK(t->singleCopyBytes() == kThreshold);
  const std::vector<size_t> sizes = {kThreshold - 4, kThreshold, kThreshold + 4, (1u << 20) + 12,
                                     5u << 20, 3u << 20};
  struct Msg {
    int peer;
    size_t bytes;
    size_t id;
    bool heap;
  };
  std::vector<Msg> msgs;
  uint64_t expectDirect = 0;  // sends that must go single-copy
  for (int q = 0; q < n; ++q)
    if (q != rank)
      for (size_t i = 0; i < sizes.size(); ++i) {
        bool heap = i == sizes.size() - 1;
        msgs.push_back({q, sizes[i], i, heap});
        if (sizes[i] >= kThreshold && !heap) ++expectDirect;
      }
  const size_t M = msgs.size();
  std::vector<Buf> src(M), dst(M);
  std::vector<std::vector<char>> heapSrc(M);
  std::vector<Request> sreq(M), rreq(M);
  std::vector<Request*> all;
  Reducer red = Reducer::of(DataType::Int32, RedOp::Sum);
  auto fill = [](char* b, size_t bytes, int s, int d, size_t id) {
    for (size_t i = 0; i < bytes / 4; ++i) {
      int32_t v = value(s, d, id, i);
      std::memcpy(b + i * 4, &v, 4);
    }
  };
  for (size_t m = 0; m < M; ++m) {
    const Msg& g = msgs[m];
    src[m].offset = g.id % 2 ? 4096 + 64 : 0;  // some start inside their allocation
    void* p = nullptr;
    CHILD_CHECK(shmem::memAlloc(g.bytes + src[m].offset + 100, &p) == Status::Success);
    src[m].base = static_cast<char*>(p);
    CHILD_CHECK(shmem::memAlloc(g.bytes, &p) == Status::Success);
    dst[m].base = static_cast<char*>(p);
    fill(src[m].data(), g.bytes, rank, g.peer, g.id);
    if (g.heap) {
      heapSrc[m].assign(src[m].data(), src[m].data() + g.bytes);
    }
    if (reduce)
      fill(dst[m].data(), g.bytes, 1000 + rank, g.peer, g.id);
    else
      std::memset(dst[m].data(), 0, g.bytes);
    all.push_back(&sreq[m]);
    all.push_back(&rreq[m]);
  }
  auto& c = shm::singleCopyCounters();
  const uint64_t sent0 = c.sent.load(), recv0 = c.received.load(), unex0 = c.unexpected.load();
  auto postRecv = [&](size_t m) {
    return t->postRecv(msgs[m].peer, 100 + msgs[m].id, dst[m].data(), msgs[m].bytes,
                       reduce ? &red : nullptr, &rreq[m]);
  };
  // Late: one receive per peer for the *last* message goes first, so the FIFO must flow past the
  // earlier messages (descriptors among them) to reach it.
  if (late)
    for (size_t m = 0; m < M; ++m)
      if (msgs[m].id == sizes.size() - 1) CHILD_CHECK(postRecv(m) == Status::Success);
  if (!late)
    for (size_t m = 0; m < M; ++m) CHILD_CHECK(postRecv(m) == Status::Success);
  for (size_t m = 0; m < M; ++m) {
    const void* from = msgs[m].heap ? static_cast<void*>(heapSrc[m].data()) : src[m].data();
    CHILD_CHECK(t->postSend(msgs[m].peer, 100 + msgs[m].id, from, msgs[m].bytes, &sreq[m]) ==
                Status::Success);
  }
  if (late) {
    std::vector<Request*> firsts;
    for (size_t m = 0; m < M; ++m)
      if (msgs[m].id == sizes.size() - 1) firsts.push_back(&rreq[m]);
    CHILD_CHECK(drive(*t, firsts, milliseconds(10000)) == Status::Success);
    for (size_t m = 0; m < M; ++m)
      if (msgs[m].id != sizes.size() - 1) CHILD_CHECK(postRecv(m) == Status::Success);
  }
  Status st = drive(*t, all, milliseconds(20000));
  if (st != Status::Success) fprintf(stderr, "rank %d: drive: %s\n", rank, statusName(st));
  CHILD_CHECK(st == Status::Success);
  for (size_t m = 0; m < M; ++m) {
    const Msg& g = msgs[m];
    std::vector<char> want(g.bytes);
    fill(want.data(), g.bytes, g.peer, rank, g.id);
    if (reduce) {
      std::vector<char> acc(g.bytes);
      fill(acc.data(), g.bytes, 1000 + rank, g.peer, g.id);
      addInt32(want.data(), acc.data(), g.bytes);
    }
    if (std::memcmp(want.data(), dst[m].data(), g.bytes) != 0) {
      fprintf(stderr, "rank %d: wrong data from rank %d, %zu bytes, message %zu\n", rank, g.peer,
              g.bytes, g.id);
      return 1;
    }
  }
  // The single-copy path really ran: every qualifying send went as a descriptor, and every one
  // coming in was read from the sender's buffer (straight into the receive unless `late`).
  uint64_t sent = c.sent.load() - sent0, recv = c.received.load() - recv0,
           unex = c.unexpected.load() - unex0;
  if (sent != expectDirect || recv + unex != expectDirect || (!late && unex != 0)) {
    fprintf(stderr, "rank %d: single-copy sends %lu, receives %lu + %lu unexpected; want %lu\n",
            rank, static_cast<unsigned long>(sent), static_cast<unsigned long>(recv),
            static_cast<unsigned long>(unex), static_cast<unsigned long>(expectDirect));
    return 1;
  }
  if (late) CHILD_CHECK(unex > 0);
  // Stay until every peer has read our buffers (our sends completed: they have).
  sh->flag[0].fetch_add(1);
  while (sh->flag[0].load() < n) usleep(1000);
  return 0;
}

void runExchange(int n, bool reduce, bool late) {
  auto codes =
      runRanks(n, [&](int r, Shared* sh) { return exchangeRank(n, reduce, late, r, sh); });
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
}

TEST(SingleCopy, Exchange2Ranks) { runExchange(2, false, false); }
TEST(SingleCopy, Exchange3Ranks) { runExchange(3, false, false); }
TEST(SingleCopy, Exchange4Ranks) { runExchange(4, false, false); }
TEST(SingleCopy, ReduceOnArrival2Ranks) { runExchange(2, true, false); }
TEST(SingleCopy, ReduceOnArrival4Ranks) { runExchange(4, true, false); }
TEST(SingleCopy, UnexpectedMessages3Ranks) { runExchange(3, false, true); }
TEST(SingleCopy, UnexpectedReduce2Ranks) { runExchange(2, true, true); }

// A sender that waits for its send before it sends what the receiver waits for: with eager sends
// that never blocked; a descriptor must not block it forever either.
TEST(SingleCopy, SendWaitThenSendDoesNotDeadlock) {
  auto codes = runRanks(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    void* a = nullptr;
    void* b = nullptr;
    CHILD_CHECK(shmem::memAlloc(1 << 20, &a) == Status::Success);
    CHILD_CHECK(shmem::memAlloc(1 << 20, &b) == Status::Success);
    std::memset(a, 7, 1 << 20);
    std::memset(b, 9, 1 << 20);
    if (rank == 0) {
      Request s1, s2;
      CHILD_CHECK(t->postSend(1, 1, a, 1 << 20, &s1) == Status::Success);
      CHILD_CHECK(drive(*t, {&s1}, milliseconds(10000)) == Status::Success);
      CHILD_CHECK(t->postSend(1, 2, b, 1 << 20, &s2) == Status::Success);
      CHILD_CHECK(drive(*t, {&s2}, milliseconds(10000)) == Status::Success);
    } else {
      std::vector<char> x(1 << 20), y(1 << 20);
      Request r1, r2;
      CHILD_CHECK(t->postRecv(0, 2, y.data(), y.size(), nullptr, &r2) == Status::Success);
      CHILD_CHECK(drive(*t, {&r2}, milliseconds(10000)) == Status::Success);
      CHILD_CHECK(t->postRecv(0, 1, x.data(), x.size(), nullptr, &r1) == Status::Success);
      CHILD_CHECK(drive(*t, {&r1}, milliseconds(10000)) == Status::Success);
      CHILD_CHECK(x == std::vector<char>(1 << 20, 7) && y == std::vector<char>(1 << 20, 9));
    }
    shmem::memFree(a);
    shmem::memFree(b);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// A send below the threshold goes single-copy when its Request says the sender never writes the
// buffer during its collective (readOnlySource: an out-of-place Input), from
// NLCCL_SHM_SINGLE_COPY_INPUT_BYTES (16 KiB) up, and through the FIFO otherwise.
TEST(SingleCopy, ReadOnlySourcesGoSingleCopyFromTheInputThreshold) {
  constexpr size_t kBytes = 32 << 10;
  auto codes = runRanks(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    CHILD_CHECK(t->singleCopyInputBytes() == (16u << 10) && kBytes < t->singleCopyBytes());
    void* a = nullptr;
    CHILD_CHECK(shmem::memAlloc(kBytes, &a) == Status::Success);
    std::memset(a, 5, kBytes);
    auto& c = shm::singleCopyCounters();
    if (rank == 0) {
      for (bool readOnly : {false, true}) {
        const uint64_t sent0 = c.sent.load();
        Request s;
        s.readOnlySource = readOnly;
        CHILD_CHECK(t->postSend(1, readOnly ? 2 : 1, a, kBytes, &s) == Status::Success);
        CHILD_CHECK(drive(*t, {&s}, milliseconds(10000)) == Status::Success);
        CHILD_CHECK(c.sent.load() - sent0 == (readOnly ? 1u : 0u));
      }
    } else {
      for (uint64_t tag : {1, 2}) {
        std::vector<char> x(kBytes);
        Request r;
        CHILD_CHECK(t->postRecv(0, tag, x.data(), x.size(), nullptr, &r) == Status::Success);
        CHILD_CHECK(drive(*t, {&r}, milliseconds(10000)) == Status::Success);
        CHILD_CHECK(x == std::vector<char>(kBytes, 5));
      }
    }
    shmem::memFree(a);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(SingleCopy, DisabledByEnvironment) {
  ScopedEnv env("NLCCL_SHM_SINGLE_COPY_BYTES", "0");
  auto codes = runRanks(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t && t->singleCopyBytes() == 0);
    void* buf = nullptr;
    CHILD_CHECK(shmem::memAlloc(4 << 20, &buf) == Status::Success);
    std::memset(buf, rank + 1, 4 << 20);
    Request s, r;
    std::vector<char> in(4 << 20);
    CHILD_CHECK(t->postRecv(1 - rank, 3, in.data(), in.size(), nullptr, &r) == Status::Success);
    CHILD_CHECK(t->postSend(1 - rank, 3, buf, 4 << 20, &s) == Status::Success);
    CHILD_CHECK(drive(*t, {&s, &r}, milliseconds(10000)) == Status::Success);
    CHILD_CHECK(in == std::vector<char>(4 << 20, static_cast<char>(2 - rank)));
    CHILD_CHECK(shm::singleCopyCounters().sent.load() == 0);
    sh->flag[0].fetch_add(1);
    while (sh->flag[0].load() < 2) usleep(1000);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// ---- failures ----

// Ranks exchange 16 MiB single-copy messages in a loop; the parent SIGKILLs one mid-exchange. The
// others fail with RemoteError on everything pending, and nothing stays mapped.
void killTest(int n, int victim) {
  auto body = [n, victim](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, n);
    CHILD_CHECK(t);
    const size_t bytes = 16 << 20;
    std::vector<char*> out(n), in(n);
    for (int q = 0; q < n; ++q) {
      void* p = nullptr;
      CHILD_CHECK(shmem::memAlloc(bytes, &p) == Status::Success);
      out[q] = static_cast<char*>(p);
      std::memset(p, 1, bytes);
      CHILD_CHECK(shmem::memAlloc(bytes, &p) == Status::Success);
      in[q] = static_cast<char*>(p);
    }
    auto start = Clock::now();
    for (uint64_t it = 0; Clock::now() - start < std::chrono::seconds(20); ++it) {
      std::vector<Request> reqs(2 * n);
      std::vector<Request*> ptrs;
      for (int q = 0; q < n; ++q) {
        if (q == rank) continue;
        t->postRecv(q, it, in[q], bytes, nullptr, &reqs[2 * q]);
        t->postSend(q, it, out[q], bytes, &reqs[2 * q + 1]);
        ptrs.push_back(&reqs[2 * q]);
        ptrs.push_back(&reqs[2 * q + 1]);
      }
      if (it == 3 && rank == victim) sh->flag[1].store(1);  // tell the parent to kill us now
      auto t0 = Clock::now();
      Status s = drive(*t, ptrs, milliseconds(10000));
      if (s == Status::Success) {
        sh->direct[rank].store(shm::singleCopyCounters().received.load());
        continue;
      }
      fprintf(stderr, "rank %d: %s after %.0f ms\n", rank, statusName(s),
              std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      CHILD_CHECK(s == Status::RemoteError);
      CHILD_CHECK(Clock::now() - t0 < std::chrono::seconds(5));
      for (Request* r : ptrs) CHILD_CHECK(r->done.load());  // nothing is left pending
      Request late;
      CHILD_CHECK(t->postSend(rank == 0 ? 1 : 0, 999, out[0], bytes, &late) ==
                  Status::RemoteError);
      CHILD_CHECK(sh->direct[rank].load() > 0);  // the exchange before the kill was single-copy
      return 0;
    }
    return 2;  // the kill was never noticed
  };
  auto parent = [victim](Shared* sh, const std::vector<pid_t>& pids) {
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (sh->flag[1].load() == 0 && Clock::now() < deadline) usleep(200);
    usleep(1000);  // inside the exchange: descriptors are posted and being read
    kill(pids[static_cast<size_t>(victim)], SIGKILL);
  };
  expectOnlyVictimKilled(runRanks(n, body, parent), victim);
}

TEST(SingleCopy, KilledPeerFailsOthers2Ranks) { killTest(2, 1); }
TEST(SingleCopy, KilledPeerFailsOthers3Ranks) { killTest(3, 0); }

// ---- through the C API ----

/// nlcclAllReduce (sum of exact integers in float) on nlcclMemAlloc buffers, out of place and in
/// place, at a size of a few times the threshold (an odd count: slices of uneven sizes) and a
/// 16 MiB one.
void allReduceCase(int n, bool expectSingleCopy) {
  std::set<std::string> memfds;
  auto status = testing::forkRanks(n, [n, expectSingleCopy](int r, nlcclComm_t comm) {
    uint64_t recv0 = shm::singleCopyCounters().received.load();
    for (size_t count : {size_t{3} * n * (kThreshold / 4) / 2 + 5, size_t{4} << 20})
      // After each call: our buffers and the peers' we read single-copy.
      if (!memAllocAllReduce(n, r, comm, count, testing::recordMemfds)) return false;
    uint64_t direct = shm::singleCopyCounters().received.load() - recv0;
    if ((direct > 0) != expectSingleCopy) {
      fprintf(stderr, "rank %d: %lu single-copy receives\n", r, static_cast<unsigned long>(direct));
      return false;
    }
    return true;
  }, 60, nullptr, &memfds);
  for (int r = 0; r < n; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  EXPECT_FALSE(memfds.empty());
  EXPECT_EQ(testing::memfdHolders(memfds), std::vector<std::string>{}) << "shared memory left behind";
}

TEST(SingleCopy, AllReduce2Processes) { allReduceCase(2, true); }
TEST(SingleCopy, AllReduce3Processes) { allReduceCase(3, true); }
TEST(SingleCopy, AllReduce4Processes) { allReduceCase(4, true); }
TEST(SingleCopy, AllReduceWithoutSingleCopy) {
  ScopedEnv env("NLCCL_SHM_SINGLE_COPY_BYTES", "0");
  allReduceCase(2, false);
}

// ---- measurement (printed, not asserted) ----

// Rank 0 streams messages from an nlcclMemAlloc buffer to rank 1, with and without single copy.
TEST(SingleCopy, Bandwidth2Processes) {
  for (bool single : {false, true}) {
    ScopedEnv env("NLCCL_SHM_SINGLE_COPY_BYTES", single ? "64K" : "0");
    auto codes = runRanks(2, [single](int rank, Shared* sh) {
      auto t = makeTransport(sh, rank, 2);
      CHILD_CHECK(t);
      for (size_t bytes : {size_t{1} << 20, size_t{16} << 20, size_t{256} << 20}) {
        int iters = static_cast<int>(std::max<size_t>(2, (size_t{512} << 20) / bytes));
        void* p = nullptr;
        CHILD_CHECK(shmem::memAlloc(bytes, &p) == Status::Success);
        std::memset(p, rank == 0 ? 3 : 0, bytes);
        uint64_t sent0 = shm::singleCopyCounters().sent.load();
        double best = 0;
        for (int pass = 0; pass < 3; ++pass) {  // pass 0 warms up (maps, faults pages in)
          std::vector<Request> reqs(static_cast<size_t>(iters));
          std::vector<Request*> ptrs;
          auto t0 = Clock::now();
          for (int i = 0; i < iters; ++i) {
            if (rank == 0)
              t->postSend(1, i, p, bytes, &reqs[i]);
            else
              t->postRecv(0, i, p, bytes, nullptr, &reqs[i]);
            ptrs.push_back(&reqs[i]);
          }
          CHILD_CHECK(drive(*t, ptrs, milliseconds(30000)) == Status::Success);
          double sec = std::chrono::duration<double>(Clock::now() - t0).count();
          if (pass > 0) best = std::max(best, bytes * double(iters) / sec / 1e9);
        }
        if (rank == 1) {
          CHILD_CHECK(static_cast<char*>(p)[bytes - 1] == 3);
          printf("shm 2 processes %6zu KiB: %6.2f GB/s %s\n", bytes >> 10, best,
                 single ? "single copy" : "slot FIFO (two copies)");
        } else {
          uint64_t direct = shm::singleCopyCounters().sent.load() - sent0;
          CHILD_CHECK(direct == (single ? 3u * static_cast<unsigned>(iters) : 0u));
        }
        shmem::memFree(p);
      }
      sh->flag[0].fetch_add(1);
      while (sh->flag[0].load() < 2) usleep(1000);
      return 0;
    });
    EXPECT_EQ(codes, (std::vector<int>{0, 0}));
  }
}

}  // namespace
}  // namespace nlccl::transport::test
