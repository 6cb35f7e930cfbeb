// A random soak over 4 processes on shm: every rank draws the same sequence of collectives (kind,
// data type, op, count 0..1M, root, in place or not, algorithm, stream or not) and checks every
// element of its output and the canaries around its buffers. 200 calls by default; the slow
// label runs 2,000.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "multirank/collective_case.hpp"
#include "multirank/fork_ranks.hpp"

#ifndef NLCCL_SOAK_CALLS
#define NLCCL_SOAK_CALLS 200
#endif

namespace nlccl::testing {
namespace {

constexpr int kRanks = 4;

/// Algorithms to run the calls with: one communicator each (split from the first), each naming
/// the algorithm for the collectives it implements (the others keep their default).
const char* const kAlgorithms[] = {"ring", "tree", "rhd", "hier", "bruck"};

bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

bool soak(int rank, nlcclComm_t world, unsigned seed, int calls) {
  std::vector<nlcclComm_t> comms;
  for (const char* algo : kAlgorithms) {
    nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
    config.algorithm = algo;
    nlcclComm_t c = nullptr;
    if (nlcclCommSplit(world, 0, rank, &c, &config) != nlcclSuccess) {
      fprintf(stderr, "rank %d: split for %s: %s\n", rank, algo, nlcclGetLastError(world));
      return false;
    }
    comms.push_back(c);
  }
  nlcclStream_t stream;
  if (nlcclStreamCreate(&stream) != nlcclSuccess) return false;
  std::mt19937_64 rng(seed);  // the same on every rank: all draw the same calls
  const Collective kinds[] = {Collective::AllReduce, Collective::AllGather,
                              Collective::ReduceScatter, Collective::Broadcast,
                              Collective::Reduce, Collective::AllToAll, Collective::AllToAllv};
  bool ok = true;
  for (int i = 0; i < calls && ok; ++i) {
    CollCase c;
    c.collective = kinds[rng() % 7];
    c.dtype = static_cast<DataType>(rng() % kNumDataTypes);
    c.op = reduces(c.collective) ? static_cast<RedOp>(rng() % kNumRedOps) : RedOp::Sum;
    // Log-uniform in 0..1M elements in all (divided among the ranks where the count is per rank).
    size_t total = static_cast<size_t>(std::exp(std::uniform_real_distribution<double>(0, std::log(1e6 + 1))(rng))) - 1;
    const bool perRank = c.collective == Collective::AllGather ||
                         c.collective == Collective::ReduceScatter ||
                         c.collective == Collective::AllToAll;
    c.count = perRank ? total / kRanks : total;
    c.root = static_cast<int>(rng() % kRanks);
    c.inPlace = c.collective != Collective::AllToAllv && rng() % 2 == 0;
    const size_t algo = rng() % std::size(kAlgorithms);
    const bool onStream = rng() % 2 == 0;
    CollBuffers b(c, rank, kRanks);
    nlcclResult_t res = b.issue(comms[algo], onStream ? stream : nullptr);
    if (res == nlcclSuccess && onStream) res = nlcclStreamSynchronize(stream);
    std::string what = "call " + std::to_string(i) + " (" + collectiveName(c.collective) + " " +
                       dataTypeName(c.dtype) + " " + redOpName(c.op) + " count " +
                       std::to_string(c.count) + " root " + std::to_string(c.root) +
                       (c.inPlace ? " in place" : "") + " algorithm " + kAlgorithms[algo] +
                       (onStream ? " on a stream" : "") + ")";
    if (res != nlcclSuccess) {
      fprintf(stderr, "rank %d: %s failed: %s\n", rank, what.c_str(), nlcclGetLastError(comms[algo]));
      ok = false;
      break;
    }
    if (std::string err = b.check(); !err.empty()) {
      fprintf(stderr, "rank %d: %s: %s\n", rank, what.c_str(), err.c_str());
      ok = false;
    }
  }
  nlcclStreamDestroy(stream);
  for (nlcclComm_t c : comms) nlcclCommDestroy(c);
  return ok;
}

TEST(Soak, RandomCollectivesOnFourProcesses) {
  const unsigned seed = 20261201;
  auto status = forkRanks(kRanks, [seed](int r, nlcclComm_t comm) {
    return soak(r, comm, seed, NLCCL_SOAK_CALLS);
  }, 1200);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(status[r], 0) << "rank " << r << " (seed " << seed << ")";
}

}  // namespace
}  // namespace nlccl::testing
