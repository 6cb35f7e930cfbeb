// The neuronlink transport's shared clock (transports/neuronlink/timeline.hpp): floors, the
// horizon, idle release and the clamp on return, jumps, and the log's ring.
#include "transports/neuronlink/timeline.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

namespace nlccl::transport {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// `n` handles on one timeline in process memory.
struct Fixture {
  Fixture(int n, uint64_t capacity, std::chrono::milliseconds grace) {
    const size_t bytes = Timeline::bytesFor(n, capacity);
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    std::memset(p, 0, bytes);
    mem = std::shared_ptr<void>(p, std::free);
    EXPECT_EQ(Timeline::format(p, bytes, n, capacity, grace), Status::Success);
    for (int r = 0; r < n; ++r) {
      std::unique_ptr<Timeline> t;
      EXPECT_EQ(Timeline::attach(mem, p, bytes, n, r, &t), Status::Success);
      ranks.push_back(std::move(t));
    }
  }
  Timeline& operator[](int r) { return *ranks[r]; }
  /// Every rank posts for the first time (leaves the not-started state).
  void activateAll() {
    double earliest = -1;
    for (auto& t : ranks) EXPECT_EQ(t->activate(&earliest), Status::Success);
  }
  std::shared_ptr<void> mem;
  std::vector<std::unique_ptr<Timeline>> ranks;
};

Timeline::View viewOf(Timeline& t) {
  Timeline::View v;
  std::vector<int> wake;
  EXPECT_EQ(t.view(&v, &wake), Status::Success);
  return v;
}

double publish(Timeline& t, double floor, bool blocked = false, double need = kInf) {
  Timeline::View v = viewOf(t);
  std::vector<int> wake;
  double horizon = 0;
  EXPECT_EQ(t.publish(floor, need, v, blocked, v.count, &wake, &horizon), Status::Success);
  return horizon;
}

TEST(TimelineTest, HorizonIsTheSmallestFloorAndARecordLowersItsReceiversFloor) {
  Fixture tl(3, 16, std::chrono::milliseconds(60000));
  double earliest = -1;
  for (int r = 0; r < 3; ++r) ASSERT_EQ(tl[r].activate(&earliest), Status::Success);
  EXPECT_EQ(earliest, 0);
  publish(tl[0], 30e-6);
  publish(tl[1], 20e-6);
  EXPECT_EQ(publish(tl[2], 50e-6), 20e-6);
  // Rank 1 publishes from a view that predates a record for it: the record's bound stays.
  Timeline::View stale = viewOf(tl[1]);
  TimelineRecord rec{25e-6, 8, 7, 0, 0, 1, 0, 0};
  uint64_t index = 99;
  ASSERT_EQ(tl[0].append(&rec, 35e-6, std::chrono::milliseconds(10), &index), Status::Success);
  EXPECT_EQ(index, 0u);
  std::vector<int> wake;
  double horizon = 0;
  ASSERT_EQ(tl[1].publish(60e-6, kInf, stale, false, stale.count, &wake, &horizon), Status::Success);
  EXPECT_EQ(horizon, 30e-6) << "rank 1's floor is min(60, 35) us; rank 0's 30 us is smaller";
  EXPECT_EQ(viewOf(tl[2]).count, 1u);
  EXPECT_EQ(tl[2].record(0).start, 25e-6);
  EXPECT_EQ(publish(tl[0], 70e-6), 35e-6);
  // Now from a fresh view (the record read): rank 1's own floor counts.
  EXPECT_EQ(publish(tl[1], 60e-6), 50e-6);
}

TEST(TimelineTest, AnIdleRankIsReleasedAfterTheGraceAndClampedWhenItReturns) {
  Fixture tl(2, 16, std::chrono::milliseconds(5));
  double earliest = -1;
  ASSERT_EQ(tl[0].activate(&earliest), Status::Success);
  ASSERT_EQ(tl[1].activate(&earliest), Status::Success);
  std::vector<int> wake;
  ASSERT_EQ(tl[1].setIdle(10e-6, 0, &wake), Status::Success);
  EXPECT_EQ(publish(tl[0], 40e-6), 10e-6) << "the idle rank holds the clock at its own";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(viewOf(tl[0]).horizon, 40e-6) << "released after the grace";
  ASSERT_EQ(tl[1].activate(&earliest), Status::Success);
  EXPECT_EQ(earliest, 40e-6) << "its messages start no earlier than the time the others reached";
}

TEST(TimelineTest, RanksThatHaveNotStartedHoldTheClockLonger) {
  Fixture tl(2, 16, std::chrono::milliseconds(5));
  double earliest = -1;
  ASSERT_EQ(tl[0].activate(&earliest), Status::Success);
  publish(tl[0], 40e-6);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // 4 graces: not yet 20
  EXPECT_EQ(viewOf(tl[0]).horizon, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_EQ(viewOf(tl[0]).horizon, 40e-6);
}

TEST(TimelineTest, JumpsOnlyWhenEveryRankIsBlockedAtTheCurrentHorizon) {
  Fixture tl(2, 16, std::chrono::milliseconds(60000));
  tl.activateAll();
  publish(tl[0], 5e-6);
  publish(tl[1], 5e-6);
  // Judged at horizon 5 us; rank 1 is not blocked.
  publish(tl[0], 5e-6, /*blocked=*/true);
  publish(tl[1], 5e-6, /*blocked=*/false);
  const std::vector<double> none(2, -1.0);  // no message has finished
  int calls = 0;
  auto finish = [&] {
    ++calls;
    return 9e-6;
  };
  bool jumped = true;
  ASSERT_EQ(tl[0].tryJump(viewOf(tl[0]), none, finish, &jumped), Status::Success);
  EXPECT_FALSE(jumped) << "rank 1 may still post";
  publish(tl[1], 5e-6, /*blocked=*/true);
  // A message of rank 1 finished after it said so: it may have something to do now.
  const std::vector<double> late{-1.0, 6e-6};
  ASSERT_EQ(tl[0].tryJump(viewOf(tl[0]), late, finish, &jumped), Status::Success);
  EXPECT_FALSE(jumped);
  ASSERT_EQ(tl[0].tryJump(viewOf(tl[0]), none, finish, &jumped), Status::Success);
  EXPECT_TRUE(jumped);
  EXPECT_EQ(calls, 1);
  Timeline::View v = viewOf(tl[1]);
  EXPECT_EQ(v.jump, 9e-6);
  EXPECT_EQ(v.effective(), 9e-6);
  // Blocked flags were from before the jump: a second jump needs everyone to judge again.
  ASSERT_EQ(tl[1].tryJump(v, none, finish, &jumped), Status::Success);
  EXPECT_FALSE(jumped);
  EXPECT_EQ(calls, 1);
}

// The replicas take a finish a hair (rounding) past the horizon as at it, and report its own
// time: such a finish was known when the rank judged itself blocked, so it does not stop the
// jump (it did, and every rank waited out the timeout: the tree all-reduce hang).
TEST(TimelineTest, AFinishRoundingPastTheHorizonDoesNotStopTheJump) {
  Fixture tl(2, 16, std::chrono::milliseconds(60000));
  tl.activateAll();
  const double h = 0.00044500492187499977;
  publish(tl[0], h);
  publish(tl[1], h);
  publish(tl[0], h, /*blocked=*/true);  // judged at horizon h
  publish(tl[1], h, /*blocked=*/true);
  const double hair = std::nextafter(std::nextafter(h, 1.0), 1.0);
  const std::vector<double> finishedAt{hair, -1.0};
  bool jumped = false;
  ASSERT_EQ(tl[0].tryJump(viewOf(tl[0]), finishedAt, [] { return 9e-4; }, &jumped),
            Status::Success);
  EXPECT_TRUE(jumped);
}

TEST(TimelineTest, AFullLogWaitsForTheSlowestReaderAndNamesIt) {
  Fixture tl(2, 2, std::chrono::milliseconds(60000));
  TimelineRecord rec{0, 8, 1, 0, 0, 1, 0, 0};
  uint64_t index = 0;
  ASSERT_EQ(tl[0].append(&rec, 10e-6, std::chrono::milliseconds(10), &index), Status::Success);
  ASSERT_EQ(tl[0].append(&rec, 10e-6, std::chrono::milliseconds(10), &index), Status::Success);
  EXPECT_EQ(tl[0].append(&rec, 10e-6, std::chrono::milliseconds(10), &index), Status::Timeout);
  // Both replicas read the two records: there is room again.
  std::vector<int> wake;
  double horizon = 0;
  for (int r = 0; r < 2; ++r) {
    Timeline::View v = viewOf(tl[r]);
    ASSERT_EQ(tl[r].publish(0, kInf, v, false, 2, &wake, &horizon), Status::Success);
  }
  ASSERT_EQ(tl[0].append(&rec, 10e-6, std::chrono::milliseconds(10), &index), Status::Success);
  EXPECT_EQ(index, 2u);
}

TEST(TimelineTest, AGoneRankNoLongerHoldsTheClock) {
  Fixture tl(2, 16, std::chrono::milliseconds(60000));
  tl.activateAll();
  publish(tl[0], 40e-6);
  EXPECT_EQ(viewOf(tl[0]).horizon, 0);
  std::vector<int> wake;
  tl[1].leave(&wake);
  EXPECT_EQ(viewOf(tl[0]).horizon, 40e-6);
}

TEST(TimelineTest, WhileOneRankIsOutRanksThatGoIdleAreReleasedAtOnce) {
  Fixture tl(3, 16, std::chrono::milliseconds(5));
  tl.activateAll();
  std::vector<int> wake;
  ASSERT_EQ(tl[2].setIdle(10e-6, 0, &wake), Status::Success);
  publish(tl[0], 40e-6);
  publish(tl[1], 30e-6);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(viewOf(tl[0]).horizon, 30e-6) << "rank 2 released after the grace";
  ASSERT_EQ(tl[1].setIdle(30e-6, 0, &wake), Status::Success);
  EXPECT_EQ(viewOf(tl[0]).horizon, 40e-6) << "rank 1 released without waiting for a grace";
}

}  // namespace
}  // namespace nlccl::transport
