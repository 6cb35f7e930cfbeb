// Groups: one thread driving every rank, grouped send/recv in any order, communicator split.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <numeric>
#include <string>

#include "common/threads.hpp"
#include "multirank/collective_case.hpp"

namespace nlccl::testing {
namespace {

TEST(GroupTest, OneThreadDrivesAllRanks) {
  const int p = 4;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  CollCase c{Collective::AllReduce, DataType::Float32, RedOp::Sum, 5000, 0, false};
  std::vector<std::unique_ptr<CollBuffers>> bufs;
  ASSERT_EQ(nlcclGroupStart(), nlcclSuccess);
  for (int r = 0; r < p; ++r) {
    bufs.push_back(std::make_unique<CollBuffers>(c, r, p));
    ASSERT_EQ(bufs.back()->issue(comms[r]), nlcclSuccess);
  }
  ASSERT_EQ(nlcclGroupEnd(), nlcclSuccess);
  for (auto& b : bufs) EXPECT_EQ(b->check(), "");
  for (auto cm : comms) EXPECT_EQ(nlcclCommDestroy(cm), nlcclSuccess);
}

TEST(GroupTest, SendRecvInAnyOrderNeverDeadlocks) {
  const int p = 5;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  runRanks(p, [&](int r) {
    int right = (r + 1) % p, left = (r - 1 + p) % p;
    // Two messages each way to each neighbour; receives posted before sends on purpose.
    std::vector<int> toRight1(100, r * 10 + 1), toRight2(50, r * 10 + 2), toLeft(70, r * 10 + 3);
    std::vector<int> fromLeft1(100), fromLeft2(50), fromRight(70);
    ASSERT_EQ(nlcclGroupStart(), nlcclSuccess);
    ASSERT_EQ(nlcclRecv(fromLeft1.data(), 100, nlcclInt, left, comms[r], nullptr), nlcclSuccess);
    ASSERT_EQ(nlcclRecv(fromRight.data(), 70, nlcclInt, right, comms[r], nullptr), nlcclSuccess);
    ASSERT_EQ(nlcclRecv(fromLeft2.data(), 50, nlcclInt, left, comms[r], nullptr), nlcclSuccess);
    ASSERT_EQ(nlcclSend(toLeft.data(), 70, nlcclInt, left, comms[r], nullptr), nlcclSuccess);
    ASSERT_EQ(nlcclSend(toRight1.data(), 100, nlcclInt, right, comms[r], nullptr), nlcclSuccess);
    ASSERT_EQ(nlcclSend(toRight2.data(), 50, nlcclInt, right, comms[r], nullptr), nlcclSuccess);
    ASSERT_EQ(nlcclGroupEnd(), nlcclSuccess) << nlcclGetLastError(comms[r]);
    EXPECT_EQ(fromLeft1, std::vector<int>(100, left * 10 + 1));
    EXPECT_EQ(fromLeft2, std::vector<int>(50, left * 10 + 2));
    EXPECT_EQ(fromRight, std::vector<int>(70, right * 10 + 3));
  });
  for (auto cm : comms) EXPECT_EQ(nlcclCommDestroy(cm), nlcclSuccess);
}

TEST(GroupTest, UngroupedSendRecvPairs) {
  std::vector<nlcclComm_t> comms(2);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess);
  runRanks(2, [&](int r) {
    std::vector<double> buf(1000);
    if (r == 0) {
      std::iota(buf.begin(), buf.end(), 0.0);
      ASSERT_EQ(nlcclSend(buf.data(), 1000, nlcclDouble, 1, comms[0], nullptr), nlcclSuccess);
    } else {
      ASSERT_EQ(nlcclRecv(buf.data(), 1000, nlcclDouble, 0, comms[1], nullptr), nlcclSuccess);
      EXPECT_EQ(buf[999], 999.0);
    }
  });
  for (auto cm : comms) EXPECT_EQ(nlcclCommDestroy(cm), nlcclSuccess);
}

TEST(GroupTest, SplitIntoEvenAndOdd) {
  const int p = 6;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  runRanks(p, [&](int r) {
    nlcclComm_t sub = nullptr;
    // Key reverses the order: new rank = (number in group - 1) - old index.
    ASSERT_EQ(nlcclCommSplit(comms[r], r % 2, -r, &sub, nullptr), nlcclSuccess);
    int n = 0, me = -1;
    ASSERT_EQ(nlcclCommCount(sub, &n), nlcclSuccess);
    ASSERT_EQ(nlcclCommUserRank(sub, &me), nlcclSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(me, 2 - r / 2);
    int v = r, sum = 0;
    ASSERT_EQ(nlcclAllReduce(&v, &sum, 1, nlcclInt, nlcclSum, sub, nullptr), nlcclSuccess);
    EXPECT_EQ(sum, r % 2 ? 1 + 3 + 5 : 0 + 2 + 4);
    nlcclComm_t none = reinterpret_cast<nlcclComm_t>(1);
    ASSERT_EQ(nlcclCommSplit(comms[r], r == 0 ? -1 : 7, 0, &none, nullptr), nlcclSuccess);
    if (r == 0) {
      EXPECT_EQ(none, nullptr);
    }
    EXPECT_EQ(nlcclCommDestroy(none), nlcclSuccess);
    EXPECT_EQ(nlcclCommDestroy(sub), nlcclSuccess);
  });
  for (auto cm : comms) EXPECT_EQ(nlcclCommDestroy(cm), nlcclSuccess);
}

}  // namespace
}  // namespace nlccl::testing

