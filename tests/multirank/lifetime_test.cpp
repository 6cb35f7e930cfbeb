// Communicator lifetime through the C API: nlcclCommFinalize waits for queued work and returns
// its error; nlcclCommAbort from another thread unblocks a call whose peer never comes, promptly
// (bounded by seconds against a timeout of minutes, never a timing measurement), and the blocked
// call returns RemoteError.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/threads.hpp"
#include "nlccl.h"
#include "util/params.hpp"

namespace nlccl::testing {
namespace {

using std::chrono::seconds;

/// Waits for `f` up to `limit`; a call still blocked then is a hang: fail and end the process
/// (the blocked thread cannot be recovered, and ctest's timeout is minutes away).
template <typename T>
T within(std::future<T>& f, seconds limit, const char* what) {
  if (f.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << what << " did not return within " << limit.count() << " s";
    fprintf(stderr, "%s hangs: ending the test process\n", what);
    std::fflush(nullptr);
    std::_Exit(1);
  }
  return f.get();
}

/// Sets NLCCL_TIMEOUT_MS for the communicators made in the scope.
struct ScopedTimeout {
  explicit ScopedTimeout(const char* ms) {
    setenv("NLCCL_TIMEOUT_MS", ms, 1);
    resetParams();
  }
  ~ScopedTimeout() {
    unsetenv("NLCCL_TIMEOUT_MS");
    resetParams();
  }
};

TEST(Finalize, WaitsForQueuedWorkAndReportsNoError) {
  const int p = 2;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  runRanks(p, [&](int r) {
    nlcclStream_t stream;
    ASSERT_EQ(nlcclStreamCreate(&stream), nlcclSuccess);
    std::vector<std::vector<float>> bufs(20, std::vector<float>(4096, 1.0f + r));
    for (auto& b : bufs)
      ASSERT_EQ(nlcclAllReduce(b.data(), b.data(), b.size(), nlcclFloat, nlcclSum, comms[r], stream),
                nlcclSuccess);
    // No synchronize: finalize itself waits until every queued call has run.
    EXPECT_EQ(nlcclCommFinalize(comms[r]), nlcclSuccess);
    for (auto& b : bufs) EXPECT_EQ(b[4095], 3.0f) << "finalize returned before the work ran";
    EXPECT_EQ(nlcclStreamQuery(stream), nlcclSuccess);
    // Still a communicator until destroyed.
    int n = 0;
    EXPECT_EQ(nlcclCommCount(comms[r], &n), nlcclSuccess);
    EXPECT_EQ(n, p);
    EXPECT_EQ(nlcclCommDestroy(comms[r]), nlcclSuccess);
    EXPECT_EQ(nlcclStreamDestroy(stream), nlcclSuccess);
  });
}

TEST(Finalize, ReturnsTheErrorOfQueuedWork) {
  std::vector<nlcclComm_t> comms(2);
  {
    ScopedTimeout t("300");
    ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess);
  }
  nlcclStream_t stream;
  ASSERT_EQ(nlcclStreamCreate(&stream), nlcclSuccess);
  std::vector<float> buf(64, 1.0f);
  // Rank 1 never joins: the queued all-reduce times out, and finalize reports it.
  ASSERT_EQ(nlcclAllReduce(buf.data(), buf.data(), 64, nlcclFloat, nlcclSum, comms[0], stream),
            nlcclSuccess);
  EXPECT_EQ(nlcclCommFinalize(comms[0]), nlcclTimeout);
  EXPECT_NE(std::string(nlcclGetLastError(comms[0])).find("peer 1"), std::string::npos)
      << nlcclGetLastError(comms[0]);
  for (auto c : comms) EXPECT_EQ(nlcclCommAbort(c), nlcclSuccess);
  EXPECT_EQ(nlcclStreamDestroy(stream), nlcclSuccess);
}

TEST(Finalize, RejectsANullCommunicator) {
  EXPECT_EQ(nlcclCommFinalize(nullptr), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("comm"), std::string::npos);
}

// A thread blocked in a collective whose peer never comes (the timeout is ten minutes): abort
// from another thread returns, and so does the blocked call, with RemoteError.
TEST(Abort, FromAnotherThreadUnblocksABlockedCall) {
  std::vector<nlcclComm_t> comms(2);
  {
    ScopedTimeout t("600000");
    ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess);
  }
  std::vector<float> buf(1 << 16, 1.0f);
  std::promise<void> entering;
  auto blocked = std::async(std::launch::async, [&] {
    entering.set_value();
    return nlcclAllReduce(buf.data(), buf.data(), buf.size(), nlcclFloat, nlcclSum, comms[0],
                          nullptr);
  });
  entering.get_future().wait();
  // The call is (almost surely) waiting for rank 1 by now; it cannot complete without it.
  EXPECT_EQ(blocked.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "the all-reduce returned without its peer";
  auto aborted = std::async(std::launch::async, [&] { return nlcclCommAbort(comms[0]); });
  EXPECT_EQ(within(aborted, seconds(20), "nlcclCommAbort"), nlcclSuccess);
  EXPECT_EQ(within(blocked, seconds(20), "the blocked nlcclAllReduce"), nlcclRemoteError);
  EXPECT_EQ(nlcclCommAbort(comms[1]), nlcclSuccess);
}

// The same with the blocked call queued on a stream: synchronize returns, with RemoteError.
TEST(Abort, FromAnotherThreadFailsWorkOnAStream) {
  std::vector<nlcclComm_t> comms(2);
  {
    ScopedTimeout t("600000");
    ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess);
  }
  nlcclStream_t stream;
  ASSERT_EQ(nlcclStreamCreate(&stream), nlcclSuccess);
  std::vector<float> buf(1 << 16, 1.0f);
  ASSERT_EQ(nlcclAllReduce(buf.data(), buf.data(), buf.size(), nlcclFloat, nlcclSum, comms[0],
                           stream),
            nlcclSuccess);
  auto synced = std::async(std::launch::async, [&] { return nlcclStreamSynchronize(stream); });
  EXPECT_EQ(synced.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  auto aborted = std::async(std::launch::async, [&] { return nlcclCommAbort(comms[0]); });
  EXPECT_EQ(within(aborted, seconds(20), "nlcclCommAbort"), nlcclSuccess);
  EXPECT_EQ(within(synced, seconds(20), "nlcclStreamSynchronize"), nlcclRemoteError);
  EXPECT_EQ(nlcclStreamDestroy(stream), nlcclSuccess);
  EXPECT_EQ(nlcclCommAbort(comms[1]), nlcclSuccess);
}

}  // namespace
}  // namespace nlccl::testing
