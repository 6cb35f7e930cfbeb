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
#include "algorithms/ring_helpers.hpp"

namespace nlccl::algo {
namespace {

using namespace plan;
using ring::chunk;
using ring::mod;

// The frame every ring builder shares: a pipelinable one-channel Plan with `scratch` elements of
// Scratch, empty when count is 0. A single rank only copies Input to Output (out of place);
// otherwise `program(r, steps)` writes rank r's steps.
template <typename Program>
Plan ringPlan(const Request& req, size_t scratch, Program program) {
  Plan plan = ring::emptyPlan(req, "ring");
  plan.pipelinable = true;
  const size_t n = req.count;
  if (n == 0) return plan;
  plan.scratchCount = scratch;
  for (int r = 0; r < req.nranks; ++r) {
    std::vector<Step>& steps = plan.ranks[r].channels[0].steps;
    if (req.nranks > 1)
      program(r, steps);
    else if (!req.inPlace)
      steps.push_back({{}, {ring::copy(in(0, n), out(0, n))}});
  }
  return plan;
}

// Rank r at step s < p-1 sends chunk r-s and reduces chunk r-s-1 on arrival; after p-1 steps it
// holds the sum of chunk r+1, which the all-gather steps then pass around the ring.
Plan ringAllReduce(const Request& req) {
  const int p = req.nranks;
  const size_t n = req.count;
  return ringPlan(req, 0, [&](int r, std::vector<Step>& steps) {
    const int next = ring::nextRank(r, p), prev = ring::prevRank(r, p);
    auto inC = [&](int j) {
      ring::Chunk c = chunk(n, p, mod(j, p));
      return in(c.offset, c.count);
    };
    auto outC = [&](int j) {
      ring::Chunk c = chunk(n, p, mod(j, p));
      return out(c.offset, c.count);
    };
    for (int s = 0; s < p - 1; ++s) {
      Step st;
      st.transfers.push_back(ring::send(next, s == 0 ? inC(r) : outC(r - s)));
      // Out of place, chunk r-s-1 of Output = this rank's Input chunk + the incoming partial sum.
      st.transfers.push_back(req.inPlace
                                 ? ring::recvReduce(prev, outC(r - s - 1))
                                 : ring::recvReduceCopy(prev, outC(r - s - 1), inC(r - s - 1)));
      steps.push_back(std::move(st));
    }
    for (int s = 0; s < p - 1; ++s)
      steps.push_back({{ring::send(next, outC(r + 1 - s)), ring::recv(prev, outC(r - s))}, {}});
  });
}

// Rank r forwards block r-s at step s and receives block r-s-1.
Plan ringAllGather(const Request& req) {
  const int p = req.nranks;
  const size_t c = req.count;
  return ringPlan(req, 0, [&](int r, std::vector<Step>& steps) {
    auto block = [&](int j) { return out(static_cast<size_t>(mod(j, p)) * c, c); };
    const int next = ring::nextRank(r, p), prev = ring::prevRank(r, p);
    Step first{{ring::send(next, in(0, c)), ring::recv(prev, block(r - 1))}, {}};
    if (!req.inPlace) first.locals.push_back(ring::copy(in(0, c), block(r)));
    steps.push_back(std::move(first));
    for (int s = 1; s < p - 1; ++s)
      steps.push_back({{ring::send(next, block(r - s)), ring::recv(prev, block(r - s - 1))}, {}});
  });
}

// Rank r at step s sends the partial sum of block r-s-1 and reduces block r-s-2 on arrival; the
// last step reduces block r straight into Output. Partial sums live in two Scratch slots.
Plan ringReduceScatter(const Request& req) {
  const int p = req.nranks;
  const size_t c = req.count;
  const size_t scratchCount = p >= 3 ? static_cast<size_t>(std::min(2, p - 2)) * c : 0;
  return ringPlan(req, scratchCount, [&](int r, std::vector<Step>& steps) {
    const int next = ring::nextRank(r, p), prev = ring::prevRank(r, p);
    auto inB = [&](int j) { return in(static_cast<size_t>(mod(j, p)) * c, c); };
    auto target = [&](int s) { return s == p - 2 ? out(0, c) : scratch((s % 2) * c, c); };
    // target(s) = this rank's block r-s-2 + the incoming partial sum, in one sweep. In place the
    // last step's operand, block r, already is Output: it reduces on arrival.
    for (int s = 0; s < p - 1; ++s) {
      const bool operandInPlace = req.inPlace && s == p - 2;
      steps.push_back({{ring::send(next, s == 0 ? inB(r - 1) : target(s - 1)),
                        operandInPlace ? ring::recvReduce(prev, target(s))
                                       : ring::recvReduceCopy(prev, target(s), inB(r - s - 2))},
                       {}});
    }
  });
}

// A chain root, root+1, ..., root-1: each rank receives the buffer and forwards it (fused).
Plan ringBroadcast(const Request& req) {
  const int p = req.nranks;
  const size_t n = req.count;
  return ringPlan(req, 0, [&](int r, std::vector<Step>& steps) {
    const int d = mod(r - req.root, p), next = ring::nextRank(r, p), prev = ring::prevRank(r, p);
    if (d == 0) {
      Step st{{ring::send(next, in(0, n))}, {}};
      if (!req.inPlace) st.locals.push_back(ring::copy(in(0, n), out(0, n)));
      steps.push_back(std::move(st));
    } else if (d < p - 1) {
      steps.push_back({{{XferKind::RecvCopySend, prev, next, out(0, n)}}, {}});
    } else {
      steps.push_back({{ring::recv(prev, out(0, n))}, {}});
    }
  });
}

// A chain root+1, ..., root-1, root: each rank adds its input to the partial sum on arrival and
// forwards it (fused). Non-roots have no Output, so they accumulate in Scratch.
Plan ringReduce(const Request& req) {
  const int p = req.nranks;
  const size_t n = req.count;
  return ringPlan(req, p >= 3 ? n : 0, [&](int r, std::vector<Step>& steps) {
    const int d = mod(r - req.root - 1, p), next = ring::nextRank(r, p),
              prev = ring::prevRank(r, p);
    if (d == p - 1) {  // the root
      steps.push_back({{req.inPlace ? ring::recvReduce(prev, out(0, n))
                                    : ring::recvReduceCopy(prev, out(0, n), in(0, n))},
                       {}});
    } else if (d == 0) {
      steps.push_back({{ring::send(next, in(0, n))}, {}});
    } else {  // scratch = input + incoming, then forwarded (in place too: Output is not used)
      steps.push_back(
          {{{XferKind::RecvReduceCopySend, prev, next, scratch(0, n), in(0, n)}}, {}});
    }
  });
}

}  // namespace

std::vector<Entry> ringEntries() {
  return {
      {"ring", Collective::AllReduce, ringAllReduce},
      {"ring", Collective::AllGather, ringAllGather},
      {"ring", Collective::ReduceScatter, ringReduceScatter},
      {"ring", Collective::Broadcast, ringBroadcast},
      {"ring", Collective::Reduce, ringReduce},
  };
}

}  // namespace nlccl::algo
