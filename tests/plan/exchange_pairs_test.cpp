// Exchange pairs (compiled.hpp, XferInfo::paired): the compiler marks a step of exactly a Send and
// a RecvReduceCopy with one peer, reducing into another region the very region it sends, and no
// other. Recursive doubling's rounds are such steps; its fold steps, ring's and rhd's are not.
#include <gtest/gtest.h>

#include "algorithms/algorithms.hpp"
#include "plan/compiled.hpp"

namespace nlccl::plan {
namespace {

std::shared_ptr<const CompiledPlan> mustCompile(const char* name, int p, bool inPlace) {
  Request req;
  req.collective = Collective::AllReduce;
  req.nranks = p;
  req.count = 1000;
  req.inPlace = inPlace;
  std::string err;
  std::optional<Plan> plan = algo::build(req, name, &err);
  EXPECT_TRUE(plan.has_value()) << err;
  std::shared_ptr<const CompiledPlan> c;
  EXPECT_EQ(compile(plan.value_or(Plan{}), &c, &err), Status::Success) << err;
  return c;
}

/// Pairs of `c`, each checked for the rule: (send, receive) xfer ids of one step, in order.
size_t countPairs(const CompiledPlan& c) {
  size_t pairs = 0;
  for (size_t x = 0; x < c.xfers().size(); ++x) {
    const XferInfo& a = c.xfers()[x];
    if (a.paired < 0) continue;
    const XferInfo& b = c.xfers()[static_cast<size_t>(a.paired)];
    EXPECT_EQ(b.paired, static_cast<int>(x));
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.peer, b.peer);
    if (a.kind != XferKind::Send) continue;
    EXPECT_EQ(b.kind, XferKind::RecvReduceCopy);
    EXPECT_EQ(a.paired, static_cast<int>(x) + 1);
    const Transfer& send = c.transfer(static_cast<int>(x));
    const Transfer& recv = c.transfer(a.paired);
    EXPECT_EQ(send.region, recv.src);
    EXPECT_FALSE(recv.region == recv.src);
    ++pairs;
  }
  return pairs;
}

TEST(ExchangePairs, EveryRoundOfRecursiveDoubling) {
  for (bool inPlace : {false, true}) {
    EXPECT_EQ(countPairs(*mustCompile("rd", 2, inPlace)), 2u);   // 1 round x 2 ranks
    EXPECT_EQ(countPairs(*mustCompile("rd", 4, inPlace)), 8u);   // 2 rounds x 4 ranks
    EXPECT_EQ(countPairs(*mustCompile("rd", 8, inPlace)), 24u);  // 3 rounds x 8 ranks
    // 6 ranks: 2 fold into 4, which pair for 2 rounds; the fold and unfold steps do not pair.
    EXPECT_EQ(countPairs(*mustCompile("rd", 6, inPlace)), 8u);
  }
}

TEST(ExchangePairs, NoneInRingOrRhd) {
  for (int p : {2, 4})
    for (const char* name : {"ring", "rhd"}) EXPECT_EQ(countPairs(*mustCompile(name, p, false)), 0u);
}

}  // namespace
}  // namespace nlccl::plan
