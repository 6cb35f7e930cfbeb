// rd: recursive-doubling all-reduce for small messages (DESIGN.md 2.2). In round j every rank
// exchanges the whole buffer with the rank whose index differs in bit j and reduces, so p = 2^k
// ranks finish in k rounds of n elements each (ring takes 2(p-1) rounds of n/p): the latency
// form, lg p alpha + lg p n beta, for messages where alpha dominates. Non-powers of two fold as
// rhd does (MPICH): with p = p' + r, the first 2r ranks pair up, the even one hands its input to
// the odd one first and gets the result back at the end.
//
// Every rank combines (own partial) op (peer's partial) in the same pairs, and op is commutative,
// so every rank ends with bit-identical results. A round sends from one buffer and reduces into
// another (RecvReduceCopy: dst = src op incoming), alternating Output and Scratch so the last
// round lands in Output; in place, where a round would have to read and write Output at once, it
// receives into Scratch and reduces locally. Every region is the whole buffer, so slices of
// consecutive rounds line up: the Plan is pipelinable.
#include "algorithms/families.hpp"
#include "algorithms/patterns.hpp"
#include "algorithms/tree_pattern.hpp"

namespace nlccl::algo {
namespace {

using namespace plan;

/// Appends one accumulating round of rank `me` with `peer`: value moves from `from` to `to`
/// (to = from op incoming); `sends` says whether `me` also sends `from` to `peer` this round.
void round(Plan& plan, int me, int peer, Buffer from, Buffer to, size_t n, bool sends) {
  Step st;
  const Region src{from, 0, n};
  if (sends) st.transfers.push_back(pattern::send(peer, src));
  if (from != to) {
    st.transfers.push_back(pattern::recvReduceCopy(peer, Region{to, 0, n}, src));
  } else {  // in place: `from` is read by the send while the incoming data arrives
    st.transfers.push_back(pattern::recv(peer, scratch(0, n)));
    st.locals.push_back({LocalKind::Reduce, scratch(0, n), src});
  }
  pattern::push(plan, me, 0, std::move(st));
}

Plan recursiveDoublingAllReduce(const Request& req) {
  Plan plan = pattern::shell(req, "rd", 1);
  plan.pipelinable = true;
  const int p = req.nranks;
  const size_t n = req.count;
  if (n == 0) return plan;
  if (p == 1) {
    if (!req.inPlace) plan.ranks[0].channels[0].steps.push_back({{}, {pattern::copy(in(0, n), out(0, n))}});
    return plan;
  }
  const int pof = tree::floorPow2(p), extra = p - pof, k = tree::ceilLog2(pof);
  const Buffer first = req.inPlace ? Buffer::Output : Buffer::Input;
  // Where the value of an active rank lives after its j-th of m accumulations: Output after the
  // last, alternating with Scratch before it.
  auto place = [](int j, int m) { return (m - j) % 2 == 0 ? Buffer::Output : Buffer::Scratch; };
  std::vector<int> active;  // virtual rank v -> rank
  for (int v = 0; v < pof; ++v) active.push_back(v < extra ? 2 * v + 1 : v + extra);
  for (int r = 0; r < p; ++r) {
    if (r < 2 * extra && r % 2 == 0) {  // folded: hand the input over, get the result back
      pattern::push(plan, r, 0, Step{{pattern::send(r + 1, Region{first, 0, n})}, {}});
      pattern::push(plan, r, 0, Step{{pattern::recv(r + 1, out(0, n))}, {}});
      continue;
    }
    const bool folds = r < 2 * extra;  // an odd rank that first takes its partner's input
    const int m = k + (folds ? 1 : 0);
    int j = 0;
    Buffer at = first;
    if (folds) {
      round(plan, r, r - 1, at, place(1, m), n, false);
      at = place(++j, m);
    }
    const int v = folds ? (r - 1) / 2 : r - extra;
    for (int bit = 0; bit < k; ++bit) {
      round(plan, r, active[static_cast<size_t>(v ^ (1 << bit))], at, place(j + 1, m), n, true);
      at = place(++j, m);
    }
    if (folds) pattern::push(plan, r, 0, Step{{pattern::send(r - 1, out(0, n))}, {}});
  }
  pattern::fitScratch(plan);
  return plan;
}

}  // namespace

std::vector<Entry> rdEntries() {
  return {{"rd", Collective::AllReduce, recursiveDoublingAllReduce}};
}

}  // namespace nlccl::algo
