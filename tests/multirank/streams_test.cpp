// Collectives queued on streams (each rank's own stream, run by its progress thread).
#include <gtest/gtest.h>

#include <memory>

#include "common/threads.hpp"
#include "util/params.hpp"
#include "multirank/collective_case.hpp"

namespace nlccl::testing {
namespace {

TEST(StreamsTest, HundredQueuedCollectivesThenSynchronize) {
  const int p = 4;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  const Collective kinds[] = {Collective::AllReduce, Collective::AllGather,
                              Collective::ReduceScatter, Collective::Broadcast,
                              Collective::AllToAll};
  runRanks(p, [&](int r) {
    nlcclStream_t stream;
    ASSERT_EQ(nlcclStreamCreate(&stream), nlcclSuccess);
    std::vector<std::unique_ptr<CollBuffers>> bufs;
    for (int i = 0; i < 100; ++i) {
      CollCase c{kinds[i % 5], i % 2 ? DataType::Float32 : DataType::Int32, RedOp::Sum,
                 static_cast<size_t>(100 + i), i % p, i % 3 == 0};
      bufs.push_back(std::make_unique<CollBuffers>(c, r, p));
      ASSERT_EQ(bufs.back()->issue(comms[r], stream), nlcclSuccess);
    }
    nlcclResult_t q = nlcclStreamQuery(stream);
    EXPECT_TRUE(q == nlcclSuccess || q == nlcclInProgress);
    ASSERT_EQ(nlcclStreamSynchronize(stream), nlcclSuccess);
    EXPECT_EQ(nlcclStreamQuery(stream), nlcclSuccess);
    for (auto& b : bufs) {
      std::string err = b->check();
      EXPECT_TRUE(err.empty()) << err;
    }
    EXPECT_EQ(nlcclStreamDestroy(stream), nlcclSuccess);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

TEST(StreamsTest, ErrorSurfacesAtSynchronizeAndAsyncError) {
  // Rank 1 never joins: rank 0's queued all-reduce times out, and the stream reports it.
  std::vector<nlcclComm_t> comms(2);
  setenv("NLCCL_TIMEOUT_MS", "300", 1);
  resetParams();
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess);
  unsetenv("NLCCL_TIMEOUT_MS");
  resetParams();
  nlcclStream_t stream;
  ASSERT_EQ(nlcclStreamCreate(&stream), nlcclSuccess);
  std::vector<float> buf(16, 1.0f);
  ASSERT_EQ(nlcclAllReduce(buf.data(), buf.data(), 16, nlcclFloat, nlcclSum, comms[0], stream),
            nlcclSuccess);
  EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclTimeout);
  nlcclResult_t async = nlcclSuccess;
  EXPECT_EQ(nlcclCommGetAsyncError(comms[0], &async), nlcclSuccess);
  EXPECT_EQ(async, nlcclTimeout);
  EXPECT_NE(std::string(nlcclGetLastError(comms[0])).find("peer 1"), std::string::npos)
      << nlcclGetLastError(comms[0]);
  // The error is sticky: asking again still reports it, until the communicator is aborted.
  EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclTimeout);
  EXPECT_EQ(nlcclStreamQuery(stream), nlcclTimeout);
  EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclTimeout);
  for (auto c : comms) EXPECT_EQ(nlcclCommAbort(c), nlcclSuccess);
  EXPECT_EQ(nlcclStreamQuery(stream), nlcclSuccess);
  EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclSuccess);
  // The stream then serves a new communicator.
  std::vector<nlcclComm_t> fresh(2);
  ASSERT_EQ(nlcclCommInitAll(fresh.data(), 2, nullptr), nlcclSuccess);
  runRanks(2, [&](int r) {
    nlcclStream_t s = stream;
    nlcclStream_t own = nullptr;
    if (r == 1) {
      ASSERT_EQ(nlcclStreamCreate(&own), nlcclSuccess);
    }
    std::vector<float> x(16, 1.0f);
    ASSERT_EQ(nlcclAllReduce(x.data(), x.data(), 16, nlcclFloat, nlcclSum, fresh[r],
                             r == 0 ? s : own),
              nlcclSuccess);
    EXPECT_EQ(nlcclStreamSynchronize(r == 0 ? s : own), nlcclSuccess);
    EXPECT_EQ(x[15], 2.0f);
    if (own) {
      EXPECT_EQ(nlcclStreamDestroy(own), nlcclSuccess);
    }
  });
  for (auto c : fresh) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
  EXPECT_EQ(nlcclStreamDestroy(stream), nlcclSuccess);
}

/// Two communicators (one process, two ranks) made under NLCCL_CHECK, whose cross-rank check
/// turns a mismatched call into a non-fatal InvalidUsage.
std::vector<nlcclComm_t> checkedComms() {
  setenv("NLCCL_CHECK", "1", 1);
  std::vector<nlcclComm_t> comms(2);
  EXPECT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess);
  unsetenv("NLCCL_CHECK");
  return comms;
}

