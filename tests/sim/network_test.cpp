// FlowNetwork's incremental max-min solution against a from-scratch reference on random cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "fabric/flow_network.hpp"

using nlccl::fabric::FlowNetwork;
using nlccl::fabric::Use;

namespace {

struct Spec {
  double start, bytes;
  std::vector<Use> uses;
  double cap = std::numeric_limits<double>::infinity();  ///< FlowNetwork::start's capBps
};

// Progressive filling over every active flow (no incrementality).
std::vector<double> maxMin(const std::vector<double>& cap, const std::vector<Spec>& flows,
                           const std::vector<int>& active) {
  std::vector<double> rate(flows.size(), 0), left = cap;
  std::vector<char> fixed(flows.size(), 1);
  for (int f : active) fixed[f] = 0;
  for (;;) {
    double best = std::numeric_limits<double>::infinity();
    int bestRes = -1;
    for (size_t r = 0; r < cap.size(); ++r) {
      double c = 0;
      for (int f : active)
        if (!fixed[f])
          for (const Use& u : flows[f].uses) c += u.res == static_cast<int>(r) ? u.coef : 0;
      if (c > 1e-12 && left[r] / c < best) {
        best = left[r] / c;
        bestRes = static_cast<int>(r);
      }
    }
    if (bestRes < 0) break;
    // Raise every unfixed flow by `best`, then fix those on saturated resources.
    for (int f : active)
      if (!fixed[f]) {
        rate[f] += best;
        for (const Use& u : flows[f].uses) left[u.res] -= u.coef * best;
      }
    for (int f : active)
      if (!fixed[f])
        for (const Use& u : flows[f].uses)
          if (left[u.res] <= cap[u.res] * 1e-12) fixed[f] = 1;
  }
  return rate;
}

// Finish time of every flow by a fluid simulation that re-solves everything at each event;
// *peak (when given) gets the largest total rate of the flows marked in `watch`.
std::vector<double> reference(const std::vector<double>& cap, const std::vector<Spec>& flows,
                              const std::vector<char>* watch = nullptr, double* peak = nullptr) {
  const size_t n = flows.size();
  std::vector<double> rem(n), finish(n, -1);
  for (size_t i = 0; i < n; ++i) rem[i] = flows[i].bytes;
  double t = 0;
  for (;;) {
    std::vector<int> active;
    double next = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < n; ++i) {
      if (finish[i] >= 0) continue;
      if (flows[i].start <= t * (1 + 1e-12)) active.push_back(static_cast<int>(i));
      else next = std::min(next, flows[i].start);
    }
    if (active.empty() && !std::isfinite(next)) break;
    const auto rate = maxMin(cap, flows, active);
    if (peak) {
      double load = 0;
      for (int f : active) load += (*watch)[f] ? rate[f] : 0;
      *peak = std::max(*peak, load);
    }
    for (int f : active) next = std::min(next, t + rem[f] / rate[f]);
    for (int f : active) {
      rem[f] -= rate[f] * (next - t);
      if (rem[f] <= flows[f].bytes * 1e-9) finish[f] = next;
    }
    t = next;
  }
  return finish;
}

// Finish time of every flow through FlowNetwork, started in order of start time.
std::vector<double> incremental(FlowNetwork& net, const std::vector<Spec>& flows) {
  std::vector<double> got(flows.size(), -1);
  std::vector<int> order(flows.size());
  for (size_t i = 0; i < flows.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return flows[a].start < flows[b].start; });
  size_t nextStart = 0;
  std::vector<int64_t> done;
  for (;;) {
    const double ts = nextStart < order.size() ? flows[order[nextStart]].start
                                               : std::numeric_limits<double>::infinity();
    const double t = std::min(ts, net.nextFinish());
    if (!std::isfinite(t)) break;
    done.clear();
    net.popFinished(t, &done);
    for (int64_t d : done) got[d] = t;
    while (nextStart < order.size() && flows[order[nextStart]].start <= t) {
      const Spec& f = flows[order[nextStart]];
      net.start(t, f.uses.data(), static_cast<int>(f.uses.size()), f.bytes, order[nextStart],
                f.cap);
      ++nextStart;
    }
    net.solve(t);
  }
  return got;
}

