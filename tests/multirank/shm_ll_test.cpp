// The shm transport's LL FIFO (small messages inline in cache lines with their own flags, see
// transports/shm/shm.hpp) across forked processes: messages of one tag on both sides of the LL
// threshold still match in posting order, a full LL FIFO makes the sender wait and the receiver
// wake it, records without a receive move aside when a later one is wanted, and a rank killed
// during small-message traffic turns into RemoteError. Collectives at sizes around the
// threshold, every data type, are checked through the C API at 2, 3, 4 and 8 processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/reduce.hpp"
#include "multirank/collective_case.hpp"
#include "multirank/fork_ranks.hpp"
#include "multirank/shm_harness.hpp"
#include "transports/shm/shm.hpp"
#include "transports/shm/shm_segment.hpp"

namespace nlccl::transport::test {
namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

void fillMsg(std::vector<char>& b, int src, int dst, size_t id) {
  for (size_t i = 0; i < b.size() / 4; ++i) {
    int32_t v = value(src, dst, id, i);
    std::memcpy(&b[i * 4], &v, 4);
  }
}

// Every message of a pair has the same tag; sizes alternate between LL records (up to 4 KiB
// here, first-line-only ones included) and slot fragments, so a small message that
// overtook a larger one sent before it would meet the larger one's receive (a size mismatch).
// Half the receives are posted before the sends, the rest once the messages have arrived.
int sameTagRank(int rank, int nranks, bool reduce, Shared* sh) {
  auto t = makeTransport(sh, rank, nranks);
  CHILD_CHECK(t);
  const size_t first = shm::kLLFirst;
  const std::vector<size_t> sizes = {4100, 8,    first + 8, 4096, 0,     70000, first,
                                     4,    4104, 2000,      4092, 1 << 20, 12};
  struct Msg {
    int peer;
    size_t bytes, id;
  };
  std::vector<Msg> msgs;
  for (int q = 0; q < nranks; ++q)
    if (q != rank)
      for (size_t i = 0; i < sizes.size(); ++i) msgs.push_back({q, sizes[i], i});
  Reducer red = Reducer::of(DataType::Int32, RedOp::Sum);
  std::vector<std::vector<char>> out(msgs.size()), in(msgs.size());
  std::vector<Request> sreq(msgs.size()), rreq(msgs.size());
  std::vector<Request*> all;
  for (size_t m = 0; m < msgs.size(); ++m) {
    out[m].resize(msgs[m].bytes);
    fillMsg(out[m], rank, msgs[m].peer, msgs[m].id);
    in[m].assign(msgs[m].bytes, 0);
    if (reduce) fillMsg(in[m], 1000 + rank, msgs[m].peer, msgs[m].id);
    all.push_back(&sreq[m]);
    all.push_back(&rreq[m]);
  }
  auto post = [&](size_t m) {
    return t->postRecv(msgs[m].peer, 42, in[m].data(), msgs[m].bytes, reduce ? &red : nullptr,
                       &rreq[m]);
  };
  const size_t early = msgs.size() / 2;  // receives are posted in message order, as FIFO needs
  for (size_t m = 0; m < early; ++m) CHILD_CHECK(post(m) == Status::Success);
  for (size_t m = 0; m < msgs.size(); ++m)
    CHILD_CHECK(t->postSend(msgs[m].peer, 42, out[m].data(), msgs[m].bytes, &sreq[m]) ==
                Status::Success);
  auto end = Clock::now() + milliseconds(30);
  while (Clock::now() < end) {
    uint32_t e = t->activityEpoch();
    CHILD_CHECK(t->progress() == Status::Success);
    t->waitActivity(e, milliseconds(1));
  }
  for (size_t m = early; m < msgs.size(); ++m) CHILD_CHECK(post(m) == Status::Success);
  Status st = drive(*t, all, milliseconds(10000));
  if (st != Status::Success) fprintf(stderr, "rank %d: drive: %s\n", rank, statusName(st));
  CHILD_CHECK(st == Status::Success);
  for (size_t m = 0; m < msgs.size(); ++m) {
    std::vector<char> want(msgs[m].bytes);
    fillMsg(want, msgs[m].peer, rank, msgs[m].id);
    if (reduce) {
      std::vector<char> acc(msgs[m].bytes);
      fillMsg(acc, 1000 + rank, msgs[m].peer, msgs[m].id);
      addInt32(want.data(), acc.data(), want.size());
    }
    if (want != in[m]) {
      fprintf(stderr, "rank %d: wrong data from rank %d, %zu bytes, message %zu\n", rank,
              msgs[m].peer, msgs[m].bytes, msgs[m].id);
      return 1;
    }
  }
  return 0;
}

TEST(ShmLL, SameTagAcrossThreshold2Ranks) {
  ScopedEnv ll("NLCCL_SHM_LL_BYTES", "4096");
  auto codes = runForked(2, [](int r, Shared* sh) { return sameTagRank(r, 2, false, sh); });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(ShmLL, SameTagAcrossThresholdReduce3Ranks) {
  ScopedEnv slots("NLCCL_SHM_SLOT_BYTES", "8K");  // the large ones take several fragments
  ScopedEnv ll("NLCCL_SHM_LL_BYTES", "4096");
  auto codes = runForked(3, [](int r, Shared* sh) { return sameTagRank(r, 3, true, sh); });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0}));
}

