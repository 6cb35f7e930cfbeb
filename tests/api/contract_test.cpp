// The C API's contract, table by table: every argument's invalid values (per role where the role
// matters: root or not) return the documented code with a message naming the argument, on the
// one rank that made the bad call; then a correct collective on all ranks succeeds, so a
// rejected call changed no state. The valid edge cases (NULL where allowed, count 0) are
// accepted. Ranks are threads here; tests/multirank/process_test.cpp repeats the "rejected call
// on one rank, then a good collective" sequence with processes over shm.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/threads.hpp"
#include "nlccl.h"

namespace {

using nlccl::testing::runRanks;

constexpr int kRanks = 3;
constexpr size_t kHuge = SIZE_MAX / 2;  // any element size overflows the buffer's byte count

/// What a rank's call gets: its communicator and buffers of 64 floats (send and receive).
struct Ctx {
  nlcclComm_t comm;
  int rank;
  float* send;
  float* recv;
};

struct BadCall {
  std::string what;  ///< test name
  int who;           ///< the rank that makes the call (-1: every rank)
  nlcclResult_t code;
  const char* names;  ///< what the message must contain (the argument)
  std::function<nlcclResult_t(const Ctx&)> call;
};

/// Runs `bad` (on its ranks) and then a correct all-reduce on all ranks; the rejected call must
/// return its code with a message naming the argument, and the all-reduce must succeed.
void expectHarmless(const BadCall& bad) {
  SCOPED_TRACE(bad.what);
  std::vector<nlcclComm_t> comms(kRanks);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), kRanks, nullptr), nlcclSuccess);
  runRanks(kRanks, [&](int r) {
    std::vector<float> send(64 * kRanks, 1.0f + r), recv(64 * kRanks, 0.0f);
    Ctx c{comms[r], r, send.data(), recv.data()};
    if (bad.who < 0 || bad.who == r) {
      EXPECT_EQ(bad.call(c), bad.code) << "rank " << r;
      const std::string msg = nlcclGetLastError(comms[r]);
      EXPECT_NE(msg.find(bad.names), std::string::npos) << "rank " << r << ": " << msg;
    }
    std::vector<float> x(5, 1.0f + r), y(5, 0.0f);
    EXPECT_EQ(nlcclAllReduce(x.data(), y.data(), 5, nlcclFloat, nlcclSum, comms[r], nullptr),
              nlcclSuccess)
        << "rank " << r << ": the communicator is broken after a rejected call";
    EXPECT_EQ(y[4], 6.0f) << "rank " << r;
  });
  for (auto cm : comms) EXPECT_EQ(nlcclCommDestroy(cm), nlcclSuccess);
}

const nlcclDataType_t kBadType = static_cast<nlcclDataType_t>(nlcclNumTypes);
const nlcclDataType_t kNegType = static_cast<nlcclDataType_t>(-1);
const nlcclRedOp_t kBadOp = static_cast<nlcclRedOp_t>(nlcclNumOps);
const nlcclRedOp_t kNegOp = static_cast<nlcclRedOp_t>(-1);

