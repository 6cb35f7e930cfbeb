// ShmTransport::exchange (transports/transport.hpp): a send to a peer and a receive from it, run
// to completion in one call, as the engine runs a step of one exchange (a 2-rank recursive-
// doubling all-reduce). It speaks the same wire as postSend/postRecv, so a peer may post the two
// halves instead; it reduces on arrival, with and without a local operand; a killed peer is
// RemoteError and a silent one Timeout, and either way nothing stays posted.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "kernels/reduce.hpp"
#include "multirank/shm_harness.hpp"
#include "transports/shm/shm.hpp"

namespace nlccl::transport::test {
namespace {

std::vector<char> message(int src, size_t bytes, size_t id) {
  std::vector<char> b(bytes);
  for (size_t i = 0; i < bytes / 4; ++i) {
    const int32_t v = value(src, 1 - src, id, i);
    std::memcpy(&b[i * 4], &v, 4);
  }
  return b;
}

// LL records (first line only, several lines), the slots (above NLCCL_SHM_LL_BYTES) and a
// single-copy-sized one (plain memory here: it goes through the slots too).
const std::vector<size_t> kSizes = {4, 40, 56, 200, 4096, 70000};

TEST(ShmExchange, MatchesPostedHalvesAndReduces) {
  ScopedEnv ll("NLCCL_SHM_LL_BYTES", "4096");
  auto body = [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    const int peer = 1 - rank;
    const Reducer sum = Reducer::of(DataType::Int32, RedOp::Sum);
    for (size_t k = 0; k < kSizes.size(); ++k) {
      const size_t n = kSizes[k];
      const std::vector<char> mine = message(rank, n, k), theirs = message(peer, n, k);
      std::vector<char> want = mine;
      addInt32(want.data(), theirs.data(), n);
      std::vector<char> got(n, 0);
      if (rank == 0) {  // one call; buf = mine op incoming (recvReduceCopy)
        Reducer fused = sum;
        fused.src = mine.data();
        CHILD_CHECK(t->exchange(peer, 7 + k, mine.data(), n, false, got.data(), n, &fused,
                                milliseconds(10000)) == Status::Success);
      } else {  // the two halves, posted: buf = buf op incoming
        got = mine;
        Request s, r;
        CHILD_CHECK(t->postSend(peer, 7 + k, mine.data(), n, &s) == Status::Success);
        CHILD_CHECK(t->postRecv(peer, 7 + k, got.data(), n, &sum, &r) == Status::Success);
        CHILD_CHECK(drive(*t, {&s, &r}, milliseconds(10000)) == Status::Success);
      }
      CHILD_CHECK(got == want);
      // Both in one call, a plain receive this time.
      std::vector<char> copy(n, 0);
      CHILD_CHECK(t->exchange(peer, 100 + k, mine.data(), n, false, copy.data(), n, nullptr,
                              milliseconds(10000)) == Status::Success);
      CHILD_CHECK(copy == theirs);
    }
    return 0;
  };
  EXPECT_EQ(runForked(2, body), (std::vector<int>{0, 0}));
}

// A step of one transfer (a 2-rank broadcast): one rank's exchange() only sends, the other's
// only receives, LL-sized and through the slots, and either meets posted halves too.
TEST(ShmExchange, HalfExchangesSendOrReceiveAlone) {
  auto body = [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    const int peer = 1 - rank;
    for (size_t k = 0; k < kSizes.size(); ++k) {
      const size_t n = kSizes[k];
      const std::vector<char> from0 = message(0, n, k);
      std::vector<char> got(n, 0);
      if (rank == 0) {
        CHILD_CHECK(t->exchange(peer, 300 + k, from0.data(), n, false, nullptr, 0, nullptr,
                                milliseconds(10000)) == Status::Success);
        Request s;  // the other direction: a posted send meets the peer's receive-only exchange
        CHILD_CHECK(t->postSend(peer, 400 + k, from0.data(), n, &s) == Status::Success);
        CHILD_CHECK(drive(*t, {&s}, milliseconds(10000)) == Status::Success);
      } else {
        CHILD_CHECK(t->exchange(peer, 300 + k, nullptr, 0, false, got.data(), n, nullptr,
                                milliseconds(10000)) == Status::Success);
        CHILD_CHECK(got == from0);
        std::fill(got.begin(), got.end(), 0);
        CHILD_CHECK(t->exchange(peer, 400 + k, nullptr, 0, false, got.data(), n, nullptr,
                                milliseconds(10000)) == Status::Success);
        CHILD_CHECK(got == from0);
      }
    }
    return 0;
  };
  EXPECT_EQ(runForked(2, body), (std::vector<int>{0, 0}));
}

// exchange() watches the peer's next LL line for the reply before it posts the receive. A reply
// that comes behind a large message (through the slots, not the LL lines), or later than the
// watch lasts, still matches, and the large message keeps its place in the pair's order.
TEST(ShmExchange, AReplyBehindTheSlotsOrLaterThanTheWatchStillMatches) {
  auto body = [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    const int peer = 1 - rank;
    for (int round = 0; round < 2; ++round) {
      const uint64_t big = 50 + 10 * round, small = big + 1;
      const std::vector<char> mine = message(rank, 40, small), theirs = message(peer, 40, small);
      std::vector<char> got(40, 0);
      if (rank == 0) {
        CHILD_CHECK(t->exchange(peer, small, mine.data(), 40, false, got.data(), 40, nullptr,
                                milliseconds(10000)) == Status::Success);
        CHILD_CHECK(got == theirs);
        const std::vector<char> want = message(peer, 100000, big);
        std::vector<char> in(100000, 0);
        Request r;
        CHILD_CHECK(t->postRecv(peer, big, in.data(), in.size(), nullptr, &r) == Status::Success);
        CHILD_CHECK(drive(*t, {&r}, milliseconds(10000)) == Status::Success);
        CHILD_CHECK(in == want);
      } else {
        // Round 1 answers well after the watch (20 us) has given up.
        if (round == 1) usleep(5000);
        const std::vector<char> out = message(rank, 100000, big);
        Request b, s, r;
        CHILD_CHECK(t->postSend(peer, big, out.data(), out.size(), &b) == Status::Success);
        CHILD_CHECK(t->postSend(peer, small, mine.data(), 40, &s) == Status::Success);
        CHILD_CHECK(t->postRecv(peer, small, got.data(), 40, nullptr, &r) == Status::Success);
        CHILD_CHECK(drive(*t, {&b, &s, &r}, milliseconds(10000)) == Status::Success);
        CHILD_CHECK(got == theirs);
      }
    }
    return 0;
  };
  EXPECT_EQ(runForked(2, body), (std::vector<int>{0, 0}));
}

TEST(ShmExchange, KilledPeerIsRemoteError) {
  auto body = [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    std::vector<char> out(64, 1), in(64);
    for (uint64_t it = 0; it < 100000000; ++it) {
      if (it == 1000 && rank == 1) sh->flag[1].store(1);  // the parent kills us now
      const Status s =
          t->exchange(1 - rank, it, out.data(), out.size(), false, in.data(), in.size(), nullptr,
                      milliseconds(10000));
      if (s == Status::Success) continue;
      fprintf(stderr, "rank %d: %s at exchange %llu\n", rank, statusName(s),
              static_cast<unsigned long long>(it));
      CHILD_CHECK(s == Status::RemoteError);
      Request late;
      CHILD_CHECK(t->postSend(1 - rank, ~uint64_t{0}, out.data(), 8, &late) != Status::Success);
      CHILD_CHECK(late.done.load());
      return 0;
    }
    return 2;  // the kill was never noticed
  };
  auto parent = [](Shared* sh, const std::vector<pid_t>& pids) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (sh->flag[1].load() == 0 && Clock::now() < deadline) usleep(200);
    kill(pids[1], SIGKILL);
  };
  expectOnlyVictimKilled(runForked(2, body, parent), 1);
}

TEST(ShmExchange, SilentPeerTimesOutAndLeavesNothingPosted) {
  auto body = [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    std::vector<char> out(64, 1), in(64);
    if (rank == 1) {  // alive, but it never sends
      while (sh->flag[2].load() == 0) usleep(1000);
      return 0;
    }
    const auto start = Clock::now();
    const Status s = t->exchange(1, 5, out.data(), out.size(), false, in.data(), in.size(), nullptr,
                                 milliseconds(300));
    const auto took = Clock::now() - start;
    sh->flag[2].store(1);
    CHILD_CHECK(s == Status::Timeout);
    CHILD_CHECK(took >= milliseconds(300) && took < std::chrono::seconds(5));
    Request late;  // the transport was aborted: it takes nothing more
    CHILD_CHECK(t->postRecv(1, 6, in.data(), in.size(), nullptr, &late) == Status::Timeout);
    CHILD_CHECK(late.done.load());
    return 0;
  };
  EXPECT_EQ(runForked(2, body), (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace nlccl::transport::test
