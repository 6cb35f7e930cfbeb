// Shared-memory transport across forked processes: data of many sizes and tags in both
// directions, receives before and after sends, reduce on arrival, dead and aborting peers, and no
// segment left mapped or open by any process afterwards (shm_harness.hpp).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/reduce.hpp"
#include "multirank/shm_harness.hpp"
#include "transports/shm/shm.hpp"

namespace nlccl::transport::test {
namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

/// Runs progress (without requiring anything to finish) for `d`.
void spin(Transport& t, milliseconds d) {
  auto end = Clock::now() + d;
  while (Clock::now() < end) {
    uint32_t e = t.activityEpoch();
    if (t.progress() != Status::Success) return;
    t.waitActivity(e, milliseconds(1));
  }
}

// ---- data exchange ----

struct ExchangeCase {
  int nranks;
  const char* slotBytes;  // NLCCL_SHM_SLOT_BYTES for the run, nullptr for the default
  const char* slots;
  bool reduce;
};

int exchangeRank(const ExchangeCase& c, int rank, Shared* sh) {
  auto t = makeTransport(sh, rank, c.nranks);
  CHILD_CHECK(t);
  const size_t s = t->slotBytes();
  const size_t unit = c.reduce ? 4 : 1;  // int32 elements when reducing
  const std::vector<size_t> sizes = {0, unit, s - unit, s, s + unit, 5u << 20};
  // Two messages per tag (one for 5 MiB): same (peer, tag) pairs match in posting order.
  struct Msg {
    int peer;
    uint64_t tag;
    size_t bytes;
    size_t id;  // distinct per message of the pair and direction
    bool early;
  };
  std::vector<Msg> msgs;
  for (int q = 0; q < c.nranks; ++q) {
    if (q == rank) continue;
    for (size_t i = 0; i < sizes.size(); ++i)
      for (size_t k = 0; k < (sizes[i] < (1u << 20) ? 2u : 1u); ++k)
        // Receives for one tag are posted in message order (that is what FIFO matching needs);
        // some tags have all receives before the sends, some after, one has one of each.
        msgs.push_back({q, 100 + i, sizes[i], i * 2 + k, i % 2 == 0 || (i == 3 && k == 0)});
  }
  if (c.nranks == 2) msgs.push_back({rank, 7, 4096, 99, true});  // a message to ourselves
  Reducer red = Reducer::of(DataType::Int32, RedOp::Sum);
  auto fill = [&](std::vector<char>& b, int src, int dst, size_t id) {
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = static_cast<char>(value(src, dst, id, i / unit) >> (8 * (i % unit)));
    if (c.reduce)
      for (size_t i = 0; i < b.size() / 4; ++i) {
        int32_t v = value(src, dst, id, i);
        std::memcpy(&b[i * 4], &v, 4);
      }
  };
  std::vector<std::vector<char>> sendBufs(msgs.size()), recvBufs(msgs.size());
  std::vector<Request> sendReqs(msgs.size()), recvReqs(msgs.size());
  std::vector<Request*> all;
  for (size_t m = 0; m < msgs.size(); ++m) {
    sendBufs[m].resize(msgs[m].bytes);
    fill(sendBufs[m], rank, msgs[m].peer, msgs[m].id);
    recvBufs[m].assign(msgs[m].bytes, 0);
    if (c.reduce) fill(recvBufs[m], 1000 + rank, msgs[m].peer, msgs[m].id);  // the accumulator
    all.push_back(&sendReqs[m]);
    all.push_back(&recvReqs[m]);
  }
  auto postRecv = [&](size_t m) {
    return t->postRecv(msgs[m].peer, msgs[m].tag, recvBufs[m].data(), msgs[m].bytes,
                       c.reduce ? &red : nullptr, &recvReqs[m]);
  };
  for (size_t m = 0; m < msgs.size(); ++m)
    if (msgs[m].early) CHILD_CHECK(postRecv(m) == Status::Success);
  for (size_t m = 0; m < msgs.size(); ++m)
    CHILD_CHECK(t->postSend(msgs[m].peer, msgs[m].tag, sendBufs[m].data(), msgs[m].bytes,
                            &sendReqs[m]) == Status::Success);
  spin(*t, milliseconds(30));  // let the late messages arrive before their receives exist
  for (size_t m = 0; m < msgs.size(); ++m)
    if (!msgs[m].early) CHILD_CHECK(postRecv(m) == Status::Success);
  Status st = drive(*t, all, milliseconds(10000));
  if (st != Status::Success) fprintf(stderr, "rank %d: drive: %s\n", rank, statusName(st));
  CHILD_CHECK(st == Status::Success);
  for (size_t m = 0; m < msgs.size(); ++m) {
    std::vector<char> want(msgs[m].bytes);
    fill(want, msgs[m].peer, rank, msgs[m].id);
    if (c.reduce) {
      std::vector<char> acc(msgs[m].bytes);
      fill(acc, 1000 + rank, msgs[m].peer, msgs[m].id);
      addInt32(want.data(), acc.data(), want.size());
    }
    if (want != recvBufs[m]) {
      fprintf(stderr, "rank %d: wrong data from rank %d, tag %lu, %zu bytes, message %zu\n", rank,
              msgs[m].peer, static_cast<unsigned long>(msgs[m].tag), msgs[m].bytes, msgs[m].id);
      return 1;
    }
  }
  // Exiting now is fine even if a peer has not drained our last sends: they are in its segment.
  return 0;
}

void runExchange(const ExchangeCase& c) {
  if (c.slotBytes) setenv("NLCCL_SHM_SLOT_BYTES", c.slotBytes, 1);
  if (c.slots) setenv("NLCCL_SHM_SLOTS", c.slots, 1);
  auto codes = runForked(c.nranks, [&](int r, Shared* sh) { return exchangeRank(c, r, sh); });
  unsetenv("NLCCL_SHM_SLOT_BYTES");
  unsetenv("NLCCL_SHM_SLOTS");
  for (int r = 0; r < c.nranks; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
}

TEST(ShmTransport, Exchange2RanksDefaultSlots) { runExchange({2, nullptr, nullptr, false}); }
TEST(ShmTransport, Exchange3RanksSmallSlots) { runExchange({3, "64K", "4", false}); }
TEST(ShmTransport, Exchange4RanksTwoSlots) { runExchange({4, "16K", "2", false}); }
TEST(ShmTransport, ReduceOnArrival2Ranks) { runExchange({2, nullptr, nullptr, true}); }
TEST(ShmTransport, ReduceOnArrival3RanksSmallSlots) { runExchange({3, "64K", "3", true}); }
TEST(ShmTransport, ReduceOnArrival4Ranks) { runExchange({4, "128K", "4", true}); }

// A receive that is only posted once a later message to the same pair has arrived: the FIFO must
// not stay blocked by the earlier, unmatched message.
TEST(ShmTransport, LaterTagCompletesFirst) {
  ScopedEnv slotBytes("NLCCL_SHM_SLOT_BYTES", "8K");
  ScopedEnv slots("NLCCL_SHM_SLOTS", "2");
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    std::vector<char> big(1 << 20), small(100);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
    for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<char>(i + 1);
    if (rank == 0) {
      Request a, b;
      CHILD_CHECK(t->postSend(1, 1, big.data(), big.size(), &a) == Status::Success);
      CHILD_CHECK(t->postSend(1, 2, small.data(), small.size(), &b) == Status::Success);
      CHILD_CHECK(drive(*t, {&a, &b}, milliseconds(10000)) == Status::Success);
    } else {
      std::vector<char> gotBig(big.size()), gotSmall(small.size());
      Request a, b;
      CHILD_CHECK(t->postRecv(0, 2, gotSmall.data(), gotSmall.size(), nullptr, &b) ==
                  Status::Success);
      CHILD_CHECK(drive(*t, {&b}, milliseconds(10000)) == Status::Success);
      CHILD_CHECK(t->postRecv(0, 1, gotBig.data(), gotBig.size(), nullptr, &a) == Status::Success);
      CHILD_CHECK(drive(*t, {&a}, milliseconds(10000)) == Status::Success);
      CHILD_CHECK(gotBig == big && gotSmall == small);
    }
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// A sender that exits right after its sends completed is no error: the data is in our segment.
TEST(ShmTransport, SenderExitsBeforeReceivesArePosted) {
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    std::vector<char> msg(300000, 'x');
    if (rank == 0) {
      Request a;
      CHILD_CHECK(t->postSend(1, 5, msg.data(), msg.size(), &a) == Status::Success);
      CHILD_CHECK(drive(*t, {&a}, milliseconds(10000)) == Status::Success);
      return 0;
    }
    while (sh->reaped.load() == 0) usleep(1000);  // rank 0 has exited and is gone
    spin(*t, milliseconds(120));                  // the liveness probe has seen rank 0 go
    std::vector<char> got(msg.size());
    Request r;
    CHILD_CHECK(t->postRecv(0, 5, got.data(), got.size(), nullptr, &r) == Status::Success);
    CHILD_CHECK(drive(*t, {&r}, milliseconds(5000)) == Status::Success);
    CHILD_CHECK(got == msg);
    // But a receive that can never arrive fails.
    Request r2;
    t->postRecv(0, 6, got.data(), got.size(), nullptr, &r2);
    CHILD_CHECK(drive(*t, {&r2}, milliseconds(5000)) == Status::RemoteError);
    return 0;
  });
  EXPECT_EQ(codes[1], 0);
}

TEST(ShmTransport, SizeMismatchIsInvalidUsage) {
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    std::vector<char> buf(1000);
    Request a;
    if (rank == 0) {
      t->postSend(1, 1, buf.data(), 600, &a);
      CHILD_CHECK(drive(*t, {&a}, milliseconds(5000)) == Status::Success);
      while (sh->flag[0].load() == 0) usleep(1000);
    } else {
      t->postRecv(0, 1, buf.data(), 1000, nullptr, &a);
      CHILD_CHECK(drive(*t, {&a}, milliseconds(5000)) == Status::InvalidUsage);
      sh->flag[0].store(1);
    }
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// ---- failures ----

// Ranks exchange 1 MiB messages in a loop; the parent SIGKILLs rank `victim` mid-exchange. The
// others must see RemoteError on everything pending, fast, and nothing may stay mapped.
void killTest(int n, int victim) {
  ScopedEnv slotBytes("NLCCL_SHM_SLOT_BYTES", "64K");
  auto body = [n, victim](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, n);
    CHILD_CHECK(t);
    std::vector<std::vector<char>> out(n, std::vector<char>(1 << 20, 1)),
        in(n, std::vector<char>(1 << 20));
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
      if (it == 3 && rank == victim) sh->flag[1].store(1);  // tell the parent to kill us now
      Status s = drive(*t, ptrs, milliseconds(10000));
      if (s == Status::Success) continue;
      int64_t killed = sh->killedAtNs.load();
      fprintf(stderr, "rank %d: %s %.0f ms after the kill\n", rank, statusName(s),
              killed ? (nowNs() - killed) / 1e6 : -1.0);
      CHILD_CHECK(s == Status::RemoteError);
      for (Request* r : ptrs) CHILD_CHECK(r->done.load());  // nothing is left pending
      Request late;
      CHILD_CHECK(t->postSend(rank == 0 ? 1 : 0, 999, out[0].data(), 8, &late) ==
                  Status::RemoteError);
      CHILD_CHECK(late.done.load() && late.status == Status::RemoteError);
      return 0;
    }
    return 2;  // the kill was never noticed
  };
  auto parent = [victim](Shared* sh, const std::vector<pid_t>& pids) {
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (sh->flag[1].load() == 0 && Clock::now() < deadline) usleep(200);
    usleep(2000);  // well inside the exchange
    sh->killedAtNs.store(nowNs());
    kill(pids[static_cast<size_t>(victim)], SIGKILL);
  };
  expectOnlyVictimKilled(runForked(n, body, parent), victim);
}

