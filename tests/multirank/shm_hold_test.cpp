// Held runs of the shm transport (hold/release, shm_wait.cpp): a thread that holds the transport
// for a run keeps its lock, yet abort from another thread still gets in and fails the run, other
// threads' runs (held or not) interleave with it on the same transport, and the LL Dekker checks
// it puts off still happen (a sender waiting for LL space and a sleeping receiver are rung).
#include <thread>

#include "multirank/shm_harness.hpp"

namespace nlccl::transport::test {
namespace {

/// One engine-like run held by the calling thread: posts, then progresses and waits until every
/// request is done (or `timeout`), releasing at the end.
Status heldRun(ShmTransport& t, const std::function<Status()>& post,
               const std::vector<Request*>& reqs, milliseconds timeout) {
  t.hold();
  Status s = post();
  auto deadline = Clock::now() + timeout;
  while (s == Status::Success) {
    const uint32_t epoch = t.activityEpoch();
    s = t.progress();
    bool all = true;
    for (Request* r : reqs) {
      if (!r->done.load(std::memory_order_acquire))
        all = false;
      else if (r->status != Status::Success && s == Status::Success)
        s = r->status;
    }
    if (all || s != Status::Success) break;
    if (Clock::now() > deadline) {
      s = Status::Timeout;
      break;
    }
    t.waitActivity(epoch, milliseconds(10));
  }
  t.release();
  return s;
}

// Rank 0's thread holds the transport while it waits for a message that never comes; abort from
// a second thread must get the lock (the wait gives it up) and fail the held run's receive.
TEST(ShmHold, AbortFromAnotherThreadFailsAHeldWait) {
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    if (rank == 1) {
      while (sh->flag[0].load() == 0) usleep(1000);  // alive (no dead-peer error) until done
      return 0;
    }
    std::vector<char> buf(64);
    Request r;
    std::atomic<bool> entered{false};
    Status got = Status::Success;
    std::thread runner([&] {
      got = heldRun(
          *t,
          [&] {
            entered.store(true);
            return t->postRecv(1, 7, buf.data(), buf.size(), nullptr, &r);
          },
          {&r}, milliseconds(20000));
    });
    while (!entered.load()) usleep(100);
    usleep(20000);                    // the run is waiting by now (a later abort is fine too)
    t->abort(Status::InternalError);  // blocks for good if the held wait keeps the lock
    runner.join();
    sh->flag[0].store(1);
    CHILD_CHECK(got == Status::InternalError);
    CHILD_CHECK(r.done.load() && r.status == Status::InternalError);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// Two threads per rank exchange messages on the same transport at once, each with its own tags:
// one in held runs, one through plain calls (or both held). Sizes go on both sides of the LL
// threshold and across slots. Every message arrives once, intact.
void concurrentRuns(bool bothHeld) {
  ScopedEnv slots("NLCCL_SHM_SLOT_BYTES", "4K");  // several fragments for the largest size
  auto codes = runForked(2, [bothHeld](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    const int peer = 1 - rank;
    const size_t sizes[] = {8, 56, 120, 200, 1024, 9000};
    std::atomic<int> bad{0};
    auto worker = [&](int th, bool held) {
      std::vector<char> out(9000), in(9000);
      for (int i = 0; i < 1500; ++i) {
        const size_t bytes = sizes[static_cast<size_t>(i) % 6];
        const uint64_t tag = (static_cast<uint64_t>(th) << 32) | static_cast<uint64_t>(i);
        for (size_t k = 0; k < bytes / 4; ++k) {
          const int32_t v = value(rank, peer, tag, k);
          std::memcpy(out.data() + k * 4, &v, 4);
        }
        Request s, r;
        auto post = [&] {
          if (Status e = t->postSend(peer, tag, out.data(), bytes, &s); e != Status::Success)
            return e;
          return t->postRecv(peer, tag, in.data(), bytes, nullptr, &r);
        };
        Status st = Status::Success;
        if (held) {
          st = heldRun(*t, post, {&s, &r}, milliseconds(20000));
        } else {
          st = post();
          if (st == Status::Success) st = drive(*t, {&s, &r}, milliseconds(20000));
        }
        if (st != Status::Success) {
          fprintf(stderr, "rank %d thread %d message %d: %s\n", rank, th, i, statusName(st));
          bad.fetch_add(1);
          return;
        }
        for (size_t k = 0; k < bytes / 4; ++k) {
          int32_t v;
          std::memcpy(&v, in.data() + k * 4, 4);
          if (v != value(peer, rank, tag, k)) {
            bad.fetch_add(1);
            return;
          }
        }
      }
    };
    std::thread a(worker, 0, true), b(worker, 1, bothHeld);
    a.join();
    b.join();
    CHILD_CHECK(bad.load() == 0);
    // Stay until the peer is done too: its last receives may still need our progress.
    sh->flag[rank].store(1);
    while (sh->flag[peer].load() == 0) usleep(1000);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(ShmHold, HeldAndPlainCallersShareATransport) { concurrentRuns(false); }
TEST(ShmHold, TwoHeldCallersShareATransport) { concurrentRuns(true); }

// Rank 0 sends far more LL records than its FIFO holds, each in a held run, while rank 1
// receives them with pauses, in held runs of its own: the sender fills the FIFO, says it waits
// for space (llSenderWaits) and sleeps; the receiver's frees put their check off to its release.
// Every record must still come, in order. (Whether the ring came at once or the sleeper's bounded
// wait ran out first is timing, and not asserted.)
TEST(ShmHold, PutOffChecksStillRingWaitingPeers) {
  auto codes = runForked(2, [](int rank, Shared* sh) {
    auto t = makeTransport(sh, rank, 2);
    CHILD_CHECK(t);
    const int n = 6000;  // the LL FIFO holds 1024 one-line records
    std::vector<char> buf(64);
    for (int i = 0; i < n; ++i) {
      Request r;
      Status s;
      if (rank == 0) {
        const int32_t v = i;
        std::memcpy(buf.data(), &v, 4);
        s = heldRun(*t, [&] { return t->postSend(1, 5, buf.data(), 16, &r); }, {&r},
                    milliseconds(20000));
      } else {
        if (i % 1500 == 0) usleep(20000);  // the sender fills the FIFO and goes to sleep
        s = heldRun(*t, [&] { return t->postRecv(0, 5, buf.data(), 16, nullptr, &r); }, {&r},
                    milliseconds(20000));
        int32_t v;
        std::memcpy(&v, buf.data(), 4);
        CHILD_CHECK(s != Status::Success || v == i);
      }
      CHILD_CHECK(s == Status::Success);
    }
    sh->flag[rank].store(1);
    while (sh->flag[1 - rank].load() == 0) usleep(1000);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace nlccl::transport::test
