// On flat:p the simulator reproduces the closed forms of REFERENCE.md section 2 (to 1e-6) for the
// registry's Plans; analytical == flow where nothing contends; flow never beats the lower bounds.
// Runs against algo::registry(): a (name, collective) that is not registered is a failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "algorithms/algorithms.hpp"
#include "sim/simulate.hpp"

using namespace nlccl;

namespace {

constexpr double kAlpha = 10e-6, kBw = 1280e9, kBeta = 1 / kBw;
constexpr size_t kEs = 4;  // float

int ceilLg(int p) {
  int l = 0;
  while ((1 << l) < p) ++l;
  return l;
}
bool pow2(int p) { return (p & (p - 1)) == 0; }

fabric::Topology flat(int p) {
  fabric::Topology t;
  std::string err;
  EXPECT_EQ(fabric::Topology::load("flat:" + std::to_string(p), {}, &t, &err), Status::Success)
      << err;
  return t;
}

struct Case {
  const char* algo;
  Collective coll;
  // Expected time for p ranks and the Request's count; NaN when REFERENCE.md has no closed form.
  std::function<double(int p, size_t count)> formula;
  /// Its transfers share ports by design (every peer at once): analytical mode, which does not
  /// share, is only a lower bound there.
  bool shares = false;
};

double nan() { return std::nan(""); }

const std::vector<Case>& cases() {
  static const std::vector<Case> k = {
      {"ring", Collective::AllReduce,
       [](int p, size_t c) { return 2 * (p - 1) * kAlpha + 2.0 * (p - 1) / p * c * kEs * kBeta; }},
      {"ring", Collective::AllGather,
       [](int p, size_t c) { return (p - 1) * kAlpha + (p - 1.0) / p * (c * p * kEs) * kBeta; }},
      {"ring", Collective::ReduceScatter,
       [](int p, size_t c) { return (p - 1) * kAlpha + (p - 1.0) / p * (c * p * kEs) * kBeta; }},
      // Rabenseifner on p' = 2^floor(lg p) ranks, plus the MPICH fold and unfold (alpha + n beta
      // each) for the others. Exact with flow control: a halving message waits for its receive
      // instead of sharing the folded rank's port with the fold (flat: rendezvous).
      {"rhd", Collective::AllReduce,
       [](int p, size_t c) {
         int q = 1;
         while (q * 2 <= p) q *= 2;
         const double n = static_cast<double>(c * kEs);
         const double core = 2 * ceilLg(q) * kAlpha + 2.0 * (q - 1) / q * n * kBeta;
         return q == p ? core : core + 2 * (kAlpha + n * kBeta);
       }},
      {"rhd", Collective::AllGather,
       [](int p, size_t c) {
         return pow2(p) ? ceilLg(p) * kAlpha + (p - 1.0) / p * (c * p * kEs) * kBeta : nan();
       }},
      // Recursive halving on powers of two, ring's schedule otherwise.
      {"rhd", Collective::ReduceScatter,
       [](int p, size_t c) {
         return (pow2(p) ? ceilLg(p) : p - 1) * kAlpha + (p - 1.0) / p * (c * p * kEs) * kBeta;
       }},
      {"tree", Collective::Broadcast,
       [](int p, size_t c) { return ceilLg(p) * (kAlpha + c * kEs * kBeta); }},
      // With flow control a leaf of the last round waits for the root to reach that round
      // (flat: rendezvous) instead of sharing the root's port with the first: lock step.
      {"tree", Collective::Reduce,
       [](int p, size_t c) { return ceilLg(p) * (kAlpha + c * kEs * kBeta); }},
      {"tree", Collective::AllReduce, [](int, size_t) { return nan(); }},
      {"pairwise", Collective::AllToAll,
       [](int p, size_t c) { return (p - 1) * kAlpha + (p - 1.0) / p * (c * p * kEs) * kBeta; }},
      // Every peer at once (p - 1 within the window): one alpha, each port busy the whole time.
      {"direct", Collective::AllToAll,
       [](int p, size_t c) { return kAlpha + (p - 1.0) / p * (c * p * kEs) * kBeta; }, true},
      // ceil(lg p) alpha + (n/2) ceil(lg p) beta for powers of two; in general step k moves the
      // blocks whose index has bit k set (p/2 of them when p is a power of two).
      {"bruck", Collective::AllToAll,
       [](int p, size_t c) {
         if (pow2(p)) return ceilLg(p) * kAlpha + (c * p * kEs) / 2.0 * ceilLg(p) * kBeta;
         double t = ceilLg(p) * kAlpha;
         for (int bit = 1; bit < p; bit <<= 1) {
           int blocks = 0;
           for (int j = 0; j < p; ++j) blocks += (j & bit) != 0;
           t += blocks * c * kEs * kBeta;
         }
         return t;
       }},
  };
  return k;
}

double lowerBound(Collective c, int p, size_t count) {
  const double n = static_cast<double>(count * kEs);
  switch (c) {
    case Collective::AllReduce: return ceilLg(p) * kAlpha + 2.0 * (p - 1) / p * n * kBeta;
    case Collective::AllGather:
    case Collective::ReduceScatter: return ceilLg(p) * kAlpha + (p - 1.0) / p * n * p * kBeta;
    case Collective::AllToAll: return kAlpha + (p - 1.0) / p * n * p * kBeta;
    default: return kAlpha + n * kBeta;  // broadcast / reduce: the root's port
  }
}

sim::Result simulate(const fabric::Topology& t, const plan::Plan& pl, sim::Mode mode) {
  sim::Options o;
  o.mode = mode;
  sim::Result r;
  std::string err;
  EXPECT_EQ(sim::simulate(t, pl, o, &r, &err), Status::Success) << err;
  return r;
}

class Formula : public ::testing::TestWithParam<int> {};

TEST_P(Formula, RegistryPlansMatchClosedForms) {
  const int p = GetParam();
  const auto topo = flat(p);
  std::string missing, noForm;
  for (const Case& cs : cases()) {
    if (algo::find(cs.algo, cs.coll) == nullptr) {
      missing += std::string(" ") + cs.algo + "/" + collectiveName(cs.coll);
      continue;
    }
    for (size_t count : {size_t(p) * p * 16, size_t(p) * p * 4096, size_t(p) * p * 262144}) {
      plan::Request req;
      req.collective = cs.coll;
      req.nranks = p;
      req.count = count;
      std::string err;
      auto pl = algo::build(req, cs.algo, &err);
      ASSERT_TRUE(pl.has_value()) << cs.algo << ": " << err;
      const auto flow = simulate(topo, *pl, sim::Mode::Flow);
      const auto ana = simulate(topo, *pl, sim::Mode::Analytical);
      const double want = cs.formula(p, count);
      SCOPED_TRACE(std::string(cs.algo) + " " + collectiveName(cs.coll) + " p=" +
                   std::to_string(p) + " count=" + std::to_string(count));
      if (!std::isnan(want)) {
        EXPECT_NEAR(flow.timeS, want, want * 1e-6);
        if (!cs.shares) {
          EXPECT_NEAR(ana.timeS, want, want * 1e-6);
        }
      } else if (count == size_t(p) * p * 16) {
        noForm += std::string(" ") + cs.algo + "/" + collectiveName(cs.coll);
      }
      EXPECT_GE(flow.timeS, lowerBound(cs.coll, p, count) * (1 - 1e-9));
      if (cs.coll == Collective::Reduce) {  // the lock-step form bounds the eager schedule
        EXPECT_LE(flow.timeS, ceilLg(p) * (kAlpha + count * kEs * kBeta) * (1 + 1e-9));
      }
      EXPECT_GE(flow.timeS, ana.timeS * (1 - 1e-9));  // sharing only slows things down
    }
  }
  if (!noForm.empty())
    std::printf("[ info ] p=%d: no closed form in REFERENCE.md, bounds only:%s\n", p, noForm.c_str());
  EXPECT_EQ(missing, "") << "algorithms with a closed form that the registry lacks";
}

// Hierarchical all-reduce, X groups of Y on one flat switch (alpha1 = alpha2, beta1 = beta2).
TEST_P(Formula, HierarchicalAllReduce) {
  const int p = GetParam();
  ASSERT_NE(algo::find("hier", Collective::AllReduce), nullptr) << "hier/allreduce is not registered";
  const auto topo = flat(p);
  std::vector<std::vector<int>> shapes;
  for (int y = 2; y <= p; ++y)
    if (p % y == 0) shapes.push_back(p / y > 1 ? std::vector<int>{y, p / y} : std::vector<int>{y});
  for (const auto& g : shapes) {
    const int y = g[0], x = g.size() > 1 ? g[1] : 1;
    for (size_t count : {size_t(p) * p * 16, size_t(p) * p * 8192}) {
      plan::Request req;
      req.collective = Collective::AllReduce;
      req.nranks = p;
      req.count = count;
      req.groups = g;
      std::string err;
      auto pl = algo::build(req, "hier", &err);
      ASSERT_TRUE(pl.has_value()) << err;
      const double n = static_cast<double>(count * kEs);
      const double want = 2 * (y - 1) * kAlpha + 2.0 * (y - 1) / y * n * kBeta +
                          2 * (x - 1) * kAlpha + 2.0 * (x - 1) / x * (n / y) * kBeta;
      SCOPED_TRACE("groups " + std::to_string(y) + "x" + std::to_string(x) + " count " +
                   std::to_string(count));
      EXPECT_NEAR(simulate(topo, *pl, sim::Mode::Flow).timeS, want, want * 1e-6);
      EXPECT_NEAR(simulate(topo, *pl, sim::Mode::Analytical).timeS, want, want * 1e-6);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Flat, Formula, ::testing::Values(2, 3, 6, 8, 12, 16, 64));

// The concurrent direct all-to-all-v puts every pair's block on the switch at once: on flat:p it
// takes alpha + max(largest row sum, largest column sum) / B, the bound of REFERENCE.md 2, for
// skew by destination (every rank sends w_j to rank j: a hot expert), by source, both, and none.
// The pairwise schedule, a negative control, takes p-1 dependent steps and is slower.
TEST(FlatAllToAllv, ConcurrentMeetsTheRowColumnBound) {
  if (algo::find("direct", Collective::AllToAllv) == nullptr) GTEST_SKIP() << "direct";
  for (int p : {2, 5, 8, 17, 64}) {
    const auto topo = flat(p);
    std::vector<double> w(static_cast<size_t>(p));
    for (int j = 0; j < p; ++j) w[j] = 1.0 / std::pow(j + 1.0, 1.2);  // zipf(1.2) weights
    auto cell = [&](int kind, int i, int j) -> size_t {
      const double base = 4096;
      switch (kind) {
        case 0: return static_cast<size_t>(base * 8 * w[j]);            // hot destinations
        case 1: return static_cast<size_t>(base * 8 * w[i]);            // hot sources
        case 2: return static_cast<size_t>(base * 8 * w[i] * w[j] * 4);  // both
        default: return static_cast<size_t>(base);                      // uniform
      }
    };
    for (int kind = 0; kind < 4; ++kind) {
      plan::Request req;
      req.collective = Collective::AllToAllv;
      req.nranks = p;
      req.matrix.resize(static_cast<size_t>(p) * p);
      std::vector<double> row(p, 0), col(p, 0);
      for (int i = 0; i < p; ++i)
        for (int j = 0; j < p; ++j) {
          const size_t v = cell(kind, i, j);
          req.matrix[static_cast<size_t>(i) * p + j] = v;
          if (i != j) {  // a rank's own block is copied locally, not sent
            row[i] += static_cast<double>(v * kEs);
            col[j] += static_cast<double>(v * kEs);
          }
        }
      const double bound = kAlpha + std::max(*std::max_element(row.begin(), row.end()),
                                             *std::max_element(col.begin(), col.end())) *
                                        kBeta;
      SCOPED_TRACE("p=" + std::to_string(p) + " kind " + std::to_string(kind));
      std::string err;
      auto concurrent = algo::build(req, "direct", &err);
      ASSERT_TRUE(concurrent.has_value()) << err;
      const double t = simulate(topo, *concurrent, sim::Mode::Flow).timeS;
      EXPECT_NEAR(t, bound, bound * 1e-9);
      if (p > 2) {
        auto pairwise = algo::build(req, "pairwise", &err);
        ASSERT_TRUE(pairwise.has_value()) << err;
        EXPECT_GT(simulate(topo, *pairwise, sim::Mode::Flow).timeS, t * 1.01);
      }
    }
  }
}

// On trn3-us144 a ring all-reduce never contends (each chip sends one message per step through a
// non-blocking fabric): analytical == flow, and both respect the lower bound.
TEST(SimUs144, RingAnalyticalEqualsFlowAndBounds) {
  ASSERT_NE(algo::find("ring", Collective::AllReduce), nullptr) << "ring/allreduce is not registered";
  fabric::Topology t;
  std::string err;
  ASSERT_EQ(fabric::Topology::load("trn3-us144", {}, &t, &err), Status::Success) << err;
  for (size_t count : {size_t(144) * 16, size_t(144) * 1024 * 64}) {
    plan::Request req;
    req.nranks = 144;
    req.count = count;
    auto pl = algo::build(req, "ring", &err);
    ASSERT_TRUE(pl.has_value()) << err;
    const auto f = simulate(t, *pl, sim::Mode::Flow);
    const auto a = simulate(t, *pl, sim::Mode::Analytical);
    EXPECT_NEAR(f.timeS, a.timeS, a.timeS * 1e-9);
    EXPECT_GE(f.timeS, ceilLg(144) * kAlpha + 2.0 * 143 / 144 * count * kEs * kBeta);
  }
}

// sim::CollectiveRun::inPlace reaches the Plan: rd in place reduces into scratch and copies the
// result home (a local op the chip's engine is charged for), ring in place stages nothing.
TEST(SimUs144, InPlaceChargesRdItsStagingCopyAndRingNothing) {
  fabric::Topology t;
  std::string err;
  ASSERT_EQ(fabric::Topology::load("trn3-us144", {}, &t, &err), Status::Success) << err;
  auto time = [&](const char* algo, bool inPlace) {
    sim::CollectiveRun run;
    run.algorithm = algo;
    run.nranks = 2;
    run.bytes = 16u << 20;
    run.inPlace = inPlace;
    sim::Result r;
    EXPECT_EQ(sim::simulateCollective(t, run, {}, &r, &err), Status::Success) << err;
    return r.timeS;
  };
  const double copy = t.chip().localOpSeconds(16u << 20, false);
  ASSERT_GT(copy, 0);
  EXPECT_NEAR(time("rd", true) - time("rd", false), copy, copy * 0.05);
  EXPECT_DOUBLE_EQ(time("ring", true), time("ring", false));
}

// Hierarchical all-reduce follows the three layers of trn3-us144 (4 x 18 x 2) and, on that
// non-blocking fabric, contends nowhere: analytical == flow, with a launch overhead added once.
TEST(SimUs144, HierFollowsTheLayersAndDoesNotContend) {
  ASSERT_NE(algo::find("hier", Collective::AllReduce), nullptr) << "hier/allreduce is not registered";
  fabric::Topology t;
  std::string err;
  ASSERT_EQ(fabric::Topology::load("trn3-us144", {"launch_overhead_us=58"}, &t, &err),
            Status::Success) << err;
  plan::Request req;
  req.nranks = 144;
  req.count = size_t(144) * 4096;
  req.groups = t.levelGroups(144);
  ASSERT_EQ(req.groups, (std::vector<int>{4, 18, 2}));
  auto pl = algo::build(req, "hier", &err);
  ASSERT_TRUE(pl.has_value()) << err;
  const auto f = simulate(t, *pl, sim::Mode::Flow);
  const auto a = simulate(t, *pl, sim::Mode::Analytical);
  EXPECT_NEAR(f.timeS, a.timeS, a.timeS * 1e-9);
  // Small messages: 2 x (3 + 17 + 1) steps of 10 us each, plus the launch overhead.
  req.count = 144;
  auto small = algo::build(req, "hier", &err);
  ASSERT_TRUE(small.has_value()) << err;
  // (the bandwidth terms of 576 bytes add about a nanosecond)
  const double ts = simulate(t, *small, sim::Mode::Flow).timeS;
  EXPECT_GE(ts, 58e-6 + 42 * kAlpha);
  EXPECT_LT(ts, 58e-6 + 42 * kAlpha + 1e-8);
}

}  // namespace

namespace {

// busbw of all-to-all-v as nccl-tests computes it for alltoallv: S is one rank's buffer (the
// matrix total over p), so a uniform matrix reports what all-to-all with that count does; the
// whole matrix's bytes would be p times too much.
TEST(Busbw, AllToAllvCountsOneRanksBufferAsNcclTestsDoes) {
  for (int p : {4, 8}) {
    const auto topo = flat(p);
    const size_t count = 1024;
    sim::CollectiveRun a2a;
    a2a.collective = Collective::AllToAll;
    a2a.algorithm = "direct";
    a2a.bytes = count * p * kEs;
    sim::CollectiveRun a2av = a2a;
    a2av.collective = Collective::AllToAllv;
    a2av.matrix.assign(static_cast<size_t>(p) * p, count);
    sim::Result x, y;
    std::string err;
    ASSERT_EQ(sim::simulateCollective(topo, a2a, {}, &x, &err), Status::Success) << err;
    ASSERT_EQ(sim::simulateCollective(topo, a2av, {}, &y, &err), Status::Success) << err;
    EXPECT_EQ(y.bytes, count * p * kEs);
    EXPECT_NEAR(y.timeS, x.timeS, x.timeS * 1e-12);
    EXPECT_NEAR(y.busbwGBps, x.busbwGBps, x.busbwGBps * 1e-12);
    EXPECT_NEAR(y.busbwGBps, y.algbwGBps * (p - 1.0) / p, 1e-9);
  }
}

}  // namespace