TEST(ShmLL, SameTagWithSmallerThreshold4Ranks) {
  ScopedEnv ll("NLCCL_SHM_LL_BYTES", "100");
  auto codes = runForked(4, [](int r, Shared* sh) { return sameTagRank(r, 4, true, sh); });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0, 0}));
}

// Far more LL data than the FIFO holds, sent before any receive exists: the sender queues what
// does not fit and must be woken when the receiver frees lines (it sleeps meanwhile). The
// receiver posts its receives in reverse order, so each record ahead of the wanted one moves to
// the unexpected queue.
// The activity epoch moves whenever a record arrives, even when progress() has looked at
// another one since the epoch was read: rank 0 reads the epoch while rank 2's record (no receive
// for it yet) is new, progress() looks at that record, then rank 1's arrives. A count of "peers
// with a record not looked at" read 1, 0, then 1 again, so a wait from that epoch slept through
// the arrival until its timeout (four ranks on two cores lost half their time that way).
TEST(ShmLL, EpochMovesForAnArrivalAfterProgressLookedAtAnother) {
  auto body = [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 3);
    CHILD_CHECK(t);
    std::vector<char> out(16, static_cast<char>(rank)), in1(16), in2(16);
    auto waitFlag = [&](int i) {
      const auto end = Clock::now() + std::chrono::seconds(10);
      while (sh->flag[i].load() == 0 && Clock::now() < end) usleep(100);
      return sh->flag[i].load() != 0;
    };
    if (rank != 0) {
      if (rank == 1) CHILD_CHECK(waitFlag(3));  // rank 1 sends once rank 0 has looked
      Request s;
      CHILD_CHECK(t->postSend(0, 40 + rank, out.data(), out.size(), &s) == Status::Success);
      CHILD_CHECK(s.done.load());  // an LL record: complete once written
      sh->flag[rank].store(1);
      CHILD_CHECK(waitFlag(4));  // stay until rank 0 is done
      return 0;
    }
    CHILD_CHECK(waitFlag(2));
    const auto end = Clock::now() + std::chrono::seconds(10);
    uint32_t seen = t->activityEpoch();
    CHILD_CHECK(t->progress() == Status::Success);  // looks at rank 2's record, which stays
    sh->flag[3].store(1);
    CHILD_CHECK(waitFlag(1));
    // Rank 1's record is whole in our FIFO now: the epoch read before must differ.
    while (t->activityEpoch() == seen && Clock::now() < end) usleep(100);
    CHILD_CHECK(t->activityEpoch() != seen);
    Request r1, r2;
    CHILD_CHECK(t->postRecv(1, 41, in1.data(), in1.size(), nullptr, &r1) == Status::Success);
    CHILD_CHECK(t->postRecv(2, 42, in2.data(), in2.size(), nullptr, &r2) == Status::Success);
    CHILD_CHECK(drive(*t, {&r1, &r2}, milliseconds(10000)) == Status::Success);
    CHILD_CHECK(in1 == std::vector<char>(16, 1) && in2 == std::vector<char>(16, 2));
    sh->flag[4].store(1);
    return 0;
  };
  EXPECT_EQ(runForked(3, body), (std::vector<int>{0, 0, 0}));
}

