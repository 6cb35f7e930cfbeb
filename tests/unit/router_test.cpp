// transport::Router's wait: a part whose traffic moves only while this rank calls its progress()
// (ofi over tcp: rxm serves a peer's read of our send from inside fi_cq_read) must be served
// while the rank waits, not only between another part's blocking waits.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "transports/router.hpp"

namespace nlccl::transport {
namespace {

/// A part with nothing posted: progress() and waitActivity() only count their calls (the wait
/// sleeps its timeout, as a transport blocked on its own wait object does).
class Part : public Transport {
 public:
  explicit Part(int readyAfter = -1) : readyAfter_(readyAfter) {}
  const char* name() const override { return "part"; }
  int rank() const override { return 0; }
  int nranks() const override { return 2; }
  Status postSend(int, uint64_t, const void*, size_t, Request*) override { return Status::Success; }
  Status postRecv(int, uint64_t, void*, size_t, const Reducer*, Request*) override {
    return Status::Success;
  }
  /// The readyAfter-th call completes something (the epoch moves), as a provider's progress does.
  Status progress() override {
    if (++progressCalls == readyAfter_) epoch_.fetch_add(1);
    return Status::Success;
  }
  uint32_t activityEpoch() override { return epoch_.load(); }
  void waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) override {
    ++blockingWaits;
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (epoch_.load() == seen && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  void abort(Status) override {}
  void wake(int) override { epoch_.fetch_add(1); }

  int progressCalls = 0;
  int blockingWaits = 0;

 private:
  const int readyAfter_;
  std::atomic<uint32_t> epoch_{0};
};

/// A Router of rank 0 of 2 whose peer p goes to part p (rank 0 to `a`, rank 1 to `b`).
Router routerOf(std::unique_ptr<Part> a, std::unique_ptr<Part> b) {
  std::vector<std::unique_ptr<Transport>> parts;
  parts.push_back(std::move(a));
  parts.push_back(std::move(b));
  return Router(0, 2, std::move(parts), {0, 1});
}

TEST(Router, WaitPollsEveryPartBeforeBlockingInAny) {
  auto quiet = std::make_unique<Part>();    // shm, say: nothing arrives
  auto polled = std::make_unique<Part>(3);  // ofi: its third progress call completes a send
  Part* q = quiet.get();
  Part* p = polled.get();
  Router router = routerOf(std::move(quiet), std::move(polled));
  const uint32_t seen = router.activityEpoch();
  router.waitActivity(seen, std::chrono::seconds(10));
  EXPECT_NE(router.activityEpoch(), seen);
  EXPECT_EQ(p->progressCalls, 3);
  // Blocking in the quiet part first would have left the other's send waiting a slice or more.
  EXPECT_EQ(q->blockingWaits, 0);
  EXPECT_EQ(p->blockingWaits, 0);
}

// When nothing moves for long, the wait still blocks (on each part in turn) rather than polling
// for its whole timeout, and returns once the timeout has passed.
TEST(Router, LongWaitBlocksAndEndsAtItsTimeout) {
  auto a = std::make_unique<Part>();
  auto b = std::make_unique<Part>();
  Part* pa = a.get();
  Part* pb = b.get();
  Router router = routerOf(std::move(a), std::move(b));
  const auto start = std::chrono::steady_clock::now();
  router.waitActivity(router.activityEpoch(), std::chrono::milliseconds(50));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  EXPECT_GT(pa->blockingWaits, 0);
  EXPECT_GT(pb->blockingWaits, 0);
}

// A wake-up through any part ends the wait at once, in its polling phase or after it.
TEST(Router, WakeThroughEitherPartEndsTheWait) {
  for (int part = 0; part < 2; ++part) {
    auto a = std::make_unique<Part>();
    auto b = std::make_unique<Part>();
    Transport* target = part == 0 ? a.get() : b.get();
    Router router = routerOf(std::move(a), std::move(b));
    const uint32_t seen = router.activityEpoch();
    std::thread waker([target] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the polling phase
      target->wake(0);
    });
    router.waitActivity(seen, std::chrono::seconds(10));
    waker.join();
    EXPECT_NE(router.activityEpoch(), seen) << "part " << part;
  }
}

}  // namespace
}  // namespace nlccl::transport
