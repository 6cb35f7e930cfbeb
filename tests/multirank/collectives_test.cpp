// Every collective x data type x op x {in place, out of place} for nranks {1, 2, 3, 4, 8}, ranks as
// threads over the loopback transport, against exact references (tests/common/reference.hpp).
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/threads.hpp"
#include "util/params.hpp"
#include "multirank/collective_case.hpp"

namespace nlccl::testing {
namespace {

struct Param {
  Collective collective;
  int nranks;
  bool inPlace;
};

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(collectiveName(info.param.collective)) + "_" +
         std::to_string(info.param.nranks) + "ranks" + (info.param.inPlace ? "_inplace" : "");
}

bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

class CollectivesTest : public ::testing::TestWithParam<Param> {
 protected:
  static void SetUpTestSuite() {
    // Small slices so that multi-slice pipelining runs on test-sized buffers.
    setenv("NLCCL_SLICE_BYTES", "512", 1);
    resetParams();
  }
};

TEST_P(CollectivesTest, AllTypesAndOps) {
  const Param prm = GetParam();
  // In-place all-to-all-v is not supported (NCCL has no all-to-all-v): it must be rejected, and
  // the communicator stays usable.
  const bool rejected = prm.inPlace && prm.collective == Collective::AllToAllv;
  const int p = prm.nranks;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < (reduces(prm.collective) ? kNumRedOps : 1); ++o) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1037}}) {
        CollCase c{prm.collective, static_cast<DataType>(t), static_cast<RedOp>(o), count,
                   p > 1 ? 1 : 0, prm.inPlace};
        runRanks(p, [&](int r) {
          CollBuffers b(c, r, p);
          if (rejected) {
            EXPECT_EQ(b.issue(comms[r]), nlcclInvalidArgument);
            EXPECT_NE(std::string(nlcclGetLastError(comms[r])).find("in-place all-to-all-v"),
                      std::string::npos)
                << nlcclGetLastError(comms[r]);
            return;
          }
          ASSERT_EQ(b.issue(comms[r]), nlcclSuccess) << nlcclGetLastError(comms[r]);
          std::string err = b.check();
          EXPECT_TRUE(err.empty()) << err;
        });
        if (HasFailure()) break;
      }
    }
  }
  if (rejected) {  // the rejections changed nothing: the out-of-place call still runs
    CollCase c{prm.collective, DataType::Float32, RedOp::Sum, 1037, 0, false};
    runRanks(p, [&](int r) {
      CollBuffers b(c, r, p);
      ASSERT_EQ(b.issue(comms[r]), nlcclSuccess) << nlcclGetLastError(comms[r]);
      EXPECT_EQ(b.check(), "");
    });
  }
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

// NLCCL_STREAM_STORE_BYTES=1: every collective writes its copies and out-of-place reductions
// with streaming stores (kernels/stream_store.hpp). Counts large enough for the streaming loops,
// odd so that each ends in a tail, at 2 and 3 ranks, in and out of place.
TEST(StreamingStores, EveryCollectiveStaysExact) {
  setenv("NLCCL_STREAM_STORE_BYTES", "1", 1);
  resetParams();
  for (int p : {2, 3}) {
    std::vector<nlcclComm_t> comms(p);
    ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
    for (Collective coll : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                            Collective::Broadcast, Collective::Reduce, Collective::AllToAll}) {
      for (DataType t : {DataType::Float32, DataType::Bfloat16, DataType::Int64}) {
        for (bool inPlace : {false, true}) {
          CollCase c{coll, t, RedOp::Sum, 6007, 1, inPlace};
          runRanks(p, [&](int r) {
            CollBuffers b(c, r, p);
            ASSERT_EQ(b.issue(comms[r]), nlcclSuccess) << nlcclGetLastError(comms[r]);
            const std::string err = b.check();
            EXPECT_TRUE(err.empty()) << collectiveName(coll) << ": " << err;
          });
        }
      }
    }
    for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
  }
  unsetenv("NLCCL_STREAM_STORE_BYTES");
  resetParams();
}

std::vector<Param> allParams() {
  std::vector<Param> out;
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                       Collective::Broadcast, Collective::Reduce, Collective::AllToAll,
                       Collective::AllToAllv, Collective::Gather, Collective::Scatter})
    for (int n : {1, 2, 3, 4, 8})
      for (bool inPlace : {false, true}) out.push_back({c, n, inPlace});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Loopback, CollectivesTest, ::testing::ValuesIn(allParams()), paramName);

}  // namespace
}  // namespace nlccl::testing