namespace nlccl::testing {
namespace {

TEST(CheckTest, MismatchedCallsAreReportedOnEveryRank) {
  setenv("NLCCL_CHECK", "1", 1);
  std::vector<nlcclComm_t> comms(3);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 3, nullptr), nlcclSuccess);
  unsetenv("NLCCL_CHECK");
  runRanks(3, [&](int r) {
    std::vector<float> buf(64, 1.0f);
    // Rank 2 passes another count: every rank must fail, naming rank 2 (itself included: the
    // others agree, so it is the odd one), and then go on.
    size_t count = r == 2 ? 63 : 64;
    EXPECT_EQ(nlcclAllReduce(buf.data(), buf.data(), count, nlcclFloat, nlcclSum, comms[r], nullptr),
              nlcclInvalidUsage);
    std::string msg = nlcclGetLastError(comms[r]);
    EXPECT_NE(msg.find("rank 2 called"), std::string::npos) << msg;
    EXPECT_NE(msg.find("count 63"), std::string::npos) << msg;
    ASSERT_EQ(nlcclAllReduce(buf.data(), buf.data(), 64, nlcclFloat, nlcclSum, comms[r], nullptr),
              nlcclSuccess);
    EXPECT_EQ(buf[0], 3.0f);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

// Every field of the signature: one rank (the first or the last) calls with another type, op,
// root or collective; every rank fails with InvalidUsage naming that rank and what it called,
// and the communicator goes on.
struct Mismatch {
  const char* what;
  const char* named;  ///< how the odd rank's call is described
  std::function<nlcclResult_t(bool odd, float* buf, nlcclComm_t comm)> call;
};

TEST(CheckTest, EachFieldIsComparedAndTheOddRankNamed) {
  const std::vector<Mismatch> cases = {
      {"type", "type int32",
       [](bool odd, float* buf, nlcclComm_t c) {
         return nlcclAllReduce(buf, buf, 16, odd ? nlcclInt32 : nlcclFloat, nlcclSum, c, nullptr);
       }},
      {"op", "op max",
       [](bool odd, float* buf, nlcclComm_t c) {
         return nlcclAllReduce(buf, buf, 16, nlcclFloat, odd ? nlcclMax : nlcclSum, c, nullptr);
       }},
      {"root", "root 1",
       [](bool odd, float* buf, nlcclComm_t c) {
         return nlcclBroadcast(buf, buf, 16, nlcclFloat, odd ? 1 : 0, c, nullptr);
       }},
      {"reduce root", "root 2",
       [](bool odd, float* buf, nlcclComm_t c) {
         return nlcclReduce(buf, buf, 16, nlcclFloat, nlcclSum, odd ? 2 : 1, c, nullptr);
       }},
      {"collective", "called allgather",
       [](bool odd, float* buf, nlcclComm_t c) {
         return odd ? nlcclAllGather(buf, buf + 64, 16, nlcclFloat, c, nullptr)
                    : nlcclAllReduce(buf, buf, 16, nlcclFloat, nlcclSum, c, nullptr);
       }},
  };
  setenv("NLCCL_CHECK", "1", 1);
  std::vector<nlcclComm_t> comms(3);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 3, nullptr), nlcclSuccess);
  unsetenv("NLCCL_CHECK");
  for (const Mismatch& m : cases)
    for (int odd : {0, 2}) {
      SCOPED_TRACE(std::string(m.what) + ", odd rank " + std::to_string(odd));
      runRanks(3, [&](int r) {
        std::vector<float> buf(256, 1.0f);
        EXPECT_EQ(m.call(r == odd, buf.data(), comms[r]), nlcclInvalidUsage) << "rank " << r;
        const std::string msg = nlcclGetLastError(comms[r]);
        EXPECT_NE(msg.find("rank " + std::to_string(odd) + " called"), std::string::npos)
            << "rank " << r << ": " << msg;
        EXPECT_NE(msg.find(m.named), std::string::npos) << "rank " << r << ": " << msg;
        ASSERT_EQ(nlcclAllReduce(buf.data(), buf.data(), 8, nlcclFloat, nlcclSum, comms[r], nullptr),
                  nlcclSuccess);
        EXPECT_EQ(buf[7], 3.0f);
      });
    }
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

}  // namespace
}  // namespace nlccl::testing
