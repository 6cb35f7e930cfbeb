// Choices that must hold, whatever the figures' fine print.
#include <gtest/gtest.h>

#include "nlccl/tuner.hpp"

namespace nlccl::tuner {
namespace {

Choice chosen(const std::string& fabricSpec, Collective c, size_t bytes) {
  fabric::Topology topo;
  std::string err;
  EXPECT_EQ(fabric::Topology::load(fabricSpec, {}, &topo, &err), Status::Success) << err;
  Query q;
  q.collective = c;
  q.bytes = bytes;
  Choice ch;
  EXPECT_EQ(choose(topo, q, {}, &ch, &err), Status::Success) << err;
  return ch;
}

TEST(TunerChoices, SmallAllReduceOn144ChipsIsNotRing) {
  const Choice ch = chosen("trn3-us144", Collective::AllReduce, 8);
  EXPECT_NE(ch.best.algorithm, "ring") << ch.best.label();
  EXPECT_FALSE(ch.considered.empty());
}

TEST(TunerChoices, OneSwitchLevelAtOneGiBIsRingOrRhd) {
  for (const char* f : {"flat:64", "flat:8", "nvl72"}) {
    const Choice ch = chosen(f, Collective::AllReduce, size_t{1} << 30);
    EXPECT_TRUE(ch.best.algorithm == "ring" || ch.best.algorithm == "rhd")
        << f << ": " << ch.best.label();
  }
}

TEST(TunerChoices, HierAcrossLayersAtLargeSizes) {
  for (const char* f : {"trn3-us144", "cluster:trn3-us144x8"}) {
    const Choice ch = chosen(f, Collective::AllReduce, size_t{1} << 30);
    EXPECT_EQ(ch.best.algorithm, "hier") << f << ": " << ch.best.label();
    EXPECT_GE(ch.best.levelAlgorithms.size(), 3u) << f;
  }
}

TEST(TunerChoices, BoundNeverExceedsFlowTime) {
  fabric::Topology topo;
  std::string err;
  ASSERT_EQ(fabric::Topology::load("trn3-us64", {}, &topo, &err), Status::Success) << err;
  for (Collective c : {Collective::AllReduce, Collective::AllToAll, Collective::Broadcast})
    for (size_t bytes : {size_t{8}, size_t{1} << 20, size_t{64} << 20}) {
      Query q;
      q.collective = c;
      q.bytes = bytes;
      Choice ch;
      ASSERT_EQ(choose(topo, q, {}, &ch, &err), Status::Success) << err;
      for (const Estimate& e : ch.considered)
        if (e.flowS >= 0) {
          EXPECT_LE(e.boundS, e.flowS * (1 + 1e-9))
              << collectiveName(c) << " " << bytes << " " << e.candidate.label();
        }
    }
}

TEST(TunerChoices, LabelsNameLevelsAndSlices) {
  Candidate c;
  c.algorithm = "hier";
  c.levelAlgorithms = {"ring", "rhd", "ring"};
  EXPECT_EQ(c.label(), "hier(ring,rhd,ring)");
  c.sliceBytes = 1 << 20;
  EXPECT_EQ(c.label(), "hier(ring,rhd,ring)/slice=1M");
}

}  // namespace
}  // namespace nlccl::tuner
