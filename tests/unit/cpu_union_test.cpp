// cpusInUnion (util/futex.hpp): the cores a group of ranks shares, from their affinity masks. The
// shm transport yields at once in waits only when its ranks outnumber that count, so ranks that
// mpirun binds to one core each are not taken for oversubscribed ones.
#include <gtest/gtest.h>
#include <sched.h>

#include <vector>

#include "util/futex.hpp"

namespace nlccl {
namespace {

CpuMask only(std::vector<int> cpus) {
  CpuMask m;
  for (int c : cpus) m.bits[c / 64] |= uint64_t{1} << (c % 64);
  return m;
}

TEST(CpuUnion, RanksBoundToACoreEachShareAllOfThem) {
  const CpuMask masks[] = {only({0}), only({1})};
  EXPECT_EQ(cpusInUnion(masks, 2), 2);  // two ranks, two cores: not oversubscribed
}

TEST(CpuUnion, RanksBoundToOneCoreShareOne) {
  const CpuMask masks[] = {only({3}), only({3}), only({3})};
  EXPECT_EQ(cpusInUnion(masks, 3), 1);
}

TEST(CpuUnion, OverlapsCountOnceAndHighCpusCount) {
  const CpuMask masks[] = {only({0, 1, 130}), only({1, 2, 1000}), only({})};
  EXPECT_EQ(cpusInUnion(masks, 3), 5);
  EXPECT_EQ(cpusInUnion(masks + 2, 1), 1) << "an empty mask still leaves one CPU";
}

TEST(CpuUnion, ThisProcessMaskMatchesItsAffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const CpuMask m = affinityMask();
  EXPECT_EQ(cpusInUnion(&m, 1), CPU_COUNT(&set));
}

}  // namespace
}  // namespace nlccl
