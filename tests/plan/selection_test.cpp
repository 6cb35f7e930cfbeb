// Parsing of per-collective algorithm choices (NLCCL_ALGO, the config's algorithm field).
#include <gtest/gtest.h>

#include "algorithms/selection.hpp"

namespace nlccl::algo {
namespace {

TEST(Selection, BareNameAppliesToEveryCollectiveItImplements) {
  Selection s;
  ASSERT_EQ(parseSelection("tree", &s), Status::Success);
  EXPECT_EQ(s.nameFor(Collective::AllReduce), "tree");
  EXPECT_EQ(s.nameFor(Collective::Broadcast), "tree");
  EXPECT_EQ(s.nameFor(Collective::Reduce), "tree");
  EXPECT_EQ(s.nameFor(Collective::AllGather), "auto");  // tree has none: the default stays
  EXPECT_EQ(s.nameFor(Collective::AllToAll), "auto");
}

TEST(Selection, AutoIsTheDefaultAndANameOfEveryCollective) {
  Selection s;
  ASSERT_EQ(parseSelection("", &s), Status::Success);
  EXPECT_EQ(s.nameFor(Collective::AllReduce), "auto");
  ASSERT_EQ(parseSelection("ring,allreduce:auto", &s), Status::Success);
  EXPECT_EQ(s.nameFor(Collective::AllReduce), "auto");
  EXPECT_EQ(s.nameFor(Collective::AllGather), "ring");
  ASSERT_EQ(parseSelection("auto", &s), Status::Success);
  EXPECT_EQ(s.nameFor(Collective::AllToAllv), "auto");
}

TEST(Selection, PerCollectiveItems) {
  Selection s;
  ASSERT_EQ(parseSelection(" AllReduce:tree , alltoall:hier,alltoallv:hier", &s), Status::Success);
  EXPECT_EQ(s.nameFor(Collective::AllReduce), "tree");
  EXPECT_EQ(s.nameFor(Collective::AllToAll), "hier");
  EXPECT_EQ(s.nameFor(Collective::AllToAllv), "hier");
  EXPECT_EQ(s.chosen.size(), 3u);
  // An explicit item overrides a bare name wherever it appears.
  ASSERT_EQ(parseSelection("allreduce:rhd,tree", &s), Status::Success);
  EXPECT_EQ(s.nameFor(Collective::AllReduce), "rhd");
  EXPECT_EQ(s.nameFor(Collective::Broadcast), "tree");
  ASSERT_EQ(parseSelection("", &s), Status::Success);
  EXPECT_TRUE(s.chosen.empty());
}

TEST(Selection, ErrorsListValidNames) {
  Selection s;
  std::string err;
  EXPECT_EQ(parseSelection("allreduce:bruck", &s, &err), Status::InvalidArgument);
  EXPECT_NE(err.find("bruck"), std::string::npos) << err;
  EXPECT_NE(err.find("ring"), std::string::npos) << err;
  EXPECT_NE(err.find("tree"), std::string::npos) << err;
  EXPECT_NE(err.find("rhd"), std::string::npos) << err;
  EXPECT_EQ(err.find("direct"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(parseSelection("allsum:ring", &s, &err), Status::InvalidArgument);
  EXPECT_NE(err.find("allsum"), std::string::npos) << err;
  EXPECT_NE(err.find("reducescatter"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(parseSelection("fastest", &s, &err), Status::InvalidArgument);
  EXPECT_NE(err.find("fastest"), std::string::npos) << err;
  EXPECT_EQ(parseSelection("allreduce:", &s, &err), Status::InvalidArgument);
}

}  // namespace
}  // namespace nlccl::algo
