// Every registered algorithm x collective runs for real over threads (loopback) with checked
// results, for several rank counts and hierarchy shapes.
#include <gtest/gtest.h>

#include <cstdlib>

#include "algorithms/algorithms.hpp"
#include "common/threads.hpp"
#include "multirank/collective_case.hpp"

namespace nlccl::testing {
namespace {

/// NLCCL_HIER_GROUPS for p ranks (innermost first); "" = one level.
const char* groupsFor(int p) {
  switch (p) {
    case 4: return "2x2";
    case 6: return "2x3";
    case 8: return "2x2x2";
    default: return "";
  }
}

bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

class AlgorithmsTest : public ::testing::TestWithParam<algo::Entry> {};

TEST_P(AlgorithmsTest, RunsForRealOverThreads) {
  const algo::Entry e = GetParam();
  std::string choice = std::string(collectiveName(e.collective)) + ":" + e.name;
  setenv("NLCCL_SLICE_BYTES", "1024", 1);
  for (int p : {1, 2, 3, 4, 6, 8}) {
    setenv("NLCCL_ALGO", choice.c_str(), 1);
    setenv("NLCCL_HIER_GROUPS", groupsFor(p), 1);
    std::vector<nlcclComm_t> comms(p);
    ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess)
        << choice << ": " << nlcclGetLastError(nullptr);
    struct TypeOp {
      DataType t;
      RedOp op;
    };
    std::vector<TypeOp> cases = {{DataType::Float32, RedOp::Sum}};
    if (reduces(e.collective))
      cases.insert(cases.end(), {{DataType::Int32, RedOp::Max}, {DataType::Bfloat16, RedOp::Avg},
                                 {DataType::Int8, RedOp::Prod}});
    for (const TypeOp& to : cases)
      for (size_t count : {size_t{0}, size_t{1}, size_t{1037}})
        for (bool inPlace : {false, true}) {
          CollCase c{e.collective, to.t, to.op, count, p - 1, inPlace};
          runRanks(p, [&](int r) {
            CollBuffers b(c, r, p);
            if (inPlace && e.collective == Collective::AllToAllv) {  // not supported: rejected
              EXPECT_EQ(b.issue(comms[r]), nlcclInvalidArgument) << choice;
              return;
            }
            ASSERT_EQ(b.issue(comms[r]), nlcclSuccess) << choice << ": " << nlcclGetLastError(comms[r]);
            std::string err = b.check();
            EXPECT_TRUE(err.empty()) << choice << " groups " << groupsFor(p) << ": " << err;
          });
          if (HasFailure()) break;
        }
    for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
    if (HasFailure()) break;
  }
  unsetenv("NLCCL_ALGO");
  unsetenv("NLCCL_HIER_GROUPS");
}

std::string entryName(const ::testing::TestParamInfo<algo::Entry>& info) {
  return std::string(info.param.name) + "_" + collectiveName(info.param.collective);
}

INSTANTIATE_TEST_SUITE_P(Registry, AlgorithmsTest, ::testing::ValuesIn(algo::registry()),
                         entryName);

}  // namespace
}  // namespace nlccl::testing

namespace nlccl::testing {
namespace {

TEST(HierShapeTest, BadLevelAlgorithmOrGroupsAreRejectedByName) {
  setenv("NLCCL_ALGO", "allreduce:hier", 1);
  for (auto [var, value] : {std::pair<const char*, const char*>{"NLCCL_HIER_ALGOS", "ring,bogus"},
                            {"NLCCL_HIER_GROUPS", "3x3"}}) {
    setenv(var, value, 1);
    std::vector<nlcclComm_t> comms(4);
    ASSERT_EQ(nlcclCommInitAll(comms.data(), 4, nullptr), nlcclSuccess);
    float x[4] = {};
    EXPECT_EQ(nlcclAllReduce(x, x, 4, nlcclFloat, nlcclSum, comms[0], nullptr), nlcclInvalidArgument);
    EXPECT_NE(std::string(nlcclGetLastError(comms[0])).find(var), std::string::npos)
        << nlcclGetLastError(comms[0]);
    unsetenv(var);
    runRanks(4, [&](int r) {  // the communicator is still usable once the variable is right
      float v[4] = {1, 1, 1, 1};
      ASSERT_EQ(nlcclAllReduce(v, v, 4, nlcclFloat, nlcclSum, comms[r], nullptr), nlcclSuccess);
      EXPECT_EQ(v[3], 4.0f);
    });
    for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
  }
  unsetenv("NLCCL_ALGO");
}

}  // namespace
}  // namespace nlccl::testing
