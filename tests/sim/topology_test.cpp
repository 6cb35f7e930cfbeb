// Topology loading, presets, overrides and routes.
#include <gtest/gtest.h>

#include "nlccl/topology.hpp"

using namespace nlccl;
using fabric::Topology;

namespace {

Topology load(const std::string& spec, std::vector<std::string> overrides = {}) {
  Topology t;
  std::string err;
  EXPECT_EQ(Topology::load(spec, overrides, &t, &err), Status::Success) << err;
  return t;
}

TEST(SimTopology, EveryPresetLoads) {
  for (const std::string& n : Topology::presetNames()) {
    Topology t = load(n);
    EXPECT_GT(t.numChips(), 0) << n;
    // Every pair of chips has a route that ends where it should.
    for (int a = 0; a < t.numChips(); a += 7)
      for (int b = 0; b < t.numChips(); b += 5) {
        const auto r = t.route(a, b);
        if (a == b) {
          EXPECT_TRUE(r.links.empty());
          continue;
        }
        ASSERT_FALSE(r.links.empty()) << n << " " << a << "->" << b;
        EXPECT_EQ(t.links()[r.links.front()].from, a) << n;
        EXPECT_EQ(t.links()[r.links.back()].to, b) << n;
        for (size_t i = 1; i < r.links.size(); ++i)
          EXPECT_EQ(t.links()[r.links[i - 1]].to, t.links()[r.links[i]].from) << n;
      }
  }
  EXPECT_EQ(load("trn3-us144").numChips(), 144);
  EXPECT_EQ(load("trn3-us64").numChips(), 64);
  EXPECT_EQ(load("trn2-us64").numChips(), 64);
  EXPECT_EQ(load("nvl72").numChips(), 72);
}

TEST(SimTopology, Trn3Us144RoutesClimbTheThreeLayers) {
  const Topology t = load("trn3-us144");
  ASSERT_EQ(t.levels().size(), 3u);
  struct Want {
    int a, b;
    size_t hops;
    int top;
  };
  // Chips 0-3 share server 0; 0 and 4 share rack 0 (servers 0-17); 0 and 72 are in different racks.
  for (const Want& w : {Want{0, 1, 2, 0}, Want{3, 0, 2, 0}, Want{0, 4, 4, 1}, Want{5, 70, 4, 1},
                        Want{0, 72, 6, 2}, Want{143, 0, 6, 2}}) {
    const auto r = t.route(w.a, w.b);
    EXPECT_EQ(r.links.size(), w.hops) << w.a << "->" << w.b;
    EXPECT_EQ(r.topLevel, w.top) << w.a << "->" << w.b;
    EXPECT_DOUBLE_EQ(r.latencyS, 10e-6);  // the press' chip-to-chip figure, whatever the layer
    EXPECT_DOUBLE_EQ(r.bottleneckBps, 1280e9);
  }
  EXPECT_EQ(t.linkName(t.route(0, 72).links[2]), "rack0->ultraserver0");
  // The rack uplink carries the rack's 72 chips at full rate (non-blocking).
  EXPECT_DOUBLE_EQ(t.links()[t.route(0, 72).links[2]].bwBps, 72 * 1280e9);
}

TEST(SimTopology, PcieVariantUsesPartnerLinks) {
  const Topology t = load("trn3-us144-pcie");
  auto r = t.route(0, 72);  // partner chip in the other rack
  EXPECT_EQ(r.links.size(), 1u);
  EXPECT_DOUBLE_EQ(r.bottleneckBps, 128e9);
  r = t.route(0, 73);  // via the partner, then the rack switch
  EXPECT_EQ(r.links.size(), 3u);
  EXPECT_DOUBLE_EQ(r.latencyS, 20e-6);
  r = t.route(0, 4);  // rack switch
  EXPECT_EQ(r.links.size(), 2u);
  EXPECT_DOUBLE_EQ(r.bottleneckBps, 320e9);
  EXPECT_DOUBLE_EQ(t.route(0, 1).bottleneckBps, 256e9);
}

TEST(SimTopology, TorusDimensionOrder) {
  const Topology t = load("trn2-us64");
  EXPECT_EQ(t.route(0, 1).links.size(), 1u);
  EXPECT_EQ(t.route(0, 2).links.size(), 2u);
  EXPECT_EQ(t.route(0, 3).links.size(), 1u);   // wrap-around
  EXPECT_EQ(t.route(0, 5).links.size(), 2u);   // x then y
  EXPECT_EQ(t.route(0, 10).links.size(), 4u);
  EXPECT_EQ(t.route(0, 16).links.size(), 1u);  // Z neighbour
  EXPECT_EQ(t.route(0, 32).links.size(), 2u);
  EXPECT_EQ(t.route(0, 16 + 5).links.size(), 3u);
  EXPECT_NEAR(t.route(0, 16 + 5).latencyS, 4.5e-6, 1e-15);
  EXPECT_DOUBLE_EQ(t.route(0, 16).bottleneckBps, 128e9);
}

TEST(SimTopology, ClusterJoinsCopiesOverEfa) {
  const Topology t = load("cluster:trn3-us144x4");
  EXPECT_EQ(t.numChips(), 576);
  const auto r = t.route(0, 144);
  EXPECT_EQ(r.links.size(), 2u);
  EXPECT_DOUBLE_EQ(r.latencyS, 15e-6);
  EXPECT_DOUBLE_EQ(r.bottleneckBps, 25e9);
  EXPECT_EQ(t.levelGroups(576), (std::vector<int>{4, 18, 2, 4}));
  EXPECT_EQ(load("cluster:trn3-us144x64").numChips(), 9216);
}

TEST(SimTopology, OverridesAndRanksPerChip) {
  const Topology t = load("trn3-us144", {"levels.server.bw_GBps=1099.5", "chip.hbm_GBps=4700",
                                         "ranks_per_chip=4", "levels.1.latency_us=2"});
  EXPECT_DOUBLE_EQ(t.route(0, 1).bottleneckBps, 1099.5e9);
  EXPECT_DOUBLE_EQ(t.chip().hbmBps, 4700e9);
  EXPECT_DOUBLE_EQ(t.route(0, 4).latencyS, 12e-6);
  EXPECT_EQ(t.numRanks(), 576);
  EXPECT_EQ(t.chipOfRank(5), 1);
  EXPECT_EQ(t.levelGroups(576), (std::vector<int>{4, 4, 18, 2}));
  EXPECT_EQ(t.levelGroups(16), (std::vector<int>{4, 4}));
  EXPECT_EQ(load("trn3-us144").levelGroups(144), (std::vector<int>{4, 18, 2}));
  EXPECT_EQ(load("trn3-us144").levelGroups(16), (std::vector<int>{4, 4}));
  Topology bad;
  std::string err;
  EXPECT_EQ(Topology::load("trn3-us144", {"levels.nosuch.bw_GBps=1"}, &bad, &err),
            Status::InvalidArgument);
  EXPECT_EQ(Topology::load("no-such-preset", {}, &bad, &err), Status::InvalidArgument);
  EXPECT_NE(err.find("trn3-us144"), std::string::npos) << err;
  EXPECT_EQ(Topology::load("flat:0", {}, &bad, &err), Status::InvalidArgument);
}

TEST(SimTopology, UserFileInTheSameFormat) {
  const std::string text = R"({"name": "two-level", "chip": {"dma_engines": 2, "dma_engine_GBps": 10},
    "levels": [{"name": "node", "kind": "switch", "size": 8, "bw_GBps": 100, "latency_us": 2},
               {"name": "spine", "kind": "switch", "size": 4, "attach": "below", "bw_GBps": 25,
                "latency_us": 3}]})";
  Topology t;
  std::string err;
  ASSERT_EQ(Topology::fromJsonText(text, {}, &t, &err), Status::Success) << err;
  EXPECT_EQ(t.numChips(), 32);
  EXPECT_DOUBLE_EQ(t.chip().dmaBps(), 20e9);
  const auto r = t.route(0, 8);
  EXPECT_EQ(r.links.size(), 4u);
  EXPECT_DOUBLE_EQ(r.latencyS, 5e-6);
  EXPECT_DOUBLE_EQ(r.bottleneckBps, 100e9);  // uplink 8 x 25 = 200 GB/s (2:1 oversubscribed... per chip)
  EXPECT_DOUBLE_EQ(t.links()[r.links[1]].bwBps, 200e9);
}

}  // namespace