// Every finish time of `got` within 1e-9 (relative, or absolute below 1) of `want`'s.
::testing::AssertionResult sameFinishes(const std::vector<double>& got,
                                        const std::vector<double>& want) {
  for (size_t i = 0; i < want.size(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-9 * std::max(1.0, want[i]))
      return ::testing::AssertionFailure() << "flow " << i << ": " << got[i] << ", want " << want[i];
  return ::testing::AssertionSuccess();
}

TEST(SimNetwork, IncrementalMatchesFromScratch) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 1000; ++trial) {
    const int nres = 2 + static_cast<int>(rng() % 6);
    std::vector<double> cap(nres);
    for (double& c : cap) c = 1 + static_cast<double>(rng() % 4);
    std::vector<Spec> flows(2 + rng() % 16);
    for (Spec& f : flows) {
      f.start = static_cast<double>(rng() % 4);
      f.bytes = 1 + static_cast<double>(rng() % 8);
      const int k = 1 + static_cast<int>(rng() % 3);
      for (int j = 0; j < k; ++j) {
        const int r = static_cast<int>(rng() % nres);
        bool dup = false;
        for (const Use& u : f.uses) dup |= u.res == r;
        if (!dup) f.uses.push_back({r, rng() % 3 == 0 ? 2.0 : 1.0});
      }
    }
    const auto want = reference(cap, flows);

    FlowNetwork net;
    for (double c : cap) net.addResource(c);
    const auto got = incremental(net, flows);
    ASSERT_TRUE(sameFinishes(got, want)) << "trial " << trial;
  }
}

// Larger cases, with per-flow caps (FlowNetwork keeps them apart from the resources: the
// reference gives each capped flow a private resource) and a passive resource that no flow can
// saturate (ignored by the reference, its peak load checked): the threshold of solve() freezes
// many more flows here.
TEST(SimNetwork, IncrementalMatchesFromScratchWithCapsAndPassive) {
  std::mt19937 rng(777);
  for (int trial = 0; trial < 300; ++trial) {
    const int nres = 3 + static_cast<int>(rng() % 10);
    std::vector<double> cap(nres);
    for (double& c : cap) c = 1 + static_cast<double>(rng() % 6);
    const size_t nflows = 10 + rng() % 40;
    std::vector<Spec> flows(nflows);
    std::vector<double> flowCap(nflows, std::numeric_limits<double>::infinity());
    std::vector<char> onPassive(nflows, 0);
    std::vector<double> refCap = cap;
    std::vector<Spec> refFlows;
    for (size_t i = 0; i < nflows; ++i) {
      Spec& f = flows[i];
      f.start = static_cast<double>(rng() % 6);
      f.bytes = 1 + static_cast<double>(rng() % 12);
      const int k = 1 + static_cast<int>(rng() % 3);
      for (int j = 0; j < k; ++j) {
        const int r = static_cast<int>(rng() % nres);
        bool dup = false;
        for (const Use& u : f.uses) dup |= u.res == r;
        if (!dup) f.uses.push_back({r, rng() % 4 == 0 ? 2.0 : 1.0});
      }
      Spec ref = f;
      if (rng() % 3 == 0) {
        flowCap[i] = 0.25 * (1 + rng() % 8);
        refCap.push_back(flowCap[i]);
        ref.uses.push_back({static_cast<int>(refCap.size()) - 1, 1.0});
      }
      onPassive[i] = rng() % 2;
      refFlows.push_back(ref);
    }
    double wantPeak = 0;
    const auto want = reference(refCap, refFlows, &onPassive, &wantPeak);

    FlowNetwork net;
    for (double c : cap) net.addResource(c);
    // Capacity above the sum of every resource's: nothing on it can ever saturate it.
    double total = 0;
    for (double c : cap) total += c;
    const int passive = net.addResource(total + 1, true);
    for (size_t i = 0; i < nflows; ++i) {
      flows[i].cap = flowCap[i];
      if (onPassive[i]) flows[i].uses.push_back({passive, 1.0});
    }
    const auto got = incremental(net, flows);
    ASSERT_TRUE(sameFinishes(got, want)) << "trial " << trial;
    EXPECT_NEAR(net.peakUtil(passive), wantPeak / (total + 1), 1e-9) << "trial " << trial;
  }
}

}  // namespace