TEST(ShmTransport, KilledPeerFailsOthers2Ranks) { killTest(2, 1); }
TEST(ShmTransport, KilledPeerFailsOthers3Ranks) { killTest(3, 1); }
TEST(ShmTransport, KilledPeerFailsOthers4Ranks) { killTest(4, 0); }

// A peer whose set-up failed after the exchange (its bootstrap reported another rank dead, say)
// frees its segment and may live on: rank 0 of a job waits for the others to leave its bootstrap
// root. A rank that then cannot open that segment sees the peer's failure, RemoteError, not a
// SystemError of its own (the InitKill flake: the peer is alive, so it never shows as dead).
TEST(ShmTransport, PeerThatGaveUpDuringSetupIsRemoteError) {
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto allGather = [sh, rank](const void* mine, size_t bytes, void* all) {
      testing::recordMemfds();  // our segment exists now
      std::memcpy(sh->blobs[0][rank], mine, bytes);
      sh->arrived[0].fetch_add(1);
      if (rank == 0) return Status::RemoteError;  // gives up right after contributing
      auto deadline = Clock::now() + std::chrono::seconds(10);
      while (sh->arrived[0].load() < 2 || sh->flag[0].load() == 0) {  // until rank 0 freed it
        if (Clock::now() > deadline) return Status::Timeout;
        usleep(200);
      }
      for (int i = 0; i < 2; ++i)
        std::memcpy(static_cast<char*>(all) + i * bytes, sh->blobs[0][i], bytes);
      return Status::Success;
    };
    std::unique_ptr<ShmTransport> t;
    const Status s = ShmTransport::create(rank, 2, allGather, milliseconds(5000), {}, &t);
    if (rank == 0) {
      CHILD_CHECK(s == Status::RemoteError && !t);
      sh->flag[0].store(1);  // our segment is freed; stay alive until rank 1 is done
      auto deadline = Clock::now() + std::chrono::seconds(20);
      while (sh->flag[1].load() == 0 && Clock::now() < deadline) usleep(1000);
    } else {
      sh->flag[1].store(1);
      fprintf(stderr, "rank 1: create: %s\n", statusName(s));
      CHILD_CHECK(s == Status::RemoteError && !t);
    }
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(ShmTransport, AbortFailsLocalAndRemote) {
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    std::vector<char> buf(4096);
    Request r;
    CHILD_CHECK(t->postRecv(1 - rank, 1, buf.data(), buf.size(), nullptr, &r) == Status::Success);
    if (rank == 0) {
      spin(*t, milliseconds(50));
      t->abort(Status::InternalError);
      CHILD_CHECK(r.done.load() && r.status == Status::InternalError);
      Request s;
      CHILD_CHECK(t->postSend(1, 2, buf.data(), 8, &s) == Status::InternalError);
      CHILD_CHECK(t->progress() == Status::InternalError);
      while (sh->flag[0].load() == 0) usleep(1000);  // stay alive: rank 1 must see the abort
    } else {
      CHILD_CHECK(drive(*t, {&r}, milliseconds(10000)) == Status::RemoteError);
      sh->flag[0].store(1);
    }
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(ShmTransport, HealthCallbackFailsEverything) {
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto start = Clock::now();
    auto health = [start] {
      return Clock::now() - start > milliseconds(200) ? Status::SystemError : Status::Success;
    };
    auto t = makeTransport(sh, rank, 2, rank == 0 ? health : std::function<Status()>{});
    CHILD_CHECK(t);
    if (rank == 0) {
      std::vector<char> buf(16);
      Request r;
      t->postRecv(1, 1, buf.data(), buf.size(), nullptr, &r);
      CHILD_CHECK(drive(*t, {&r}, milliseconds(10000)) == Status::SystemError);
      CHILD_CHECK(r.done.load() && r.status == Status::SystemError);
      sh->flag[0].store(1);
    } else {
      while (sh->flag[0].load() == 0) usleep(1000);
    }
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// ---- measurement (printed, not asserted) ----

TEST(ShmTransport, Bandwidth2Ranks) {
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    for (size_t bytes : {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20}) {
      int iters = static_cast<int>(std::max<size_t>(8, (size_t{512} << 20) / bytes / 2));
      // The sender's bytes differ per position, size and pass; the receiver's start at 0.
      auto pattern = [bytes](size_t i, int pass) {
        return static_cast<char>(i * 131 + (bytes >> 10) + pass * 17 + 1);
      };
      std::vector<char> buf(bytes);
      for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms up
        for (size_t i = 0; i < bytes; ++i) buf[i] = rank == 0 ? pattern(i, pass) : 0;
        auto t0 = Clock::now();
        std::vector<Request> reqs(static_cast<size_t>(iters));
        std::vector<Request*> ptrs;
        for (int i = 0; i < iters; ++i) {
          if (rank == 0)
            t->postSend(1, i, buf.data(), bytes, &reqs[i]);
          else
            t->postRecv(0, i, buf.data(), bytes, nullptr, &reqs[i]);
          ptrs.push_back(&reqs[i]);
        }
        CHILD_CHECK(drive(*t, ptrs, milliseconds(20000)) == Status::Success);
        // The receiver's clock is the one that counts: it sees the last byte arrive.
        double sec = std::chrono::duration<double>(Clock::now() - t0).count();
        if (rank == 1)
          for (size_t i = 0; i < bytes; ++i) CHILD_CHECK(buf[i] == pattern(i, pass));
        if (rank == 1 && pass == 1)
          printf("shm bandwidth %8zu KiB: %6.2f GB/s (%d messages, slot %lu KiB x %u)\n",
                 bytes >> 10, bytes * iters / sec / 1e9, iters,
                 static_cast<unsigned long>(t->slotBytes() >> 10), t->slots());
      }
    }
    sh->flag[0].fetch_add(1);
    while (sh->flag[0].load() < 2) usleep(1000);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace nlccl::transport::test
