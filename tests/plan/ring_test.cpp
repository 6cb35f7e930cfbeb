// Ring and direct Plans: step counts and elements sent equal the alpha and beta coefficients of
// REFERENCE.md section 2, and chunking of uneven counts.
#include <gtest/gtest.h>

#include "algorithms/algorithms.hpp"
#include "algorithms/builders.hpp"
#include "algorithms/patterns.hpp"
#include "plan/verifier.hpp"

namespace nlccl::plan {
namespace {

Plan mustBuild(Collective c, int p, size_t count, const char* name = "ring") {
  Request req;
  req.collective = c;
  req.nranks = p;
  req.count = count;
  std::string err;
  std::optional<Plan> plan = algo::build(req, name, &err);
  EXPECT_TRUE(plan.has_value()) << err;
  std::string why;
  EXPECT_TRUE(verify(*plan, req, &why)) << why;
  return plan.value_or(Plan{});
}

TEST(RingCost, AllReduceIsTwoPMinusOneStepsAndTwoPMinusOneOverPElements) {
  for (int p = 2; p <= 17; ++p)
    for (size_t k : {1, 3, 64}) {
      const size_t n = p * k;
      Plan plan = mustBuild(Collective::AllReduce, p, n);
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(sequentialSteps(plan, r), static_cast<size_t>(2 * (p - 1))) << "p=" << p;
        EXPECT_EQ(elementsSent(plan, r), 2 * (p - 1) * n / p) << "p=" << p << " n=" << n;
      }
    }
}

TEST(RingCost, AllGatherAndReduceScatterArePMinusOneStepsAndPMinusOneOverPElements) {
  for (int p = 2; p <= 17; ++p)
    for (size_t c : {1, 5}) {
      const size_t n = p * c;  // the formulas' n: output (all-gather) or input (reduce-scatter)
      for (Collective coll : {Collective::AllGather, Collective::ReduceScatter}) {
        Plan plan = mustBuild(coll, p, c);
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(sequentialSteps(plan, r), static_cast<size_t>(p - 1)) << collectiveName(coll);
          EXPECT_EQ(elementsSent(plan, r), (p - 1) * n / p) << collectiveName(coll) << " p=" << p;
        }
      }
    }
}

TEST(RingCost, UnevenCountsSendAtMostOneExtraElementPerStep) {
  for (int p = 2; p <= 9; ++p) {
    const size_t n = 10 * p + 3;
    Plan plan = mustBuild(Collective::AllReduce, p, n);
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(sequentialSteps(plan, r), static_cast<size_t>(2 * (p - 1)));
      EXPECT_GE(elementsSent(plan, r), 2 * (p - 1) * (n / p));
      EXPECT_LE(elementsSent(plan, r), 2 * (p - 1) * (n / p + 1));
    }
  }
}

TEST(RingCost, RingPlansArePipelinable) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                       Collective::Broadcast, Collective::Reduce})
    EXPECT_TRUE(mustBuild(c, 5, 12).pipelinable) << collectiveName(c);
}

// The reductions take their local operand straight from Input (RecvReduceCopy), so no ring Plan
// copies locally, in place or not. Only in-place all-reduce, whose operands all sit in their
// destinations already, has nothing to fuse.
TEST(RingCost, ReductionsAreFusedAndNeverCopyLocally) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::Reduce})
    for (bool inPlace : {false, true}) {
      Request req;
      req.collective = c;
      req.nranks = 4;
      req.count = 12;
      req.inPlace = inPlace;
      std::optional<Plan> plan = algo::build(req, "ring");
      ASSERT_TRUE(plan.has_value());
      std::string why;
      EXPECT_TRUE(verify(*plan, req, &why)) << why;
      size_t fusedXfers = 0, locals = 0;
      for (const RankPlan& rp : plan->ranks)
        for (const Step& st : rp.channels[0].steps) {
          locals += st.locals.size();
          for (const Transfer& t : st.transfers) fusedXfers += readsSrc(t.kind);
        }
      SCOPED_TRACE(std::string(collectiveName(c)) + (inPlace ? " in place" : " out of place"));
      EXPECT_EQ(locals, 0u);
      if (inPlace && c == Collective::AllReduce) EXPECT_EQ(fusedXfers, 0u);
      else EXPECT_GT(fusedXfers, 0u);
    }
}

