// The MoE routing generator (nlccl/moe.hpp) and its phases on the model (nlccl/moe_study.hpp):
// hand-computed deduplication and capacity, conservation of bytes, reproducibility, the direct
// all-to-all closed form on flat:p, and a hot receiver that meets the cut lower bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "nlccl/moe.hpp"
#include "nlccl/moe_study.hpp"

using namespace nlccl;

namespace {

constexpr double kAlpha = 10e-6, kBw = 1280e9;  // flat:p's defaults

moe::Routing route(const moe::RoutingSpec& s) {
  moe::Routing r;
  std::string err;
  EXPECT_EQ(moe::generateRouting(s, &r, &err), Status::Success) << err;
  return r;
}

fabric::Topology load(const std::string& spec) {
  fabric::Topology t;
  std::string err;
  EXPECT_EQ(fabric::Topology::load(spec, {}, &t, &err), Status::Success) << err;
  return t;
}

moe::RoutingSpec spec(int ranks, int64_t tokens, int topk, int experts) {
  moe::RoutingSpec s;
  s.ranks = ranks;
  s.tokensPerRank = tokens;
  s.hidden = 512;
  s.bytesPerElement = 2;
  s.topk = topk;
  s.experts = experts;
  return s;
}

uint64_t total(const moe::Routing& r) {
  return std::accumulate(r.tokens.begin(), r.tokens.end(), uint64_t{0});
}

}  // namespace

// 2 ranks, 4 experts round-robin (0, 2 on rank 0; 1, 3 on rank 1), top-2, expected routing:
// quotas 2 each, laid out [0 0 1 1 2 2 3 3]; tokens 0 and 1 take experts (0, 2), both on rank
// 0, tokens 2 and 3 take (1, 3), both on rank 1: one copy each, 4 copies saved per rank.
TEST(MoeRouting, DeduplicatesExpertsOnOneRank) {
  moe::RoutingSpec s = spec(2, 4, 2, 4);
  s.placement = moe::Placement::RoundRobin;
  s.sampling = moe::Sampling::Expected;
  const moe::Routing r = route(s);
  EXPECT_EQ(r.tokens, (std::vector<uint32_t>{2, 2, 2, 2}));
  EXPECT_EQ(r.dedupSaved, 8);
  EXPECT_EQ(r.expertTokens, (std::vector<int64_t>{4, 4, 4, 4}));
  // Negative control: contiguous placement puts experts 0 and 2 on different ranks.
  s.placement = moe::Placement::Contiguous;
  const moe::Routing c = route(s);
  EXPECT_EQ(c.dedupSaved, 0);
  EXPECT_EQ(c.tokens, (std::vector<uint32_t>{4, 4, 4, 4}));
}

// 2 ranks, experts 0 (rank 0) and 1 (rank 1) with loads 3:1, T = 4, top-1, CF 1:
// C = min(4, ceil(4 * 1 * 1 / 2)) = 2. Each rank's layout is [0 0 0 1]: its third token finds
// expert 0 full and is dropped.
TEST(MoeRouting, CapacityDropsInTokenOrder) {
  moe::RoutingSpec s = spec(2, 4, 1, 2);
  s.sampling = moe::Sampling::Expected;
  s.dist.kind = moe::Distribution::Kind::Loads;
  s.dist.loads = {3, 1};
  s.capacityFactor = 1;
  const moe::Routing r = route(s);
  EXPECT_EQ(r.capacity, 2);
  EXPECT_EQ(r.tokens, (std::vector<uint32_t>{2, 1, 2, 1}));
  EXPECT_EQ(r.droppedAssignments, 2);
  EXPECT_EQ(r.droppedTokens, 2);
  EXPECT_EQ(r.expertTokens, (std::vector<int64_t>{4, 2}));
  // CF >= E / top-k: no drops.
  s.capacityFactor = 2;
  const moe::Routing n = route(s);
  EXPECT_EQ(n.droppedAssignments, 0);
  EXPECT_EQ(n.tokens, (std::vector<uint32_t>{3, 1, 3, 1}));
}