// Sends posted with Request::holdWake wake their receivers at releaseWakes(), with one fence for
// all (the root of a direct broadcast paid a cross-core round trip per receiver before). The
// receivers sleep in waitActivity; nothing but releaseWakes rings their doorbells here. A wait
// wakes every 50 ms to check its peers and is awake for a few microseconds then, so the sender
// tries up to 20 times, a record each time, until each receiver's doorbell has rung.
TEST(ShmLL, HeldWakesRingSleepingReceiversAtRelease) {
  auto codes = runForked(3, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 3);
    CHILD_CHECK(t);
    auto waitFlag = [&](int i) {
      const auto end = Clock::now() + std::chrono::seconds(20);
      while (sh->flag[i].load() == 0 && Clock::now() < end) usleep(100);
      return sh->flag[i].load() != 0;
    };
    const char out[8] = {7, 6, 5, 4, 3, 2, 1, 0};
    if (rank == 0) {  // flags: 1, 2 ready; 3, 4 rung; 5, 6 records sent to 1, 2; 7 done
      CHILD_CHECK(waitFlag(1) && waitFlag(2));
      Request reqs[2][20];
      for (int k = 0; k < 20 && !(sh->flag[3].load() && sh->flag[4].load()); ++k) {
        usleep(100 * 1000);  // the receivers sleep meanwhile
        for (int r = 1; r <= 2; ++r) {
          if (sh->flag[r + 2].load()) continue;
          Request& s = reqs[r - 1][k];
          s.holdWake = true;
          CHILD_CHECK(t->postSend(r, 100 + k, out, sizeof out, &s) == Status::Success);
          CHILD_CHECK(s.done.load());  // LL: complete once written
          sh->flag[r + 4].store(k + 1);
        }
        t->releaseWakes();
      }
      sh->flag[7].store(1);
      return 0;
    }
    const uint32_t rings = t->doorbellRings();
    sh->flag[rank].store(1);
    const auto end = Clock::now() + std::chrono::seconds(15);
    while (t->doorbellRings() == rings && Clock::now() < end)
      t->waitActivity(t->activityEpoch(), std::chrono::seconds(1));
    CHILD_CHECK(t->doorbellRings() != rings);
    sh->flag[rank + 2].store(1);
    CHILD_CHECK(waitFlag(7));
    for (int k = 0; k < sh->flag[rank + 4].load(); ++k) {
      char in[8] = {};
      Request r;
      CHILD_CHECK(t->postRecv(0, 100 + k, in, sizeof in, nullptr, &r) == Status::Success);
      CHILD_CHECK(drive(*t, {&r}, milliseconds(10000)) == Status::Success);
      CHILD_CHECK(std::memcmp(in, out, sizeof in) == 0);
    }
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0}));
}

