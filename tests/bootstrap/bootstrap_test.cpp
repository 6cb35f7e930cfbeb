// Ranks as threads: join, all-gather, barrier, broadcast, split, timeout, abort and liveness.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "bootstrap/helpers.hpp"

namespace nlccl::bootstrap {
namespace {

using namespace std::chrono_literals;
using test::allRanks;
using test::runRanks;

class BootstrapRanks : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapRanks, AllGatherBarrierBroadcast) {
  const int n = GetParam();
  const int socketsBefore = test::openSockets();
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  auto res = runRanks(id, n, allRanks(n), 10s, [n](Bootstrap& b) -> Status {
    if (b.rank() < 0 || b.nranks() != n || !b.sameHost(0)) return Status::InternalError;
    for (int round = 0; round < 3; ++round) {
      const size_t bytes = 13 + round;  // odd sizes
      std::vector<uint8_t> mine(bytes), all(bytes * n);
      for (size_t i = 0; i < bytes; ++i) mine[i] = uint8_t(b.rank() * 31 + i + round);
      NLCHECK(b.allGather(mine.data(), bytes, all.data()));
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < bytes; ++i)
          if (all[r * bytes + i] != uint8_t(r * 31 + i + round)) return Status::InternalError;
      NLCHECK(b.barrier());
      for (int root : {0, n - 1}) {
        uint64_t v = b.rank() == root ? 0xabc000 + root + round : 0;
        NLCHECK(b.broadcast(&v, sizeof(v), root));
        if (v != 0xabc000u + root + round) return Status::InternalError;
      }
    }
    // A zero-byte all-gather is a barrier.
    NLCHECK(b.allGather(nullptr, 0, nullptr));
    return b.health();
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(res[r].status, Status::Success) << r << ": " << res[r].error;
  EXPECT_TRUE(test::rootFinished(id)) << "root thread did not exit after all ranks left";
  EXPECT_EQ(test::openSockets(), socketsBefore) << "a socket was left behind";
}

INSTANTIATE_TEST_SUITE_P(Sizes, BootstrapRanks, ::testing::Range(1, 9));

TEST(Bootstrap, SplitRunsIndependentRounds) {
  const int n = 6;
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  auto res = runRanks(id, n, allRanks(n), 10s, [](Bootstrap& b) -> Status {
    std::unique_ptr<Bootstrap> sub;
    int color = b.rank() == 5 ? -1 : b.rank() % 2;  // rank 5 opts out
    NLCHECK(b.split(color, -b.rank(), &sub));
    if (b.rank() == 5) return sub == nullptr ? b.barrier() : Status::InternalError;
    // Evens {0,2,4} and odds {1,3}, ordered by descending world rank (key = -rank).
    int expectN = b.rank() % 2 == 0 ? 3 : 2;
    if (sub->nranks() != expectN) return Status::InternalError;
    if (sub->worldRank(sub->rank()) != b.rank()) return Status::InternalError;
    if (sub->worldRank(0) < sub->worldRank(sub->nranks() - 1)) return Status::InternalError;
    for (int k = 0; k < 2; ++k) {
      int32_t mine = b.rank() * 10 + k, all[3] = {};
      NLCHECK(sub->allGather(&mine, sizeof(mine), all));
      for (int r = 0; r < sub->nranks(); ++r)
        if (all[r] != sub->worldRank(r) * 10 + k) return Status::InternalError;
      NLCHECK(sub->barrier());
    }
    return b.barrier();  // the parent keeps working after the split
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(res[r].status, Status::Success) << r << ": " << res[r].error;
}

TEST(Bootstrap, TimeoutNamesTheMissingRank) {
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  auto res = runRanks(id, 4, {0, 1, 2}, 1500ms, nullptr);
  for (auto& r : res) {
    EXPECT_EQ(r.status, Status::Timeout);
    EXPECT_NE(r.error.find("timed out after 1500 ms waiting for rank 3 of 4 to join"),
              std::string::npos)
        << r.error;
  }
  EXPECT_TRUE(test::rootFinished(id));
}

TEST(Bootstrap, MismatchedAllGatherSizesFailEverywhere) {
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  auto res = runRanks(id, 3, allRanks(3), 5s, [](Bootstrap& b) -> Status {
    uint8_t buf[64] = {}, all[3 * 64];
    return b.allGather(buf, b.rank() == 1 ? 16 : 8, all);
  });
  for (auto& r : res) {
    EXPECT_EQ(r.status, Status::InvalidUsage);
    EXPECT_NE(r.error.find("size mismatch"), std::string::npos) << r.error;
  }
}

TEST(Bootstrap, AbortedRankTurnsOthersUnhealthyAndWakesWaiters) {
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  std::atomic<int> callbacks{0};
  auto res = runRanks(id, 3, allRanks(3), 5s, [&](Bootstrap& b) -> Status {
    b.setFailureCallback([&](Status, const std::string&) { callbacks++; });
    NLCHECK(b.barrier());
    if (b.rank() == 2) {
      b.abort();
      return b.barrier() == Status::InvalidUsage ? Status::Success : Status::InternalError;
    }
    Notifier n;
    b.addWaker(&n);
    // Block the way a transport would: on a Notifier, rechecking the failure word after each wake.
    auto end = std::chrono::steady_clock::now() + 5s;
    while (b.failureWord()->load() == 0 && std::chrono::steady_clock::now() < end) {
      uint32_t e = n.epoch();
      if (b.failureWord()->load() != 0) break;
      n.wait(e, 100ms);
    }
    b.removeWaker(&n);
    Status h = b.health();
    if (log::lastError().find("rank 2 disconnected") == std::string::npos) return Status::InternalError;
    // Later rounds fail at once instead of waiting for the dead rank.
    if (b.barrier() != Status::RemoteError) return Status::InternalError;
    return h;
  });
  EXPECT_EQ(res[0].status, Status::RemoteError) << res[0].error;
  EXPECT_EQ(res[1].status, Status::RemoteError) << res[1].error;
  EXPECT_EQ(res[2].status, Status::Success) << res[2].error;
  EXPECT_EQ(callbacks.load(), 2);
  EXPECT_TRUE(test::rootFinished(id));
}

// A rank whose io thread is stuck in a handler (here its failure callback blocks; in the field,
// a library lock a fork inherited) still leaves within the bound instead of hanging in a join.
TEST(Bootstrap, StuckIoThreadDoesNotHangAbort) {
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  std::mutex mu;
  std::condition_variable cv;
  bool inCallback = false, release = false;
  double abortSec = -1;
  auto res = runRanks(id, 2, allRanks(2), 5s, [&](Bootstrap& b) -> Status {
    if (b.rank() == 1) {
      b.setFailureCallback([&](Status, const std::string&) {
        std::unique_lock<std::mutex> lock(mu);
        inCallback = true;
        cv.notify_all();
        cv.wait(lock, [&] { return release; });  // the io thread is stuck here
      });
    }
    NLCHECK(b.barrier());
    if (b.rank() == 0) {
      b.abort();
      return Status::Success;
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, 5s, [&] { return inCallback; })) return Status::InternalError;
    }
    const auto t0 = std::chrono::steady_clock::now();
    b.abort();  // joins the io thread: bounded, although the thread cannot stop
    abortSec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    {
      // The left-behind thread finishes on the state it holds, and closes its socket (until
      // then the root counts this rank as live, and this Bootstrap's end waits for the root).
      std::lock_guard<std::mutex> lock(mu);
      release = true;
    }
    cv.notify_all();
    return Status::Success;
  });
  EXPECT_EQ(res[0].status, Status::Success) << res[0].error;
  EXPECT_EQ(res[1].status, Status::Success) << res[1].error;
  EXPECT_GE(abortSec, 1.5) << "abort should have waited for the io thread first";
  EXPECT_LT(abortSec, 4.0) << "abort hung on a stuck io thread";
  EXPECT_TRUE(test::rootFinished(id));
}

TEST(Bootstrap, InvalidArguments) {
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::init(id, 2, 2, 1s, &b), Status::InvalidArgument);
  EXPECT_NE(log::lastError().find("rank 2 out of range"), std::string::npos);
  EXPECT_EQ(Bootstrap::init(id, 0, 0, 1s, &b), Status::InvalidArgument);
  UniqueId zero;
  EXPECT_EQ(Bootstrap::init(zero, 0, 1, 1s, &b), Status::InvalidArgument);
  ASSERT_EQ(Bootstrap::init(id, 0, 1, 1s, &b), Status::Success);
  uint8_t x = 0;
  EXPECT_EQ(b->broadcast(&x, 1, 1), Status::InvalidArgument);
  EXPECT_EQ(b->allGather(nullptr, 4, &x), Status::InvalidArgument);
  EXPECT_EQ(b->broadcast(&x, 1, 0), Status::Success);
  b.reset();
  EXPECT_TRUE(test::rootFinished(id));
}

}  // namespace
}  // namespace nlccl::bootstrap