// Top-2 of 4 with every load on one expert but zero on two: each token must still get two
// distinct experts with load (the sampler's fallback), and top-3 cannot be routed.
TEST(MoeRouting, SamplesDistinctExpertsWithLoad) {
  moe::RoutingSpec s = spec(3, 500, 2, 4);
  s.dist.kind = moe::Distribution::Kind::Loads;
  s.dist.loads = {1000, 0, 1, 0};
  const moe::Routing r = route(s);
  EXPECT_EQ(r.expertTokens, (std::vector<int64_t>{1500, 0, 1500, 0}));
  s.topk = 3;
  moe::Routing bad;
  std::string err;
  EXPECT_EQ(moe::generateRouting(s, &bad, &err), Status::InvalidArgument);
  EXPECT_NE(err.find("top-k"), std::string::npos) << err;
}

TEST(MoeRouting, BytesAreConserved) {
  for (const char* dist : {"uniform", "zipf:1.2", "hot:8:2"}) {
    moe::RoutingSpec s = spec(16, 300, 4, 48);
    ASSERT_EQ(moe::parseDistribution(dist, &s.dist, nullptr), Status::Success);
    s.capacityFactor = 1.0;
    s.placement = moe::Placement::RoundRobin;
    const moe::Routing r = route(s);
    EXPECT_EQ(r.assignments, 16 * 300 * 4);
    const int64_t kept = r.assignments - r.droppedAssignments;
    EXPECT_EQ(std::accumulate(r.expertTokens.begin(), r.expertTokens.end(), int64_t{0}), kept);
    EXPECT_EQ(static_cast<int64_t>(total(r)), kept - r.dedupSaved) << dist;
    for (int64_t t : r.expertTokens) EXPECT_LE(t, 16 * r.capacity);
    // Combine is dispatch transposed; the phases' byte counts and the simulated sends agree.
    const fabric::Topology topo = load("flat:16");
    const std::vector<size_t> d = r.matrix(false, 2), c = r.matrix(true, 2);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) EXPECT_EQ(d[i * 16 + j], c[j * 16 + i]);
    moe::StudyOptions o;
    o.algorithm = "direct";
    for (bool combine : {false, true}) {
      moe::PhaseResult ph;
      std::string err;
      ASSERT_EQ(moe::simulatePhase(topo, r, combine, o, &ph, &err), Status::Success) << err;
      EXPECT_EQ(ph.stats.bytes, total(r) * 1024);
      const double sent =
          std::accumulate(ph.sim.rankBytesSent.begin(), ph.sim.rankBytesSent.end(), 0.0);
      EXPECT_DOUBLE_EQ(sent, static_cast<double>(ph.stats.fabricBytes)) << dist;
      EXPECT_LE(ph.stats.boundS, ph.timeS * (1 + 1e-9));  // a lower bound
    }
  }
}

TEST(MoeRouting, SameSeedSameMatrix) {
  moe::RoutingSpec s = spec(12, 256, 2, 24);
  ASSERT_EQ(moe::parseDistribution("zipf:1", &s.dist, nullptr), Status::Success);
  s.seed = 7;
  const moe::Routing a = route(s), b = route(s);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.expertTokens, b.expertTokens);
  s.seed = 8;  // negative control
  EXPECT_NE(route(s).tokens, a.tokens);
}