TEST(ShmLL, FullFifoWakesTheSenderAndRecordsMoveAside) {
  ScopedEnv ll("NLCCL_SHM_LL_BYTES", "4096");
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    constexpr size_t kMsgs = 300, kBytes = 4096;  // 74 lines each; the FIFO has 1024
    std::vector<std::vector<char>> bufs(kMsgs, std::vector<char>(kBytes));
    std::vector<Request> reqs(kMsgs);
    std::vector<Request*> all;
    for (auto& r : reqs) all.push_back(&r);
    if (rank == 0) {
      for (size_t m = 0; m < kMsgs; ++m) {
        fillMsg(bufs[m], 0, 1, m);
        CHILD_CHECK(t->postSend(1, m, bufs[m].data(), kBytes, &reqs[m]) == Status::Success);
      }
      CHILD_CHECK(!reqs[kMsgs - 1].done.load());  // it did not fit: the sender waits
      CHILD_CHECK(drive(*t, all, milliseconds(10000)) == Status::Success);
    } else {
      usleep(100 * 1000);  // the sender fills the FIFO and goes to sleep
      for (size_t m = kMsgs; m-- > 0;)
        CHILD_CHECK(t->postRecv(0, m, bufs[m].data(), kBytes, nullptr, &reqs[m]) ==
                    Status::Success);
      CHILD_CHECK(drive(*t, all, milliseconds(10000)) == Status::Success);
      for (size_t m = 0; m < kMsgs; ++m) {
        std::vector<char> want(kBytes);
        fillMsg(want, 0, 1, m);
        CHILD_CHECK(want == bufs[m]);
      }
    }
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// The activity epoch a wait compares against is read before progress(); that progress() looks at
// an LL record nobody has asked for yet (a later call's, from a peer running ahead), and only
// then does the record the wait is for arrive. Its sender saw no sleeper and rang nothing, so the
// epoch alone must tell: it once counted peers with unread records and so went 1 -> 0 -> 1 here,
// equal to what the waiter had seen; the wait then spun 50 us and slept to its timeout (ring
// broadcast at 4 ranks, 8 B: 20-70 us a call instead of about 1).
TEST(ShmLL, EpochChangesForARecordArrivingAfterProgressLookedAtAnother) {
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    auto waitFlag = [&](int i, int v) {
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while (sh->flag[i].load() < v)
        if (Clock::now() > deadline) return false;
      return true;
    };
    char a[8] = {1}, b[8] = {2}, inA[8] = {}, inB[8] = {};
    Request sa, sb, ra, rb;
    if (rank == 0) {
      CHILD_CHECK(t->postSend(1, 1, a, sizeof a, &sa) == Status::Success);  // the early one
      sh->flag[0].store(1);
      CHILD_CHECK(waitFlag(1, 1));  // the receiver has read its epoch and made progress
      CHILD_CHECK(t->postSend(1, 2, b, sizeof b, &sb) == Status::Success);
      CHILD_CHECK(sa.done.load() && sb.done.load());  // LL: complete once written
      sh->flag[0].store(2);
      CHILD_CHECK(waitFlag(1, 2));
      return 0;
    }
    CHILD_CHECK(waitFlag(0, 1));
    const uint32_t seen = t->activityEpoch();
    CHILD_CHECK(t->progress() == Status::Success);  // looks at record 1: no receive for it yet
    sh->flag[1].store(1);
    CHILD_CHECK(waitFlag(0, 2));  // record 2 is in our lines now
    CHILD_CHECK(t->activityEpoch() != seen);
    CHILD_CHECK(t->postRecv(0, 1, inA, sizeof inA, nullptr, &ra) == Status::Success);
    CHILD_CHECK(t->postRecv(0, 2, inB, sizeof inB, nullptr, &rb) == Status::Success);
    CHILD_CHECK(drive(*t, {&ra, &rb}, milliseconds(10000)) == Status::Success);
    CHILD_CHECK(inA[0] == 1 && inB[0] == 2);
    sh->flag[1].store(2);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// Small-message traffic only (LL records both ways) when a rank is killed: the others fail with
// RemoteError, nothing stays pending, and later posts fail too.
void llKillTest(int n, int victim) {
  auto body = [n, victim](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, n);
    CHILD_CHECK(t);
    std::vector<std::vector<char>> out(n, std::vector<char>(64, 1)), in(n, std::vector<char>(64));
    auto start = Clock::now();
    for (uint64_t it = 0; Clock::now() - start < std::chrono::seconds(10); ++it) {
      std::vector<Request> reqs(2 * n);
      std::vector<Request*> ptrs;
      for (int q = 0; q < n; ++q) {
        if (q == rank) continue;
        t->postRecv(q, it, in[q].data(), in[q].size(), nullptr, &reqs[2 * q]);
        t->postSend(q, it, out[q].data(), out[q].size(), &reqs[2 * q + 1]);
        ptrs.push_back(&reqs[2 * q]);
        ptrs.push_back(&reqs[2 * q + 1]);
      }
      if (it == 1000 && rank == victim) sh->flag[1].store(1);  // tell the parent to kill us now
      Status s = drive(*t, ptrs, milliseconds(10000));
      if (s == Status::Success) continue;
      int64_t killed = sh->killedAtNs.load();
      fprintf(stderr, "rank %d: %s %.0f ms after the kill\n", rank, statusName(s),
              killed ? (nowNs() - killed) / 1e6 : -1.0);
      CHILD_CHECK(s == Status::RemoteError);
      for (Request* r : ptrs) CHILD_CHECK(r->done.load());
      Request late;
      CHILD_CHECK(t->postSend(rank == 0 ? 1 : 0, ~uint64_t{0}, out[0].data(), 8, &late) ==
                  Status::RemoteError);
      return 0;
    }
    return 2;  // the kill was never noticed
  };
  auto parent = [victim](Shared* sh, const std::vector<pid_t>& pids) {
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (sh->flag[1].load() == 0 && Clock::now() < deadline) usleep(200);
    sh->killedAtNs.store(nowNs());
    kill(pids[static_cast<size_t>(victim)], SIGKILL);
  };
  expectOnlyVictimKilled(runForked(n, body, parent), victim);
}

TEST(ShmLL, KilledPeerFailsOthers2Ranks) { llKillTest(2, 1); }
TEST(ShmLL, KilledPeerFailsOthers3Ranks) { llKillTest(3, 0); }

}  // namespace
}  // namespace nlccl::transport::test

