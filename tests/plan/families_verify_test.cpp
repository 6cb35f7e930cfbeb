// The plan verifier proves every tree, rhd, bruck and hier Plan: nranks 1..33 with counts
// that do not divide evenly, count 0, in place, roots other than 0, and hierarchical group shapes
// with every level algorithm. The default build samples; built with NLCCL_FAMILIES_SWEEP (the slow
// families_sweep_test) it sweeps every rank count 1..33 and more shapes and counts instead.
#include <gtest/gtest.h>

#include "algorithms/builders.hpp"
#include "plan/family_cases.hpp"

namespace nlccl::families {
namespace {

void flatSweep(const std::vector<int>& ranks, const std::vector<size_t>& counts) {
  for (const Case& c : flatCases())
    for (int p : ranks)
      for (size_t n : counts)
        for (bool ip : {false, true})
          for (int root : {0, p / 2 + 1}) {
            if (root != 0 && c.coll != Collective::Broadcast && c.coll != Collective::Reduce)
              continue;
            const plan::Request req = request(c.coll, p, n, ip, root);
            EXPECT_EQ(buildAndVerify(req, c.algo), "") << describe(req, c.algo);
          }
}

#ifndef NLCCL_FAMILIES_SWEEP
TEST(FamiliesVerify, FlatSample) {
  flatSweep({1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 16, 17}, {0, 1, 7, 29, 64});
}

TEST(FamiliesVerify, TreeAllReduceChunked) {
  for (int p : {2, 3, 5, 8, 11})
    for (size_t n : {1, 3, 10, 37, 5000})
      for (bool ip : {false, true})
        for (int chunks : {1, 2, 3, 8}) {
          const plan::Request req = request(Collective::AllReduce, p, n, ip);
          std::string why;
          EXPECT_TRUE(plan::verify(algo::treeAllReduce(req, chunks), req, &why))
              << describe(req, "tree") << " chunks " << chunks << ": " << why;
        }
}

TEST(FamiliesVerify, CorruptedPlansFail) {
  // The proofs above mean something only if the verifier rejects a broken Plan of each family.
  for (const Case& c : flatCases()) {
    const plan::Request req = request(c.coll, 6, 10);
    auto plan = *algo::build(req, c.algo);
    plan.ranks[1].channels[0].steps.pop_back();
    EXPECT_FALSE(plan::verify(plan, req)) << c.algo << " " << collectiveName(c.coll);
  }
  plan::Request req = request(Collective::AllReduce, 6, 12);
  req.groups = {2, 3};
  auto plan = *algo::build(req, "hier");
  plan.ranks[4].channels[0].steps[1].transfers[0].region.offset ^= 1;
  EXPECT_FALSE(plan::verify(plan, req));
}

#endif  // !NLCCL_FAMILIES_SWEEP

std::vector<std::vector<int>> shapes() {
  return {{1},    {2, 3}, {3, 2}, {4, 4}, {3, 5},   {2, 2, 3},
          {4, 2}, {2, 4}, {5, 1}, {1, 6}, {3, 3, 2}};
}

void hierSweep(const std::vector<std::vector<int>>& shapeList, const std::vector<size_t>& counts) {
  const std::vector<std::string> algos = {"ring", "rhd", "tree"};
  for (const auto& g : shapeList) {
    int p = 1;
    for (int x : g) p *= x;
    for (Collective coll : hierCollectives())
      for (size_t n : counts)
        for (bool ip : {false, true})
          for (const std::string& inner : algos)
            for (const std::string& outer : algos) {
              plan::Request req = request(coll, p, n, ip);
              req.groups = g;
              req.levelAlgorithms.assign(g.size(), inner);
              req.levelAlgorithms.back() = outer;
              EXPECT_EQ(buildAndVerify(req, "hier"), "") << describe(req, "hier");
            }
  }
}

#ifndef NLCCL_FAMILIES_SWEEP
TEST(FamiliesVerify, HierSample) { hierSweep(shapes(), {0, 1, 5, 24}); }

// Broadcast from every root of every shape: each rank receives exactly once (at the innermost
// level at which it differs from the root), and one message crosses the top level per other
// group, whichever rank is the root.
TEST(FamiliesVerify, HierBroadcastFromEveryRoot) {
  for (const auto& g : shapes()) {
    int p = 1;
    for (int x : g) p *= x;
    for (int root = 0; root < p; ++root)
      for (bool ip : {false, true}) {
        plan::Request req = request(Collective::Broadcast, p, 5, ip, root);
        req.groups = g;
        EXPECT_EQ(buildAndVerify(req, "hier"), "") << describe(req, "hier");
        const plan::Plan plan = *algo::build(req, "hier");
        int crossing = 0;  // messages between groups of the top level
        const int inner = p / g.back();
        for (int r = 0; r < p; ++r) {
          int recvs = 0;
          for (const auto& ch : plan.ranks.at(r).channels)
            for (const auto& st : ch.steps)
              for (const auto& t : st.transfers) {
                if (t.kind == plan::XferKind::Recv) ++recvs;
                if (t.kind == plan::XferKind::Send && t.peer / inner != r / inner) ++crossing;
              }
          EXPECT_EQ(recvs, r == root ? 0 : 1) << describe(req, "hier") << " rank " << r;
        }
        EXPECT_EQ(crossing, g.back() - 1) << describe(req, "hier");
      }
  }
}

TEST(FamiliesVerify, HierWithoutGroupsIsOneLevel) {
  for (int p : {1, 3, 6})
    for (Collective coll : hierCollectives()) {
      plan::Request req = request(coll, p, 7);
      EXPECT_EQ(buildAndVerify(req, "hier"), "") << describe(req, "hier");
      req.groups = {4, 4};  // product != nranks: treated as one level
      EXPECT_EQ(buildAndVerify(req, "hier"), "") << describe(req, "hier");
    }
}

#else
TEST(FamiliesVerifySweep, Flat1To33) {
  std::vector<int> ranks;
  for (int p = 1; p <= 33; ++p) ranks.push_back(p);
  flatSweep(ranks, {0, 1, 2, 5, 31, 100, 129});
}

TEST(FamiliesVerifySweep, HierShapes) {
  auto s = shapes();
  s.push_back({8, 4});
  s.push_back({2, 2, 2, 2});
  s.push_back({3, 11});
  s.push_back({2, 16});
  hierSweep(s, {0, 1, 2, 7, 33, 96});
}
#endif  // NLCCL_FAMILIES_SWEEP

}  // namespace
}  // namespace nlccl::families
