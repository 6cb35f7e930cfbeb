// The reduced form (one representative per class of equivalent ranks, on the fabric folded by the
// symmetry) equals full flow mode: on trn3-us144 and cluster:trn3-us144x2, for every collective
// and algorithm the registry declares symmetric, at three sizes, the time, every rank's finish
// and bytes, and every link's bytes agree. Sizes divide evenly, so the images match exactly;
// at a size that does not, the reduced form is flagged and within a hair of the full one.
// A wrongly assumed symmetry is caught (negative control).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "algorithms/algorithms.hpp"
#include "sim/quotient.hpp"
#include "sim/simulate.hpp"

namespace nlccl {
namespace {

fabric::Topology load(const std::string& spec) {
  fabric::Topology t;
  std::string err;
  EXPECT_EQ(fabric::Topology::load(spec, {}, &t, &err), Status::Success) << err;
  return t;
}

sim::Result run(const fabric::Topology& topo, const sim::CollectiveRun& cr, bool reduce) {
  sim::Options o;
  o.reduce = reduce;
  sim::Result r;
  std::string err;
  EXPECT_EQ(sim::simulateCollective(topo, cr, o, &r, &err), Status::Success) << err;
  return r;
}

void expectSame(const sim::Result& a, const sim::Result& b, double rel) {
  EXPECT_NEAR(a.timeS, b.timeS, b.timeS * rel);
  EXPECT_NEAR(a.busbwGBps, b.busbwGBps, b.busbwGBps * rel);
  ASSERT_EQ(a.rankFinishS.size(), b.rankFinishS.size());
  for (size_t r = 0; r < a.rankFinishS.size(); ++r) {
    EXPECT_NEAR(a.rankFinishS[r], b.rankFinishS[r], b.timeS * rel) << "rank " << r;
    EXPECT_NEAR(a.rankBytesSent[r], b.rankBytesSent[r], b.rankBytesSent[r] * rel + 1) << r;
    EXPECT_NEAR(a.rankBytesReceived[r], b.rankBytesReceived[r], b.rankBytesReceived[r] * rel + 1)
        << r;
  }
  std::map<int, double> bytes;
  for (const auto& l : b.links) bytes[l.link] = l.bytes;
  ASSERT_EQ(a.links.size(), b.links.size());
  for (const auto& l : a.links) EXPECT_NEAR(l.bytes, bytes[l.link], l.bytes * rel + 1) << l.link;
}

// Element counts that divide evenly for every level of every algorithm on p ranks.
std::vector<size_t> bytesFor(Collective c, int p) {
  const size_t e = 4, pp = static_cast<size_t>(p);
  if (c == Collective::AllReduce) return {pp * pp * e, pp * pp * e * 64, pp * e * (1u << 18)};
  // Per rank (or per peer) x p. The full form of the concurrent all-to-all shares every port
  // among 64 flows per rank: its max-min solves are large, so these stay moderate.
  if (c == Collective::AllToAll) return {pp * e * 4, pp * e * 64, pp * e * 256};
  return {pp * e * 4, pp * e * 1024, pp * e * 65536};
}

class Reduced : public ::testing::TestWithParam<const char*> {};

TEST_P(Reduced, EqualsFullFlowModeForEverySymmetricCollective) {
  const fabric::Topology topo = load(GetParam());
  const int p = topo.numRanks();
  int compared = 0;
  for (const algo::Entry& e : algo::registry()) {
    if (e.symmetry == nullptr) continue;
    sim::CollectiveRun cr;
    cr.collective = e.collective;
    cr.algorithm = e.name;
    for (size_t bytes : bytesFor(e.collective, p)) {
      cr.bytes = bytes;
      plan::Request req = sim::requestFor(topo, cr, 4);
      const plan::Symmetry sym = sim::fabricSymmetry(topo, e.symmetry(req), p);
      if (sym.trivial()) continue;  // e.g. rhd on 144 ranks (the fold): simulated whole anyway
      SCOPED_TRACE(std::string(e.name) + " " + collectiveName(e.collective) + " " +
                   std::to_string(bytes) + " B on " + GetParam());
      const sim::Result reduced = run(topo, cr, true);
      const sim::Result full = run(topo, cr, false);
      EXPECT_LT(reduced.simulatedRanks, p);
      EXPECT_EQ(full.simulatedRanks, p);
      EXPECT_EQ(reduced.countMismatches, 0u);
      expectSame(reduced, full, 1e-9);
      ++compared;
    }
  }
  EXPECT_GE(compared, 3 * 8);  // ring x3, hier x4, direct, pairwise, bruck: three sizes each
}

INSTANTIATE_TEST_SUITE_P(Fabrics, Reduced,
                         ::testing::Values("trn3-us144", "cluster:trn3-us144x2"));

TEST(Reduced, UnevenBlocksAreFlaggedAndWithinOneElementOfTheFullForm) {
  const fabric::Topology topo = load("cluster:trn3-us144x2");
  for (const char* algo : {"ring", "hier"}) {
    sim::CollectiveRun cr;
    cr.algorithm = algo;
    cr.bytes = size_t(1) << 28;  // 2^26 elements: not a multiple of 288
    const sim::Result reduced = run(topo, cr, true);
    const sim::Result full = run(topo, cr, false);
    EXPECT_GT(reduced.countMismatches, 0u) << algo;
    EXPECT_EQ(reduced.maxCountDifference, 1u) << algo;
    EXPECT_NEAR(reduced.timeS, full.timeS, full.timeS * 1e-5) << algo;
  }
}

// The symmetry of each algorithm is narrowed to the fabric's: a ring's rotation of the whole rank
// index becomes the rotation of the top level's units; hier keeps one digit per level.
TEST(Reduced, FabricSymmetryKeepsWhatMapsTheFabricOntoItself) {
  const fabric::Topology us = load("trn3-us144"), cl = load("cluster:trn3-us144x2");
  const plan::Symmetry ring{{{1, 144}}};
  EXPECT_EQ(sim::fabricSymmetry(us, ring, 144).digits, (std::vector<plan::Digit>{{72, 2}}));
  EXPECT_EQ(sim::fabricSymmetry(cl, plan::Symmetry{{{1, 288}}}, 288).digits,
            (std::vector<plan::Digit>{{144, 2}}));
  const plan::Symmetry hier{{{1, 4}, {4, 18}, {72, 2}, {144, 2}}};
  EXPECT_EQ(sim::fabricSymmetry(cl, hier, 288).digits, hier.digits);
  // 100 of 144 ranks: no rotation of a prefix maps servers and racks onto each other.
  EXPECT_TRUE(sim::fabricSymmetry(us, plan::Symmetry{{{1, 100}}}, 100).trivial());
  // A torus is not folded.
  EXPECT_TRUE(sim::fabricSymmetry(load("trn2-us64"), plan::Symmetry{{{1, 64}}}, 64).trivial());
}

// Negative control: the double binary tree is not symmetric; compiling its representatives under
// a rotation it does not have fails to match, or simulates to another time than the full run.
TEST(Reduced, AWrongSymmetryIsCaught) {
  const fabric::Topology topo = load("trn3-us144");
  plan::Request req;
  req.nranks = 144;
  req.count = 144 * 144;
  auto builder = [&](const std::vector<int>& ranks, plan::Plan* out, std::string* e) {
    plan::Request part = req;
    part.onlyRanks = ranks;
    auto built = algo::build(part, "tree", e);
    if (!built) return Status::InvalidArgument;
    *out = std::move(*built);
    return Status::Success;
  };
  std::shared_ptr<const plan::CompiledPlan> wrong, whole;
  std::string err;
  const Status s =
      plan::CompiledPlan::compileRanks(144, plan::Symmetry{{{72, 2}}}, builder, 32, &wrong, &err);
  ASSERT_EQ(plan::CompiledPlan::compileRanks(144, {}, builder, 32, &whole, &err), Status::Success);
  if (s != Status::Success) {
    EXPECT_NE(err.find("unmatched"), std::string::npos) << err;
    return;
  }
  sim::Options o;
  sim::Result a, b;
  ASSERT_EQ(sim::simulate(topo, *wrong, o, &a, &err), Status::Success) << err;
  ASSERT_EQ(sim::simulate(topo, *whole, o, &b, &err), Status::Success) << err;
  EXPECT_GT(std::abs(a.timeS - b.timeS), b.timeS * 1e-6);
}

}  // namespace
}  // namespace nlccl
