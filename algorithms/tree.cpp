// tree: NCCL's double binary tree all-reduce; binomial-tree broadcast and reduce.
#include "algorithms/builders.hpp"
#include "algorithms/families.hpp"
#include "algorithms/patterns.hpp"
#include "algorithms/tree_pattern.hpp"

namespace nlccl::algo {

Plan treeAllReduce(const plan::Request& req, int chunks) {
  Plan p = pattern::shell(req, "tree");
  const size_t n = req.count, h0 = (n + 1) / 2;
  const Region half[2] = {plan::out(0, h0), plan::out(h0, n - h0)};
  const auto all = pattern::iota(req.nranks);
  for (int t = 0; t < 2; ++t) {
    // The Plan is pipelinable: the compiled loops cut it into slices and pipeline them through
    // the tree as NCCL's chunk loop does, so by default it is not chunked again inside (that
    // would multiply the messages by the chunk count for a pipeline of the same depth).
    const int c = static_cast<int>(std::min<size_t>(chunks > 0 ? static_cast<size_t>(chunks) : 1,
                                                    std::max<size_t>(half[t].count, 1)));
    // Leaves send from Input and interior nodes fold Input into their first child's data as it
    // arrives (RecvReduceCopy): no copy before communicating. A single rank only copies.
    const Region src = req.inPlace ? half[t] : plan::in(half[t].offset, half[t].count);
    if (req.nranks == 1) pattern::local(p, 0, t, LocalKind::Copy, src, half[t]);
    pattern::appendTreeAllReduce(p, t, all, half[t], t, c, half[t].offset, src);
  }
  pattern::fitScratch(p);
  p.pipelinable = true;
  return p;
}

Plan binomialBroadcast(const plan::Request& req) {
  Plan p = pattern::shell(req, "tree");
  const int np = req.nranks;
  const Region buf = plan::out(0, req.count);
  for (int r = 0; r < np; ++r) {
    if (!p.builds(r)) continue;
    const int v = (r - req.root + np) % np;
    // Out of place the root sends from Input and copies it to Output on a channel of its own,
    // beside its sends (ring.cpp's broadcast says why), not before them.
    const Region src = v == 0 && !req.inPlace ? plan::in(0, req.count) : buf;
    if (v == 0 && !req.inPlace) pattern::local(p, r, 1, LocalKind::Copy, src, buf);
    int mask = 1;
    while (mask < np) {
      if (v & mask) {
        Step st;
        pattern::xfer(st, XferKind::Recv, (v - mask + req.root) % np, buf);
        pattern::push(p, r, 0, std::move(st));
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
      if (v + mask < np) {
        Step st;
        pattern::xfer(st, XferKind::Send, (v + mask + req.root) % np, src);
        pattern::push(p, r, 0, std::move(st));
      }
    }
  }
  p.pipelinable = true;
  return p;
}

Plan binomialReduce(const plan::Request& req) {
  Plan p = pattern::shell(req, "tree");
  const int np = req.nranks;
  const size_t n = req.count;
  for (int r = 0; r < np; ++r) {
    if (!p.builds(r)) continue;
    const int v = (r - req.root + np) % np;
    const bool leaf = v % 2 == 1 || v + 1 >= np;  // no child v + 1 (hence none at all)
    // The root accumulates in Output; the other interior ranks have no Output, so use Scratch.
    // The first child's data is reduced with Input straight into the accumulator
    // (RecvReduceCopy), so nothing is copied first; a leaf sends from Input.
    const Region acc = v == 0 ? plan::out(0, n) : leaf ? plan::in(0, n) : plan::scratch(0, n);
    const Region input = v == 0 && req.inPlace ? acc : plan::in(0, n);
    if (np == 1) pattern::local(p, r, 0, LocalKind::Copy, input, acc);
    bool first = true;
    for (int mask = 1; mask < np; mask <<= 1) {
      Step st;
      if (v & mask) {
        pattern::xfer(st, XferKind::Send, (v - mask + req.root) % np, acc);
        pattern::push(p, r, 0, std::move(st));
        break;
      }
      if (v + mask < np && n > 0) {
        const int child = (v + mask + req.root) % np;
        if (first && !(input == acc))
          st.transfers.push_back(pattern::recvReduceCopy(child, acc, input));
        else
          st.transfers.push_back(pattern::recvReduce(child, acc));
        first = false;
      }
      pattern::push(p, r, 0, std::move(st));
    }
  }
  pattern::fitScratch(p);
  p.pipelinable = true;
  return p;
}

std::vector<Entry> treeEntries() {
  return {
      {"tree", Collective::AllReduce, [](const plan::Request& r) { return treeAllReduce(r); }},
      {"tree", Collective::Broadcast, binomialBroadcast},
      {"tree", Collective::Reduce, binomialReduce},
  };
}

}  // namespace nlccl::algo
