// Proves every registered (algorithm, collective) pair with the verifier, so that algorithms
// added to the registry later are covered without touching this file.
#include <gtest/gtest.h>

#include "plan/sweep_common.hpp"
#include "plan/verifier.hpp"

namespace nlccl::plan {
namespace {

// The default run proves a representative set of rank counts (powers of two, primes, odd
// composites); plan_sweep_test (label slow) is built with NLCCL_PLAN_SWEEP_FULL and proves 1..17.
std::vector<int> sweepRanks() {
#ifdef NLCCL_PLAN_SWEEP_FULL
  std::vector<int> all;
  for (int p = 1; p <= 17; ++p) all.push_back(p);
  return all;
#else
  return {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17};
#endif
}

class AlgorithmSweep : public ::testing::TestWithParam<size_t> {};

TEST_P(AlgorithmSweep, VerifierProvesEveryShape) {
  const algo::Entry& entry = algo::registry()[GetParam()];
  int proven = 0;
  for (int p : sweepRanks()) {
    std::vector<size_t> counts = {0, 1, 7, 1000, static_cast<size_t>(p) * 5 + 3};
    for (const Request& req : testing::sweepRequests(entry, p, counts)) {
      Plan plan = entry.build(req);
      std::string why;
      ASSERT_TRUE(verify(plan, req, &why)) << testing::describe(entry, req) << ": " << why;
      ++proven;
    }
  }
  EXPECT_GT(proven, 0);
}

std::string entryName(const ::testing::TestParamInfo<size_t>& info) {
  const algo::Entry& e = algo::registry()[info.param];
  return std::string(e.name) + "_" + collectiveName(e.collective);
}

INSTANTIATE_TEST_SUITE_P(Registry, AlgorithmSweep,
                         ::testing::Range<size_t>(0, algo::registry().size()), entryName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AlgorithmSweep);

}  // namespace
}  // namespace nlccl::plan
