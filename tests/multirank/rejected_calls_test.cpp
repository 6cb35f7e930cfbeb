// A rejected call changes no state, with ranks as processes over shm: rank 1 makes one bad call
// of every entry point (each argument check in turn), then every rank runs a correct collective,
// which must succeed. And NLCCL_CHECK's all-to-all-v counts: a rank whose counts disagree with
// its peers' is named, alike, on every rank. (tests/api/contract_test.cpp covers every argument
// with threads.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/threads.hpp"
#include "multirank/fork_ranks.hpp"

namespace nlccl::testing {
namespace {

using BadFn = std::function<nlcclResult_t(nlcclComm_t, float*, float*)>;

const std::vector<std::pair<const char*, BadFn>>& badCalls() {
  static const size_t counts[3] = {4, 4, 4}, displs[3] = {0, 4, 8}, odd[3] = {4, 5, 4};
  static const std::vector<std::pair<const char*, BadFn>> calls = {
      {"allreduce bad type", [](nlcclComm_t c, float* s, float* r) {
         return nlcclAllReduce(s, r, 4, static_cast<nlcclDataType_t>(99), nlcclSum, c, nullptr);
       }},
      {"allreduce bad op", [](nlcclComm_t c, float* s, float* r) {
         return nlcclAllReduce(s, r, 4, nlcclFloat, static_cast<nlcclRedOp_t>(99), c, nullptr);
       }},
      {"broadcast bad root", [](nlcclComm_t c, float* s, float* r) {
         return nlcclBroadcast(s, r, 4, nlcclFloat, 3, c, nullptr);
       }},
      {"reduce null root recvbuff", [](nlcclComm_t c, float* s, float*) {
         return nlcclReduce(s, nullptr, 4, nlcclFloat, nlcclSum, 1, c, nullptr);
       }},
      {"allgather misplaced in place", [](nlcclComm_t c, float*, float* r) {
         return nlcclAllGather(r + 8, r, 4, nlcclFloat, c, nullptr);  // rank 1's block is at 4
       }},
      {"reducescatter count overflow", [](nlcclComm_t c, float* s, float* r) {
         return nlcclReduceScatter(s, r, SIZE_MAX / 4, nlcclFloat, nlcclSum, c, nullptr);
       }},
      {"alltoall null recvbuff", [](nlcclComm_t c, float* s, float*) {
         return nlcclAlltoAll(s, nullptr, 4, nlcclFloat, c, nullptr);
       }},
      {"alltoallv count to itself", [](nlcclComm_t c, float* s, float* r) {
         return nlcclAlltoAllv(s, odd, displs, r, counts, displs, nlcclFloat, c, nullptr);
       }},
      {"alltoallv overlapping blocks", [](nlcclComm_t c, float* s, float*) {
         return nlcclAlltoAllv(s, counts, displs, s + 1, counts, displs, nlcclFloat, c, nullptr);
       }},
      {"send bad peer", [](nlcclComm_t c, float* s, float*) {
         return nlcclSend(s, 4, nlcclFloat, 9, c, nullptr);
       }},
      {"recv null buffer", [](nlcclComm_t c, float*, float*) {
         return nlcclRecv(nullptr, 4, nlcclFloat, 0, c, nullptr);
       }},
  };
  return calls;
}

TEST(RejectedCalls, EachLeavesTheProcessCommunicatorUsable) {
  auto status = forkRanks(3, [](int r, nlcclComm_t comm) {
    std::vector<float> send(64, 1.0f + r), recv(64, 0.0f);
    for (const auto& [what, bad] : badCalls()) {
      if (r == 1) {
        const nlcclResult_t res = bad(comm, send.data(), recv.data());
        if (res != nlcclInvalidArgument) {
          fprintf(stderr, "%s: got %d, want InvalidArgument\n", what, res);
          return false;
        }
      }
      std::vector<float> x(5, 1.0f + r), y(5, 0.0f);
      if (nlcclAllReduce(x.data(), y.data(), 5, nlcclFloat, nlcclSum, comm, nullptr) !=
              nlcclSuccess ||
          y[4] != 6.0f) {
        fprintf(stderr, "rank %d: after '%s' the next all-reduce failed: %s\n", r, what,
                nlcclGetLastError(comm));
        return false;
      }
    }
    return true;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

// Rank 2 expects 3 elements from rank 0, which sends it 4: every rank fails the call naming
// ranks 0 and 2, then goes on. Direct all-to-all-v under NLCCL_CHECK, and the hierarchical one
// (which gathers the counts anyway) with and without it.
void mismatchedCountsAreNamedOnEveryRank(const char* algo, bool check) {
  SCOPED_TRACE(std::string(algo) + (check ? " with NLCCL_CHECK" : ""));
  if (check) setenv("NLCCL_CHECK", "1", 1);
  setenv("NLCCL_ALGO", (std::string("alltoallv:") + algo).c_str(), 1);
  std::vector<nlcclComm_t> comms(3);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 3, nullptr), nlcclSuccess);
  unsetenv("NLCCL_CHECK");
  unsetenv("NLCCL_ALGO");
  runRanks(3, [&](int r) {
    std::vector<float> send(12, 1.0f), recv(12, 0.0f);
    size_t sc[3] = {4, 4, 4}, rc[3] = {4, 4, 4}, d[3] = {0, 4, 8};
    if (r == 2) rc[0] = 3;
    EXPECT_EQ(nlcclAlltoAllv(send.data(), sc, d, recv.data(), rc, d, nlcclFloat, comms[r], nullptr),
              nlcclInvalidUsage)
        << "rank " << r;
    const std::string msg = nlcclGetLastError(comms[r]);
    EXPECT_NE(msg.find("rank 0 sends rank 2 4 elements but rank 2 expects 3"), std::string::npos)
        << "rank " << r << ": " << msg;
    rc[0] = 4;
    EXPECT_EQ(nlcclAlltoAllv(send.data(), sc, d, recv.data(), rc, d, nlcclFloat, comms[r], nullptr),
              nlcclSuccess)
        << "rank " << r;
    EXPECT_EQ(recv[11], 1.0f);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

TEST(CheckAllToAllv, DirectMismatchedCountsAreNamedOnEveryRank) {
  mismatchedCountsAreNamedOnEveryRank("direct", true);
}
TEST(CheckAllToAllv, HierMismatchedCountsAreNamedOnEveryRank) {
  mismatchedCountsAreNamedOnEveryRank("hier", true);
  mismatchedCountsAreNamedOnEveryRank("hier", false);
}

}  // namespace
}  // namespace nlccl::testing
