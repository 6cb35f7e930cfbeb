// Small hand-built Plans for the simulator tests (independent of the algorithm registry).
#pragma once

#include "plan/plan.hpp"

namespace nlccl::simtest {

/// Ring all-reduce: p-1 reduce-scatter steps then p-1 all-gather steps, one chunk of count/p each.
inline plan::Plan ringAllReduce(int p, size_t count) {
  plan::Plan pl;
  pl.collective = Collective::AllReduce;
  pl.algorithm = "hand-ring";
  pl.nranks = p;
  pl.count = count;
  pl.pipelinable = true;
  pl.ranks.resize(p);
  const size_t c = count / p;
  for (int r = 0; r < p; ++r) {
    plan::Channel ch;
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    for (int s = 0; s < 2 * (p - 1); ++s) {
      const size_t sendChunk = static_cast<size_t>((r - s % (p - 1) + 2 * p) % p);
      const size_t recvChunk = static_cast<size_t>((r - s % (p - 1) - 1 + 2 * p) % p);
      plan::Step st;
      st.transfers.push_back({plan::XferKind::Send, next, -1, plan::out(sendChunk * c, c)});
      st.transfers.push_back({s < p - 1 ? plan::XferKind::RecvReduce : plan::XferKind::Recv, prev,
                              -1, plan::out(recvChunk * c, c)});
      ch.steps.push_back(st);
    }
    pl.ranks[r].channels.push_back(ch);
  }
  return pl;
}

/// One step: every (src, dst) pair in `pairs` sends `count` elements at once.
inline plan::Plan transfers(int p, const std::vector<std::pair<int, int>>& pairs, size_t count,
                            bool reduce = false) {
  plan::Plan pl;
  pl.collective = Collective::SendRecv;
  pl.algorithm = "hand";
  pl.nranks = p;
  pl.count = count;
  pl.ranks.resize(p);
  for (auto& rp : pl.ranks) rp.channels.resize(1);
  for (auto& rp : pl.ranks) rp.channels[0].steps.resize(1);
  for (auto [s, d] : pairs) {
    pl.ranks[s].channels[0].steps[0].transfers.push_back(
        {plan::XferKind::Send, d, -1, plan::in(0, count)});
    pl.ranks[d].channels[0].steps[0].transfers.push_back(
        {reduce ? plan::XferKind::RecvReduce : plan::XferKind::Recv, s, -1, plan::out(0, count)});
  }
  return pl;
}

/// Chain broadcast 0 -> 1 -> ... -> p-1 with RecvCopySend (pipelinable).
inline plan::Plan chainBroadcast(int p, size_t count) {
  plan::Plan pl;
  pl.collective = Collective::Broadcast;
  pl.algorithm = "hand-chain";
  pl.nranks = p;
  pl.count = count;
  pl.pipelinable = true;
  pl.ranks.resize(p);
  for (int r = 0; r < p; ++r) {
    plan::Step st;
    if (r == 0) st.transfers.push_back({plan::XferKind::Send, 1, -1, plan::in(0, count)});
    else if (r == p - 1) st.transfers.push_back({plan::XferKind::Recv, r - 1, -1, plan::out(0, count)});
    else st.transfers.push_back({plan::XferKind::RecvCopySend, r - 1, r + 1, plan::out(0, count)});
    pl.ranks[r].channels.push_back({{st}});
  }
  return pl;
}

}  // namespace nlccl::simtest
