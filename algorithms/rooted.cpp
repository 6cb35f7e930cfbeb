// Direct gather and scatter (NCCL 2.28's ncclGather / ncclScatter): the root exchanges one block
// of `count` elements with every other rank, all of them posted in one step, as NCCL's own
// implementation groups p-1 sends or receives at the root. The root's own block is a local copy,
// left out in place (Gather: sendbuff == recvbuff + root*count; Scatter: recvbuff == sendbuff +
// root*count). Every transfer moves a whole block, so slices of a block pipeline: pipelinable.
#include "algorithms/families.hpp"
#include "algorithms/patterns.hpp"

namespace nlccl::algo {
namespace {

using namespace plan;

/// Gather: rank j's Input lands in the root's Output block j. Scatter: the root's Input block j
/// lands in rank j's Output.
Plan directRooted(const Request& req) {
  Plan plan = pattern::shell(req, "direct", 1);
  plan.pipelinable = true;
  const int p = req.nranks, root = req.root;
  const size_t c = req.count;
  if (c == 0) return plan;
  const bool gather = req.collective == Collective::Gather;
  for (int r = 0; r < p; ++r) {
    Step st;
    if (r != root) {
      st.transfers.push_back(gather ? pattern::send(root, in(0, c)) : pattern::recv(root, out(0, c)));
    } else {
      for (int j = 0; j < p; ++j) {
        if (j == root) continue;
        const Region block = gather ? out(static_cast<size_t>(j) * c, c)
                                    : in(static_cast<size_t>(j) * c, c);
        st.transfers.push_back(gather ? pattern::recv(j, block) : pattern::send(j, block));
      }
      if (!req.inPlace) {
        const size_t at = static_cast<size_t>(root) * c;
        st.locals.push_back(gather ? pattern::copy(in(0, c), out(at, c))
                                   : pattern::copy(in(at, c), out(0, c)));
      }
    }
    pattern::push(plan, r, 0, std::move(st));
  }
  return plan;
}

/// Broadcast: the root sends its whole buffer to every other rank, all sends in one step, and
/// each other rank receives once. One hop, against a binomial tree's log2(p): no rank forwards
/// (with more ranks than cores a forwarding rank that is not running holds up its subtree), at
/// the price of the root's p-1 sends. Over shm each receiver copies out of the root's buffer,
/// so those cost the root nothing and the tuner takes it at every size; over a network the root
/// pays each send and a tree wins large messages.
Plan directBroadcast(const Request& req) {
  Plan plan = pattern::shell(req, "direct");
  plan.pipelinable = true;
  const int p = req.nranks, root = req.root;
  const Region buf = out(0, req.count);
  if (req.count == 0) return plan;
  for (int r = 0; r < p; ++r) {
    if (!plan.builds(r)) continue;
    Step st;
    if (r != root) {
      st.transfers.push_back(pattern::recv(root, buf));
      pattern::push(plan, r, 0, std::move(st));
      continue;
    }
    // Out of place the root sends from Input and copies it to Output on a channel of its own,
    // beside its sends (ring.cpp's broadcast says why).
    const Region src = req.inPlace ? buf : in(0, req.count);
    for (int j = 0; j < p; ++j)
      if (j != root) st.transfers.push_back(pattern::send(j, src));
    pattern::push(plan, r, 0, std::move(st));
    if (!req.inPlace) pattern::local(plan, r, 1, LocalKind::Copy, src, buf);
  }
  return plan;
}

}  // namespace

std::vector<Entry> rootedEntries() {
  return {
      {"direct", Collective::Gather, directRooted},
      {"direct", Collective::Scatter, directRooted},
      {"direct", Collective::Broadcast, directBroadcast},
  };
}

}  // namespace nlccl::algo
