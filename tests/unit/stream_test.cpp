// core::Stream's wake-ups: a caller that synchronizes after every item runs the items itself and
// stops waking the stream's thread; work nobody synchronizes for still runs on the thread.
#include "core/stream.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

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

}  // namespace
}  // namespace nlccl::core
