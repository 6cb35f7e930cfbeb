// core::Stream's wake-ups: a caller that synchronizes after every item (or right after enqueueing)
// runs the items itself and stops waking the stream's thread; work nobody synchronizes for, or
// synchronizes for only later, still runs on the thread.
#include "core/stream.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace nlccl::core {
namespace {

struct Record {
  std::atomic<int> ran{0};
  std::atomic<int> onCaller{0};
  std::thread::id caller = std::this_thread::get_id();
};

StreamItem itemFor(Record* r) {
  StreamItem it;
  it.ptr[0] = r;
  it.run = [](StreamItem& item, Lives*) {
    // As a small collective waits for its peers: the caller's synchronize finds it pending.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    auto* rec = static_cast<Record*>(item.ptr[0]);
    if (std::this_thread::get_id() == rec->caller) rec->onCaller.fetch_add(1);
    rec->ran.fetch_add(1);
    return Status::Success;
  };
  return it;
}

bool waitFor(const std::atomic<int>& v, int want) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (v.load() < want) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

/// Enough synchronizes that find work pending to turn the stream lazy.
constexpr int kWarm = 2 * Stream::kLazyAfter;

/// `n` items, each enqueued and then synchronized for.
void synchronizeEach(Stream& s, Record* rec, int n) {
  for (int i = 0; i < n; ++i) {
    s.enqueue(itemFor(rec));
    ASSERT_EQ(s.synchronize(), Status::Success);
  }
}

TEST(Stream, SynchronizingAfterEveryItemStopsWakingTheThread) {
  Stream s;
  Record rec;
  const int n = 200;
  for (int i = 0; i < n; ++i) {
    s.enqueue(itemFor(&rec));
    ASSERT_EQ(s.synchronize(), Status::Success);
    // Longer than the thread's idle spin: without lazy wake-ups it sleeps, and every enqueue
    // wakes it.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  EXPECT_EQ(rec.ran.load(), n);
  // Only the first few (and one per nap that ended between an enqueue and its synchronize) may
  // wake the thread or run on it.
  EXPECT_LE(s.wakeups(), 20u);
  EXPECT_GE(rec.onCaller.load(), n - 20);
  EXPECT_TRUE(s.lazy());
}

TEST(Stream, WorkNobodySynchronizesStillRunsOnTheThread) {
  Stream s;
  Record rec;
  synchronizeEach(s, &rec, kWarm);
  ASSERT_TRUE(s.lazy());
  const int before = rec.onCaller.load();
  s.enqueue(itemFor(&rec));  // not woken: the thread finds it at the end of its nap
  ASSERT_TRUE(waitFor(rec.ran, kWarm + 1));
  EXPECT_EQ(rec.onCaller.load(), before);  // it ran on the stream's thread
  EXPECT_FALSE(s.lazy());                  // which wakes promptly again
  EXPECT_EQ(s.synchronize(), Status::Success);
}

TEST(Stream, QueryTurnsWakeUpsBackOn) {
  Stream s;
  Record rec;
  synchronizeEach(s, &rec, kWarm);
  ASSERT_TRUE(s.lazy());
  s.enqueue(itemFor(&rec));
  const Status q = s.query();
  EXPECT_TRUE(q == Status::InProgress || q == Status::Success);
  EXPECT_FALSE(s.lazy());  // a caller that polls gets its work started without a nap
  ASSERT_TRUE(waitFor(rec.ran, kWarm + 1));
  EXPECT_EQ(s.synchronize(), Status::Success);
}

/// An item that takes `us` microseconds, as a collective whose peers are slow.
StreamItem sleeper(Record* r, int us) {
  StreamItem it = itemFor(r);
  it.value = static_cast<uint64_t>(us);
  it.run = [](StreamItem& item, Lives*) {
    std::this_thread::sleep_for(std::chrono::microseconds(item.value));
    static_cast<Record*>(item.ptr[0])->ran.fetch_add(1);
    return Status::Success;
  };
  return it;
}

TEST(Stream, ASynchronizeRightAfterItsEnqueueStopsWakeUpsAtOnce) {
  // A benchmark's first timed calls: the thread woken for the work is still running it when
  // the synchronize comes, so the wake-up bought nothing: the next call runs on the caller.
  Stream s;
  Record rec;
  s.enqueue(sleeper(&rec, 2000));
  ASSERT_EQ(s.synchronize(), Status::Success);
  EXPECT_TRUE(s.lazy());
  const int before = rec.onCaller.load();
  synchronizeEach(s, &rec, 3);
  EXPECT_EQ(rec.onCaller.load(), before + 3);
}

TEST(Stream, ASynchronizeLongAfterItsEnqueueKeepsWakeUps) {
  // A framework's pattern: a collective enqueued, the caller's own work, then its wait. The
  // thread ran the collective meanwhile; a wait that still finds it running keeps wake-ups on.
  Stream s;
  Record rec;
  s.enqueue(sleeper(&rec, 20000));
  std::this_thread::sleep_for(std::chrono::microseconds(2000));  // > kQuickSync
  ASSERT_EQ(s.synchronize(), Status::Success);
  EXPECT_FALSE(s.lazy());
  EXPECT_EQ(rec.ran.load(), 1);
}

/// What the full-queue test's items record: the order they ran in and who ran them.
struct Ordered {
  std::atomic<bool> release{false};
  std::vector<int> order;  // written by one runner at a time (items run one at a time)
  std::atomic<int> onEnqueuer{0};
  std::thread::id enqueuer;
};

StreamItem orderedItem(Ordered* o, int index) {
  StreamItem it;
  it.ptr[0] = o;
  it.value = static_cast<uint64_t>(index);
  it.run = [](StreamItem& item, Lives*) {
    auto* o = static_cast<Ordered*>(item.ptr[0]);
    while (item.value == 0 && !o->release.load()) std::this_thread::yield();  // the gate
    o->order.push_back(static_cast<int>(item.value));
    if (std::this_thread::get_id() == o->enqueuer) o->onEnqueuer.fetch_add(1);
    return Status::Success;
  };
  return it;
}

TEST(Stream, AnEnqueueToAFullQueueRunsTheOldestItemsItself) {
  Stream s;
  Ordered o;
  const int total = static_cast<int>(3 * Stream::kMaxQueued);
  std::atomic<int> enqueued{0};
  // Item 0 holds the stream's thread until released; behind it the queue fills, and the
  // enqueue after that must wait for room: it cannot return while item 0 runs.
  std::thread producer([&] {
    o.enqueuer = std::this_thread::get_id();
    for (int i = 0; i < total; ++i) {
      s.enqueue(orderedItem(&o, i));
      enqueued.store(i + 1);
    }
  });
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (enqueued.load() < static_cast<int>(Stream::kMaxQueued) &&
         std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // Item 0 runs on the thread (or, had the producer got there first, on the producer, gated),
  // taken with up to kBatch - 1 items behind it; at most kMaxQueued wait behind those, so the
  // producer is stuck at the next one.
  EXPECT_LE(enqueued.load(), static_cast<int>(Stream::kMaxQueued + Stream::kBatch));
  EXPECT_TRUE(o.order.empty());
  o.release.store(true);
  producer.join();
  ASSERT_EQ(s.synchronize(), Status::Success);
  ASSERT_EQ(static_cast<int>(o.order.size()), total);
  for (int i = 0; i < total; ++i) ASSERT_EQ(o.order[static_cast<size_t>(i)], i) << "in order";
  // The producer made its own room: it ran items rather than waiting for the thread each time.
  EXPECT_GT(o.onEnqueuer.load(), 0);
}

TEST(Stream, AnItemIsReleasedOnceAfterItRanAndBeforeSynchronizeReturns) {
  // What an item owns (general work: a Work and its communicators' pending counts) is freed by
  // its release, once, after its run and before the synchronize that waits for it returns.
  struct Owned {
    std::atomic<int> ran{0};
    std::atomic<int> released{0};
    std::atomic<int> releasedBeforeRun{0};
  } o;
  Stream s;
  constexpr int n = 100;
  for (int i = 0; i < n; ++i) {
    StreamItem it;
    it.ptr[0] = &o;
    it.run = [](StreamItem& item, Lives*) {
      static_cast<Owned*>(item.ptr[0])->ran.fetch_add(1);
      return Status::Success;
    };
    it.release = [](StreamItem& item) {
      auto* own = static_cast<Owned*>(item.ptr[0]);
      if (own->released.load() >= own->ran.load()) own->releasedBeforeRun.fetch_add(1);
      own->released.fetch_add(1);
    };
    s.enqueue(it);
    if (i % 10 == 9) {
      ASSERT_EQ(s.synchronize(), Status::Success);
      EXPECT_EQ(o.released.load(), i + 1);
    }
  }
  EXPECT_EQ(o.ran.load(), n);
  EXPECT_EQ(o.released.load(), n);
  EXPECT_EQ(o.releasedBeforeRun.load(), 0);
}

}  // namespace
}  // namespace nlccl::core
