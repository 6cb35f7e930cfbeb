// The step patterns every algorithm family composes (the way UCC keeps src/coll_patterns apart
// from any transport): the one chunker (blockOffset), Plan-building helpers, and emitters that
// append a ring, halving/doubling or tree phase over a group of ranks.
//
// Each emitter appends steps to one channel of every member (a list of global ranks; member i has
// local index i). Unless an emitter says otherwise, the data lives at the same region `seg` on every
// member, blocks are the balanced split of `seg` into as many parts as members, and reductions
// accumulate in `seg`, which must already hold each member's own contribution.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "plan/plan.hpp"
#include "plan/symmetry.hpp"

namespace nlccl::algo {

// The Plan IR names every family file uses, declared once for all of them.
using plan::LocalKind;
using plan::Plan;
using plan::Region;
using plan::Step;
using plan::XferKind;

}  // namespace nlccl::algo

namespace nlccl::algo::pattern {

/// Offset of block i (0..m) when `count` elements are split into m balanced blocks.
inline size_t blockOffset(size_t count, int m, int i) {
  const size_t q = count / static_cast<size_t>(m), rem = count % static_cast<size_t>(m);
  return static_cast<size_t>(i) * q + std::min(static_cast<size_t>(i), rem);
}
/// Block i of `seg` split m ways.
inline plan::Region block(const plan::Region& seg, int m, int i) {
  const size_t a = blockOffset(seg.count, m, i), b = blockOffset(seg.count, m, i + 1);
  return {seg.buffer, seg.offset + a, b - a};
}
/// Blocks [i, j) of `seg` split m ways, as one region.
inline plan::Region blocks(const plan::Region& seg, int m, int i, int j) {
  const size_t a = blockOffset(seg.count, m, i), b = blockOffset(seg.count, m, j);
  return {seg.buffer, seg.offset + a, b - a};
}

/// Adds a transfer to `s` unless the region is empty (both sides skip it alike).
void xfer(plan::Step& s, plan::XferKind kind, int peer, const plan::Region& r, int next = -1);
/// Appends `s` to rank's channel `ch` (grows the channel list). A step without transfers is merged
/// into the previous step's local ops (same order, no extra alpha); an empty step is dropped, and
/// so is every step of a rank a partial Plan does not build (Plan::builds).
void push(plan::Plan& p, int rank, int ch, plan::Step&& s);
/// Appends a local op as its own locals-only step (merged as push does); empty ops are dropped.
void local(plan::Plan& p, int rank, int ch, plan::LocalKind kind, const plan::Region& src,
           const plan::Region& dst);
/// Fresh Plan shell for `req` with nranks empty programs of `channels` empty channels; a request
/// with onlyRanks gives a partial Plan (Plan::built), whose other ranks stay empty.
plan::Plan shell(const plan::Request& req, const char* algorithm, int channels = 0);

/// Where a ring reduce-scatter's data lives, per member i and block j: `own(i, j)` is member i's
/// contribution to block j; `acc(i, s, j)` is where member i accumulates block j's partial sum at
/// step s (the last step's is the result). When acc is own itself, the step reduces on arrival;
/// otherwise it takes the operand from own as it goes (RecvReduceCopy: acc = own op incoming).
struct RingReduceLayout {
  std::function<plan::Region(int i, int j)> own;
  std::function<plan::Region(int i, int s, int j)> acc;
};
/// In place on `seg`: every member's contribution and sums in block j of `seg`.
RingReduceLayout inPlaceLayout(const plan::Region& seg, int m);
/// Sums in `seg`, contributions read from `src` (same count; `src` == `seg` is in place).
RingReduceLayout sourcedLayout(const plan::Region& seg, const plan::Region& src, int m);
/// Ring reduce-scatter: member i ends with block i reduced over all members (m-1 steps; step s
/// sends block i-s-1 and reduces block i-s-2).
void appendRingReduceScatter(plan::Plan& p, int ch, const std::vector<int>& members,
                             const RingReduceLayout& layout);
void appendRingReduceScatter(plan::Plan& p, int ch, const std::vector<int>& members,
                             const plan::Region& seg);
/// Ring all-gather: member i owns block(i, i); afterwards every member has every block (m-1
/// steps; step s sends block i-s and receives block i-s-1). When `ownSrc(i)` is not block(i, i)
/// itself, member i sends its block from there and copies it into place in the first step.
void appendRingAllGather(plan::Plan& p, int ch, const std::vector<int>& members,
                         const std::function<plan::Region(int i, int j)>& block,
                         const std::function<plan::Region(int i)>& ownSrc);
void appendRingAllGather(plan::Plan& p, int ch, const std::vector<int>& members,
                         const plan::Region& seg);
/// Recursive-halving reduce-scatter (m a power of two): member i ends with block i of `seg`
/// (lg m steps). Member i's data sits in `srcOf(i)` (seg itself, or a region of the same count):
/// its first step sends from there and reduces with RecvReduceCopy, so nothing is copied first.
void appendHalvingReduceScatter(plan::Plan& p, int ch, const std::vector<int>& members,
                                const plan::Region& seg,
                                const std::function<plan::Region(int i)>& srcOf);
void appendHalvingReduceScatter(plan::Plan& p, int ch, const std::vector<int>& members,
                                const plan::Region& seg);
/// All-gather in ceil(lg m) steps: recursive doubling for powers of two, Bruck's dissemination
/// (blocks sent straight to their final place, split at the wrap) otherwise. With `ownSrc`
/// (a block-sized region, out of place: Input), a member's first step sends its own block from
/// there and copies it into place after its transfers, for the later steps to send.
void appendDoublingAllGather(plan::Plan& p, int ch, const std::vector<int>& members,
                             const plan::Region& seg, const plan::Region* ownSrc = nullptr);
/// Rabenseifner all-reduce with the MPICH fold for non-powers of two: the first 2r members
/// (r = m - 2^floor(lg m)) pair up, the even one sends its data to the odd one first and gets the
/// result back at the end. The result lands in `seg`; each member's contribution is read from
/// `src` (seg itself in place), fused into its first reduction.
void appendRabenseifnerAllReduce(plan::Plan& p, int ch, const std::vector<int>& members,
                                 const plan::Region& seg, const plan::Region& src);
void appendRabenseifnerAllReduce(plan::Plan& p, int ch, const std::vector<int>& members,
                           const plan::Region& seg);
/// One binary tree (`which` = 0 or 1 of the double binary tree over member indices) all-reduce of
/// `seg`, pipelined in `chunks` chunks: reduce toward the root (a node receives chunk k from its
/// children while sending chunk k-1 up), then broadcast down the same way. The second child's data
/// lands in scratch at `scratchOffset` + (offset within seg). Contributions are read from `src`
/// (seg in place): leaves send straight from it, interior nodes reduce into seg with
/// RecvReduceCopy.
void appendTreeAllReduce(plan::Plan& p, int ch, const std::vector<int>& members, const plan::Region& seg,
                   int which, int chunks, size_t scratchOffset, const plan::Region& src);
void appendTreeAllReduce(plan::Plan& p, int ch, const std::vector<int>& members, const plan::Region& seg,
                   int which, int chunks, size_t scratchOffset);
/// Chunk count the tree uses for `count` elements per tree (>= 1).
int treeChunks(size_t count);

/// Reduce-scatter / all-gather / all-reduce of a subgroup by inner algorithm name ("ring", "rhd",
/// "tree"). Reduce-scatter and all-gather use recursive halving/doubling for "rhd" (halving needs
/// a power of two; otherwise ring) and ring for "tree", which has no such form. appendTreeAllReduce
/// with tree `which` is used for "tree" all-reduce. The reducing forms read each member's
/// contribution from `src` (the same count as `seg`; `seg` itself in place) and leave the result
/// in `seg`.
void appendReduceScatter(std::string_view algo, plan::Plan& p, int ch, const std::vector<int>& members,
                   const plan::Region& seg, const plan::Region& src);
void appendAllGather(std::string_view algo, plan::Plan& p, int ch, const std::vector<int>& members,
               const plan::Region& seg);
void appendAllReduce(std::string_view algo, plan::Plan& p, int ch, const std::vector<int>& members,
               const plan::Region& seg, int which, size_t scratchOffset, const plan::Region& src);

/// True when member i of `members` is built in `p` (a partial Plan builds some ranks only):
/// emitters skip the others' steps.
inline bool builds(const plan::Plan& p, const std::vector<int>& members, int i) {
  return p.builds(members[static_cast<size_t>(i)]);
}
/// True when `p` builds any of `members`.
bool buildsAny(const plan::Plan& p, const std::vector<int>& members);

/// Sets plan.scratchCount to the end of the furthest scratch region any rank addresses.
void fitScratch(plan::Plan& p);

/// Transfers and local ops, spelled as DESIGN.md 2.1 names them.
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

/// Symmetry digits (plan/symmetry.hpp) of the shared patterns over a group whose local index is
/// the rank digit (stride, size): a ring (or any rotated schedule) is symmetric under rotating
/// it; recursive halving/doubling over a power of two under each bit of it (flipping a bit is
/// rotating a digit of size 2). Nothing for a trivial group.
void addRotation(plan::Symmetry* sym, int stride, int size);
void addBits(plan::Symmetry* sym, int stride, int size);

/// Members 0..n-1.
std::vector<int> iota(int n);
inline bool isPow2(int n) { return n > 0 && (n & (n - 1)) == 0; }
/// a mod m in [0, m) for any sign of a.
inline int mod(int a, int m) { return ((a % m) + m) % m; }
/// Ring neighbours.
inline int nextRank(int r, int p) { return mod(r + 1, p); }
inline int prevRank(int r, int p) { return mod(r - 1, p); }

}  // namespace nlccl::algo::pattern