// All-to-all-shaped cases, as a MoE dispatch makes them: every flow leaves a source's egress
// and enters a destination's ingress, a few destinations are hot, starts are staggered and some
// flows have caps. Most coupled flows here are bottlenecked elsewhere than where they meet, which
// is what the component's expansion leaves out.
TEST(SimNetwork, IncrementalMatchesFromScratchOnSkewedAllToAll) {
  std::mt19937 rng(4242);
  for (int trial = 0; trial < 400; ++trial) {
    const int src = 3 + static_cast<int>(rng() % 5), dst = 3 + static_cast<int>(rng() % 5);
    std::vector<double> cap;
    for (int i = 0; i < src + dst; ++i) cap.push_back(1 + static_cast<double>(rng() % 4));
    std::vector<Spec> flows, refFlows;
    std::vector<double> refCap = cap;
    for (int s = 0; s < src; ++s)
      for (int d = 0; d < dst; ++d) {
        Spec f;
        f.start = static_cast<double>(rng() % 3);
        // Destination 0 is hot: it receives several times the bytes.
        f.bytes = (d == 0 ? 6.0 : 1.0) * (1 + static_cast<double>(rng() % 6));
        f.uses = {{s, 1.0}, {src + d, 1.0}};
        Spec ref = f;
        if (rng() % 4 == 0) {
          f.cap = 0.25 * (1 + rng() % 6);
          refCap.push_back(f.cap);
          ref.uses.push_back({static_cast<int>(refCap.size()) - 1, 1.0});
        }
        flows.push_back(f);
        refFlows.push_back(ref);
      }
    const auto want = reference(refCap, refFlows);
    FlowNetwork net;
    for (double c : cap) net.addResource(c);
    const auto got = incremental(net, flows);
    ASSERT_TRUE(sameFinishes(got, want)) << "trial " << trial;
  }
}

// A departure re-rates only the flows bottlenecked where it left: on resource 0, two flows
// limited by it alone and a hundred that resource 1 limits (faster than the departing one, so
// the frozen-flow threshold does not keep them out). Only the two are re-rated.
TEST(SimNetwork, DepartureReRatesOnlyTheFlowsBottleneckedThere) {
  FlowNetwork net;
  const int shared = net.addResource(200), narrow = net.addResource(100), slow = net.addResource(0.5);
  const Use onShared[] = {{shared, 1.0}}, viaNarrow[] = {{shared, 1.0}, {narrow, 1.0}},
            viaSlow[] = {{shared, 1.0}, {slow, 1.0}};
  const int a = net.start(0, onShared, 1, 1e9, 0);
  const int b = net.start(0, onShared, 1, 1e9, 1);
  const int s = net.start(0, viaSlow, 2, 0.5, 2);  // leaves at t = 1
  std::vector<int> capped;
  for (int i = 0; i < 100; ++i) capped.push_back(net.start(0, viaNarrow, 2, 1e9, 10 + i));
  net.solve(0);
  EXPECT_DOUBLE_EQ(net.rate(a), (200 - 0.5 - 100) / 2);
  EXPECT_DOUBLE_EQ(net.rate(s), 0.5);
  EXPECT_DOUBLE_EQ(net.rate(capped[0]), 1.0);
  ASSERT_DOUBLE_EQ(net.nextFinish(), 1.0);
  std::vector<int64_t> done;
  net.popFinished(1.0, &done);
  ASSERT_EQ(done, std::vector<int64_t>{2});
  const size_t before = net.stats().flowsFilled;
  net.solve(1.0);
  EXPECT_EQ(net.stats().flowsFilled - before, 2u);
  EXPECT_DOUBLE_EQ(net.rate(a), 50.0);
  EXPECT_DOUBLE_EQ(net.rate(b), 50.0);
  for (int f : capped) EXPECT_DOUBLE_EQ(net.rate(f), 1.0);
}