// Uniform top-1 on one expert per rank, expected routing: every rank sends every rank T/p
// tokens, the direct all-to-all of that block, whose closed form on flat:p is
// alpha + (p-1) x block / B (every peer at once; REFERENCE.md, concurrent all-to-all-v).
TEST(MoeOnFlat, UniformTop1IsTheDirectAllToAll) {
  for (int p : {4, 8, 13}) {
    moe::RoutingSpec s = spec(p, 64LL * p, 1, 2 * p);
    s.sampling = moe::Sampling::Expected;
    const moe::Routing r = route(s);
    for (uint32_t t : r.tokens) ASSERT_EQ(t, 64u);
    const fabric::Topology topo = load("flat:" + std::to_string(p));
    moe::StudyOptions o;
    o.algorithm = "direct";
    moe::PhaseResult ph;
    std::string err;
    ASSERT_EQ(moe::simulatePhase(topo, r, false, o, &ph, &err), Status::Success) << err;
    const double block = 64.0 * 1024;
    const double expect = kAlpha + (p - 1) * block / kBw;
    EXPECT_NEAR(ph.timeS, expect, 1e-6 * expect) << p;
    EXPECT_NEAR(ph.stats.boundS, expect, 1e-6 * expect) << p;
    EXPECT_DOUBLE_EQ(ph.stats.imbalance, 1.0);
    // The same time as the all-to-all of that block, by the library's own all-to-all.
    sim::CollectiveRun run;
    run.collective = Collective::AllToAll;
    run.algorithm = "direct";
    run.bytes = static_cast<size_t>(block) * p;
    sim::Options so;
    so.dtype = DataType::Uint8;
    sim::Result a2a;
    ASSERT_EQ(sim::simulateCollective(topo, run, so, &a2a, &err), Status::Success) << err;
    EXPECT_NEAR(ph.timeS, a2a.timeS, 1e-9);
  }
}

// Every token to expert 0 on rank 0: rank 0's ingress port carries everything (the flows of the
// other ranks share it fairly), so the time is its bound alpha + (p-1) T x token / B exactly.
TEST(MoeOnFlat, OneHotReceiverMeetsTheBound) {
  const int p = 8;
  moe::RoutingSpec s = spec(p, 1000, 1, p);
  std::vector<double> loads(p, 0.0);
  loads[0] = 1;
  const std::string path = ::testing::TempDir() + "moe_hot_loads.csv";
  {
    std::ofstream f(path);
    f << "expert,load\n";
    for (int e = 0; e < p; ++e) f << e << "," << loads[e] << "\n";
  }
  ASSERT_EQ(moe::parseDistribution(path, &s.dist, nullptr), Status::Success);
  ASSERT_EQ(s.dist.loads, loads);
  const moe::Routing r = route(s);
  const fabric::Topology topo = load("flat:8");
  for (const char* algo : {"direct", "auto"}) {
    moe::StudyOptions o;
    o.algorithm = algo;
    moe::PhaseResult ph;
    std::string err;
    ASSERT_EQ(moe::simulatePhase(topo, r, false, o, &ph, &err), Status::Success) << err;
    const double expect = kAlpha + (p - 1) * 1000.0 * 1024 / kBw;
    EXPECT_NEAR(ph.stats.boundS, expect, 1e-9 * expect);
    EXPECT_NEAR(ph.timeS, ph.stats.boundS, 1e-6 * ph.stats.boundS) << algo;
    EXPECT_EQ(ph.stats.boundAt, "chip 0 ingress");
    EXPECT_NEAR(ph.stats.imbalance, p, 1e-12);
    // Combine: rank 0 sends everything back, its egress binds.
    ASSERT_EQ(moe::simulatePhase(topo, r, true, o, &ph, &err), Status::Success) << err;
    EXPECT_NEAR(ph.timeS, ph.stats.boundS, 1e-6 * ph.stats.boundS) << algo;
    EXPECT_EQ(ph.stats.boundAt, "chip 0 egress");
  }
  std::remove(path.c_str());
}

// The cut bound sees an UltraServer's EFA links on a cluster, not just the chips' NeuronLink.
TEST(MoeBound, ClusterCutIsTheScaleOutNetwork) {
  const fabric::Topology topo = load("cluster:trn3-us144x2");
  moe::RoutingSpec s = spec(288, 576, 1, 288);
  s.sampling = moe::Sampling::Expected;
  s.placement = moe::Placement::Contiguous;
  const moe::Routing r = route(s);
  const moe::PhaseStats st = moe::phaseStats(topo, r, false);
  // Every rank sends 2 tokens to every rank; half of them leave its UltraServer: 144 ranks x
  // 288 tokens x 1 KiB over 144 x 25 GB/s.
  const double expect = 144 * 288 * 1024.0 / (144 * 25e9);
  EXPECT_NEAR(st.transferBoundS, expect, 1e-9 * expect);
  EXPECT_NE(st.boundAt.find("ultraserver"), std::string::npos) << st.boundAt;
  EXPECT_EQ(moe::studyGroups(topo, 288), (std::vector<int>{144, 2}));
}

