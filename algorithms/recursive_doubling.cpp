// rd: recursive-doubling all-reduce, the latency-optimal candidate for tiny messages: lg p
// rounds, each exchanging the whole buffer with the partner at distance 2^k (REFERENCE.md 2:
// lg p (alpha + n beta + n gamma)); non-powers of two fold the first 2(p - p') members in pairs
// first and unfold them after (two more rounds). Each round sends the partial sum it holds and
// reduces the partner's into the other of Output and Scratch (RecvReduceCopy), so no region is
// read and written by one step. The tuner chooses it for small messages (DESIGN.md 2.2).
#include "algorithms/builders.hpp"
#include "algorithms/families.hpp"
#include "algorithms/patterns.hpp"
#include "algorithms/tree_pattern.hpp"

namespace nlccl::algo {

namespace {

Plan recursiveDoublingAllReduce(const plan::Request& req) {
  Plan p = pattern::shell(req, "rd");
  const size_t n = req.count;
  const int m = req.nranks;
  const Region out = plan::out(0, n), scr = plan::scratch(0, n);
  const Region src = req.inPlace ? out : plan::in(0, n);
  if (m == 1 || n == 0) {
    if (m == 1 && !req.inPlace) pattern::local(p, 0, 0, LocalKind::Copy, src, out);
    return p;
  }
  const int pof = tree::floorPow2(m), extra = m - pof;
  int rounds = 0;
  while ((1 << rounds) < pof) ++rounds;
  std::vector<Region> cur(static_cast<size_t>(m), src);  // where each rank's partial sum is
  for (int i = 0; i < 2 * extra; ++i) {  // fold: even members hand their data to the odd one
    if (!p.builds(i)) continue;
    plan::Step st;
    if (i % 2 == 0) {
      pattern::xfer(st, XferKind::Send, i + 1, src);
    } else {
      st.transfers.push_back(src == out ? pattern::recvReduce(i - 1, out)
                                        : pattern::recvReduceCopy(i - 1, out, src));
      cur[static_cast<size_t>(i)] = out;
    }
    pattern::push(p, i, 0, std::move(st));
  }
  std::vector<int> active;
  for (int k = 0; k < pof; ++k) active.push_back(k < extra ? 2 * k + 1 : k + extra);
  for (int a = 0; a < pof; ++a) {
    const int r = active[static_cast<size_t>(a)];
    if (!p.builds(r)) continue;
    Region c = cur[static_cast<size_t>(r)];
    // The first target is chosen so that the last round lands in Output: reading Input, the
    // targets alternate ending at Output; reading Output (or Scratch), they alternate from the
    // other buffer, and a final copy moves an odd count's result home.
    Region target = c == out ? scr : c == scr ? out : (rounds % 2 == 1 ? out : scr);
    for (int k = 0; k < rounds; ++k) {
      const int partner = active[static_cast<size_t>(a ^ (1 << k))];
      plan::Step st;
      pattern::xfer(st, XferKind::Send, partner, c);
      st.transfers.push_back(pattern::recvReduceCopy(partner, target, c));
      pattern::push(p, r, 0, std::move(st));
      c = target;
      target = c == out ? scr : out;
    }
    if (!(c == out)) pattern::local(p, r, 0, LocalKind::Copy, c, out);
  }
  for (int i = 0; i < 2 * extra; ++i) {  // unfold: the odd member returns the result
    if (!p.builds(i)) continue;
    plan::Step st;
    if (i % 2 == 1)
      pattern::xfer(st, XferKind::Send, i - 1, out);
    else
      pattern::xfer(st, XferKind::Recv, i + 1, out);
    pattern::push(p, i, 0, std::move(st));
  }
  pattern::fitScratch(p);
  p.pipelinable = true;  // every step moves whole regions: proportional slices line up
  return p;
}

}  // namespace

std::vector<Entry> recursiveDoublingEntries() {
  auto bits = [](const plan::Request& r) {
    plan::Symmetry s;
    if (pattern::isPow2(r.nranks)) pattern::addBits(&s, 1, r.nranks);
    return s;
  };
  return {{"rd", Collective::AllReduce, recursiveDoublingAllReduce, bits}};
}

}  // namespace nlccl::algo
