// The symmetries algorithms declare (Entry::symmetry) hold for the Plans they build: rotating a
// declared digit maps every rank's program onto its image's, peer for peer, with the same kinds
// and counts (counts divisible by the group sizes). The simulator's reduced form rests on these
// declarations, so each one is checked here against whole Plans; a planted asymmetry is caught.
// Partial Plans (Request::onlyRanks) hold exactly the built ranks' programs of the whole Plan.
#include <gtest/gtest.h>

#include "algorithms/algorithms.hpp"
#include "plan/family_cases.hpp"

namespace nlccl::plan {
namespace {

int rotate(const Digit& d, int r, int by) {
  const int v = d.of(r);
  return r + ((v + by) % d.size - v) * d.stride;
}

/// "" when rank g(r)'s program is rank r's mapped by g (rotation of `d` by one), else why not.
std::string equivariant(const Plan& p, const Digit& d) {
  for (int r = 0; r < p.nranks; ++r) {
    const int gr = rotate(d, r, 1);
    auto g = [&](int q) { return q < 0 ? q : rotate(d, q, 1); };
    const auto& a = p.ranks[r].channels;
    const auto& b = p.ranks[gr].channels;
    const std::string where = "rank " + std::to_string(r) + " vs " + std::to_string(gr);
    if (a.size() != b.size()) return where + ": channels differ";
    for (size_t c = 0; c < a.size(); ++c) {
      if (a[c].steps.size() != b[c].steps.size()) return where + ": steps differ";
      for (size_t s = 0; s < a[c].steps.size(); ++s) {
        const Step& x = a[c].steps[s];
        const Step& y = b[c].steps[s];
        const std::string at = where + " channel " + std::to_string(c) + " step " + std::to_string(s);
        if (x.transfers.size() != y.transfers.size() || x.locals.size() != y.locals.size())
          return at + ": transfers or locals differ";
        for (size_t t = 0; t < x.transfers.size(); ++t) {
          const Transfer& u = x.transfers[t];
          const Transfer& v = y.transfers[t];
          if (u.kind != v.kind || u.region.count != v.region.count || g(u.peer) != v.peer ||
              g(u.next) != v.next)
            return at + " transfer " + std::to_string(t) + ": not the image";
        }
        for (size_t l = 0; l < x.locals.size(); ++l)
          if (x.locals[l].kind != y.locals[l].kind ||
              x.locals[l].src.count != y.locals[l].src.count)
            return at + " local " + std::to_string(l) + ": not the image";
      }
    }
  }
  return "";
}

struct Shape {
  int p;
  std::vector<int> groups;
  std::vector<std::string> levels;
};

std::vector<Shape> shapes() {
  return {{8, {}, {}},          {6, {}, {}},          {12, {}, {}},
          {8, {4, 2}, {}},      {12, {2, 3, 2}, {}},  {8, {2, 4}, {"rhd", "ring"}},
          {16, {4, 4}, {"ring", "rhd"}}, {12, {4, 3}, {"ring", "tree"}}, {6, {3, 2}, {"rhd", "ring"}}};
}

TEST(Symmetry, DeclaredDigitsMapProgramsOntoEachOther) {
  int checked = 0;
  for (const algo::Entry& e : algo::registry()) {
    if (e.symmetry == nullptr) continue;
    for (const Shape& sh : shapes()) {
      if (!sh.groups.empty() && std::string(e.name) != "hier") continue;
      for (bool inPlace : {false, true}) {
        Request req = families::request(e.collective, sh.p, size_t(sh.p) * sh.p * 8, inPlace);
        req.groups = sh.groups;
        req.levelAlgorithms = sh.levels;
        const Symmetry sym = e.symmetry(req);
        const Plan plan = e.build(req);
        for (const Digit& d : sym.digits) {
          SCOPED_TRACE(families::describe(req, e.name) + " digit (" + std::to_string(d.stride) +
                       "," + std::to_string(d.size) + ")");
          EXPECT_EQ(sh.p % (d.stride * d.size), 0);
          EXPECT_EQ(equivariant(plan, d), "");
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 50);
}

TEST(Symmetry, AnAsymmetricPlanIsCaught) {
  Request req = families::request(Collective::AllReduce, 8, 8 * 8 * 8);
  Plan plan = *algo::build(req, "ring");
  ASSERT_EQ(equivariant(plan, {1, 8}), "");
  plan.ranks[5].channels[0].steps[3].transfers[0].peer = 2;
  EXPECT_NE(equivariant(plan, {1, 8}), "");
  // The tree declares nothing: its programs are not images of each other.
  const Plan tree = *algo::build(req, "tree");
  EXPECT_NE(equivariant(tree, {1, 8}), "");
}

TEST(Symmetry, RepresentativesAndRelativeRanks) {
  const Symmetry s{{{1, 4}, {8, 3}}};  // 24 ranks: digit 0 of size 4, digit 3 of size 3
  EXPECT_EQ(s.order(), 12);
  EXPECT_EQ(s.reps(24), (std::vector<int>{0, 4}));
  EXPECT_EQ(s.rep(23), 4);
  // relative(r, q) is g^-1(r) for the g taking rep(q) to q.
  for (int r = 0; r < 24; ++r)
    for (int q = 0; q < 24; ++q) {
      const int rel = s.relative(r, q);
      int back = rel;
      for (const Digit& d : s.digits) back = rotate(d, back, d.of(q));
      EXPECT_EQ(back, r);
      EXPECT_EQ(s.relative(q, q), s.rep(q));
    }
}

TEST(Symmetry, PartialPlansHoldTheBuiltRanksPrograms) {
  for (const algo::Entry& e : algo::registry()) {
    for (const Shape& sh : shapes()) {
      if (!sh.groups.empty() && std::string(e.name) != "hier") continue;
      Request req = families::request(e.collective, sh.p, 37, false, 1);
      req.groups = sh.groups;
      req.levelAlgorithms = sh.levels;
      const Plan whole = e.build(req);
      req.onlyRanks = {1, sh.p - 1};
      const Plan part = e.build(req);
      SCOPED_TRACE(families::describe(req, e.name));
      ASSERT_EQ(part.ranks.size(), whole.ranks.size());
      for (int r = 0; r < sh.p; ++r) {
        const bool built = r == 1 || r == sh.p - 1;
        EXPECT_EQ(part.builds(r), built);
        if (!built) {
          EXPECT_TRUE(part.ranks[r].channels.empty());
          continue;
        }
        ASSERT_EQ(part.ranks[r].channels.size(), whole.ranks[r].channels.size()) << "rank " << r;
        for (size_t c = 0; c < whole.ranks[r].channels.size(); ++c) {
          const auto& x = part.ranks[r].channels[c].steps;
          const auto& y = whole.ranks[r].channels[c].steps;
          ASSERT_EQ(x.size(), y.size());
          for (size_t s = 0; s < x.size(); ++s) {
            EXPECT_EQ(x[s].transfers, y[s].transfers);
            EXPECT_EQ(x[s].locals, y[s].locals);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace nlccl::plan