// A non-fatal error (a mismatched call under NLCCL_CHECK leaves the communicator usable) is
// reported once, not kept.
TEST(StreamsTest, NonFatalErrorsAreReportedOnce) {
  const std::vector<nlcclComm_t> comms = checkedComms();
  runRanks(2, [&](int r) {
    nlcclStream_t stream;
    ASSERT_EQ(nlcclStreamCreate(&stream), nlcclSuccess);
    std::vector<float> x(16, 1.0f);
    ASSERT_EQ(nlcclAllReduce(x.data(), x.data(), r == 0 ? 16 : 15, nlcclFloat, nlcclSum, comms[r],
                             stream),
              nlcclSuccess);
    EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclInvalidUsage);
    EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclSuccess);
    ASSERT_EQ(nlcclAllReduce(x.data(), x.data(), 16, nlcclFloat, nlcclSum, comms[r], stream),
              nlcclSuccess);
    EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclSuccess);
    EXPECT_EQ(x[0], 2.0f);
    EXPECT_EQ(nlcclStreamDestroy(stream), nlcclSuccess);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

// A synchronize behind many queued calls runs them in batches (core/stream.cpp): a failed one in
// the middle is reported once, and the calls queued before and after it still run.
TEST(StreamsTest, AFailureInsideABatchIsReportedAndTheRestRun) {
  const std::vector<nlcclComm_t> comms = checkedComms();
  runRanks(2, [&](int r) {
    nlcclStream_t stream;
    ASSERT_EQ(nlcclStreamCreate(&stream), nlcclSuccess);
    std::vector<std::vector<float>> x(9, std::vector<float>(16, 1.0f));
    for (int i = 0; i < 9; ++i) {
      const size_t count = i == 4 && r == 0 ? 15 : 16;  // the fifth disagrees across ranks
      ASSERT_EQ(nlcclAllReduce(x[i].data(), x[i].data(), count, nlcclFloat, nlcclSum, comms[r],
                               stream),
                nlcclSuccess);
    }
    EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclInvalidUsage);
    EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclSuccess);
    for (int i = 0; i < 9; ++i) {
      if (i != 4) {
        EXPECT_EQ(x[i][0], 2.0f) << "call " << i;
      }
    }
    EXPECT_EQ(nlcclStreamDestroy(stream), nlcclSuccess);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

}  // namespace
}  // namespace nlccl::testing

namespace nlccl::testing {
namespace {

TEST(StreamsTest, DestroyWaitsForQueuedWork) {
  const int p = 2;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  runRanks(p, [&](int r) {
    nlcclStream_t stream;
    ASSERT_EQ(nlcclStreamCreate(&stream), nlcclSuccess);
    std::vector<std::vector<float>> bufs(20, std::vector<float>(4096, 1.0f));
    for (auto& b : bufs)
      ASSERT_EQ(nlcclAllReduce(b.data(), b.data(), b.size(), nlcclFloat, nlcclSum, comms[r], stream),
                nlcclSuccess);
    // No synchronize: destroy itself must wait for the queued calls, not free the communicator
    // under the stream's thread.
    EXPECT_EQ(nlcclCommDestroy(comms[r]), nlcclSuccess);
    EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclSuccess);
    for (auto& b : bufs) EXPECT_EQ(b[4095], 2.0f);
    EXPECT_EQ(nlcclStreamDestroy(stream), nlcclSuccess);
  });
}

TEST(StreamsTest, AbortReturnsPromptlyWithWorkInFlight) {
  // Rank 1 never joins: rank 0's queued all-reduce waits (the timeout is the default 300 s), and
  // abort must still return at once, failing that work.
  std::vector<nlcclComm_t> comms(2);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess);
  nlcclStream_t stream;
  ASSERT_EQ(nlcclStreamCreate(&stream), nlcclSuccess);
  std::vector<float> a(1024, 1.0f), b(1024, 1.0f);
  ASSERT_EQ(nlcclAllReduce(a.data(), a.data(), 1024, nlcclFloat, nlcclSum, comms[0], stream),
            nlcclSuccess);
  ASSERT_EQ(nlcclAllReduce(b.data(), b.data(), 1024, nlcclFloat, nlcclSum, comms[0], stream),
            nlcclSuccess);
  EXPECT_EQ(nlcclCommAbort(comms[0]), nlcclSuccess);
  // Both calls failed (the running one at the transport, the queued one when it came up): the
  // stream reports it once, as RemoteError, and then the aborted communicator's error is gone.
  EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclRemoteError);
  EXPECT_EQ(nlcclStreamSynchronize(stream), nlcclSuccess);
  EXPECT_EQ(nlcclStreamDestroy(stream), nlcclSuccess);
  EXPECT_EQ(nlcclCommAbort(comms[1]), nlcclSuccess);
}

}  // namespace
}  // namespace nlccl::testing
