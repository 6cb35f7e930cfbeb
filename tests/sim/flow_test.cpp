// Simulator semantics on hand-built Plans: alpha-beta exactness, contention, engine limits,
// analytical vs flow, pipelining, FlowModel.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fabric/flow_model.hpp"
#include "sim/simulate.hpp"
#include "sim/plans.hpp"

using namespace nlccl;

namespace {

fabric::Topology load(const std::string& spec, std::vector<std::string> overrides = {}) {
  fabric::Topology t;
  std::string err;
  EXPECT_EQ(fabric::Topology::load(spec, overrides, &t, &err), Status::Success) << err;
  return t;
}

sim::Result run(const fabric::Topology& t, const plan::Plan& p, sim::Mode mode = sim::Mode::Flow,
                int64_t chunk = -1) {
  sim::Options o;
  o.mode = mode;
  o.chunkBytes = chunk;
  sim::Result r;
  std::string err;
  EXPECT_EQ(sim::simulate(t, p, o, &r, &err), Status::Success) << err;
  return r;
}

constexpr double kAlpha = 10e-6, kBw = 1280e9;

TEST(SimFlow, RingAllReduceMatchesAlphaBeta) {
  for (int p : {2, 3, 8}) {
    const auto t = load("flat:" + std::to_string(p));
    const size_t count = 4096 * p;
    const double n = count * 4.0;
    const double want = 2 * (p - 1) * kAlpha + 2.0 * (p - 1) / p * n / kBw;
    for (auto mode : {sim::Mode::Flow, sim::Mode::Analytical}) {
      const auto r = run(t, simtest::ringAllReduce(p, count), mode);
      EXPECT_NEAR(r.timeS, want, want * 1e-9) << "p=" << p;
      EXPECT_EQ(r.rankFinishS.size(), static_cast<size_t>(p));
    }
  }
}

TEST(SimFlow, TwoFlowsOnOneLinkShareIt) {
  const auto t = load("flat:3");
  const size_t count = 1 << 20;
  const double n = count * 4.0;
  // 0->2 and 1->2 share 2's downlink: each gets half.
  const auto r = run(t, simtest::transfers(3, {{0, 2}, {1, 2}}, count));
  EXPECT_NEAR(r.timeS, kAlpha + 2 * n / kBw, 1e-12);
  // 0->1 and 0->2 share 0's uplink.
  const auto r2 = run(t, simtest::transfers(3, {{0, 1}, {0, 2}}, count));
  EXPECT_NEAR(r2.timeS, kAlpha + 2 * n / kBw, 1e-12);
  // Disjoint: full rate.
  const auto r3 = run(t, simtest::transfers(3, {{0, 1}, {1, 2}}, count));
  EXPECT_NEAR(r3.timeS, kAlpha + n / kBw, 1e-12);
  // Analytical ignores sharing, so it is a lower bound here.
  const auto ra = run(t, simtest::transfers(3, {{0, 2}, {1, 2}}, count), sim::Mode::Analytical);
  EXPECT_NEAR(ra.timeS, kAlpha + n / kBw, 1e-12);
  EXPECT_LT(ra.timeS, r.timeS);
}

TEST(SimFlow, MaxMinUnevenShares) {
  // Flows 0->2, 1->2, 1->3 on flat:4: downlink of 2 is shared by two flows (B/2 each); 1's uplink
  // carries 1->2 (B/2) and 1->3, which then gets the remaining B/2; when the shared flows finish
  // together, nothing is left. All three finish at alpha + 2n/B.
  const auto t = load("flat:4");
  const size_t count = 1 << 18;
  const double n = count * 4.0;
  const auto r = run(t, simtest::transfers(4, {{0, 2}, {1, 2}, {1, 3}}, count));
  EXPECT_NEAR(r.timeS, kAlpha + 2 * n / kBw, 1e-12);
  // 0->1, 0->2 and 3->2: 2's downlink and 0's uplink both split; every flow at B/2.
  const auto r2 = run(t, simtest::transfers(4, {{0, 1}, {0, 2}, {3, 2}}, count));
  EXPECT_NEAR(r2.timeS, kAlpha + 2 * n / kBw, 1e-12);
  // Peak utilisation of the shared link is 1.
  bool sawFull = false;
  for (const auto& l : r2.links) sawFull |= l.peakUtil > 0.999;
  EXPECT_TRUE(sawFull);
}

TEST(SimFlow, StaggeredContentionIsExact) {
  // Two messages of n and 3n bytes into one port: both at B/2 until the small one ends (2n/B),
  // then the big one at B: it ends at 2n/B + 2n/B.
  const auto t = load("flat:3");
  plan::Plan p = simtest::transfers(3, {{0, 2}}, 1 << 16);
  plan::Plan q = simtest::transfers(3, {{1, 2}}, 3 << 16);
  p.ranks[1] = q.ranks[1];
  auto& st = p.ranks[2].channels[0].steps[0].transfers;
  st.push_back(q.ranks[2].channels[0].steps[0].transfers[0]);
  const double n = (1 << 16) * 4.0;
  const auto r = run(t, p);
  EXPECT_NEAR(r.timeS, kAlpha + 4 * n / kBw, 1e-12);
  EXPECT_NEAR(r.rankFinishS[0], kAlpha + 2 * n / kBw, 1e-12);
}

TEST(SimFlow, DmaEnginesBind) {
  // 4 engines x 100 GB/s = 400 GB/s < the 1280 GB/s port: one message runs at 400 GB/s.
  const auto t = load("flat:2", {"chip.dma_engines=4", "chip.dma_engine_GBps=100"});
  const size_t count = 1 << 20;
  const auto r = run(t, simtest::transfers(2, {{0, 1}}, count));
  EXPECT_NEAR(r.timeS, kAlpha + count * 4.0 / 400e9, 1e-12);
  // Two messages out of one chip share the engines (200 GB/s each), though each has its own
  // destination port.
  const auto t3 = load("flat:3", {"chip.dma_engines=4", "chip.dma_engine_GBps=100"});
  const auto r2 = run(t3, simtest::transfers(3, {{0, 1}, {0, 2}}, count));
  EXPECT_NEAR(r2.timeS, kAlpha + 2 * count * 4.0 / 400e9, 1e-12);
}

TEST(SimFlow, ReceiverCopiesChargesTheReceiversEngine) {
  // One sender, two receivers, 100 GB/s engines: sender-side DMA shares the sender's engine
  // (50 GB/s each); with receiver_copies each receiver's engine moves its own message (a host
  // rank reading its peer's buffer), so both run at 100 GB/s. Two senders into one receiver
  // then share the receiver's engine instead.
  const std::vector<std::string> figures = {"chip.dma_engines=1", "chip.dma_engine_GBps=100"};
  std::vector<std::string> pulled = figures;
  pulled.push_back("chip.receiver_copies=true");
  const auto pushT = load("flat:3", figures), pullT = load("flat:3", pulled);
  ASSERT_TRUE(pullT.chip().receiverCopies);
  const size_t count = 1 << 20;
  const double n = count * 4.0;
  const plan::Plan fanOut = simtest::transfers(3, {{0, 1}, {0, 2}}, count);
  const plan::Plan fanIn = simtest::transfers(3, {{1, 0}, {2, 0}}, count);
  EXPECT_NEAR(run(pushT, fanOut).timeS, kAlpha + 2 * n / 100e9, 1e-12);
  EXPECT_NEAR(run(pullT, fanOut).timeS, kAlpha + n / 100e9, 1e-12);
  EXPECT_NEAR(run(pushT, fanIn).timeS, kAlpha + n / 100e9, 1e-12);
  EXPECT_NEAR(run(pullT, fanIn).timeS, kAlpha + 2 * n / 100e9, 1e-12);
  const auto r = run(pullT, fanIn);
  EXPECT_DOUBLE_EQ(r.rankBytesReceived[0], 2 * n);
  EXPECT_DOUBLE_EQ(r.rankBytesReceived[1], 0.0);
  EXPECT_DOUBLE_EQ(r.rankBytesSent[1], n);
  // The neuronlink transport's incremental model charges the same engine.
  fabric::FlowModel m(pullT);
  const auto a = m.add(0, 1, n, 0.0, false);
  const auto b = m.add(0, 2, n, 0.0, false);
  EXPECT_NEAR(m.finishTime(a), kAlpha + n / 100e9, 1e-12);
  EXPECT_NEAR(m.finishTime(b), kAlpha + n / 100e9, 1e-12);
  fabric::Topology bad;
  std::string err;
  EXPECT_NE(fabric::Topology::load("flat:2", {"chip.receiver_copies=2"}, &bad, &err),
            Status::Success);
  EXPECT_NE(err.find("receiver_copies"), std::string::npos) << err;
}

TEST(SimFlow, HbmBindsReductions) {
  // HBM 500 GB/s, 2 bytes of HBM per reduced byte: reduce-on-arrival runs at 250 GB/s; a plain
  // receive is not charged.
  const auto t = load("flat:2", {"chip.hbm_GBps=500"});
  const size_t count = 1 << 20;
  const double n = count * 4.0;
  EXPECT_NEAR(run(t, simtest::transfers(2, {{0, 1}}, count, true)).timeS, kAlpha + n / 250e9, 1e-12);
  EXPECT_NEAR(run(t, simtest::transfers(2, {{0, 1}}, count, false)).timeS, kAlpha + n / kBw, 1e-12);
  EXPECT_NEAR(run(t, simtest::transfers(2, {{0, 1}}, count, true), sim::Mode::Analytical).timeS,
              kAlpha + n / 250e9, 1e-12);
  // Two reductions into one chip from different sources share its HBM (125 GB/s each).
  const auto t3 = load("flat:3", {"chip.hbm_GBps=500"});
  EXPECT_NEAR(run(t3, simtest::transfers(3, {{0, 2}, {1, 2}}, count, true)).timeS,
              kAlpha + 2 * n / 500e9 * 2, 1e-12);
}

TEST(SimFlow, SharedEngineSerialisesSendsAndReductions) {
  // One engine per chip (a host rank's thread): 100 GB/s of sends, a reduced byte costing
  // 2 x 100 / 400 = 0.5 of a sent one. Two ranks that send to each other and reduce what
  // arrives: each engine carries r + 0.5 r = 100 GB/s, so r = 66.7 GB/s. Separate engines
  // (the default): the DMA binds at 100 GB/s and the HBM (200 GB/s of reduction) does not.
  const std::vector<std::string> figures = {"chip.dma_engines=1", "chip.dma_engine_GBps=100",
                                            "chip.hbm_GBps=400"};
  std::vector<std::string> shared = figures;
  shared.push_back("chip.shared_engine=true");
  const auto t = load("flat:2", shared), apart = load("flat:2", figures);
  ASSERT_TRUE(t.chip().sharesEngine());
  EXPECT_FALSE(apart.chip().sharesEngine());
  const size_t count = 1 << 20;
  const double n = count * 4.0;
  const plan::Plan exchange = simtest::transfers(2, {{0, 1}, {1, 0}}, count, true);
  for (bool reduce : {true, false}) {  // the representative form and every rank simulated
    sim::Options o;
    o.reduce = reduce;
    sim::Result r;
    std::string err;
    ASSERT_EQ(sim::simulate(t, exchange, o, &r, &err), Status::Success) << err;
    EXPECT_NEAR(r.timeS, kAlpha + 1.5 * n / 100e9, 1e-12) << "reduced form " << reduce;
  }
  EXPECT_NEAR(run(apart, exchange).timeS, kAlpha + n / 100e9, 1e-12);
  // Analytical mode times each transfer alone: no sharing.
  EXPECT_NEAR(run(t, exchange, sim::Mode::Analytical).timeS, kAlpha + n / 100e9, 1e-12);
  // One way, the engines are two chips': the sender's sends, the receiver's reduction.
  EXPECT_NEAR(run(t, simtest::transfers(2, {{0, 1}}, count, true)).timeS, kAlpha + n / 100e9,
              1e-12);
  // The neuronlink transport's incremental model shares the same way.
  fabric::FlowModel m(t);
  const auto a = m.add(0, 1, n, 0.0, true);
  const auto b = m.add(1, 0, n, 0.0, true);
  EXPECT_NEAR(m.finishTime(a), kAlpha + 1.5 * n / 100e9, 1e-12);
  EXPECT_NEAR(m.finishTime(b), kAlpha + 1.5 * n / 100e9, 1e-12);
}

// A switch uplink that the chips below it cannot fill is left out of the sharing (passive) but
// its load is still reported; an oversubscribed one still binds.
TEST(SimFlow, UplinksBindOnlyWhenOversubscribed) {
  const size_t count = 1 << 22;
  const double n = count * 4.0;
  // Chips 0 and 1 (server 0) each send to a chip of server 1: two flows up one server uplink.
  auto uplinkPeak = [](const fabric::Topology& t, const sim::Result& r) {
    double peak = 0;
    for (const sim::LinkStat& l : r.links) {
      const fabric::Link& link = t.links()[static_cast<size_t>(l.link)];
      if (link.from >= t.numChips() && link.to >= t.numChips()) peak = std::max(peak, l.peakUtil);
    }
    return peak;
  };
  const auto wide = load("trn3-us144");
  const double lone = run(wide, simtest::transfers(144, {{0, 4}}, count)).timeS;
  const auto both = run(wide, simtest::transfers(144, {{0, 4}, {1, 5}}, count));
  EXPECT_NEAR(both.timeS, lone, 1e-9 * lone);
  EXPECT_NEAR(uplinkPeak(wide, both), 0.5, 1e-9);  // 2 x 1280 GB/s of a 4 x 1280 GB/s uplink
  // A quarter of the bandwidth per chip above the server: the uplink (1280 GB/s) is shared.
  const auto thin = load("trn3-us144", {"levels.rack.bw_GBps=320"});
  const double lone2 = run(thin, simtest::transfers(144, {{0, 4}}, count)).timeS;
  const auto both2 = run(thin, simtest::transfers(144, {{0, 4}, {1, 5}}, count));
  EXPECT_NEAR(both2.timeS - lone2, n / 1280e9, 1e-9 * both2.timeS);
  EXPECT_NEAR(uplinkPeak(thin, both2), 1.0, 1e-9);
}

// Merging finishes within a precision re-solves less and moves the time by less than it.
TEST(SimFlow, PrecisionMergesFinishes) {
  const auto t = load("flat:16");
  std::vector<std::pair<int, int>> pairs;
  for (int s = 0; s < 16; ++s)
    for (int d = 0; d < 16; ++d)
      if (s != d) pairs.emplace_back(s, d);
  // Skewed sizes: pair (s, d) moves (1 + (7s + 3d) % 29) blocks, so finishes spread out.
  plan::Plan skew;
  skew.collective = Collective::SendRecv;
  skew.algorithm = "hand";
  skew.nranks = 16;
  skew.count = 1;
  skew.ranks.resize(16);
  for (auto& rk : skew.ranks) {
    rk.channels.resize(1);
    rk.channels[0].steps.resize(1);
  }
  for (auto [s, d] : pairs) {
    const size_t c = 4096 * (1 + (7 * s + 3 * d) % 29);
    skew.ranks[s].channels[0].steps[0].transfers.push_back(
        {plan::XferKind::Send, d, -1, plan::in(0, c)});
    skew.ranks[d].channels[0].steps[0].transfers.push_back(
        {plan::XferKind::Recv, s, -1, plan::out(0, c)});
  }
  sim::Options o;
  sim::Result exact, merged;
  std::string err;
  ASSERT_EQ(sim::simulate(t, skew, o, &exact, &err), Status::Success) << err;
  o.precision = 1e-2;
  ASSERT_EQ(sim::simulate(t, skew, o, &merged, &err), Status::Success) << err;
  EXPECT_LT(merged.solves, exact.solves);
  EXPECT_EQ(merged.transfers, exact.transfers);
  EXPECT_NEAR(merged.timeS, exact.timeS, 1e-2 * exact.timeS);
  for (size_t r = 0; r < 16; ++r)
    EXPECT_DOUBLE_EQ(merged.rankBytesSent[r], exact.rankBytesSent[r]);
}

TEST(SimFlow, RanksOfOneChipShareItsLinksAndEngines) {
  // flat:2 with 2 ranks per chip: ranks 0,1 on chip 0 and 2,3 on chip 1.
  const auto t = load("flat:2", {"ranks_per_chip=2"});
  ASSERT_EQ(t.numRanks(), 4);
  const size_t count = 1 << 20;
  const double n = count * 4.0;
  // 0->2 and 1->3 both cross chip 0's port: half the bandwidth each.
  EXPECT_NEAR(run(t, simtest::transfers(4, {{0, 2}, {1, 3}}, count)).timeS, kAlpha + 2 * n / kBw,
              1e-12);
  // 0->1 stays on the chip: no link, no latency; with unlimited engines it is free.
  EXPECT_NEAR(run(t, simtest::transfers(4, {{0, 1}}, count)).timeS, 0.0, 1e-15);
  // With engines set, an on-chip transfer runs at the DMA rate, and shares it with a send out.
  const auto e = load("flat:2", {"ranks_per_chip=2", "chip.dma_engines=10",
                                 "chip.dma_engine_GBps=100"});
  EXPECT_NEAR(run(e, simtest::transfers(4, {{0, 1}}, count)).timeS, n / 1000e9, 1e-12);
  EXPECT_NEAR(run(e, simtest::transfers(4, {{0, 1}, {0, 2}}, count)).timeS, kAlpha + n / 500e9,
              1e-12);
}

TEST(SimFlow, PipelinedChainBroadcast) {
  // p-1 hops, L slices: (p-1+L-1) (alpha + n/(L B)).
  const int p = 5;
  const auto t = load("flat:5");
  const size_t count = 1 << 20;
  const double n = count * 4.0;
  const auto r1 = run(t, simtest::chainBroadcast(p, count));
  EXPECT_EQ(r1.loops, 1);
  EXPECT_NEAR(r1.timeS, (p - 1) * (kAlpha + n / kBw), 1e-12);
  const auto r8 = run(t, simtest::chainBroadcast(p, count), sim::Mode::Flow, n / 8);
  EXPECT_EQ(r8.loops, 8);
  EXPECT_NEAR(r8.timeS, (p - 1 + 8 - 1) * (kAlpha + n / 8 / kBw), 1e-12);
  const auto a8 = run(t, simtest::chainBroadcast(p, count), sim::Mode::Analytical, n / 8);
  EXPECT_NEAR(a8.timeS, r8.timeS, 1e-12);
}

TEST(SimFlow, UnmatchedPlanIsAnError) {
  const auto t = load("flat:2");
  plan::Plan p = simtest::transfers(2, {{0, 1}}, 16);
  p.ranks[1].channels[0].steps[0].transfers.clear();
  sim::Result r;
  std::string err;
  EXPECT_EQ(sim::simulate(t, p, {}, &r, &err), Status::InvalidArgument);
  EXPECT_NE(err.find("unmatched"), std::string::npos) << err;
}

TEST(SimFlow, TraceHasEveryTransfer) {
  const auto t = load("flat:4");
  sim::Options o;
  o.trace = true;
  sim::Result r;
  std::string err;
  ASSERT_EQ(sim::simulate(t, simtest::ringAllReduce(4, 4096), o, &r, &err), Status::Success);
  ASSERT_EQ(r.trace.size(), 4u * 6u);
  const std::string path = ::testing::TempDir() + "/sim_trace.json";
  ASSERT_EQ(sim::writeChromeTrace(t, r, path, &err), Status::Success) << err;
  // Read it back: valid JSON with one complete event per transfer (times in us, on the sender's
  // row), a name per rank and a finish marker per rank at the rank's finish time.
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << path << " is not JSON";
  EXPECT_EQ(doc["otherData"]["ranks"], 4);
  EXPECT_NEAR(doc["otherData"]["time_us"].get<double>(), r.timeS * 1e6, 1e-6);
  std::vector<nlohmann::json> sends, names, finishes;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    (ph == "X" ? sends : ph == "M" ? names : finishes).push_back(e);
  }
  ASSERT_EQ(sends.size(), r.trace.size());
  EXPECT_EQ(names.size(), 4u);
  ASSERT_EQ(finishes.size(), 4u);
  for (size_t i = 0; i < sends.size(); ++i) {
    const sim::TraceEvent& want = r.trace[i];
    const auto& e = sends[i];
    EXPECT_EQ(e["tid"], want.src) << i;
    EXPECT_EQ(e["args"]["dst"], want.dst) << i;
    EXPECT_EQ(e["args"]["step"], want.step) << i;
    EXPECT_EQ(e["args"]["bytes"].get<double>(), want.bytes) << i;
    EXPECT_EQ(e["name"], (want.reduce ? "sendReduce " : "send ") + std::to_string(want.src) +
                             "->" + std::to_string(want.dst));
    EXPECT_NEAR(e["ts"].get<double>(), want.startS * 1e6, 1e-6) << i;
    EXPECT_NEAR(e["dur"].get<double>(), (want.endS - want.startS) * 1e6, 1e-6) << i;
    EXPECT_GT(e["dur"].get<double>(), 0) << i;
  }
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(finishes[rank]["tid"], rank);
    EXPECT_NEAR(finishes[rank]["ts"].get<double>(), r.rankFinishS[rank] * 1e6, 1e-6);
  }
  // Every rank sends 6 messages of a 4-rank ring all-reduce, each to its right neighbour, half of
  // them reduced on arrival (the reduce-scatter).
  for (int rank = 0; rank < 4; ++rank) {
    int n = 0, reduced = 0;
    for (const auto& e : r.trace)
      if (e.src == rank) {
        ++n;
        reduced += e.reduce;
        EXPECT_EQ(e.dst, (rank + 1) % 4);
      }
    EXPECT_EQ(n, 6);
    EXPECT_EQ(reduced, 3);
  }
}

