// The verifier rejects broken Plans and says where they go wrong.
#include "plan/verifier.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "algorithms/algorithms.hpp"

namespace nlccl::plan {
namespace {

Request request(Collective c, int p, size_t count, bool inPlace = false) {
  Request req;
  req.collective = c;
  req.nranks = p;
  req.count = count;
  req.inPlace = inPlace;
  return req;
}

/// An empty 2-rank all-reduce Plan of 4 elements (4 of Scratch) for tests to fill in by hand.
Plan handWritten2RankAllReduce() {
  Plan plan;
  plan.collective = Collective::AllReduce;
  plan.nranks = 2;
  plan.count = 4;
  plan.scratchCount = 4;
  plan.ranks.resize(2);
  return plan;
}

Plan ringPlan(const Request& req) {
  std::optional<Plan> plan = algo::build(req, "ring");
  EXPECT_TRUE(plan.has_value());
  std::string why;
  EXPECT_TRUE(verify(*plan, req, &why)) << why;
  return *plan;
}

// Expects `plan` to fail verification with a message containing every one of `words`.
void expectRejected(const Plan& plan, const Request& req, std::vector<std::string> words) {
  std::string why;
  ASSERT_FALSE(verify(plan, req, &why)) << "a broken plan was accepted";
  for (const std::string& w : words) EXPECT_NE(why.find(w), std::string::npos) << why;
}

// The k-th step of `rank` that posts transfers.
Step& transferStep(Plan& plan, int rank, int k) {
  for (Step& s : plan.ranks[rank].channels[0].steps)
    if (!s.transfers.empty() && k-- == 0) return s;
  throw std::out_of_range("no such step");
}

TEST(Verifier, AcceptsRingAllReduce) { ringPlan(request(Collective::AllReduce, 4, 10)); }

TEST(Verifier, RejectsADroppedStep) {
  Request req = request(Collective::AllReduce, 4, 10);
  Plan plan = ringPlan(req);
  std::vector<Step>& steps = plan.ranks[2].channels[0].steps;
  steps.erase(steps.begin() + 3);
  expectRejected(plan, req, {"rank", "step"});
}

TEST(Verifier, RejectsADroppedLastStepAsUnmatched) {
  Request req = request(Collective::AllGather, 3, 4);
  Plan plan = ringPlan(req);
  plan.ranks[1].channels[0].steps.pop_back();
  expectRejected(plan, req, {"no matching", "rank"});
}

TEST(Verifier, RejectsAWrongPeer) {
  Request req = request(Collective::AllReduce, 5, 10);
  Plan plan = ringPlan(req);
  transferStep(plan, 1, 2).transfers[0].peer = 4;
  expectRejected(plan, req, {"rank"});
}

TEST(Verifier, RejectsASwappedRegion) {
  Request req = request(Collective::AllGather, 4, 3);
  Plan plan = ringPlan(req);
  // Rank 0 receives two blocks into each other's places (sizes match, only the data is wrong).
  std::swap(transferStep(plan, 0, 0).transfers[1].region,
            transferStep(plan, 0, 1).transfers[1].region);
  expectRejected(plan, req, {"rank 0", "Output["});
}

TEST(Verifier, RejectsADoubleReduce) {
  Request req = request(Collective::AllReduce, 3, 6);
  Plan plan = ringPlan(req);
  plan.ranks[0].channels[0].steps.back().locals.push_back({LocalKind::Reduce, in(0, 6), out(0, 6)});
  expectRejected(plan, req, {"twice", "rank 0"});
}

TEST(Verifier, RejectsAMissingContribution) {
  Request req = request(Collective::AllReduce, 4, 8);
  Plan plan = ringPlan(req);
  Transfer& t = transferStep(plan, 2, 1).transfers[1];
  ASSERT_EQ(t.kind, XferKind::RecvReduceCopy);  // out of place: Output = Input op incoming
  t.kind = XferKind::Recv;
  expectRejected(plan, req, {"lacks the contribution"});
}

TEST(Verifier, RejectsARaceBetweenChannels) {
  Request req = request(Collective::AllReduce, 3, 6);
  Plan plan = ringPlan(req);
  Channel extra;
  extra.steps.push_back({{}, {{LocalKind::Copy, in(0, 2), out(1, 2)}}});
  plan.ranks[1].channels.push_back(extra);
  expectRejected(plan, req, {"race", "rank 1"});
}

TEST(Verifier, RejectsARaceInsideAStep) {
  Request req = request(Collective::AllGather, 3, 4);
  Plan plan = ringPlan(req);
  // Every rank receives into the block it is sending in its second step.
  for (int r = 0; r < 3; ++r) {
    Step& s = transferStep(plan, r, 1);
    s.transfers[1].region = s.transfers[0].region;
  }
  expectRejected(plan, req, {"race", "step"});
}

TEST(Verifier, RejectsOutOfBoundsRegions) {
  Request req = request(Collective::AllReduce, 2, 6);
  Plan plan = ringPlan(req);
  transferStep(plan, 0, 0).transfers[0].region.offset = 5;  // 3 elements from 5 in 6 elements
  expectRejected(plan, req, {"exceeds", "rank 0"});
  Plan plan2 = ringPlan(req);
  plan2.ranks[1].channels[0].steps[0].locals.push_back({LocalKind::Copy, in(0, 1), scratch(0, 1)});
  expectRejected(plan2, req, {"Scratch", "exceeds"});
}

TEST(Verifier, RejectsSizeMismatches) {
  Request req = request(Collective::AllGather, 3, 4);
  Plan plan = ringPlan(req);
  transferStep(plan, 2, 0).transfers[1].region.count = 3;
  expectRejected(plan, req, {"sizes differ"});
}

TEST(Verifier, RejectsDeadlock) {
  Request req = request(Collective::AllReduce, 2, 4);
  Plan plan = handWritten2RankAllReduce();
  for (int r = 0; r < 2; ++r) {
    Channel ch;
    ch.steps.push_back({{{XferKind::Recv, 1 - r, -1, scratch(0, 4)}}, {}});
    ch.steps.push_back({{{XferKind::Send, 1 - r, -1, in(0, 4)}}, {}});
    plan.ranks[r].channels.push_back(ch);
  }
  expectRejected(plan, req, {"deadlock", "rank 0", "rank 1"});
}

TEST(Verifier, RejectsWritesToTheSendBufferOutOfPlace) {
  Request req = request(Collective::AllReduce, 2, 4);
  Plan plan = ringPlan(req);
  plan.ranks[0].channels[0].steps.back().locals.push_back({LocalKind::Copy, out(0, 4), in(0, 4)});
  expectRejected(plan, req, {"send buffer"});
}

TEST(Verifier, RejectsReducingUninitializedData) {
  Request req = request(Collective::AllReduce, 2, 4);
  Plan plan = ringPlan(req);
  plan.scratchCount = 4;
  plan.ranks[0].channels[0].steps.back().locals.push_back(
      {LocalKind::Reduce, in(0, 4), scratch(0, 4)});
  expectRejected(plan, req, {"uninitialized"});
}

TEST(Verifier, RejectsAPlanForAnotherRequest) {
  Request req = request(Collective::AllReduce, 4, 10);
  Plan plan = ringPlan(req);
  expectRejected(plan, request(Collective::AllReduce, 5, 10), {"ranks"});
  expectRejected(plan, request(Collective::AllGather, 4, 10), {"allreduce"});
  std::string why;  // same shape, larger count: the last elements are never written
  EXPECT_FALSE(verify(plan, request(Collective::AllReduce, 4, 12), &why));
}

TEST(Verifier, ChecksTheInPlaceAliasing) {
  // In-place ReduceScatter puts Output inside Input: loading every partial sum into Output
  // clobbers this rank's Input block before it is read.
  Request inPlace = request(Collective::ReduceScatter, 4, 2, true);
  Plan plan = ringPlan(inPlace);
  for (Step& s : plan.ranks[0].channels[0].steps) {
    for (LocalOp& op : s.locals) op.dst = out(0, 2);
    for (Transfer& t : s.transfers)
      if (t.region.buffer == Buffer::Scratch) t.region = out(0, 2);
  }
  std::string why;
  EXPECT_FALSE(verify(plan, inPlace, &why));
  EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
}

// A ring all-reduce whose out-of-place copy is one whole-buffer step: correct when run as one
// loop, but not pipelinable (loop 0 of step 1 reads chunks that loop 0 of the copy did not write).
TEST(Verifier, RejectsAPipeliningHazard) {
  Request req = request(Collective::AllReduce, 4, 12);
  Plan plan = ringPlan(request(Collective::AllReduce, 4, 12, true));
  plan.inPlace = false;
  for (RankPlan& rp : plan.ranks) {
    std::vector<Step>& steps = rp.channels[0].steps;
    for (Step& s : steps)
      for (Transfer& t : s.transfers) t.region.buffer = Buffer::Output;
    steps.insert(steps.begin(), Step{{}, {{LocalKind::Copy, in(0, 12), out(0, 12)}}});
  }
  std::string why;
  EXPECT_TRUE(verifyLoops(plan, req, 1, &why)) << why;
  plan.pipelinable = false;
  EXPECT_TRUE(verify(plan, req, &why)) << why;
  plan.pipelinable = true;
  expectRejected(plan, req, {"pipelin", "loop"});
  EXPECT_FALSE(verifyLoops(plan, req, 2, &why));
}

// ---- RecvReduceCopy: region = src op incoming ----

// The smallest use: two ranks exchange their inputs and each writes input + incoming to Output.
Plan pairAllReduce(size_t n) {
  Plan plan;
  plan.collective = Collective::AllReduce;
  plan.nranks = 2;
  plan.count = n;
  plan.pipelinable = true;
  plan.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    Channel ch;
    ch.steps.push_back({{{XferKind::Send, 1 - r, -1, in(0, n)},
                         {XferKind::RecvReduceCopy, 1 - r, -1, out(0, n), in(0, n)}},
                        {}});
    plan.ranks[r].channels.push_back(ch);
  }
  return plan;
}

TEST(Verifier, ProvesRecvReduceCopy) {
  Request req = request(Collective::AllReduce, 2, 6);
  std::string why;
  EXPECT_TRUE(verify(pairAllReduce(6), req, &why)) << why;  // plain and pipelined
  // The out-of-place ring Plans use it and have nothing left to copy locally.
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::Reduce}) {
    Plan plan = ringPlan(request(c, 5, 10));
    size_t fusedXfers = 0;
    for (const RankPlan& rp : plan.ranks)
      for (const Step& st : rp.channels[0].steps) {
        EXPECT_TRUE(st.locals.empty()) << collectiveName(c);
        for (const Transfer& t : st.transfers) fusedXfers += readsSrc(t.kind);
      }
    EXPECT_GT(fusedXfers, 0u) << collectiveName(c);
  }
}

