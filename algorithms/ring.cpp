// Ring algorithms (DESIGN.md 2.2): all-reduce as ring reduce-scatter then ring all-gather,
// all-gather, reduce-scatter, and chain (pipelined ring) broadcast and reduce.
//
// Every step only touches whole chunks, so cutting each region into proportional slices keeps a
// step's slice inside the slice of the chunk it depends on: all these Plans are pipelinable.
//
// A reduction into Output (or Scratch) takes this rank's operand straight from Input with
// RecvReduceCopy (dst = input op incoming) instead of copying the Input chunk first and then
// reducing on arrival: memory is swept once, not twice. Only where the operand already sits in
// the destination (in place, Output is Input's block) does a step reduce on arrival.
#include "algorithms/families.hpp"
#include "algorithms/patterns.hpp"

namespace nlccl::algo {
namespace {

using namespace plan;
using pattern::mod;

// The frame every ring builder shares: a pipelinable one-channel Plan with `scratch` elements of
// Scratch, empty when count is 0. A single rank only copies Input to Output (out of place);
// otherwise `program(r, plan)` appends rank r's steps (or `all(plan)` every rank's).
template <typename Program>
Plan ringPlan(const Request& req, size_t scratch, Program program) {
  Plan plan = pattern::shell(req, "ring", 1);
  plan.pipelinable = true;
  const size_t n = req.count;
  if (n == 0) return plan;
  plan.scratchCount = scratch;
  if (req.nranks > 1) {
    program(plan);
  } else if (!req.inPlace && plan.builds(0)) {
    plan.ranks[0].channels[0].steps.push_back({{}, {pattern::copy(in(0, n), out(0, n))}});
  }
  return plan;
}

// Ring reduce-scatter of the whole buffer into Output (chunk j of every rank), then ring
// all-gather of the chunks. Out of place, step s reduces this rank's Input chunk with the
// incoming partial sum straight into Output.
Plan ringAllReduce(const Request& req) {
  const int p = req.nranks;
  const Region whole = out(0, req.count), input = in(0, req.count);
  return ringPlan(req, 0, [&](Plan& plan) {
    const auto all = pattern::iota(p);
    pattern::RingReduceLayout lay{
        [&](int, int j) { return pattern::block(req.inPlace ? whole : input, p, j); },
        [&](int, int, int j) { return pattern::block(whole, p, j); }};
    pattern::appendRingReduceScatter(plan, 0, all, lay);
    pattern::appendRingAllGather(plan, 0, all, whole);
  });
}

// Rank r owns block r of Output; out of place it sends its block from Input and copies it into
// place in the first step.
Plan ringAllGather(const Request& req) {
  const int p = req.nranks;
  const size_t c = req.count;
  return ringPlan(req, 0, [&](Plan& plan) {
    pattern::appendRingAllGather(
        plan, 0, pattern::iota(p), [&](int, int j) { return out(static_cast<size_t>(j) * c, c); },
        [&](int i) { return req.inPlace ? out(static_cast<size_t>(i) * c, c) : in(0, c); });
  });
}

// Partial sums travel through two Scratch slots; the last step reduces block r straight into
// Output (in place, Output is Input's block r: it reduces on arrival).
Plan ringReduceScatter(const Request& req) {
  const int p = req.nranks;
  const size_t c = req.count;
  const size_t scratchCount = p >= 3 ? static_cast<size_t>(std::min(2, p - 2)) * c : 0;
  return ringPlan(req, scratchCount, [&](Plan& plan) {
    pattern::RingReduceLayout lay{
        [&](int i, int j) {
          return req.inPlace && i == j ? out(0, c) : in(static_cast<size_t>(j) * c, c);
        },
        [&](int, int s, int) { return s == p - 2 ? out(0, c) : scratch((s % 2) * c, c); }};
    pattern::appendRingReduceScatter(plan, 0, pattern::iota(p), lay);
  });
}

// A chain root, root+1, ..., root-1: each rank receives the buffer and forwards it (fused).
// Out of place, the root's copy Input -> Output runs on a channel of its own: a step's locals
// run only once its transfers completed, and a single-copy send completes when the peer has
// read the whole buffer, so in the send's step the copy came after the peer's read instead of
// beside it (2 ranks, 1-4 MiB: a third to a half of in place's busbw).
Plan ringBroadcast(const Request& req) {
  const int p = req.nranks;
  const size_t n = req.count;
  return ringPlan(req, 0, [&](Plan& plan) {
    for (int r = 0; r < p; ++r) {
      if (!plan.builds(r)) continue;
      std::vector<Step>& steps = plan.ranks[r].channels[0].steps;
      const int d = mod(r - req.root, p), next = pattern::nextRank(r, p),
                prev = pattern::prevRank(r, p);
      if (d == 0) {
        steps.push_back({{pattern::send(next, in(0, n))}, {}});
        if (!req.inPlace) pattern::local(plan, r, 1, LocalKind::Copy, in(0, n), out(0, n));
      } else if (d < p - 1) {
        steps.push_back({{{XferKind::RecvCopySend, prev, next, out(0, n)}}, {}});
      } else {
        steps.push_back({{pattern::recv(prev, out(0, n))}, {}});
      }
    }
  });
}

// A chain root+1, ..., root-1, root: each rank adds its input to the partial sum on arrival and
// forwards it (fused). Non-roots have no Output, so they accumulate in Scratch.
Plan ringReduce(const Request& req) {
  const int p = req.nranks;
  const size_t n = req.count;
  return ringPlan(req, p >= 3 ? n : 0, [&](Plan& plan) {
    for (int r = 0; r < p; ++r) {
      if (!plan.builds(r)) continue;
      std::vector<Step>& steps = plan.ranks[r].channels[0].steps;
      const int d = mod(r - req.root - 1, p), next = pattern::nextRank(r, p),
                prev = pattern::prevRank(r, p);
      if (d == p - 1) {  // the root
        steps.push_back({{req.inPlace ? pattern::recvReduce(prev, out(0, n))
                                      : pattern::recvReduceCopy(prev, out(0, n), in(0, n))},
                         {}});
      } else if (d == 0) {
        steps.push_back({{pattern::send(next, in(0, n))}, {}});
      } else {  // scratch = input + incoming, then forwarded (in place too: Output is not used)
        steps.push_back(
            {{{XferKind::RecvReduceCopySend, prev, next, scratch(0, n), in(0, n)}}, {}});
      }
    }
  });
}

// Every rank runs the same program rotated by its index: symmetric under rotating the whole rank
// index (the chains of broadcast and reduce start at the root and are not).
plan::Symmetry rotation(const Request& req) {
  plan::Symmetry s;
  pattern::addRotation(&s, 1, req.nranks);
  return s;
}

}  // namespace

std::vector<Entry> ringEntries() {
  return {
      {"ring", Collective::AllReduce, ringAllReduce, rotation},
      {"ring", Collective::AllGather, ringAllGather, rotation},
      {"ring", Collective::ReduceScatter, ringReduceScatter, rotation},
      {"ring", Collective::Broadcast, ringBroadcast},
      {"ring", Collective::Reduce, ringReduce},
  };
}

}  // namespace nlccl::algo