namespace nlccl::testing {
namespace {

// Collectives through the C API over shm with messages just below, at and above the LL
// threshold `ll` (NLCCL_SHM_LL_BYTES; at 0, around 4 KiB) and the first line's capacity, for
// every data type.
void thresholdCollectives(int p, size_t ll) {
  const std::string text = std::to_string(ll);
  setenv("NLCCL_SHM_LL_BYTES", text.c_str(), 1);
  const size_t at = ll ? ll : 4096;
  auto status = forkRanks(p, [p, at](int r, nlcclComm_t comm) {
    for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                         Collective::Broadcast}) {
      for (int ti = 0; ti < kNumDataTypes; ++ti) {
        const DataType t = static_cast<DataType>(ti);
        const size_t es = dataTypeSize(t);
        for (size_t bytes : {size_t{8}, transport::shm::kLLFirst, transport::shm::kLLFirst + 8,
                             at - 8, at, at + 8}) {
          const size_t count = std::max<size_t>(1, bytes / es);
          for (int o = 0; o < (c == Collective::AllReduce ? kNumRedOps : 1); ++o) {
            CollCase cc{c, t, static_cast<RedOp>(o), count, p - 1, bytes == at};
            CollBuffers b(cc, r, p);
            nlcclResult_t res = b.issue(comm);
            std::string err = res == nlcclSuccess ? b.check() : nlcclGetLastError(comm);
            if (!err.empty()) {
              fprintf(stderr, "rank %d: %s\n", r, err.c_str());
              return false;
            }
          }
        }
      }
    }
    return true;
  }, 120);
  unsetenv("NLCCL_SHM_LL_BYTES");
  for (int r = 0; r < p; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

class ShmLLCollectives : public ::testing::TestWithParam<int> {};
TEST_P(ShmLLCollectives, AroundA4KThreshold) { thresholdCollectives(GetParam(), 4096); }
INSTANTIATE_TEST_SUITE_P(Shm, ShmLLCollectives, ::testing::Values(2, 3, 4, 8));

TEST(ShmLLCollectivesOff, AroundTheThresholdWithoutLL) { thresholdCollectives(2, 0); }
TEST(ShmLLCollectivesDefault, AroundTheDefaultThreshold) { thresholdCollectives(3, 512); }

}  // namespace
}  // namespace nlccl::testing