TEST(Verifier, RejectsRecvReduceCopyOfTheWrongElement) {
  Request req = request(Collective::AllReduce, 4, 8);
  Plan plan = ringPlan(req);
  Transfer& t = transferStep(plan, 1, 0).transfers[1];
  ASSERT_EQ(t.kind, XferKind::RecvReduceCopy);
  t.src.offset = (t.src.offset + 2) % 8;  // the next chunk of Input (chunks are 2 elements)
  expectRejected(plan, req, {"rank 1", "combines element"});
}

TEST(Verifier, RejectsRecvReduceCopyFromUninitializedData) {
  Request req = request(Collective::AllReduce, 2, 6);
  Plan plan = pairAllReduce(6);
  plan.scratchCount = 6;
  plan.ranks[0].channels[0].steps[0].transfers[1].src = scratch(0, 6);  // never written
  expectRejected(plan, req, {"uninitialized", "source", "rank 0"});
}

TEST(Verifier, RejectsRecvReduceCopyShapeErrors) {
  Request req = request(Collective::AllReduce, 2, 6);
  Plan plan = pairAllReduce(6);
  plan.ranks[1].channels[0].steps[0].transfers[1].src = in(0, 5);
  expectRejected(plan, req, {"sizes differ", "rank 1"});
  // src may be the region itself (a plain reduce on arrival), but not overlap it otherwise.
  plan = pairAllReduce(6);
  for (RankPlan& rp : plan.ranks) {
    std::vector<Step>& steps = rp.channels[0].steps;
    steps[0].transfers[1].src = out(0, 6);
    steps.insert(steps.begin(), Step{{}, {{LocalKind::Copy, in(0, 6), out(0, 6)}}});
  }
  std::string why;
  EXPECT_TRUE(verify(plan, req, &why)) << why;
  Transfer& t = plan.ranks[0].channels[0].steps[1].transfers[1];
  t.region = out(1, 5);
  t.src = out(0, 5);
  expectRejected(plan, req, {"overlapping source", "rank 0"});
  plan = pairAllReduce(6);
  plan.ranks[0].channels[0].steps[0].transfers[1].src = in(3, 6);
  expectRejected(plan, req, {"exceeds"});
}

