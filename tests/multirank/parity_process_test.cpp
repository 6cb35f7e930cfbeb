// The NCCL-parity parts of the C API with ranks as forked processes over shared memory at 1, 2,
// 3, 4 and 8 ranks, and nlcclCommShrink after a rank was SIGKILLed: the survivors get a working
// communicator, and no process still maps or holds the job's shared memory (memfds.hpp).
#include <gtest/gtest.h>
#include <signal.h>

#include <set>
#include <string>
#include <vector>

#include "multirank/fork_ranks.hpp"
#include "multirank/parity_cases.hpp"

namespace nlccl::testing {
namespace {

class ParityProcesses : public ::testing::TestWithParam<int> {};

TEST_P(ParityProcesses, EveryAddition) {
  const int p = GetParam();
  std::set<std::string> memfds;
  auto status = forkRanks(p, [p](int r, nlcclComm_t comm) {
    std::string err = checkParity(r, p, comm);
    if (!err.empty()) fprintf(stderr, "rank %d: %s\n", r, err.c_str());
    return err.empty();
  }, 90, nullptr, &memfds);
  for (int r = 0; r < p; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  EXPECT_FALSE(memfds.empty()) << "the ranks recorded no shared memory: nothing was checked";
  EXPECT_EQ(memfdHolders(memfds), std::vector<std::string>{}) << "shared memory left behind";
}

// Shrink of a healthy communicator: the last rank leaves (it does not call shrink), the others
// go on without it; at one rank, a shrink that excludes nobody.
TEST_P(ParityProcesses, ShrinkWithoutTheLastRank) {
  const int p = GetParam();
  std::set<std::string> memfds;
  auto status = forkRanks(p, [p](int r, nlcclComm_t comm) {
    std::vector<int> excluded;
    if (p > 1) excluded.push_back(p - 1);
    if (p > 1 && r == p - 1) return true;  // leaves: destroying its communicator says goodbye
    nlcclComm_t shrunk = nullptr;
    if (nlcclCommShrink(comm, excluded.data(), static_cast<int>(excluded.size()), &shrunk,
                        nullptr, NLCCL_SHRINK_DEFAULT) != nlcclSuccess) {
      fprintf(stderr, "rank %d: shrink: %s\n", r, nlcclGetLastError(comm));
      return false;
    }
    std::string err = checkShrunk(r, p, excluded, shrunk);
    if (!err.empty()) fprintf(stderr, "rank %d: %s\n", r, err.c_str());
    nlcclCommDestroy(shrunk);
    return err.empty();
  }, 90, nullptr, &memfds);
  for (int r = 0; r < p; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  EXPECT_FALSE(memfds.empty()) << "the ranks recorded no shared memory: nothing was checked";
  EXPECT_EQ(memfdHolders(memfds), std::vector<std::string>{}) << "shared memory left behind";
}

INSTANTIATE_TEST_SUITE_P(Shm, ParityProcesses, ::testing::Values(1, 2, 3, 4, 8));

class ShrinkAfterKill : public ::testing::TestWithParam<int> {};

TEST_P(ShrinkAfterKill, SurvivorsGetAWorkingCommunicator) {
  const int p = GetParam();
  const int victim = 1;
  std::set<std::string> memfds;
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  config.timeoutMs = 20000;
  auto status = forkRanks(
      p,
      [p](int r, nlcclComm_t comm) {
        std::vector<float> v(1 << 16, 1.0f);
        if (nlcclAllReduce(v.data(), v.data(), v.size(), nlcclFloat, nlcclSum, comm, nullptr) !=
            nlcclSuccess)
          return false;
        if (r == victim) raise(SIGKILL);
        // The next collective cannot complete: it fails (the peer is gone) with RemoteError or
        // Timeout, as the README promises, and never hangs.
        nlcclResult_t res =
            nlcclAllReduce(v.data(), v.data(), v.size(), nlcclFloat, nlcclSum, comm, nullptr);
        if (res != nlcclRemoteError && res != nlcclTimeout) {
          fprintf(stderr, "rank %d: a collective with a dead rank returned %s\n", r,
                  nlcclGetErrorString(res));
          return false;
        }
        int excluded[] = {victim};
        nlcclComm_t shrunk = nullptr;
        res = nlcclCommShrink(comm, excluded, 1, &shrunk, nullptr, NLCCL_SHRINK_ABORT);
        if (res != nlcclSuccess) {
          fprintf(stderr, "rank %d: shrink: %s\n", r, nlcclGetLastError(comm));
          return false;
        }
        std::string err = checkShrunk(r, p, {victim}, shrunk);
        if (!err.empty()) fprintf(stderr, "rank %d: %s\n", r, err.c_str());
        nlcclCommDestroy(shrunk);
        nlcclCommAbort(comm);
        std::fflush(nullptr);
        _exit(err.empty() ? 0 : 1);  // the parent communicator is already aborted
      },
      90, &config, &memfds);
  for (int r = 0; r < p; ++r)
    EXPECT_EQ(status[r], r == victim ? 100 + SIGKILL : 0) << "rank " << r;
  EXPECT_FALSE(memfds.empty()) << "the ranks recorded no shared memory: nothing was checked";
  EXPECT_EQ(memfdHolders(memfds), std::vector<std::string>{}) << "shared memory left behind";
}

INSTANTIATE_TEST_SUITE_P(Shm, ShrinkAfterKill, ::testing::Values(2, 3, 4, 8));

}  // namespace
}  // namespace nlccl::testing
