// Direct all-to-all and all-to-all-v (DESIGN.md 2.2), in two forms.
//   direct (concurrent, the default): every peer at once, as NCCL's grouped send/recv posts them,
//     with a window bounding the transfers in flight: W = min(window, p-1) channels, channel c
//     talking to the peers at distance c+1, c+1+W, c+1+2W, ... (send to r+s, receive from r-s),
//     one peer per step. Channels run concurrently, so W transfers are in flight at a time and a
//     slow peer holds up only its own channel. The copy of a rank's own block runs on a channel
//     of its own, beside the transfers. In place, Input is Output: every outgoing block is staged
//     in Scratch first, and the window then moves in steps of W peers on one channel (channels
//     cannot wait for each other's staging).
//   pairwise: at step s rank r sends its block for (r+s)%p and receives the block of (r-s+p)%p,
//     p-1 dependent transfer steps after a local copy of its own block.
// In place, Input is Output, so the outgoing blocks are staged in Scratch first (a received block
// would otherwise overwrite a block not yet sent).
#include <algorithm>

#include "algorithms/builders.hpp"
#include "algorithms/families.hpp"
#include "algorithms/patterns.hpp"

namespace nlccl::algo {
namespace {

using namespace plan;
using pattern::mod;

/// Block layout of one rank's Input and Output (offsets and sizes in elements per peer).
struct Blocks {
  std::vector<size_t> inOff, inCount, outOff, outCount;
};

Blocks blocksOf(const Request& req, int r) {
  const int p = req.nranks;
  Blocks b;
  b.inOff.resize(p);
  b.inCount.resize(p);
  b.outOff.resize(p);
  b.outCount.resize(p);
  size_t io = 0, oo = 0;
  for (int j = 0; j < p; ++j) {
    const bool v = req.collective == Collective::AllToAllv;
    b.inCount[j] = v ? req.matrix[static_cast<size_t>(r) * p + j] : req.count;
    b.outCount[j] = v ? req.matrix[static_cast<size_t>(j) * p + r] : req.count;
    b.inOff[j] = io;
    b.outOff[j] = oo;
    io += b.inCount[j];
    oo += b.outCount[j];
  }
  return b;
}

// The local ops of the first step: in place, stage every outgoing block in Scratch (and move the
// own block of all-to-all-v, whose place in Output differs); otherwise copy the own block.
Step firstStep(const Request& req, int r, const Blocks& b) {
  const int p = req.nranks;
  const bool v = req.collective == Collective::AllToAllv;
  Step first;
  if (req.inPlace) {
    for (int j = 0; j < p; ++j)
      if (b.inCount[j] > 0 && (j != r || v))
        first.locals.push_back(
            pattern::copy(in(b.inOff[j], b.inCount[j]), scratch(b.inOff[j], b.inCount[j])));
    if (v && b.inCount[r] > 0)
      first.locals.push_back(pattern::copy(scratch(b.inOff[r], b.inCount[r]),
                                           out(b.outOff[r], b.outCount[r])));
  } else if (b.inCount[r] > 0) {
    first.locals.push_back(
        pattern::copy(in(b.inOff[r], b.inCount[r]), out(b.outOff[r], b.outCount[r])));
  }
  return first;
}

// The exchange with the peers at distances `dists` (send to r+s, receive from r-s) as one step.
Step exchange(const Request& req, int r, const Blocks& b, const std::vector<int>& dists) {
  const int p = req.nranks;
  Step st;
  for (int s : dists) {
    const int to = mod(r + s, p);
    if (b.inCount[to] == 0) continue;
    st.transfers.push_back(pattern::send(to, req.inPlace ? scratch(b.inOff[to], b.inCount[to])
                                                         : in(b.inOff[to], b.inCount[to])));
  }
  for (int s : dists) {
    const int from = mod(r - s, p);
    if (b.outCount[from] > 0)
      st.transfers.push_back(pattern::recv(from, out(b.outOff[from], b.outCount[from])));
  }
  return st;
}

Plan shellFor(const Request& req, const char* name) {
  Plan plan = pattern::shell(req, name, 1);
  // Equal blocks slice alike in Input and Output, so staging stays slice-local; variable blocks
  // in place alias Input and Output at unrelated offsets, so that form is not pipelinable.
  plan.pipelinable = !(req.collective == Collective::AllToAllv && req.inPlace);
  for (int r = 0; r < req.nranks && req.inPlace; ++r) {
    const Blocks b = blocksOf(req, r);
    plan.scratchCount = std::max(plan.scratchCount, b.inOff[req.nranks - 1] + b.inCount[req.nranks - 1]);
  }
  return plan;
}

Plan pairwise(const Request& req) {
  Plan plan = shellFor(req, "pairwise");
  const int p = req.nranks;
  for (int r = 0; r < p; ++r) {
    if (!plan.builds(r)) continue;
    const Blocks b = blocksOf(req, r);
    pattern::push(plan, r, 0, firstStep(req, r, b));
    for (int s = 1; s < p; ++s) pattern::push(plan, r, 0, exchange(req, r, b, {s}));
  }
  return plan;
}

}  // namespace

Plan concurrentAllToAll(const Request& req, int window) {
  Plan plan = shellFor(req, "direct");
  // Every peer is already in flight: slicing the blocks into loops would only multiply the
  // messages (64-fold for the simulator) without overlapping anything more.
  plan.pipelinable = false;
  const int p = req.nranks;
  const int w = std::max(1, std::min(window, p - 1));
  for (int r = 0; r < p; ++r) {
    if (!plan.builds(r)) continue;
    const Blocks b = blocksOf(req, r);
    if (req.inPlace) {
      pattern::push(plan, r, 0, firstStep(req, r, b));
      for (int s = 1; s < p; s += w) {
        std::vector<int> dists;
        for (int d = s; d < std::min(p, s + w); ++d) dists.push_back(d);
        pattern::push(plan, r, 0, exchange(req, r, b, dists));
      }
      continue;
    }
    for (int c = 0; c < w; ++c)
      for (int s = c + 1; s < p; s += w) pattern::push(plan, r, c, exchange(req, r, b, {s}));
    // The own block's copy on a channel of its own, so it overlaps the transfers.
    pattern::push(plan, r, w, firstStep(req, r, b));
  }
  return plan;
}

std::vector<Entry> directEntries() {
  auto concurrent = [](const Request& r) { return concurrentAllToAll(r, kDirectWindow); };
  // Equal blocks: rank r's schedule is rank 0's rotated by r. A matrix has no such symmetry.
  auto rotation = [](const Request& r) {
    plan::Symmetry s;
    pattern::addRotation(&s, 1, r.nranks);
    return s;
  };
  return {
      {"direct", Collective::AllToAll, concurrent, rotation},
      {"direct", Collective::AllToAllv, concurrent},
      {"pairwise", Collective::AllToAll, pairwise, rotation},
      {"pairwise", Collective::AllToAllv, pairwise},
  };
}

}  // namespace nlccl::algo
