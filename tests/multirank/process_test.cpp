// Ranks as processes over shared memory: every collective at 2, 3 and 4 processes with checked
// results, communicator split, and a rank killed mid-collective.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "multirank/collective_case.hpp"
#include "multirank/fork_ranks.hpp"

namespace nlccl::testing {

namespace {

bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

class ProcessCollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(ProcessCollectivesTest, EveryCollective) {
  const int p = GetParam();
  std::vector<pid_t> pids;
  auto status = forkRanks(p, [p](int r, nlcclComm_t comm) {
    bool ok = true;
    for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                         Collective::Broadcast, Collective::Reduce, Collective::AllToAll,
                         Collective::AllToAllv, Collective::Gather, Collective::Scatter}) {
      for (int ti = 0; ti < kNumDataTypes; ++ti) {
        const DataType t = static_cast<DataType>(ti);
        for (int o = 0; o < (reduces(c) ? kNumRedOps : 1); ++o) {
          for (bool inPlace : {false, true}) {
            if (inPlace && c == Collective::AllToAllv) continue;
            // 1.2 MB messages cross slot boundaries of the shm FIFOs; 1 element does not.
            for (size_t count : {size_t{1}, size_t{7001}, size_t{300000}}) {
              if (count == 300000 && (t != DataType::Float32 || o != 0)) continue;
              CollCase cc{c, t, static_cast<RedOp>(o), count, p - 1, inPlace};
              CollBuffers b(cc, r, p);
              nlcclResult_t res = b.issue(comm);
              std::string err = res == nlcclSuccess ? b.check() : nlcclGetLastError(comm);
              if (!err.empty()) {
                fprintf(stderr, "rank %d: %s\n", r, err.c_str());
                ok = false;
                return ok;
              }
            }
          }
        }
      }
    }
    return ok;
  }, 60, nullptr, &pids);
  for (int r = 0; r < p; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  EXPECT_TRUE(nlcclShmSegments(pids).empty()) << "shared memory segments left behind";
}

INSTANTIATE_TEST_SUITE_P(Shm, ProcessCollectivesTest, ::testing::Values(2, 3, 4));

TEST(ProcessTest, SplitAcrossProcesses) {
  auto status = forkRanks(4, [](int r, nlcclComm_t comm) {
    nlcclComm_t sub = nullptr;
    if (nlcclCommSplit(comm, r % 2, r, &sub, nullptr) != nlcclSuccess) return false;
    int v = r + 1, sum = 0;
    bool ok = nlcclAllReduce(&v, &sum, 1, nlcclInt, nlcclSum, sub, nullptr) == nlcclSuccess &&
              sum == (r % 2 ? 2 + 4 : 1 + 3);
    nlcclCommDestroy(sub);
    return ok;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

void killedRankBecomesAnErrorOnTheOthers(const char* transport) {
  std::vector<pid_t> pids;
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  config.timeoutMs = 5000;
  config.transport = transport;
  auto status = forkRanks(
      3,
      [](int r, nlcclComm_t comm) {
        std::vector<float> buf(1 << 20, 1.0f);
        // One good collective, then rank 1 dies in the middle of the next one: it queues it on a
        // stream (so its data is moving) and is killed a moment later.
        if (nlcclAllReduce(buf.data(), buf.data(), buf.size(), nlcclFloat, nlcclSum, comm,
                           nullptr) != nlcclSuccess)
          return false;
        if (r == 1) {
          nlcclStream_t s;
          nlcclStreamCreate(&s);
          std::vector<float> big(16 << 20, 1.0f);
          nlcclAllReduce(big.data(), big.data(), big.size(), nlcclFloat, nlcclSum, comm, s);
          usleep(20000);
          raise(SIGKILL);
        }
        buf.assign(16 << 20, 1.0f);
        nlcclResult_t res = nlcclAllReduce(buf.data(), buf.data(), buf.size(), nlcclFloat,
                                           nlcclSum, comm, nullptr);
        if (res == nlcclSuccess) return false;
        fprintf(stderr, "rank %d got the expected error: %s (%s)\n", r, nlcclGetErrorString(res),
                nlcclGetLastError(comm));
        nlcclCommAbort(comm);
        _exit(0);
      },
      30, &config, &pids);  // a survivor still waiting after 30 s is killed: status 99
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 100 + SIGKILL);
  EXPECT_EQ(status[2], 0);
  EXPECT_TRUE(nlcclShmSegments(pids).empty()) << "shared memory segments left behind";
}

TEST(ProcessTest, KilledRankBecomesAnErrorOnTheOthers) { killedRankBecomesAnErrorOnTheOthers("shm"); }

// The neuronlink transport's shared clock must not wait for the dead rank either.
TEST(ProcessTest, KilledRankBecomesAnErrorOnTheOthersOverNeuronLink) {
  killedRankBecomesAnErrorOnTheOthers("neuronlink");
}

}  // namespace
}  // namespace nlccl::testing