std::vector<BadCall> collectiveCases() {
  std::vector<BadCall> v;
  // All-reduce: every argument.
  v.push_back({"allreduce null sendbuff", 1, nlcclInvalidArgument, "sendbuff",
               [](const Ctx& c) { return nlcclAllReduce(nullptr, c.recv, 4, nlcclFloat, nlcclSum, c.comm, nullptr); }});
  v.push_back({"allreduce null recvbuff", 1, nlcclInvalidArgument, "recvbuff",
               [](const Ctx& c) { return nlcclAllReduce(c.send, nullptr, 4, nlcclFloat, nlcclSum, c.comm, nullptr); }});
  v.push_back({"allreduce bad type", 1, nlcclInvalidArgument, "datatype",
               [](const Ctx& c) { return nlcclAllReduce(c.send, c.recv, 4, kBadType, nlcclSum, c.comm, nullptr); }});
  v.push_back({"allreduce negative type", 1, nlcclInvalidArgument, "datatype",
               [](const Ctx& c) { return nlcclAllReduce(c.send, c.recv, 4, kNegType, nlcclSum, c.comm, nullptr); }});
  v.push_back({"allreduce bad op", 1, nlcclInvalidArgument, "op",
               [](const Ctx& c) { return nlcclAllReduce(c.send, c.recv, 4, nlcclFloat, kBadOp, c.comm, nullptr); }});
  v.push_back({"allreduce negative op", 1, nlcclInvalidArgument, "op",
               [](const Ctx& c) { return nlcclAllReduce(c.send, c.recv, 4, nlcclFloat, kNegOp, c.comm, nullptr); }});
  v.push_back({"allreduce count overflow", 1, nlcclInvalidArgument, "count",
               [](const Ctx& c) { return nlcclAllReduce(c.send, c.recv, kHuge, nlcclFloat, nlcclSum, c.comm, nullptr); }});
  v.push_back({"allreduce partial overlap", 1, nlcclInvalidArgument, "overlap",
               [](const Ctx& c) { return nlcclAllReduce(c.send, c.send + 1, 4, nlcclFloat, nlcclSum, c.comm, nullptr); }});
  // Broadcast: sendbuff matters at the root only, recvbuff everywhere.
  v.push_back({"broadcast root null sendbuff", 0, nlcclInvalidArgument, "sendbuff",
               [](const Ctx& c) { return nlcclBroadcast(nullptr, c.recv, 4, nlcclFloat, 0, c.comm, nullptr); }});
  v.push_back({"broadcast non-root null recvbuff", 1, nlcclInvalidArgument, "recvbuff",
               [](const Ctx& c) { return nlcclBroadcast(c.send, nullptr, 4, nlcclFloat, 0, c.comm, nullptr); }});
  v.push_back({"broadcast root out of range", 1, nlcclInvalidArgument, "root",
               [](const Ctx& c) { return nlcclBroadcast(c.send, c.recv, 4, nlcclFloat, kRanks, c.comm, nullptr); }});
  v.push_back({"broadcast negative root", 1, nlcclInvalidArgument, "root",
               [](const Ctx& c) { return nlcclBroadcast(c.send, c.recv, 4, nlcclFloat, -1, c.comm, nullptr); }});
  v.push_back({"broadcast bad type", 1, nlcclInvalidArgument, "datatype",
               [](const Ctx& c) { return nlcclBroadcast(c.send, c.recv, 4, kBadType, 0, c.comm, nullptr); }});
  // Reduce: recvbuff matters at the root only, sendbuff everywhere.
  v.push_back({"reduce non-root null sendbuff", 1, nlcclInvalidArgument, "sendbuff",
               [](const Ctx& c) { return nlcclReduce(nullptr, c.recv, 4, nlcclFloat, nlcclSum, 0, c.comm, nullptr); }});
  v.push_back({"reduce root null recvbuff", 0, nlcclInvalidArgument, "recvbuff",
               [](const Ctx& c) { return nlcclReduce(c.send, nullptr, 4, nlcclFloat, nlcclSum, 0, c.comm, nullptr); }});
  v.push_back({"reduce root out of range", 1, nlcclInvalidArgument, "root",
               [](const Ctx& c) { return nlcclReduce(c.send, c.recv, 4, nlcclFloat, nlcclSum, 7, c.comm, nullptr); }});
  v.push_back({"reduce bad op", 1, nlcclInvalidArgument, "op",
               [](const Ctx& c) { return nlcclReduce(c.send, c.recv, 4, nlcclFloat, kBadOp, 0, c.comm, nullptr); }});
  // All-gather and reduce-scatter: their in-place layouts are the only overlaps allowed.
  v.push_back({"allgather null recvbuff", 1, nlcclInvalidArgument, "recvbuff",
               [](const Ctx& c) { return nlcclAllGather(c.send, nullptr, 4, nlcclFloat, c.comm, nullptr); }});
  v.push_back({"allgather null sendbuff", 1, nlcclInvalidArgument, "sendbuff",
               [](const Ctx& c) { return nlcclAllGather(nullptr, c.recv, 4, nlcclFloat, c.comm, nullptr); }});
  v.push_back({"allgather count overflow", 1, nlcclInvalidArgument, "count",
               [](const Ctx& c) { return nlcclAllGather(c.send, c.recv, kHuge / 2, nlcclFloat, c.comm, nullptr); }});
  v.push_back({"allgather misplaced in place", 1, nlcclInvalidArgument, "recvbuff + rank*sendcount",
               [](const Ctx& c) {  // sendbuff inside recvbuff, but not at this rank's block
                 return nlcclAllGather(c.recv + 4 * ((c.rank + 1) % kRanks), c.recv, 4, nlcclFloat, c.comm, nullptr);
               }});
  v.push_back({"reducescatter null sendbuff", 1, nlcclInvalidArgument, "sendbuff",
               [](const Ctx& c) { return nlcclReduceScatter(nullptr, c.recv, 4, nlcclFloat, nlcclSum, c.comm, nullptr); }});
  v.push_back({"reducescatter null recvbuff", 1, nlcclInvalidArgument, "recvbuff",
               [](const Ctx& c) { return nlcclReduceScatter(c.send, nullptr, 4, nlcclFloat, nlcclSum, c.comm, nullptr); }});
  v.push_back({"reducescatter bad op", 1, nlcclInvalidArgument, "op",
               [](const Ctx& c) { return nlcclReduceScatter(c.send, c.recv, 4, nlcclFloat, kNegOp, c.comm, nullptr); }});
  v.push_back({"reducescatter misplaced in place", 1, nlcclInvalidArgument, "sendbuff + rank*recvcount",
               [](const Ctx& c) {
                 return nlcclReduceScatter(c.send, c.send + 4 * ((c.rank + 1) % kRanks), 4, nlcclFloat, nlcclSum, c.comm, nullptr);
               }});
  // Every other overlap of all-gather and reduce-scatter buffers (count 4, 3 ranks: the
  // all-gather output and the reduce-scatter input hold 12 elements).
  const char* kAgLayout = "recvbuff + rank*sendcount";
  const char* kRsLayout = "sendbuff + rank*recvcount";
  v.push_back({"allgather sendbuff one element into its block", 1, nlcclInvalidArgument, kAgLayout,
               [](const Ctx& c) { return nlcclAllGather(c.recv + 4 * c.rank + 1, c.recv, 4, nlcclFloat, c.comm, nullptr); }});
  v.push_back({"allgather sendbuff equals recvbuff off rank 0", 1, nlcclInvalidArgument, kAgLayout,
               [](const Ctx& c) { return nlcclAllGather(c.recv, c.recv, 4, nlcclFloat, c.comm, nullptr); }});
  v.push_back({"allgather sendbuff overlaps the start of recvbuff", 1, nlcclInvalidArgument, kAgLayout,
               [](const Ctx& c) { return nlcclAllGather(c.send, c.send + 2, 4, nlcclFloat, c.comm, nullptr); }});
  v.push_back({"allgather sendbuff overlaps the end of recvbuff", 1, nlcclInvalidArgument, kAgLayout,
               [](const Ctx& c) { return nlcclAllGather(c.recv + 10, c.recv, 4, nlcclFloat, c.comm, nullptr); }});
  v.push_back({"reducescatter recvbuff one element into its block", 1, nlcclInvalidArgument, kRsLayout,
               [](const Ctx& c) {
                 return nlcclReduceScatter(c.send, c.send + 4 * c.rank + 1, 4, nlcclFloat, nlcclSum, c.comm, nullptr);
               }});
  v.push_back({"reducescatter recvbuff equals sendbuff off rank 0", 1, nlcclInvalidArgument, kRsLayout,
               [](const Ctx& c) { return nlcclReduceScatter(c.send, c.send, 4, nlcclFloat, nlcclSum, c.comm, nullptr); }});
  v.push_back({"reducescatter recvbuff overlaps the end of sendbuff", 1, nlcclInvalidArgument, kRsLayout,
               [](const Ctx& c) { return nlcclReduceScatter(c.send, c.send + 10, 4, nlcclFloat, nlcclSum, c.comm, nullptr); }});
  v.push_back({"reducescatter recvbuff overlaps the start of sendbuff", 1, nlcclInvalidArgument, kRsLayout,
               [](const Ctx& c) { return nlcclReduceScatter(c.send + 2, c.send, 4, nlcclFloat, nlcclSum, c.comm, nullptr); }});
  // Partial overlaps of the collectives whose only in-place layout is sendbuff == recvbuff.
  v.push_back({"broadcast root partial overlap", 0, nlcclInvalidArgument, "overlap",
               [](const Ctx& c) { return nlcclBroadcast(c.send, c.send + 1, 4, nlcclFloat, 0, c.comm, nullptr); }});
  v.push_back({"reduce root partial overlap", 0, nlcclInvalidArgument, "overlap",
               [](const Ctx& c) { return nlcclReduce(c.send, c.send + 1, 4, nlcclFloat, nlcclSum, 0, c.comm, nullptr); }});
  v.push_back({"alltoall partial overlap", 1, nlcclInvalidArgument, "overlap",
               [](const Ctx& c) { return nlcclAlltoAll(c.send, c.send + 1, 4, nlcclFloat, c.comm, nullptr); }});
  // All-to-all and all-to-all-v.
  v.push_back({"alltoall null sendbuff", 1, nlcclInvalidArgument, "sendbuff",
               [](const Ctx& c) { return nlcclAlltoAll(nullptr, c.recv, 4, nlcclFloat, c.comm, nullptr); }});
  v.push_back({"alltoall null recvbuff", 1, nlcclInvalidArgument, "recvbuff",
               [](const Ctx& c) { return nlcclAlltoAll(c.send, nullptr, 4, nlcclFloat, c.comm, nullptr); }});
  v.push_back({"alltoall bad type", 1, nlcclInvalidArgument, "datatype",
               [](const Ctx& c) { return nlcclAlltoAll(c.send, c.recv, 4, kBadType, c.comm, nullptr); }});
  static const size_t counts[kRanks] = {4, 4, 4}, displs[kRanks] = {0, 4, 8};
  static const size_t selfOdd[kRanks] = {4, 5, 4};  // rank 1 sends itself 5, expects 4
  static const size_t huge[kRanks] = {4, kHuge, 4};
  for (const char* arg : {"sendcounts", "sdispls", "recvcounts", "rdispls"}) {
    const std::string a = arg;
    v.push_back({"alltoallv null " + a, 1, nlcclInvalidArgument, arg, [a](const Ctx& c) {
                   return nlcclAlltoAllv(c.send, a == "sendcounts" ? nullptr : counts,
                                         a == "sdispls" ? nullptr : displs, c.recv,
                                         a == "recvcounts" ? nullptr : counts,
                                         a == "rdispls" ? nullptr : displs, nlcclFloat, c.comm, nullptr);
                 }});
  }
  v.push_back({"alltoallv null sendbuff", 1, nlcclInvalidArgument, "sendbuff", [](const Ctx& c) {
                 return nlcclAlltoAllv(nullptr, counts, displs, c.recv, counts, displs, nlcclFloat, c.comm, nullptr);
               }});
  v.push_back({"alltoallv count to itself differs", 1, nlcclInvalidArgument, "itself", [](const Ctx& c) {
                 return nlcclAlltoAllv(c.send, selfOdd, displs, c.recv, counts, displs, nlcclFloat, c.comm, nullptr);
               }});
  v.push_back({"alltoallv count overflow", 1, nlcclInvalidArgument, "sendcounts[r]", [](const Ctx& c) {
                 return nlcclAlltoAllv(c.send, huge, displs, c.recv, counts, displs, nlcclFloat, c.comm, nullptr);
               }});
  v.push_back({"alltoallv in place", 1, nlcclInvalidArgument, "same buffer", [](const Ctx& c) {
                 return nlcclAlltoAllv(c.send, counts, displs, c.send, counts, displs, nlcclFloat, c.comm, nullptr);
               }});
  v.push_back({"alltoallv partial overlap", 1, nlcclInvalidArgument, "overlaps", [](const Ctx& c) {
                 return nlcclAlltoAllv(c.send, counts, displs, c.send + 2, counts, displs, nlcclFloat, c.comm, nullptr);
               }});
  // Empty calls (count 0) end before the general path, after the same checks.
  v.push_back({"empty allreduce bad type", 1, nlcclInvalidArgument, "datatype",
               [](const Ctx& c) { return nlcclAllReduce(c.send, c.recv, 0, kBadType, nlcclSum, c.comm, nullptr); }});
  v.push_back({"empty allreduce negative op", 1, nlcclInvalidArgument, "op",
               [](const Ctx& c) { return nlcclAllReduce(c.send, c.recv, 0, nlcclFloat, kNegOp, c.comm, nullptr); }});
  v.push_back({"empty broadcast root out of range", 1, nlcclInvalidArgument, "root",
               [](const Ctx& c) { return nlcclBroadcast(c.send, c.recv, 0, nlcclFloat, kRanks, c.comm, nullptr); }});
  v.push_back({"empty reduce bad op", 1, nlcclInvalidArgument, "op",
               [](const Ctx& c) { return nlcclReduce(c.send, c.recv, 0, nlcclFloat, kBadOp, 0, c.comm, nullptr); }});
  v.push_back({"empty reduce negative root", 1, nlcclInvalidArgument, "root",
               [](const Ctx& c) { return nlcclReduce(c.send, c.recv, 0, nlcclFloat, nlcclSum, -1, c.comm, nullptr); }});
  v.push_back({"empty allgather negative type", 1, nlcclInvalidArgument, "datatype",
               [](const Ctx& c) { return nlcclAllGather(c.send, c.recv, 0, kNegType, c.comm, nullptr); }});
  v.push_back({"empty reducescatter bad op", 1, nlcclInvalidArgument, "op",
               [](const Ctx& c) { return nlcclReduceScatter(c.send, c.recv, 0, nlcclFloat, kBadOp, c.comm, nullptr); }});
  v.push_back({"empty alltoall bad type", 1, nlcclInvalidArgument, "datatype",
               [](const Ctx& c) { return nlcclAlltoAll(c.send, c.recv, 0, kBadType, c.comm, nullptr); }});
  v.push_back({"empty gather root out of range", 1, nlcclInvalidArgument, "root",
               [](const Ctx& c) { return nlcclGather(c.send, c.recv, 0, nlcclFloat, kRanks, c.comm, nullptr); }});
  v.push_back({"empty scatter negative root", 1, nlcclInvalidArgument, "root",
               [](const Ctx& c) { return nlcclScatter(c.send, c.recv, 0, nlcclFloat, -1, c.comm, nullptr); }});
  // Point to point.
  v.push_back({"send null buffer", 1, nlcclInvalidArgument, "sendbuff",
               [](const Ctx& c) { return nlcclSend(nullptr, 4, nlcclFloat, 0, c.comm, nullptr); }});
  v.push_back({"send peer out of range", 1, nlcclInvalidArgument, "peer",
               [](const Ctx& c) { return nlcclSend(c.send, 4, nlcclFloat, kRanks, c.comm, nullptr); }});
  v.push_back({"send bad type", 1, nlcclInvalidArgument, "datatype",
               [](const Ctx& c) { return nlcclSend(c.send, 4, kBadType, 0, c.comm, nullptr); }});
  v.push_back({"recv null buffer", 1, nlcclInvalidArgument, "recvbuff",
               [](const Ctx& c) { return nlcclRecv(nullptr, 4, nlcclFloat, 0, c.comm, nullptr); }});
  v.push_back({"recv negative peer", 1, nlcclInvalidArgument, "peer",
               [](const Ctx& c) { return nlcclRecv(c.recv, 4, nlcclFloat, -1, c.comm, nullptr); }});
  v.push_back({"recv count overflow", 1, nlcclInvalidArgument, "count",
               [](const Ctx& c) { return nlcclRecv(c.recv, kHuge, nlcclFloat, 0, c.comm, nullptr); }});
  // Queries on a live communicator with bad output pointers.
  v.push_back({"count null output", 1, nlcclInvalidArgument, "count",
               [](const Ctx& c) { return nlcclCommCount(c.comm, nullptr); }});
  v.push_back({"user rank null output", 1, nlcclInvalidArgument, "rank",
               [](const Ctx& c) { return nlcclCommUserRank(c.comm, nullptr); }});
  v.push_back({"async error null output", 1, nlcclInvalidArgument, "asyncError",
               [](const Ctx& c) { return nlcclCommGetAsyncError(c.comm, nullptr); }});
  v.push_back({"split null newcomm", -1, nlcclInvalidArgument, "newcomm",
               [](const Ctx& c) { return nlcclCommSplit(c.comm, 0, 0, nullptr, nullptr); }});
  return v;
}

