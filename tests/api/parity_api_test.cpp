// The parts of nccl.h added for NCCL parity, as a C API: NCCL's names and values, every
// ncclConfig_t field, and argument checks that name the argument, complete before anything
// changes, and leave the communicator usable.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/expect_rejected.hpp"
#include "common/threads.hpp"
#include "nlccl.h"

namespace {

TEST(ParityApi, VersionMacrosAreNccls) {
  static_assert(NLCCL_VERSION(2, 19, 0) == 21900);
  static_assert(NLCCL_VERSION(2, 8, 4) == 2804);  // NCCL's old encoding below 2.9
  static_assert(NLCCL_VERSION_CODE == NLCCL_VERSION(NLCCL_MAJOR, NLCCL_MINOR, NLCCL_PATCH));
#if NLCCL_VERSION_CODE < NLCCL_VERSION(2, 19, 0)
#error "ported code that checks for NCCL 2.19 features must see them"
#endif
  int v = 0;
  ASSERT_EQ(nlcclGetVersion(&v), nlcclSuccess);
  EXPECT_EQ(v, NLCCL_VERSION(2, 30, 0));
  nlcclComm_t none = NLCCL_COMM_NULL;
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(nlcclUnhandledCudaError, nlcclUnhandledDeviceError);
  EXPECT_EQ(static_cast<long>(nlcclMaxRedOp), 0x7fffffffL);
  EXPECT_EQ(nlcclScalarDevice, 0);
  EXPECT_EQ(nlcclScalarHostImmediate, 1);
  EXPECT_EQ(NLCCL_WIN_COLL_SYMMETRIC, 1);
  EXPECT_EQ(NLCCL_SHRINK_ABORT, 1);
  EXPECT_EQ(NLCCL_API_MAGIC, 0xcafebeefu);
}

TEST(ParityApi, ConfigHasNcclsFieldsInNcclsOrder) {
  // The fields of NCCL 2.30/2.31's ncclConfig_t, in order; nlccl's own come after them.
  const size_t offsets[] = {
      offsetof(nlcclConfig_t, blocking),          offsetof(nlcclConfig_t, cgaClusterSize),
      offsetof(nlcclConfig_t, minCTAs),           offsetof(nlcclConfig_t, maxCTAs),
      offsetof(nlcclConfig_t, netName),           offsetof(nlcclConfig_t, splitShare),
      offsetof(nlcclConfig_t, trafficClass),      offsetof(nlcclConfig_t, commName),
      offsetof(nlcclConfig_t, collnetEnable),     offsetof(nlcclConfig_t, CTAPolicy),
      offsetof(nlcclConfig_t, shrinkShare),       offsetof(nlcclConfig_t, nvlsCTAs),
      offsetof(nlcclConfig_t, nChannelsPerNetPeer), offsetof(nlcclConfig_t, nvlinkCentricSched),
      offsetof(nlcclConfig_t, graphUsageMode),    offsetof(nlcclConfig_t, numRmaCtx),
      offsetof(nlcclConfig_t, maxP2pPeers),       offsetof(nlcclConfig_t, graphStreamOrdering),
      offsetof(nlcclConfig_t, launchOrderImplicit), offsetof(nlcclConfig_t, numRmaSig),
      offsetof(nlcclConfig_t, rmaEagerInit),      offsetof(nlcclConfig_t, hostCftMode),
      offsetof(nlcclConfig_t, nvlsHostMode),      offsetof(nlcclConfig_t, timeoutMs),
      offsetof(nlcclConfig_t, transport),         offsetof(nlcclConfig_t, algorithm)};
  for (size_t i = 1; i < sizeof(offsets) / sizeof(offsets[0]); ++i)
    EXPECT_LT(offsets[i - 1], offsets[i]) << "field " << i;
  nlcclConfig_t c = NLCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(c.magic, NLCCL_API_MAGIC);
  EXPECT_EQ(c.splitShare, NLCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(c.nvlsHostMode, NLCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(c.algorithm, nullptr);
}

/// A config with every host-meaningless NCCL field set is accepted; one out of range is not, with
/// the field named.
TEST(ParityApi, ConfigFieldsAreAcceptedOrRejectedByName) {
  nlcclUniqueId id;
  ASSERT_EQ(nlcclGetUniqueId(&id), nlcclSuccess);
  nlcclConfig_t c = NLCCL_CONFIG_INITIALIZER;
  c.blocking = 0;
  c.cgaClusterSize = 4;
  c.minCTAs = 2;
  c.maxCTAs = 16;
  c.netName = "Socket";
  c.splitShare = 1;
  c.trafficClass = 3;
  c.commName = "parity";
  c.collnetEnable = 0;
  c.CTAPolicy = NLCCL_CTA_POLICY_EFFICIENCY;
  c.shrinkShare = 0;
  c.nvlsCTAs = 8;
  c.nChannelsPerNetPeer = 2;
  c.graphUsageMode = 1;
  c.hostCftMode = nlcclHostCftDisable;
  c.nvlsHostMode = nlcclNvlsHostModeDisable;
  nlcclComm_t comm = nullptr;
  ASSERT_EQ(nlcclCommInitRankConfig(&comm, 1, id, 0, &c), nlcclSuccess)
      << nlcclGetLastError(nullptr);
  EXPECT_EQ(nlcclCommDestroy(comm), nlcclSuccess);
  for (auto [field, set] : std::vector<std::pair<const char*, void (*)(nlcclConfig_t*)>>{
           {"splitShare", [](nlcclConfig_t* x) { x->splitShare = 2; }},
           {"blocking", [](nlcclConfig_t* x) { x->blocking = 7; }},
           {"CTAPolicy", [](nlcclConfig_t* x) { x->CTAPolicy = 64; }},
           {"minCTAs", [](nlcclConfig_t* x) { x->minCTAs = 0; }}}) {
    nlcclConfig_t bad = NLCCL_CONFIG_INITIALIZER;
    set(&bad);
    EXPECT_EQ(nlcclCommInitRankConfig(&comm, 1, id, 0, &bad), nlcclInvalidArgument) << field;
    EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find(field), std::string::npos)
        << nlcclGetLastError(nullptr);
  }
}

using nlccl::testing::expectRejected;

TEST(ParityApi, RootedCollectivesCheckTheirArguments) {
  float x[8];
  expectRejected(nlcclInvalidArgument, "recvbuff", [&](nlcclComm_t c) {
    return nlcclGather(x, nullptr, 4, nlcclFloat, 0, c, nullptr);  // rank 0 is the root
  });
  expectRejected(nlcclInvalidArgument, "root", [&](nlcclComm_t c) {
    return nlcclGather(x, x, 4, nlcclFloat, 2, c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "sendbuff", [&](nlcclComm_t c) {
    return nlcclScatter(nullptr, x, 4, nlcclFloat, 0, c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "datatype", [&](nlcclComm_t c) {
    return nlcclScatter(x, x, 4, static_cast<nlcclDataType_t>(40), 0, c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "overlap", [&](nlcclComm_t c) {
    return nlcclGather(x + 1, x, 2, nlcclFloat, 0, c, nullptr);  // neither in place nor apart
  });
  expectRejected(nlcclInvalidArgument, "sendbuff", [&](nlcclComm_t c) {
    return nlcclBcast(nullptr, 4, nlcclFloat, 1, c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "root", [&](nlcclComm_t c) {
    return nlcclBcast(x, 4, nlcclFloat, -1, c, nullptr);
  });
}

TEST(ParityApi, PreMulSumChecksItsArguments) {
  float s = 2.0f;
  nlcclRedOp_t op;
  expectRejected(nlcclInvalidArgument, "op", [&](nlcclComm_t c) {
    return nlcclRedOpCreatePreMulSum(nullptr, &s, nlcclFloat, nlcclScalarHostImmediate, c);
  });
  expectRejected(nlcclInvalidArgument, "scalar", [&](nlcclComm_t c) {
    return nlcclRedOpCreatePreMulSum(&op, nullptr, nlcclFloat, nlcclScalarHostImmediate, c);
  });
  expectRejected(nlcclInvalidArgument, "residence", [&](nlcclComm_t c) {
    return nlcclRedOpCreatePreMulSum(&op, &s, nlcclFloat, static_cast<nlcclScalarResidence_t>(5), c);
  });
  expectRejected(nlcclInvalidArgument, "datatype", [&](nlcclComm_t c) {
    return nlcclRedOpCreatePreMulSum(&op, &s, static_cast<nlcclDataType_t>(99),
                                     nlcclScalarHostImmediate, c);
  });
  float buf[4] = {};
  expectRejected(nlcclInvalidArgument, "created for datatype float", [&](nlcclComm_t c) {
    EXPECT_EQ(nlcclRedOpCreatePreMulSum(&op, &s, nlcclFloat, nlcclScalarHostImmediate, c),
              nlcclSuccess);
    return nlcclAllReduce(buf, buf, 2, nlcclDouble, op, c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "not created on this communicator", [&](nlcclComm_t c) {
    return nlcclRedOpDestroy(static_cast<nlcclRedOp_t>(77), c);
  });
  expectRejected(nlcclInvalidArgument, "op 9", [&](nlcclComm_t c) {
    return nlcclAllReduce(buf, buf, 4, nlcclFloat, static_cast<nlcclRedOp_t>(9), c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "built-in", [&](nlcclComm_t c) {
    return nlcclRedOpDestroy(nlcclSum, c);
  });
}

TEST(ParityApi, RegistrationChecksItsArguments) {
  char buf[64];
  void* h = nullptr;
  expectRejected(nlcclInvalidArgument, "buff", [&](nlcclComm_t c) {
    return nlcclCommRegister(c, nullptr, 64, &h);
  });
  expectRejected(nlcclInvalidArgument, "size", [&](nlcclComm_t c) {
    return nlcclCommRegister(c, buf, 0, &h);
  });
  expectRejected(nlcclInvalidArgument, "handle", [&](nlcclComm_t c) {
    return nlcclCommRegister(c, buf, 64, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "was not returned", [&](nlcclComm_t c) {
    return nlcclCommDeregister(c, buf);
  });
  nlcclWindow_t w = nullptr;
  expectRejected(nlcclInvalidArgument, "winFlags", [&](nlcclComm_t c) {
    return nlcclCommWindowRegister(c, buf, 64, &w, 0x100);
  });
  expectRejected(nlcclInvalidArgument, "win", [&](nlcclComm_t c) {
    return nlcclCommWindowRegister(c, buf, 64, nullptr, NLCCL_WIN_DEFAULT);
  });
  expectRejected(nlcclInvalidArgument, "not a window", [&](nlcclComm_t c) {
    void* handle = nullptr;
    EXPECT_EQ(nlcclCommRegister(c, buf, 64, &handle), nlcclSuccess);
    // A buffer registration is not a window.
    return nlcclCommWindowDeregister(c, static_cast<nlcclWindow_t>(handle));
  });
  expectRejected(nlcclInvalidArgument, "outUserPtr", [&](nlcclComm_t c) {
    return nlcclWinGetUserPtr(c, w, nullptr);
  });
}

TEST(ParityApi, ShrinkChecksItsArguments) {
  int list[2] = {1, 1};
  nlcclComm_t out = nullptr;
  expectRejected(nlcclInvalidArgument, "newcomm", [&](nlcclComm_t c) {
    return nlcclCommShrink(c, list, 1, nullptr, nullptr, NLCCL_SHRINK_DEFAULT);
  });
  expectRejected(nlcclInvalidArgument, "excludeRanksCount", [&](nlcclComm_t c) {
    return nlcclCommShrink(c, list, 2, &out, nullptr, NLCCL_SHRINK_DEFAULT);  // nobody left
  });
  expectRejected(nlcclInvalidArgument, "excludeRanksCount", [&](nlcclComm_t c) {
    return nlcclCommShrink(c, list, -1, &out, nullptr, NLCCL_SHRINK_DEFAULT);
  });
  expectRejected(nlcclInvalidArgument, "excludeRanksList", [&](nlcclComm_t c) {
    return nlcclCommShrink(c, nullptr, 1, &out, nullptr, NLCCL_SHRINK_DEFAULT);
  });
  int far[1] = {5};
  expectRejected(nlcclInvalidArgument, "excludeRanksList[0] = 5", [&](nlcclComm_t c) {
    return nlcclCommShrink(c, far, 1, &out, nullptr, NLCCL_SHRINK_DEFAULT);
  });
  int self[1] = {0};
  expectRejected(nlcclInvalidArgument, "calling rank", [&](nlcclComm_t c) {
    return nlcclCommShrink(c, self, 1, &out, nullptr, NLCCL_SHRINK_DEFAULT);
  });
  expectRejected(nlcclInvalidArgument, "shrinkFlags", [&](nlcclComm_t c) {
    return nlcclCommShrink(c, list, 1, &out, nullptr, 4);
  });
  nlcclConfig_t bad = NLCCL_CONFIG_INITIALIZER;
  bad.shrinkShare = 3;
  expectRejected(nlcclInvalidArgument, "shrinkShare", [&](nlcclComm_t c) {
    return nlcclCommShrink(c, list, 1, &out, &bad, NLCCL_SHRINK_DEFAULT);
  });
}

TEST(ParityApi, OtherCommunicatorCallsCheckTheirArguments) {
  expectRejected(nlcclInvalidArgument, "device", [&](nlcclComm_t c) {
    return nlcclCommCuDevice(c, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "revokeFlags", [&](nlcclComm_t c) {
    return nlcclCommRevoke(c, 3);
  });
  expectRejected(nlcclInvalidArgument, "flags", [&](nlcclComm_t c) {
    return nlcclCommSuspend(c, 0x10);
  });
  uint64_t v;
  expectRejected(nlcclInvalidArgument, "stat", [&](nlcclComm_t c) {
    return nlcclCommMemStats(c, static_cast<nlcclCommMemStat_t>(9), &v);
  });
  nlcclComm_t out;
  expectRejected(nlcclInvalidArgument, "rank", [&](nlcclComm_t c) {
    return nlcclCommGrow(c, 4, nullptr, 2, &out, nullptr);  // old ranks keep theirs: -1
  });
  expectRejected(nlcclInvalidArgument, "nRanks", [&](nlcclComm_t c) {
    return nlcclCommGrow(c, 2, nullptr, -1, &out, nullptr);
  });
  expectRejected(nlcclInvalidArgument, "uniqueId", [&](nlcclComm_t c) {
    return nlcclCommGetUniqueId(c, nullptr);
  });
  nlcclUniqueId ids[1];
  EXPECT_EQ(nlcclCommInitRankScalable(&out, 2, 0, 0, ids, nullptr), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("nId"), std::string::npos);
  EXPECT_EQ(nlcclCommInitRankScalable(&out, 2, 0, 1, nullptr, nullptr), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("commIds"), std::string::npos);
  EXPECT_EQ(nlcclCommInitRankScalable(&out, 2, 2, 1, ids, nullptr), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("myrank"), std::string::npos);
}

TEST(ParityApi, ParametersReadTheTableOfTheReadme) {
  nlcclParamHandle_t h = nullptr;
  ASSERT_EQ(nlcclParamBind(&h, "NLCCL_TIMEOUT_MS"), nlcclSuccess);
  int32_t ms = 0;
  ASSERT_EQ(nlcclParamGetI32(h, &ms), nlcclSuccess);
  EXPECT_EQ(ms, 300000);  // the default (ctest does not set it)
  int8_t small = 0;
  EXPECT_EQ(nlcclParamGetI8(h, &small), nlcclInvalidArgument) << "300000 does not fit 8 bits";
  ASSERT_EQ(nlcclParamBind(&h, "TRANSPORT"), nlcclSuccess) << "the key without the prefix";
  const char* text = nullptr;
  ASSERT_EQ(nlcclParamGetStr(h, &text), nlcclSuccess);
  EXPECT_STREQ(text, "auto");
  char out[16];
  int len = 0;
  ASSERT_EQ(nlcclParamGet(h, out, sizeof out, &len), nlcclSuccess);
  EXPECT_EQ(len, 4);
  EXPECT_EQ(nlcclParamGet(h, out, 2, &len), nlcclInvalidArgument);
  EXPECT_EQ(nlcclParamBind(&h, "NO_SUCH_THING"), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("NO_SUCH_THING"), std::string::npos);
  const char** keys = nullptr;
  int n = 0;
  ASSERT_EQ(nlcclParamGetAllParameterKeys(&keys, &n), nlcclSuccess);
  bool found = false;
  for (int i = 0; i < n; ++i) found = found || std::string(keys[i]) == "NLCCL_ALGO";
  EXPECT_TRUE(found);
  const char* value = nullptr;
  ASSERT_EQ(nlcclParamGetParameter("SHM_SLOTS", &value, &len), nlcclSuccess);
  EXPECT_STREQ(value, "8");
  nlcclParamDumpAll();
  nlcclResetDebugInit();
}

}  // namespace
