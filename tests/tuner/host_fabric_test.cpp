// The host fabric the tuner builds for real runs (src/tuner/host_fabric.*): over ofi inside a
// host (NLCCL_TRANSPORT=ofi) each rank's thread both sends and reduces, so the tuner must see
// recursive doubling's extra reduction and take a reduce-scatter + all-gather algorithm for
// large all-reduces, while small ones stay on the latency-optimal rd.
#include <gtest/gtest.h>

#include <string>

#include "nlccl/tuner.hpp"
#include "tuner/host_fabric.hpp"

namespace nlccl {
namespace {

const tuner::HostShape kTwoCpus{2, 2, 1};  // this CI machine's shape

fabric::Topology hostOverOfi(int ranks) {
  fabric::Topology t;
  std::string err;
  const std::string doc = tuner::hostFabricJson(ranks, 1, 1 << 20, kTwoCpus, true);
  EXPECT_EQ(fabric::Topology::fromJsonText(doc, {}, &t, &err), Status::Success) << err;
  return t;
}

tuner::Choice chooseFor(const fabric::Topology& t, Collective coll, int ranks, size_t bytes) {
  tuner::Query q;
  q.collective = coll;
  q.bytes = bytes;
  q.nranks = ranks;
  tuner::Choice c;
  std::string err;
  EXPECT_EQ(tuner::choose(t, q, {}, &c, &err), Status::Success) << err;
  return c;
}

tuner::Choice allReduce(const fabric::Topology& t, int ranks, size_t bytes) {
  return chooseFor(t, Collective::AllReduce, ranks, bytes);
}

/// The best time the tuner saw for `algorithm` (any slice), or -1.
double bestOf(const tuner::Choice& c, const std::string& algorithm) {
  double best = -1;
  for (const tuner::Estimate& e : c.considered)
    if (e.candidate.algorithm == algorithm && e.candidate.levelAlgorithms.empty() &&
        (best < 0 || e.timeS < best))
      best = e.timeS;
  return best;
}

TEST(TunerHostFabric, OfiInsideAHostSharesEachRanksEngine) {
  const fabric::Topology t = hostOverOfi(2);
  EXPECT_TRUE(t.chip().sharesEngine());
  fabric::Topology shm;
  std::string err;
  ASSERT_EQ(fabric::Topology::fromJsonText(tuner::hostFabricJson(2, 1, 1 << 20, kTwoCpus), {},
                                           &shm, &err),
            Status::Success)
      << err;
  EXPECT_FALSE(shm.chip().sharesEngine());
  // The host level's latency is the ofi figure (15 us by default), not shm's (2 us).
  EXPECT_GT(t.levels()[0].latencyS, shm.levels()[0].latencyS);
}

TEST(TunerHostFabric, OfiTwoMibAllReduceTakesABandwidthOptimalAlgorithm) {
  for (int ranks : {2, 4}) {
    const fabric::Topology t = hostOverOfi(ranks);
    const tuner::Choice c = allReduce(t, ranks, 2 << 20);
    const std::string& a = c.best.algorithm;
    EXPECT_TRUE(a == "ring" || a == "rhd") << ranks << " ranks chose " << c.best.label();
    // rd reduces the whole vector lg p times on the same thread that sends it: slower here.
    const double rd = bestOf(c, "rd"), ring = bestOf(c, "ring");
    ASSERT_GT(rd, 0);
    ASSERT_GT(ring, 0);
    EXPECT_GT(rd, ring * 1.05) << ranks << " ranks";
  }
}

TEST(TunerHostFabric, OfiSmallAllReduceStaysOnRecursiveDoubling) {
  for (int ranks : {2, 4}) {
    const fabric::Topology t = hostOverOfi(ranks);
    EXPECT_EQ(allReduce(t, ranks, 8).best.algorithm, "rd") << ranks << " ranks";
  }
}

fabric::Topology hostOverShm(int ranks) {
  fabric::Topology t;
  std::string err;
  EXPECT_EQ(fabric::Topology::fromJsonText(tuner::hostFabricJson(ranks, 1, 1 << 20, kTwoCpus),
                                           {}, &t, &err),
            Status::Success)
      << err;
  return t;
}

// One host is one level: hier there is a flat schedule plus staging copies, and it runs on the
// library's general path (no prepared call). At 4 ranks the model once chose hier(rhd) for small
// reduce-scatters (no flat recursive halving existed), and those calls crawled (64 B: 20-700 us
// against Open MPI's 8-12 us). Now hier is not a candidate and flat rhd takes the halving.
TEST(TunerHostFabric, OneHostNeverConsidersHier) {
  for (int ranks : {2, 4})
    for (Collective c : {Collective::AllReduce, Collective::AllGather,
                         Collective::ReduceScatter, Collective::AllToAll})
      for (size_t bytes : {size_t{64}, size_t{4096}, size_t{1} << 20}) {
        const fabric::Topology t = hostOverShm(ranks);
        tuner::Query q;
        q.collective = c;
        q.bytes = bytes;
        q.nranks = ranks;
        tuner::Choice ch;
        std::string err;
        ASSERT_EQ(tuner::choose(t, q, {}, &ch, &err), Status::Success) << err;
        EXPECT_NE(ch.best.algorithm, "hier") << collectiveName(c) << " " << bytes;
        for (const tuner::Estimate& e : ch.considered)
          EXPECT_NE(e.candidate.algorithm, "hier") << collectiveName(c) << " " << bytes;
        for (const tuner::Candidate& cand : tuner::allCandidates(t, q))
          EXPECT_NE(cand.algorithm, "hier") << collectiveName(c) << " " << bytes;
      }
}

TEST(TunerHostFabric, SmallReduceScatterAtFourRanksTakesRecursiveHalving) {
  const fabric::Topology t = hostOverShm(4);
  for (size_t bytes : {size_t{64}, size_t{512}}) {
    const tuner::Choice ch = chooseFor(t, Collective::ReduceScatter, 4, bytes);
    EXPECT_EQ(ch.best.algorithm, "rhd") << bytes << " B chose " << ch.best.label();
  }
}

// Over shm a large message is read by its receiver straight out of the sender's buffer, so a
// root read by all its receivers at once pays nothing for it. When the model charged the sender
// instead, the root paid every send and ring won from 2 MiB at 4 ranks; measured, tree was
// 1.2-1.3x faster than ring at 4-256 MiB there, and direct (the root read by all three at once)
// as fast as tree or faster (docs/shm-performance.md). Over tcp the sender copies, so a root
// that sends the whole buffer to every rank is the slowest way for large messages.
TEST(TunerHostFabric, LargeShmBroadcastIsCopiedByItsReceiversSoTheRootFansOut) {
  const fabric::Topology shm = hostOverShm(4);
  EXPECT_TRUE(shm.chip().receiverCopies);
  EXPECT_FALSE(hostOverOfi(4).chip().receiverCopies);  // over tcp the sender copies too
  for (size_t bytes : {size_t{2} << 20, size_t{32} << 20}) {
    const tuner::Choice ch = chooseFor(shm, Collective::Broadcast, 4, bytes);
    EXPECT_EQ(ch.best.algorithm, "direct") << bytes << " B chose " << ch.best.label();
    const tuner::Choice ofi = chooseFor(hostOverOfi(4), Collective::Broadcast, 4, bytes);
    EXPECT_NE(ofi.best.algorithm, "direct") << bytes << " B over ofi chose " << ofi.best.label();
  }
}

}  // namespace
}  // namespace nlccl