class Contract : public ::testing::TestWithParam<BadCall> {};
TEST_P(Contract, RejectedCallNamesTheArgumentAndChangesNothing) { expectHarmless(GetParam()); }
std::string caseName(const ::testing::TestParamInfo<BadCall>& info) {
  std::string s = info.param.what;
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}
INSTANTIATE_TEST_SUITE_P(EveryEntryPoint, Contract, ::testing::ValuesIn(collectiveCases()),
                         caseName);

// NULL where allowed, count 0: accepted, and the collectives complete.
TEST(Contract, ValidEdgeCasesAreAccepted) {
  std::vector<nlcclComm_t> comms(kRanks);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), kRanks, nullptr), nlcclSuccess);
  runRanks(kRanks, [&](int r) {
    nlcclComm_t c = comms[r];
    std::vector<float> buf(8, 1.0f + r), out(8 * kRanks, 0.0f);
    EXPECT_EQ(nlcclAllReduce(nullptr, nullptr, 0, nlcclFloat, nlcclSum, c, nullptr), nlcclSuccess);
    EXPECT_EQ(nlcclAllGather(nullptr, nullptr, 0, nlcclFloat, c, nullptr), nlcclSuccess);
    EXPECT_EQ(nlcclReduceScatter(nullptr, nullptr, 0, nlcclFloat, nlcclSum, c, nullptr), nlcclSuccess);
    EXPECT_EQ(nlcclAlltoAll(nullptr, nullptr, 0, nlcclFloat, c, nullptr), nlcclSuccess);
    // Broadcast: only the root's sendbuff is read.
    EXPECT_EQ(nlcclBroadcast(r == 0 ? buf.data() : nullptr, out.data(), 8, nlcclFloat, 0, c, nullptr),
              nlcclSuccess);
    EXPECT_EQ(out[7], 1.0f);
    // Reduce: only the root's recvbuff is written.
    EXPECT_EQ(nlcclReduce(buf.data(), r == 2 ? out.data() : nullptr, 8, nlcclFloat, nlcclSum, 2, c,
                          nullptr),
              nlcclSuccess);
    if (r == 2) {
      EXPECT_EQ(out[0], 6.0f);
    }
    // Point to point of 0 elements with NULL buffers, in a group so the ring cannot deadlock.
    EXPECT_EQ(nlcclGroupStart(), nlcclSuccess);
    EXPECT_EQ(nlcclSend(nullptr, 0, nlcclFloat, (r + 1) % kRanks, c, nullptr), nlcclSuccess);
    EXPECT_EQ(nlcclRecv(nullptr, 0, nlcclFloat, (r + kRanks - 1) % kRanks, c, nullptr), nlcclSuccess);
    EXPECT_EQ(nlcclGroupEnd(), nlcclSuccess);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

// An empty collective is a no-op on the rank that calls it, as in NCCL: it takes no sequence
// number, so a rank that makes extra empty calls still matches its peers' next real one (which
// would otherwise wait for a message the others tag differently, until the timeout).
TEST(Contract, EmptyCollectivesAreLocalNoOps) {
  std::vector<nlcclComm_t> comms(kRanks);
  setenv("NLCCL_TIMEOUT_MS", "5000", 1);  // a mismatch fails in seconds instead of minutes
  ASSERT_EQ(nlcclCommInitAll(comms.data(), kRanks, nullptr), nlcclSuccess);
  unsetenv("NLCCL_TIMEOUT_MS");
  runRanks(kRanks, [&](int r) {
    nlcclComm_t c = comms[r];
    nlcclStream_t s;
    ASSERT_EQ(nlcclStreamCreate(&s), nlcclSuccess);
    if (r == 0) {
      float x = 0;
      EXPECT_EQ(nlcclAllReduce(&x, &x, 0, nlcclFloat, nlcclSum, c, nullptr), nlcclSuccess);
      EXPECT_EQ(nlcclAllGather(&x, &x, 0, nlcclFloat, c, s), nlcclSuccess);
      EXPECT_EQ(nlcclBroadcast(&x, &x, 0, nlcclFloat, 1, c, s), nlcclSuccess);
    }
    std::vector<float> v(5, 1.0f + r);
    EXPECT_EQ(nlcclAllReduce(v.data(), v.data(), v.size(), nlcclFloat, nlcclSum, c, s),
              nlcclSuccess);
    EXPECT_EQ(nlcclStreamSynchronize(s), nlcclSuccess);
    const float sum = kRanks * (kRanks + 1) / 2.0f;
    for (float x : v) EXPECT_EQ(x, sum);
    EXPECT_EQ(nlcclStreamDestroy(s), nlcclSuccess);
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

TEST(Contract, InitRejectsRankCountsItCannotServe) {
  nlcclComm_t comms[2];
  EXPECT_EQ(nlcclCommInitAll(comms, INT_MAX, nullptr), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("ndev"), std::string::npos);
  EXPECT_EQ(nlcclCommInitAll(comms, 0, nullptr), nlcclInvalidArgument);
  EXPECT_EQ(nlcclCommInitAll(nullptr, 2, nullptr), nlcclInvalidArgument);
  nlcclUniqueId id{};
  nlcclComm_t c;
  EXPECT_EQ(nlcclCommInitRank(&c, INT_MAX, id, 0), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("nranks"), std::string::npos);
  EXPECT_EQ(nlcclCommInitRank(&c, 2, id, 2), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("rank"), std::string::npos);
  EXPECT_EQ(nlcclCommInitRank(nullptr, 2, id, 0), nlcclInvalidArgument);
}

}  // namespace
