// Transport-free peer and chunk arithmetic shared by the ring and direct algorithms (the way UCC
// keeps src/coll_patterns/ring.h apart from any transport).
#pragma once

#include <cstddef>

#include "algorithms/subgroup.hpp"
#include "plan/plan.hpp"

namespace nlccl::algo::ring {

using sub::mod;  // a mod p in [0, p) for any sign of a
inline int nextRank(int r, int p) { return mod(r + 1, p); }
inline int prevRank(int r, int p) { return mod(r - 1, p); }

/// Part j of n elements cut into `parts` contiguous chunks whose sizes differ by at most one
/// (the first n % parts chunks are one element larger).
struct Chunk {
  size_t offset = 0;
  size_t count = 0;
};
inline Chunk chunk(size_t n, int parts, int j) {
  const size_t q = n / parts, rem = n % parts, uj = static_cast<size_t>(j);
  return {uj * q + (uj < rem ? uj : rem), q + (uj < rem ? 1 : 0)};
}

/// A Plan skeleton for `req`: sub::shell with one empty channel per rank.
inline plan::Plan emptyPlan(const plan::Request& req, const char* algorithm) {
  plan::Plan p = sub::shell(req, algorithm);
  for (plan::RankPlan& rp : p.ranks) rp.channels.resize(1);
  return p;
}

inline plan::Transfer send(int peer, plan::Region r) { return {plan::XferKind::Send, peer, -1, r}; }
inline plan::Transfer recv(int peer, plan::Region r) { return {plan::XferKind::Recv, peer, -1, r}; }
inline plan::Transfer recvReduce(int peer, plan::Region r) {
  return {plan::XferKind::RecvReduce, peer, -1, r};
}
/// region = src op incoming (one sweep instead of a copy of src followed by a RecvReduce).
inline plan::Transfer recvReduceCopy(int peer, plan::Region region, plan::Region src) {
  return {plan::XferKind::RecvReduceCopy, peer, -1, region, src};
}
inline plan::LocalOp copy(plan::Region src, plan::Region dst) {
  return {plan::LocalKind::Copy, src, dst};
}

}  // namespace nlccl::algo::ring