TEST(DirectCost, PairwiseAllToAllIsPMinusOneStepsAndPMinusOneOverPElements) {
  for (int p = 1; p <= 12; ++p) {
    const size_t c = 4;
    Plan plan = mustBuild(Collective::AllToAll, p, c, "pairwise");
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(sequentialSteps(plan, r), static_cast<size_t>(p - 1));
      EXPECT_EQ(elementsSent(plan, r), (p - 1) * c);
      // Step s talks to (r+s)%p and (r-s+p)%p.
      int s = 0;
      for (const Step& st : plan.ranks[r].channels[0].steps) {
        if (st.transfers.empty()) continue;
        ++s;
        ASSERT_EQ(st.transfers.size(), 2u);
        EXPECT_EQ(st.transfers[0].peer, (r + s) % p);
        EXPECT_EQ(st.transfers[1].peer, (r - s + p) % p);
      }
    }
  }
}

// The concurrent direct all-to-all talks to every peer at once: with the window at least p-1, one
// transfer step per channel (alpha once), each channel one peer at distance c+1; a smaller window
// puts the peers at distances c+1, c+1+W, ... on channel c, W in flight. In place it stages and
// moves the window in steps of W peers on one channel.
TEST(DirectCost, ConcurrentAllToAllPostsEveryPeerAtOnceWithinItsWindow) {
  for (int p = 2; p <= 12; ++p)
    for (int window : {1, 3, 64})
      for (bool inPlace : {false, true}) {
        Request req;
        req.collective = Collective::AllToAll;
        req.nranks = p;
        req.count = 4;
        req.inPlace = inPlace;
        const Plan plan = algo::concurrentAllToAll(req, window);
        std::string why;
        ASSERT_TRUE(verify(plan, req, &why)) << why;
        const int w = std::min(window, p - 1);
        const size_t steps = static_cast<size_t>((p - 1 + w - 1) / w);
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(sequentialSteps(plan, r), steps) << p << " " << window;
          EXPECT_EQ(elementsSent(plan, r), (p - 1) * req.count);
          if (inPlace) continue;
          for (int c = 0; c < w; ++c) {
            int s = c + 1;
            for (const Step& st : plan.ranks[r].channels[c].steps) {
              ASSERT_EQ(st.transfers.size(), 2u);
              EXPECT_EQ(st.transfers[0].peer, (r + s) % p);
              EXPECT_EQ(st.transfers[1].peer, (r - s + p) % p);
              s += w;
            }
          }
        }
      }
}

// The one chunker every family uses (patterns.hpp).
TEST(Patterns, ChunksCoverTheBufferAndDifferByAtMostOne) {
  for (int parts = 1; parts <= 17; ++parts)
    for (size_t n : {0, 1, 7, 16, 1000, 1003}) {
      size_t next = 0, lo = n, hi = 0;
      for (int j = 0; j < parts; ++j) {
        const Region c = algo::pattern::block(out(0, n), parts, j);
        EXPECT_EQ(c.offset, next);
        next += c.count;
        lo = std::min(lo, c.count);
        hi = std::max(hi, c.count);
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(hi - std::min(lo, hi), 1u);
    }
}

TEST(Registry, BuildRejectsAlgorithmsThatDoNotApplyAndNamesTheValidOnes) {
  Request req;
  req.collective = Collective::AllToAll;
  req.nranks = 4;
  req.count = 8;
  std::string err;
  EXPECT_FALSE(algo::build(req, "ring", &err).has_value());
  EXPECT_NE(err.find("direct"), std::string::npos) << err;
  EXPECT_FALSE(algo::build(req, "nosuch", &err).has_value());
  EXPECT_EQ(algo::find("ring", Collective::AllToAll), nullptr);
  ASSERT_NE(algo::find("ring", Collective::AllReduce), nullptr);
  EXPECT_NE(algo::validNames(Collective::AllReduce).find("ring"), std::string::npos);
  EXPECT_STREQ(algo::defaultAlgorithm(Collective::AllReduce), "ring");
  EXPECT_STREQ(algo::defaultAlgorithm(Collective::AllToAllv), "direct");
  for (Collective c :
       {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
        Collective::Broadcast, Collective::Reduce, Collective::AllToAll, Collective::AllToAllv})
    EXPECT_NE(algo::find(algo::defaultAlgorithm(c), c), nullptr) << collectiveName(c);
  std::optional<Plan> plan = algo::build(req, "direct");
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->algorithm, "direct");
}

}  // namespace
}  // namespace nlccl::plan