TEST(MoeParse, DistributionsAndPlacements) {
  moe::Distribution d;
  ASSERT_EQ(moe::parseDistribution("hot:4:3", &d, nullptr), Status::Success);
  EXPECT_EQ(d.kind, moe::Distribution::Kind::Hot);
  EXPECT_EQ(d.factor, 4);
  EXPECT_EQ(d.hotExperts, 3);
  ASSERT_EQ(moe::parseDistribution("zipf:1.5", &d, nullptr), Status::Success);
  EXPECT_EQ(moe::distributionName(d), "zipf:1.5");
  std::string err;
  EXPECT_EQ(moe::parseDistribution("zipf:-1", &d, &err), Status::InvalidArgument);
  EXPECT_EQ(moe::parseDistribution("hot:2:0.5", &d, &err), Status::InvalidArgument);
  EXPECT_EQ(moe::parseDistribution("/nonexistent.csv", &d, &err), Status::InvalidArgument);
  moe::Placement pl;
  std::vector<int> ranks;
  ASSERT_EQ(moe::parsePlacement("rr", &pl, &ranks, nullptr), Status::Success);
  EXPECT_EQ(pl, moe::Placement::RoundRobin);
  std::vector<int> placed;
  EXPECT_EQ(moe::placeExperts(moe::Placement::Explicit, 2, 2, {0, 2}, &placed, &err),
            Status::InvalidArgument);
  ASSERT_EQ(moe::placeExperts(moe::Placement::Contiguous, 6, 4, {}, &placed, &err),
            Status::Success);
  EXPECT_EQ(placed, (std::vector<int>{0, 0, 1, 2, 2, 3}));
}

// A hot expert on a cluster: hier gathers its dispatch onto one chip per UltraServer and sends it
// over that chip's EFA port; hier-across (DeepSeek-V3's order) crosses UltraServers first from
// every source's own port. Combine is the mirror image, so auto takes one for each phase.
TEST(MoeOnCluster, AcrossFirstDispatchesASkewedRoutingFaster) {
  const std::string spec = "cluster:trn3-us144x2";
  const fabric::Topology topo = load(spec);
  moe::RoutingSpec s = ::spec(288, 128, 1, 288);
  s.sampling = moe::Sampling::Expected;
  ASSERT_EQ(moe::parseDistribution("hot:200:1", &s.dist, nullptr), Status::Success);
  const moe::Routing r = route(s);
  moe::StudyOptions o;
  o.topologySpec = spec;
  double t[2][2];  // [phase][hier, hier-across]
  for (int c = 0; c < 2; ++c)
    for (int a = 0; a < 2; ++a) {
      o.algorithm = a ? "hier-across" : "hier";
      moe::PhaseResult ph;
      std::string err;
      ASSERT_EQ(moe::simulatePhase(topo, r, c == 1, o, &ph, &err), Status::Success) << err;
      EXPECT_LE(ph.stats.boundS, ph.timeS * (1 + 1e-9));
      t[c][a] = ph.timeS;
    }
  EXPECT_LT(t[0][1], t[0][0]);  // dispatch: across first wins
  EXPECT_LT(t[1][0], t[1][1]);  // combine: inside first wins
  o.algorithm = "auto";
  o.directMessageBudget = 0;  // direct is slow to simulate here; auto must then skip it
  moe::PhaseResult d, c;
  std::string err;
  ASSERT_EQ(moe::simulatePhase(topo, r, false, o, &d, &err), Status::Success) << err;
  ASSERT_EQ(moe::simulatePhase(topo, r, true, o, &c, &err), Status::Success) << err;
  EXPECT_EQ(d.algorithm, "hier-across");
  EXPECT_EQ(c.algorithm, "hier");
  EXPECT_EQ(d.candidates.front().second, -1.0);  // direct: over the budget, not simulated
}