// Its source is read while the step's other transfers run: a receive writing it is a race.
TEST(Verifier, RejectsARaceOnTheRecvReduceCopySource) {
  Request req = request(Collective::AllReduce, 2, 4);
  Plan plan = handWritten2RankAllReduce();
  for (int r = 0; r < 2; ++r) {
    Channel ch;
    // Output first takes the peer's input, then Scratch = Output + the peer's input again: wrong
    // anyway, but the race is found first.
    ch.steps.push_back({{{XferKind::Send, 1 - r, -1, in(0, 4)},
                         {XferKind::Send, 1 - r, -1, in(0, 4)},
                         {XferKind::Recv, 1 - r, -1, out(0, 4)},
                         {XferKind::RecvReduceCopy, 1 - r, -1, scratch(0, 4), out(0, 4)}},
                        {}});
    plan.ranks[r].channels.push_back(ch);
  }
  expectRejected(plan, req, {"race", "transfers 2 and 3"});
  // Reading it one step later is fine as far as races go (and wrong: a contribution twice).
  for (int r = 0; r < 2; ++r) {
    std::vector<Step>& steps = plan.ranks[r].channels[0].steps;
    Transfer second = steps[0].transfers[1], rrc = steps[0].transfers[3];
    steps[0].transfers = {steps[0].transfers[0], steps[0].transfers[2]};
    steps.push_back({{second, rrc}, {}});
  }
  expectRejected(plan, req, {"twice"});
}

TEST(Verifier, PipelinedRingPassesForAnyLoopCount) {
  for (size_t loops : {2, 3, 5}) {
    Request req = request(Collective::AllReduce, 5, 23);
    std::string why;
    EXPECT_TRUE(verifyLoops(ringPlan(req), req, loops, &why)) << why;
  }
}

}  // namespace
}  // namespace nlccl::plan
