// Direct (pairwise) all-to-all and all-to-all-v (DESIGN.md 2.2): at step s rank r sends its block
// for (r+s)%p and receives the block of (r-s+p)%p, p-1 transfer steps after a local copy of its
// own block. In place, Input is Output, so the outgoing blocks are staged in Scratch first (a
// received block would otherwise overwrite a block not yet sent).
#include <algorithm>

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

Plan pairwise(const Request& req) {
  Plan plan = pattern::shell(req, "direct", 1);
  const int p = req.nranks;
  const bool v = req.collective == Collective::AllToAllv;
  // Equal blocks slice alike in Input and Output, so staging stays slice-local; variable blocks
  // in place alias Input and Output at unrelated offsets, so that form is not pipelinable.
  plan.pipelinable = !(v && req.inPlace);
  for (int r = 0; r < p; ++r) {
    const Blocks b = blocksOf(req, r);
    const size_t total = b.inOff[p - 1] + b.inCount[p - 1];
    if (req.inPlace) plan.scratchCount = std::max(plan.scratchCount, total);
    std::vector<Step>& steps = plan.ranks[r].channels[0].steps;
    auto src = [&](int j) {
      return req.inPlace ? scratch(b.inOff[j], b.inCount[j]) : in(b.inOff[j], b.inCount[j]);
    };
    Step first;
    if (req.inPlace) {
      for (int j = 0; j < p; ++j)
        if (b.inCount[j] > 0 && (j != r || v))
          first.locals.push_back(pattern::copy(in(b.inOff[j], b.inCount[j]), src(j)));
      if (v && b.inCount[r] > 0)
        first.locals.push_back(pattern::copy(src(r), out(b.outOff[r], b.outCount[r])));
    } else if (b.inCount[r] > 0) {
      first.locals.push_back(
          pattern::copy(in(b.inOff[r], b.inCount[r]), out(b.outOff[r], b.outCount[r])));
    }
    if (!first.locals.empty()) steps.push_back(std::move(first));
    for (int s = 1; s < p; ++s) {
      const int to = mod(r + s, p), from = mod(r - s, p);
      Step st;
      if (b.inCount[to] > 0) st.transfers.push_back(pattern::send(to, src(to)));
      if (b.outCount[from] > 0)
        st.transfers.push_back(pattern::recv(from, out(b.outOff[from], b.outCount[from])));
      if (!st.transfers.empty()) steps.push_back(std::move(st));
    }
  }
  return plan;
}

}  // namespace

std::vector<Entry> directEntries() {
  return {
      {"direct", Collective::AllToAll, pairwise},
      {"direct", Collective::AllToAllv, pairwise},
  };
}

}  // namespace nlccl::algo
