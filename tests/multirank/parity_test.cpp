// The NCCL-parity parts of the C API with ranks as threads over loopback (nlcclCommInitAll) at
// 1, 2, 3, 4 and 8 ranks: gather, scatter, bcast, PreMulSum, registration and windows, the local
// index; shrink (the excluded ranks do not call it), grow, and init from several ids.
#include <gtest/gtest.h>

#include <atomic>

#include "common/threads.hpp"
#include "multirank/parity_cases.hpp"

namespace nlccl::testing {
namespace {

class ParityThreads : public ::testing::TestWithParam<int> {};

TEST_P(ParityThreads, EveryAddition) {
  const int p = GetParam();
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  runRanks(p, [&](int r) {
    std::string err = checkParity(r, p, comms[r]);
    EXPECT_TRUE(err.empty()) << "rank " << r << ": " << err;
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

/// The ranks a shrink of p ranks leaves out in these tests.
std::vector<int> excludedOf(int p) {
  if (p == 1) return {};
  if (p < 4) return {p - 1};
  return {1, p - 1};
}

TEST_P(ParityThreads, ShrinkWithoutTheExcludedRanks) {
  const int p = GetParam();
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  std::vector<int> excluded = excludedOf(p);
  runRanks(p, [&](int r) {
    if (std::find(excluded.begin(), excluded.end(), r) != excluded.end()) return;  // not called
    nlcclComm_t shrunk = nullptr;
    ASSERT_EQ(nlcclCommShrink(comms[r], excluded.data(), static_cast<int>(excluded.size()),
                              &shrunk, nullptr, NLCCL_SHRINK_DEFAULT),
              nlcclSuccess)
        << nlcclGetLastError(comms[r]);
    std::string err = checkShrunk(r, p, excluded, shrunk);
    EXPECT_TRUE(err.empty()) << "rank " << r << ": " << err;
    EXPECT_EQ(nlcclCommDestroy(shrunk), nlcclSuccess);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Loopback, ParityThreads, ::testing::Values(1, 2, 3, 4, 8));

TEST(ParityThreads, GrowByTwoRanks) {
  std::vector<nlcclComm_t> comms(2);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess);
  nlcclUniqueId id;
  ASSERT_EQ(nlcclCommGetUniqueId(comms[0], &id), nlcclSuccess);
  nlcclUniqueId again;
  EXPECT_EQ(nlcclCommGetUniqueId(comms[0], &again), nlcclInvalidUsage)
      << "a second id before the grow consumed the first";
  std::vector<nlcclComm_t> grown(4, nullptr);
  runRanks(4, [&](int r) {
    nlcclResult_t res = r < 2 ? nlcclCommGrow(comms[r], 4, r == 0 ? &id : nullptr, -1, &grown[r],
                                              nullptr)
                              : nlcclCommGrow(nullptr, 4, &id, r, &grown[r], nullptr);
    ASSERT_EQ(res, nlcclSuccess) << nlcclGetLastError(r < 2 ? comms[r] : nullptr);
    int rank = -1, n = -1;
    nlcclCommUserRank(grown[r], &rank);
    nlcclCommCount(grown[r], &n);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(n, 4);
    int v = r + 1, sum = 0;
    ASSERT_EQ(nlcclAllReduce(&v, &sum, 1, nlcclInt, nlcclSum, grown[r], nullptr), nlcclSuccess);
    EXPECT_EQ(sum, 10);
  });
  for (auto c : grown) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

TEST(ParityThreads, InitRankScalableFromSeveralIds) {
  const int p = 3;
  nlcclUniqueId ids[2];
  ASSERT_EQ(nlcclGetUniqueId(&ids[0]), nlcclSuccess);
  ASSERT_EQ(nlcclGetUniqueId(&ids[1]), nlcclSuccess);
  std::vector<nlcclComm_t> comms(p, nullptr);
  runRanks(p, [&](int r) {
    ASSERT_EQ(nlcclCommInitRankScalable(&comms[r], p, r, 2, ids, nullptr), nlcclSuccess)
        << nlcclGetLastError(nullptr);
    int v = 1, sum = 0;
    ASSERT_EQ(nlcclAllReduce(&v, &sum, 1, nlcclInt, nlcclSum, comms[r], nullptr), nlcclSuccess);
    EXPECT_EQ(sum, p);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

TEST(ParityThreads, RevokedCommunicatorFailsCallsButShrinks) {
  const int p = 3;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  runRanks(p, [&](int r) {
    ASSERT_EQ(nlcclCommRevoke(comms[r], NLCCL_REVOKE_DEFAULT), nlcclSuccess);
    int v = 1;
    EXPECT_EQ(nlcclAllReduce(&v, &v, 1, nlcclInt, nlcclSum, comms[r], nullptr), nlcclInvalidUsage);
    EXPECT_NE(std::string(nlcclGetLastError(comms[r])).find("revoked"), std::string::npos)
        << nlcclGetLastError(comms[r]);
    EXPECT_EQ(nlcclAllReduce(&v, &v, 0, nlcclInt, nlcclSum, comms[r], nullptr), nlcclInvalidUsage)
        << "an empty call is refused too";
    nlcclComm_t shrunk = nullptr;
    ASSERT_EQ(nlcclCommShrink(comms[r], nullptr, 0, &shrunk, nullptr, NLCCL_SHRINK_DEFAULT),
              nlcclSuccess);
    std::string err = checkShrunk(r, p, {}, shrunk);
    EXPECT_TRUE(err.empty()) << err;
    nlcclCommDestroy(shrunk);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

TEST(ParityThreads, SuspendRefusesCallsUntilResumed) {
  const int p = 2;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  runRanks(p, [&](int r) {
    std::vector<float> v(1 << 16, 1.0f);
    ASSERT_EQ(nlcclAllReduce(v.data(), v.data(), v.size(), nlcclFloat, nlcclSum, comms[r], nullptr),
              nlcclSuccess);
    ASSERT_EQ(nlcclCommSuspend(comms[r], NLCCL_SUSPEND_MEM), nlcclSuccess);
    uint64_t suspended = 0, kept = 1;
    EXPECT_EQ(nlcclCommMemStats(comms[r], nlcclStatGpuMemSuspended, &suspended), nlcclSuccess);
    EXPECT_EQ(nlcclCommMemStats(comms[r], nlcclStatGpuMemSuspend, &kept), nlcclSuccess);
    EXPECT_EQ(suspended, 1u);
    EXPECT_EQ(kept, 0u) << "suspend with NLCCL_SUSPEND_MEM frees the kept scratch";
    EXPECT_EQ(nlcclAllReduce(v.data(), v.data(), v.size(), nlcclFloat, nlcclSum, comms[r], nullptr),
              nlcclInvalidUsage);
    EXPECT_NE(std::string(nlcclGetLastError(comms[r])).find("suspended"), std::string::npos);
    EXPECT_EQ(nlcclAllGather(v.data(), v.data(), 0, nlcclFloat, comms[r], nullptr),
              nlcclInvalidUsage)
        << "an empty call is refused too";
    ASSERT_EQ(nlcclCommResume(comms[r]), nlcclSuccess);
    ASSERT_EQ(nlcclAllReduce(v.data(), v.data(), v.size(), nlcclFloat, nlcclSum, comms[r], nullptr),
              nlcclSuccess);
    EXPECT_EQ(v[0], 4.0f);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

}  // namespace
}  // namespace nlccl::testing
