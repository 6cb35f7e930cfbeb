// Split exchanges over shm (shm.hpp, "Split exchanges"): the two ranks of an exchange pair
// (transport.hpp, Request::pairTarget) each reduce half of the message and store it in both
// targets. Through the transport: exact results and the split counter for element sizes 1-8 and
// odd counts, the two ranks holding the same bits, with plain and with streaming stores; no split
// (and still exact) when a rank's target is not nlcclMemAlloc memory, below
// NLCCL_SHM_SPLIT_BYTES, with it 0, or when the receive is posted before its send. Through
// nlcclAllReduce: recursive doubling at 2 and 4 ranks, and streamed at 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/reduce.hpp"
#include "multirank/fork_ranks.hpp"
#include "multirank/memalloc_allreduce.hpp"
#include "multirank/shm_harness.hpp"
#include "nlccl.h"
#include "transports/shm/shm.hpp"
#include "util/shared_memory.hpp"

namespace nlccl::transport::test {
namespace {

std::vector<int> runRanks(int n, const RankFn& fn) {
  return runForked(n, fn, {}, ForkOptions{std::chrono::seconds(60)});
}

/// How a pair is set up on each rank.
struct PairCase {
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  size_t count = (1 << 18) + 3;  ///< elements (1 MiB + 12 B of floats)
  bool sharedTarget[2] = {true, true};  ///< each rank's target in nlcclMemAlloc memory
  bool recvFirst = false;  ///< post the receive before its send
  bool expectSplit = true;
  bool signedZeros = false;  ///< every third element +0 on rank 0 and -0 on rank 1
  bool streamed = false;  ///< the reducer writes with streaming stores (buffers past the cache)
};

/// Element i of rank r's input, as a double every type holds exactly.
double inputValue(const PairCase& c, int r, size_t i) {
  if (c.signedZeros && i % 3 == 0) return r == 0 ? 0.0 : -0.0;
  const double v = static_cast<double>((i * 7 + static_cast<size_t>(r) * 13) % 61);
  return c.type == DataType::Int8 ? v - 30 : v;
}

/// One pair on each of 2 ranks: the send from an nlcclMemAlloc input, the receive into the
/// target with target = input op incoming. Checks every element against the op of the two
/// inputs, and the split counter; writes the result into sh->blobs for the parent to compare.
int pairRank(const PairCase& c, int rank, Shared* sh) {
  auto t = makeTransport(sh, rank, 2);
  CHILD_CHECK(t);
  const size_t es = dataTypeSize(c.type), bytes = c.count * es;
  void* in = nullptr;
  CHILD_CHECK(shmem::memAlloc(bytes, &in) == Status::Success);
  std::vector<char> heap;
  void* target = nullptr;
  if (c.sharedTarget[rank]) {
    CHILD_CHECK(shmem::memAlloc(bytes, &target) == Status::Success);
  } else {
    heap.resize(bytes);
    target = heap.data();
  }
  for (size_t i = 0; i < c.count; ++i) kernels::storeFromDouble(c.type, in, i, inputValue(c, rank, i));
  std::memset(target, 0x5a, bytes);
  auto& counters = shm::singleCopyCounters();
  const uint64_t split0 = counters.split.load();
  const Reducer red0 = Reducer::of(c.type, c.op);
  Reducer red = red0;
  red.src = in;
  red.streamed = c.streamed;
  Request s, r;
  s.readOnlySource = true;
  s.pairTarget = target;
  r.pairSend = &s;
  const int peer = 1 - rank;
  if (c.recvFirst) {
    CHILD_CHECK(t->postRecv(peer, 7, target, bytes, &red, &r) == Status::Success);
    CHILD_CHECK(t->postSend(peer, 7, in, bytes, &s) == Status::Success);
  } else {
    CHILD_CHECK(t->postSend(peer, 7, in, bytes, &s) == Status::Success);
    CHILD_CHECK(t->postRecv(peer, 7, target, bytes, &red, &r) == Status::Success);
  }
  CHILD_CHECK(drive(*t, {&s, &r}, std::chrono::milliseconds(20000)) == Status::Success);
  // Expected: this rank's input op the peer's, element by element, with the kernel itself.
  std::vector<char> mine(bytes), theirs(bytes), want(bytes);
  for (size_t i = 0; i < c.count; ++i) {
    kernels::storeFromDouble(c.type, mine.data(), i, inputValue(c, rank, i));
    kernels::storeFromDouble(c.type, theirs.data(), i, inputValue(c, peer, i));
  }
  red0.fn3(want.data(), mine.data(), theirs.data(), c.count);
  // By value: the peer's half has the op's operands the other way round (+0 and -0 compare equal).
  for (size_t i = 0; i < c.count; ++i)
    if (kernels::loadAsDouble(c.type, target, i) != kernels::loadAsDouble(c.type, want.data(), i)) {
      fprintf(stderr, "rank %d: element %zu of %zu: %g, want %g\n", rank, i, c.count,
              kernels::loadAsDouble(c.type, target, i), kernels::loadAsDouble(c.type, want.data(), i));
      return 1;
    }
  const uint64_t splits = counters.split.load() - split0;
  if (splits != (c.expectSplit ? 1u : 0u)) {
    fprintf(stderr, "rank %d: %llu splits, want %d\n", rank,
            static_cast<unsigned long long>(splits), c.expectSplit ? 1 : 0);
    return 1;
  }
  // The first bytes of both results, in the lower rank's half: one computation, so one result
  // bit for bit, where each rank reducing its own way round may differ (+0 or -0 for Max).
  char(&blob)[2][kMaxBlob] = reinterpret_cast<char(&)[2][kMaxBlob]>(sh->blobs[kRounds - 1]);
  const size_t head = std::min(bytes, kMaxBlob);
  std::memcpy(blob[rank], target, head);
  sh->flag[0].fetch_add(1);
  while (sh->flag[0].load() < 2) usleep(1000);  // the peer may still write our target
  if (c.expectSplit && std::memcmp(blob[0], blob[1], head) != 0) {
    fprintf(stderr, "rank %d: the two results differ in the lower rank's half\n", rank);
    return 1;
  }
  shmem::memFree(in);
  if (c.sharedTarget[rank]) shmem::memFree(target);
  return 0;
}

void runPair(const PairCase& c) {
  auto codes = runRanks(2, [&](int rank, Shared* sh) { return pairRank(c, rank, sh); });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(ShmSplit, FloatSumOddCount) { runPair({}); }
TEST(ShmSplit, Int8MaxOddBytes) { runPair({DataType::Int8, RedOp::Max, (1 << 20) + 1}); }
TEST(ShmSplit, HalfProd) { runPair({DataType::Float16, RedOp::Prod, (1 << 19) + 5}); }
TEST(ShmSplit, DoubleMin) { runPair({DataType::Float64, RedOp::Min, (1 << 17) + 1}); }
TEST(ShmSplit, BothRanksHoldTheSameBits) {
  PairCase c;
  c.op = RedOp::Max;
  c.signedZeros = true;
  runPair(c);
}
TEST(ShmSplit, StreamedFloatSum) {
  PairCase c;
  c.streamed = true;
  runPair(c);
}
TEST(ShmSplit, StreamedInt8MaxOddBytes) {
  PairCase c{DataType::Int8, RedOp::Max, (1 << 20) + 37};
  c.streamed = true;
  runPair(c);
}
TEST(ShmSplit, StreamedBothRanksHoldTheSameBits) {
  PairCase c{DataType::Float32, RedOp::Max};
  c.signedZeros = true;
  c.streamed = true;
  runPair(c);
}
TEST(ShmSplit, NotWhenATargetIsNotShared) {
  PairCase c;
  c.sharedTarget[1] = false;
  c.expectSplit = false;
  runPair(c);
}
TEST(ShmSplit, NotWhenTheReceiveComesFirst) {
  PairCase c;
  c.recvFirst = true;
  c.expectSplit = false;
  runPair(c);
}
TEST(ShmSplit, NotBelowTheThreshold) {
  ScopedEnv env("NLCCL_SHM_SPLIT_BYTES", "2M");
  PairCase c;
  c.expectSplit = false;
  runPair(c);
}
TEST(ShmSplit, DisabledByEnvironment) {
  ScopedEnv env("NLCCL_SHM_SPLIT_BYTES", "0");
  PairCase c;
  c.expectSplit = false;
  runPair(c);
}

// Through the C API: recursive doubling (the tuner's choice at 2 ranks for these sizes, forced
// at 4) on nlcclMemAlloc buffers, out of place and in place, exact sums; the 2-rank out-of-place
// calls split. `streamBytes`: NLCCL_STREAM_STORE_BYTES, low enough that the calls stream.
void allReduceCase(int n, const char* streamBytes = nullptr) {
  ScopedEnv algo("NLCCL_ALGO", "allreduce:rd");
  std::optional<ScopedEnv> stream;
  if (streamBytes != nullptr) stream.emplace("NLCCL_STREAM_STORE_BYTES", streamBytes);
  auto status = testing::forkRanks(n, [n](int r, nlcclComm_t comm) {
    const uint64_t split0 = shm::singleCopyCounters().split.load();
    for (size_t count : {size_t{(1 << 18) + 7}, size_t{3} << 20})
      if (!memAllocAllReduce(n, r, comm, count)) return false;
    const uint64_t splits = shm::singleCopyCounters().split.load() - split0;
    if (n == 2 && splits == 0) {
      fprintf(stderr, "rank %d: no split\n", r);
      return false;
    }
    return true;
  }, 60);
  for (int r = 0; r < n; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

TEST(ShmSplit, AllReduce2Processes) { allReduceCase(2); }
TEST(ShmSplit, AllReduce4Processes) { allReduceCase(4); }
TEST(ShmSplit, AllReduceStreamed2Processes) { allReduceCase(2, "64K"); }

}  // namespace
}  // namespace nlccl::transport::test
