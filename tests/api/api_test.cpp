// The C API's contract: enum values, version, error strings, and argument checks that name the
// argument and leave the communicator usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/expect_rejected.hpp"
#include "common/threads.hpp"
#include "nlccl.h"

extern "C" int nlcclHeaderCompilesAsC(void);

namespace {

TEST(ApiTest, EnumValuesAreNccls) {
  EXPECT_EQ(nlcclInvalidArgument, 4);
  EXPECT_EQ(nlcclTimeout, 8);
  EXPECT_EQ(nlcclBfloat16, 9);
  EXPECT_EQ(nlcclFloat8e5m2, 11);
  EXPECT_EQ(nlcclHalf, nlcclFloat16);
  EXPECT_EQ(nlcclAvg, 4);
  EXPECT_GT(nlcclHeaderCompilesAsC(), 0);
}

TEST(ApiTest, VersionAndErrorStrings) {
  int v = 0;
  ASSERT_EQ(nlcclGetVersion(&v), nlcclSuccess);
  EXPECT_EQ(v, NLCCL_VERSION_CODE);
  EXPECT_EQ(nlcclGetVersion(nullptr), nlcclInvalidArgument);
  for (int r = 0; r < nlcclNumResults; ++r)
    EXPECT_GT(std::string(nlcclGetErrorString(static_cast<nlcclResult_t>(r))).size(), 3u);
}

using nlccl::testing::expectRejected;

TEST(ApiTest, NullBuffersAreRejected) {
  float x[4];
  expectRejected(nlcclInvalidArgument, "sendbuff", [&](nlcclComm_t c) {
    return nlcclAllReduce(nullptr, x, 4, nlcclFloat, nlcclSum, c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "recvbuff", [&](nlcclComm_t c) {
    return nlcclAllGather(x, nullptr, 2, nlcclFloat, c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "sendcounts", [&](nlcclComm_t c) {
    return nlcclAlltoAllv(x, nullptr, nullptr, x, nullptr, nullptr, nlcclFloat, c, nullptr);
  });
}

TEST(ApiTest, CountOverflowIsRejected) {
  float x[4];
  expectRejected(nlcclInvalidArgument, "count", [&](nlcclComm_t c) {
    return nlcclAllGather(x, x + 1, SIZE_MAX / 2, nlcclFloat, c, nullptr);
  });
}

TEST(ApiTest, BadTypeOpRootPeerAreRejected) {
  float x[4];
  expectRejected(nlcclInvalidArgument, "datatype", [&](nlcclComm_t c) {
    return nlcclAllReduce(x, x, 4, static_cast<nlcclDataType_t>(12), nlcclSum, c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "op", [&](nlcclComm_t c) {
    return nlcclAllReduce(x, x, 4, nlcclFloat, static_cast<nlcclRedOp_t>(-1), c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "root", [&](nlcclComm_t c) {
    return nlcclBroadcast(x, x, 4, nlcclFloat, 2, c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "peer", [&](nlcclComm_t c) {
    return nlcclSend(x, 4, nlcclFloat, -1, c, nullptr);
  });
}

TEST(ApiTest, MismatchedInPlaceIsRejected) {
  std::vector<float> x(16);
  expectRejected(nlcclInvalidArgument, "overlap", [&](nlcclComm_t c) {
    return nlcclAllReduce(x.data(), x.data() + 1, 8, nlcclFloat, nlcclSum, c, nullptr);
  });
}

TEST(ApiTest, NullAndStaleCommunicators) {
  float x[4] = {};
  EXPECT_EQ(nlcclAllReduce(x, x, 4, nlcclFloat, nlcclSum, nullptr, nullptr), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("comm"), std::string::npos);
  int n = 0;
  EXPECT_EQ(nlcclCommCount(nullptr, &n), nlcclInvalidArgument);
  EXPECT_EQ(nlcclCommInitAll(nullptr, 2, nullptr), nlcclInvalidArgument);
  nlcclComm_t c[1];
  EXPECT_EQ(nlcclCommInitAll(c, 0, nullptr), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("ndev"), std::string::npos);
  EXPECT_EQ(nlcclGroupEnd(), nlcclInvalidUsage);
}

TEST(ApiTest, UnknownAlgorithmNamesListTheValidOnes) {
  setenv("NLCCL_ALGO", "allreduce:bruck", 1);
  nlcclComm_t c[1];
  nlcclResult_t r = nlcclCommInitAll(c, 1, nullptr);
  unsetenv("NLCCL_ALGO");
  EXPECT_EQ(r, nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("ring"), std::string::npos)
      << nlcclGetLastError(nullptr);
}

}  // namespace