TEST(SimFlow, FlowModelIncremental) {
  const auto t = load("flat:3");
  fabric::FlowModel m(t);
  const double n = 1e6;
  const auto a = m.add(0, 2, n, 0.0);
  const auto b = m.add(1, 2, n, 0.0);
  EXPECT_NEAR(m.finishTime(a), kAlpha + 2 * n / kBw, 1e-12);
  EXPECT_NEAR(m.finishTime(b), kAlpha + 2 * n / kBw, 1e-12);
  // A lone later transfer sees the whole link.
  const auto c = m.add(0, 1, n, 1.0);
  EXPECT_NEAR(m.finishTime(c), 1.0 + kAlpha + n / kBw, 1e-12);
  EXPECT_NEAR(m.latencyS(0, 1), kAlpha, 1e-15);
  EXPECT_NEAR(m.bottleneckBps(0, 1), kBw, 1e-3);
}

TEST(SimFlow, FlowModelSettlesOnlyWhatHasFinishedByTheHorizon) {
  const auto t = load("flat:3");
  fabric::FlowModel m(t);
  const double n = 1e6;  // alone: n / kBw = 0.78 us of data
  const auto a = m.add(0, 2, n, 0.0);
  double arrival = 0;
  // Before anything runs, the bound is the lone-transfer time; nothing has arrived.
  EXPECT_NEAR(m.arrivalLowerBound(a), kAlpha + n / kBw, 1e-15);
  m.advanceTo(0.5 * n / kBw);
  EXPECT_FALSE(m.arrived(a, &arrival));
  // Half the bytes moved: the bound is now + the other half alone + latency.
  EXPECT_NEAR(m.arrivalLowerBound(a), kAlpha + n / kBw, 1e-15);
  // A second transfer into the same port halves a's rate from here on.
  const auto b = m.add(1, 2, n, 0.5 * n / kBw);
  m.advanceTo(1.0 * n / kBw);
  EXPECT_FALSE(m.arrived(a, &arrival)) << "a has a quarter of its bytes left";
  EXPECT_NEAR(m.arrivalLowerBound(a), kAlpha + 1.25 * n / kBw, 1e-15);
  m.advanceTo(1.5 * n / kBw);
  ASSERT_TRUE(m.arrived(a, &arrival));
  EXPECT_NEAR(arrival, kAlpha + 1.5 * n / kBw, 1e-15);
  EXPECT_NEAR(m.arrivalLowerBound(a), arrival, 0);
  EXPECT_NEAR(m.finishTime(b), kAlpha + 2.0 * n / kBw, 1e-15);
  m.forget(a);
  EXPECT_FALSE(m.arrived(a, &arrival));
}

TEST(SimFlow, FlowModelLatencyAndRateCapOverrides) {
  const auto t = load("flat:3");
  fabric::FlowModel::Options o;
  o.latencyS = 2e-6;
  o.rateCapBps = kBw / 4;
  fabric::FlowModel m(t, o);
  const double n = 1e6;
  // Two transfers share port 2 (kBw / 2 each) but each is capped at kBw / 4.
  const auto a = m.add(0, 2, n, 0.0);
  const auto b = m.add(1, 2, n, 0.0);
  EXPECT_NEAR(m.finishTime(a), 2e-6 + 4 * n / kBw, 1e-15);
  EXPECT_NEAR(m.finishTime(b), 2e-6 + 4 * n / kBw, 1e-15);
  EXPECT_NEAR(m.latencyS(0, 1), 2e-6, 0);
  EXPECT_NEAR(m.bottleneckBps(0, 1), kBw / 4, 1e-3);
}

}  // namespace
