// Shared by the API tests: a rejected call must name its argument and leave the communicator
// usable.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/threads.hpp"
#include "nlccl.h"

namespace nlccl::testing {

/// Calls `bad` on rank 0 of two thread ranks and expects `code` with a message containing
/// `needle`; then a valid all-reduce on the same communicators must still succeed.
template <typename F>
void expectRejected(nlcclResult_t code, const char* needle, F bad) {
  const int p = 2;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  nlcclResult_t got = bad(comms[0]);
  EXPECT_EQ(got, code) << needle;
  EXPECT_NE(std::string(nlcclGetLastError(comms[0])).find(needle), std::string::npos)
      << "message: " << nlcclGetLastError(comms[0]) << " should mention " << needle;
  runRanks(p, [&](int r) {
    std::vector<float> buf(64, 1.0f);
    ASSERT_EQ(nlcclAllReduce(buf.data(), buf.data(), 64, nlcclFloat, nlcclSum, comms[r], nullptr),
              nlcclSuccess);
    EXPECT_EQ(buf[0], 2.0f);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

}  // namespace nlccl::testing
