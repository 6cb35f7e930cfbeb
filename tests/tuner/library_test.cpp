// The tuner inside the library: a real run over shm takes the small-message path for 8 bytes,
// and nlcclGroupSimulateEnd predicts what the simulator's analytical mode says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "multirank/fork_ranks.hpp"
#include "nlccl.h"
#include "nlccl/sim.hpp"
#include "nlccl/tuner.hpp"
#include "util/params.hpp"

namespace nlccl {
namespace {

TEST(TunerLibrary, ShmRunTakesTheSmallMessagePathForEightBytes) {
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  config.transport = "shm";
  const std::vector<int> status = testing::forkRanks(
      4,
      [](int rank, nlcclComm_t comm) {
        float in[2] = {1.0f + rank, 2.0f}, out[2] = {0, 0};
        if (nlcclAllReduce(in, out, 2, nlcclFloat, nlcclSum, comm, nullptr) != nlcclSuccess)
          return false;
        nlcclCommStats_t st = {};
        st.size = sizeof(st);
        if (nlcclCommGetStats(comm, &st) != nlcclSuccess) return false;
        if (rank == 0) fprintf(stderr, "8-byte all-reduce over shm on 4 ranks ran %s\n",
                               st.lastAlgorithm);
        return out[0] == 10.0f && out[1] == 8.0f && std::string(st.lastAlgorithm) != "ring" &&
               std::string(st.transport) == "shm";
      },
      60, &config);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

/// The estimate of one all-reduce of `count` floats on 8 threads (every rank in the group).
float simulatedEnd(size_t count) {
  nlcclComm_t comms[8];
  EXPECT_EQ(nlcclCommInitAll(comms, 8, nullptr), nlcclSuccess);
  std::vector<float> buf(count, 1.0f);
  nlcclSimInfo_t info = NLCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(info.magic, 0x74685283u);
  EXPECT_EQ(info.estimatedTime, NLCCL_UNDEF_FLOAT);
  EXPECT_EQ(nlcclGroupStart(), nlcclSuccess);
  for (int r = 0; r < 8; ++r)
    EXPECT_EQ(nlcclAllReduce(buf.data(), buf.data(), count, nlcclFloat, nlcclSum, comms[r],
                             nullptr),
              nlcclSuccess);
  EXPECT_EQ(nlcclGroupSimulateEnd(&info), nlcclSuccess);
  for (float x : buf) EXPECT_EQ(x, 1.0f);  // nothing ran
  for (auto& c : comms) nlcclCommDestroy(c);
  return info.estimatedTime;
}

/// nlccl-sim --mode analytical -t trn3-us64 -n 8 --chunk-bytes 1048576 (-a algo).
double simAnalyticalUs(const std::string& algo, size_t bytes) {
  fabric::Topology topo;
  std::string err;
  EXPECT_EQ(fabric::Topology::load("trn3-us64", {}, &topo, &err), Status::Success) << err;
  sim::CollectiveRun run;
  int64_t slice = 1 << 20;
  run.algorithm = algo;
  run.nranks = 8;
  run.bytes = bytes;
  if (algo == "auto") {  // what nlccl-sim --algo auto runs
    tuner::Query q;
    q.bytes = bytes;
    q.nranks = 8;
    fabric::Topology sliced;
    EXPECT_EQ(fabric::Topology::load("trn3-us64", {"chunk_bytes=1048576"}, &sliced, &err),
              Status::Success);
    tuner::Choice ch;
    EXPECT_EQ(tuner::choose(sliced, q, {}, &ch, &err), Status::Success) << err;
    run.algorithm = ch.best.algorithm;
    run.levelAlgorithms = ch.best.levelAlgorithms;
    if (ch.best.sliceBytes >= 0) slice = ch.best.sliceBytes;
  }
  sim::Options o;
  o.mode = sim::Mode::Analytical;
  o.chunkBytes = slice;
  sim::Result r;
  EXPECT_EQ(sim::simulateCollective(topo, run, o, &r, &err), Status::Success) << err;
  return r.timeS * 1e6;
}

TEST(TunerLibrary, GroupSimulateEndEqualsTheAnalyticalSimulator) {
  setenv("NLCCL_TUNER_TOPOLOGY", "trn3-us64", 1);
  for (const char* algo : {"ring", "tree", "auto"})
    for (size_t count : {size_t{2}, size_t{1} << 20}) {
      setenv("NLCCL_ALGO", (std::string("allreduce:") + algo).c_str(), 1);
      resetParams();
      const double want = simAnalyticalUs(algo, count * sizeof(float));
      const float got = simulatedEnd(count);
      EXPECT_NEAR(got, want, want * 1e-5) << algo << " " << count;
    }
  unsetenv("NLCCL_ALGO");
  unsetenv("NLCCL_TUNER_TOPOLOGY");
  resetParams();
}

TEST(TunerLibrary, GroupSimulateEndRejectsAnUninitialisedInfo) {
  nlcclSimInfo_t info = {};
  EXPECT_EQ(nlcclGroupStart(), nlcclSuccess);
  EXPECT_EQ(nlcclGroupSimulateEnd(&info), nlcclInvalidArgument);
  nlcclSimInfo_t good = NLCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(nlcclGroupSimulateEnd(&good), nlcclInvalidUsage);  // the group was closed
}

}  // namespace
}  // namespace nlccl
