#include "algorithms/patterns.hpp"

#include <numeric>

#include "algorithms/tree_pattern.hpp"

namespace nlccl::algo::pattern {

void xfer(Step& s, XferKind kind, int peer, const Region& r, int next) {
  if (r.count == 0) return;
  s.transfers.push_back({kind, peer, next, r});
}

void push(Plan& p, int rank, int ch, Step&& s) {
  if (!p.builds(rank)) return;
  auto& chans = p.ranks.at(static_cast<size_t>(rank)).channels;
  if (chans.size() <= static_cast<size_t>(ch)) chans.resize(static_cast<size_t>(ch) + 1);
  auto& steps = chans[static_cast<size_t>(ch)].steps;
  if (s.transfers.empty()) {
    if (s.locals.empty()) return;
    if (!steps.empty()) {
      auto& l = steps.back().locals;
      l.insert(l.end(), s.locals.begin(), s.locals.end());
      return;
    }
  }
  steps.push_back(std::move(s));
}

void local(Plan& p, int rank, int ch, LocalKind kind, const Region& src, const Region& dst) {
  if (src.count == 0 || src == dst || !p.builds(rank)) return;  // a copy onto itself is a no-op
  // As push() merges a locals-only step, without building one (all-to-all staging adds p ops
  // per rank).
  auto& chans = p.ranks[static_cast<size_t>(rank)].channels;
  if (chans.size() <= static_cast<size_t>(ch)) chans.resize(static_cast<size_t>(ch) + 1);
  auto& steps = chans[static_cast<size_t>(ch)].steps;
  if (steps.empty()) steps.emplace_back();
  steps.back().locals.push_back({kind, src, dst});
}

Plan shell(const plan::Request& req, const char* algorithm, int channels) {
  Plan p;
  p.collective = req.collective;
  p.algorithm = algorithm;
  p.nranks = req.nranks;
  p.count = req.count;
  p.root = req.root;
  p.inPlace = req.inPlace;
  p.ranks.resize(static_cast<size_t>(req.nranks));
  if (!req.onlyRanks.empty()) {
    p.built.assign(static_cast<size_t>(req.nranks), 0);
    for (int r : req.onlyRanks) p.built.at(static_cast<size_t>(r)) = 1;
  }
  for (int r = 0; r < req.nranks; ++r)
    if (p.builds(r)) p.ranks[static_cast<size_t>(r)].channels.resize(static_cast<size_t>(channels));
  return p;
}

bool buildsAny(const Plan& p, const std::vector<int>& members) {
  if (p.built.empty()) return true;
  for (int r : members)
    if (p.builds(r)) return true;
  return false;
}

void fitScratch(Plan& p) {
  size_t end = 0;
  auto see = [&end](const Region& r) {
    if (r.buffer == plan::Buffer::Scratch && r.count > 0) end = std::max(end, r.offset + r.count);
  };
  for (const auto& rp : p.ranks)
    for (const auto& c : rp.channels)
      for (const auto& s : c.steps) {
        for (const auto& t : s.transfers) see(t.region);
        for (const auto& l : s.locals) {
          see(l.src);
          see(l.dst);
        }
      }
  p.scratchCount = end;
}

void addRotation(plan::Symmetry* sym, int stride, int size) {
  if (size > 1) sym->digits.push_back({stride, size});
}

void addBits(plan::Symmetry* sym, int stride, int size) {
  for (int b = 1; b < size; b *= 2) sym->digits.push_back({stride * b, 2});
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}


RingReduceLayout inPlaceLayout(const Region& seg, int m) {
  return {[seg, m](int, int j) { return block(seg, m, j); },
          [seg, m](int, int, int j) { return block(seg, m, j); }};
}

RingReduceLayout sourcedLayout(const Region& seg, const Region& src, int m) {
  return {[src, m](int, int j) { return block(src, m, j); },
          [seg, m](int, int, int j) { return block(seg, m, j); }};
}

// The emitters run member by member (each member's steps in order), skipping members a partial
// Plan does not build, so building a few ranks of a large Plan costs only their steps.
void appendRingReduceScatter(Plan& p, int ch, const std::vector<int>& members,
                             const RingReduceLayout& lay) {
  const int m = static_cast<int>(members.size());
  for (int i = 0; i < m; ++i) {
    if (!builds(p, members, i)) continue;
    for (int s = 0; s + 1 < m; ++s) {
      const int out = mod(i - s - 1, m), in = mod(i - s - 2, m);
      Step st;
      xfer(st, XferKind::Send, members[mod(i + 1, m)], s == 0 ? lay.own(i, out) : lay.acc(i, s - 1, out));
      const Region acc = lay.acc(i, s, in), own = lay.own(i, in);
      if (acc.count > 0) {
        if (acc == own)
          st.transfers.push_back(recvReduce(members[mod(i - 1, m)], acc));
        else
          st.transfers.push_back(recvReduceCopy(members[mod(i - 1, m)], acc, own));
      }
      push(p, members[i], ch, std::move(st));
    }
  }
}

void appendRingReduceScatter(Plan& p, int ch, const std::vector<int>& members, const Region& seg) {
  appendRingReduceScatter(p, ch, members, inPlaceLayout(seg, static_cast<int>(members.size())));
}

void appendRingAllGather(Plan& p, int ch, const std::vector<int>& members,
                         const std::function<Region(int i, int j)>& blk,
                         const std::function<Region(int i)>& ownSrc) {
  const int m = static_cast<int>(members.size());
  for (int i = 0; i < m; ++i) {
    if (!builds(p, members, i)) continue;
    for (int s = 0; s + 1 < m; ++s) {
      const Region mine = blk(i, i), src = s == 0 ? ownSrc(i) : blk(i, mod(i - s, m));
      Step st;
      xfer(st, XferKind::Send, members[mod(i + 1, m)], src);
      xfer(st, XferKind::Recv, members[mod(i - 1, m)], blk(i, mod(i - s - 1, m)));
      if (s == 0 && !(src == mine) && mine.count > 0) st.locals.push_back(copy(src, mine));
      push(p, members[i], ch, std::move(st));
    }
  }
}

void appendRingAllGather(Plan& p, int ch, const std::vector<int>& members, const Region& seg) {
  const int m = static_cast<int>(members.size());
  auto blk = [&](int, int j) { return block(seg, m, j); };
  appendRingAllGather(p, ch, members, blk, [&](int i) { return block(seg, m, i); });
}

void appendHalvingReduceScatter(Plan& p, int ch, const std::vector<int>& members, const Region& seg,
                                const std::function<Region(int i)>& srcOf) {
  const int m = static_cast<int>(members.size());
  for (int i = 0; i < m; ++i) {
    if (!builds(p, members, i)) continue;
    int lo = 0, hi = m;
    // Until its first reduction a member's data is still where srcOf says.
    Region from = srcOf(i);
    for (int mask = m / 2; mask >= 1; mask /= 2) {
      const int mid = (lo + hi) / 2;
      const bool lower = (i & mask) == 0;
      Step st;
      // Send the half the partner keeps, reduce the half this member keeps.
      xfer(st, XferKind::Send, members[i ^ mask],
           lower ? blocks(from, m, mid, hi) : blocks(from, m, lo, mid));
      const Region keep = lower ? blocks(seg, m, lo, mid) : blocks(seg, m, mid, hi);
      const Region keepSrc = lower ? blocks(from, m, lo, mid) : blocks(from, m, mid, hi);
      if (keep.count > 0) {
        if (keep == keepSrc)
          st.transfers.push_back(recvReduce(members[i ^ mask], keep));
        else
          st.transfers.push_back(recvReduceCopy(members[i ^ mask], keep, keepSrc));
      }
      push(p, members[i], ch, std::move(st));
      (lower ? hi : lo) = mid;
      from = seg;
    }
  }
}

void appendHalvingReduceScatter(Plan& p, int ch, const std::vector<int>& members, const Region& seg) {
  appendHalvingReduceScatter(p, ch, members, seg, [&seg](int) { return seg; });
}

namespace {
// Blocks [a, a+n) mod m of seg as one or two regions (split where the range wraps).
void wrapped(Step& st, XferKind kind, int peer, const Region& seg, int m, int a, int n) {
  if (a + n <= m) {
    xfer(st, kind, peer, blocks(seg, m, a, a + n));
  } else {
    xfer(st, kind, peer, blocks(seg, m, a, m));
    xfer(st, kind, peer, blocks(seg, m, 0, a + n - m));
  }
}
}  // namespace

void appendDoublingAllGather(Plan& p, int ch, const std::vector<int>& members, const Region& seg,
                             const Region* ownSrc) {
  const int m = static_cast<int>(members.size());
  // The first step of each member sends just its own block. From ownSrc, the peer reads Input,
  // not the Output block this member rewrites at its next call: a block the peer has just read
  // sits in the peer's cache, and writing it again costs a cross-core transfer per line (an
  // out-of-place 256 KiB all-gather at 2 ranks spent 22 of its 31 us on that copy).
  auto sendOwn = [&](Step& st, int peer, int i) {
    const Region own = block(seg, m, i);
    if (ownSrc == nullptr || *ownSrc == own) {
      xfer(st, XferKind::Send, peer, own);
      return;
    }
    xfer(st, XferKind::Send, peer, *ownSrc);
    if (own.count > 0) st.locals.push_back(copy(*ownSrc, own));
  };
  if (isPow2(m)) {
    for (int i = 0; i < m; ++i) {
      if (!builds(p, members, i)) continue;
      for (int mask = 1; mask < m; mask *= 2) {
        const int mine = i & ~(mask - 1), theirs = (i ^ mask) & ~(mask - 1);
        Step st;
        if (mask == 1)
          sendOwn(st, members[i ^ mask], i);
        else
          xfer(st, XferKind::Send, members[i ^ mask], blocks(seg, m, mine, mine + mask));
        xfer(st, XferKind::Recv, members[i ^ mask], blocks(seg, m, theirs, theirs + mask));
        push(p, members[i], ch, std::move(st));
      }
    }
    return;
  }
  // Bruck: before the step with distance d, member i holds blocks i..i+d-1 (mod m).
  for (int i = 0; i < m; ++i) {
    if (!builds(p, members, i)) continue;
    for (int d = 1; d < m; d *= 2) {
      const int n = std::min(d, m - d);
      Step st;
      if (d == 1)
        sendOwn(st, members[mod(i - d, m)], i);
      else
        wrapped(st, XferKind::Send, members[mod(i - d, m)], seg, m, i, n);
      wrapped(st, XferKind::Recv, members[mod(i + d, m)], seg, m, mod(i + d, m), n);
      push(p, members[i], ch, std::move(st));
    }
  }
}

void appendRabenseifnerAllReduce(Plan& p, int ch, const std::vector<int>& members, const Region& seg,
                                 const Region& src) {
  const int m = static_cast<int>(members.size());
  if (m <= 1 || seg.count == 0) return;
  const int pof = tree::floorPow2(m), extra = m - pof;
  for (int i = 0; i < 2 * extra; ++i) {  // fold: even members hand their data to the odd one
    Step st;
    if (i % 2 == 0)
      xfer(st, XferKind::Send, members[i + 1], src);
    else if (src == seg)
      xfer(st, XferKind::RecvReduce, members[i - 1], seg);
    else
      st.transfers.push_back(recvReduceCopy(members[i - 1], seg, src));
    push(p, members[i], ch, std::move(st));
  }
  std::vector<int> active;
  for (int k = 0; k < pof; ++k) active.push_back(members[k < extra ? 2 * k + 1 : k + extra]);
  // Folded members already hold their partial sum in seg; the others still read src.
  appendHalvingReduceScatter(p, ch, active, seg,
                             [&](int k) { return k < extra ? seg : src; });
  appendDoublingAllGather(p, ch, active, seg);
  for (int i = 0; i < 2 * extra; ++i) {  // unfold: the odd member returns the result
    Step st;
    if (i % 2 == 1)
      xfer(st, XferKind::Send, members[i - 1], seg);
    else
      xfer(st, XferKind::Recv, members[i + 1], seg);
    push(p, members[i], ch, std::move(st));
  }
}

void appendRabenseifnerAllReduce(Plan& p, int ch, const std::vector<int>& members, const Region& seg) {
  appendRabenseifnerAllReduce(p, ch, members, seg, seg);
}

int treeChunks(size_t count) {
  constexpr size_t kMinChunk = 1024;
  constexpr size_t kMaxChunks = 8;
  return static_cast<int>(std::clamp<size_t>(count / kMinChunk, 1, kMaxChunks));
}

void appendTreeAllReduce(Plan& p, int ch, const std::vector<int>& members, const Region& seg, int which,
                   int chunks, size_t scratchOffset, const Region& src) {
  const int m = static_cast<int>(members.size());
  if (m <= 1 || seg.count == 0) return;
  const int c =
      static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(chunks, 1)), seg.count));
  auto chunk = [&](int k) { return block(seg, c, k); };
  auto own = [&](int k) { return block(src, c, k); };
  (void)scratchOffset;  // both children reduce on arrival: this tree stages nothing in Scratch
  for (int i = 0; i < m; ++i) {
    if (!builds(p, members, i)) continue;
    const tree::Links l = tree::doubleTree(m, i, which);
    const int parent = l.parent >= 0 ? members[l.parent] : -1;
    std::vector<int> kids;
    for (int x : l.child)
      if (x >= 0) kids.push_back(members[x]);
    const int me = members[i];
    // Reduce toward the root: receive chunk k from the children while chunk k-1 goes up. A leaf
    // sends its contribution straight from src; an interior node folds src into the first
    // child's data as it arrives (RecvReduceCopy), so nothing is copied up front.
    if (kids.empty()) {
      for (int k = 0; k < c; ++k) {
        Step st;
        xfer(st, XferKind::Send, parent, own(k));
        push(p, me, ch, std::move(st));
      }
    } else {
      // Both children's data is reduced on arrival (DESIGN.md 2.3: never a separate pass over
      // memory): the first child's chunk k into chunk k with src (RecvReduceCopy), the second
      // child's one step later into the same chunk, and the chunk goes up the step after: three
      // transfers in flight per step, as the single pass with a scratch buffer had.
      const int lag = kids.size() == 2 ? 1 : 0;
      for (int k = 0; k <= c + lag; ++k) {
        Step st;
        if (k < c) {
          if (chunk(k) == own(k))
            st.transfers.push_back(recvReduce(kids[0], chunk(k)));
          else
            st.transfers.push_back(recvReduceCopy(kids[0], chunk(k), own(k)));
        }
        if (lag && k >= 1 && k <= c) xfer(st, XferKind::RecvReduce, kids[1], chunk(k - 1));
        if (parent >= 0 && k > lag) xfer(st, XferKind::Send, parent, chunk(k - 1 - lag));
        push(p, me, ch, std::move(st));
      }
    }
    // Broadcast from the root the same way.
    if (parent < 0) {
      for (int k = 0; k < c; ++k) {
        Step st;
        for (int kid : kids) xfer(st, XferKind::Send, kid, chunk(k));
        push(p, me, ch, std::move(st));
      }
    } else {
      const int last = kids.empty() ? c - 1 : c;
      for (int k = 0; k <= last; ++k) {
        Step st;
        if (k < c) xfer(st, XferKind::Recv, parent, chunk(k));
        if (k > 0)
          for (int kid : kids) xfer(st, XferKind::Send, kid, chunk(k - 1));
        push(p, me, ch, std::move(st));
      }
    }
  }
}

void appendTreeAllReduce(Plan& p, int ch, const std::vector<int>& members, const Region& seg, int which,
                   int chunks, size_t scratchOffset) {
  appendTreeAllReduce(p, ch, members, seg, which, chunks, scratchOffset, seg);
}

void appendReduceScatter(std::string_view algo, Plan& p, int ch, const std::vector<int>& members,
                   const Region& seg, const Region& src) {
  const int m = static_cast<int>(members.size());
  if (algo == "rhd" && isPow2(m))
    appendHalvingReduceScatter(p, ch, members, seg, [&src](int) { return src; });
  else
    appendRingReduceScatter(p, ch, members, sourcedLayout(seg, src, m));
}

void appendAllGather(std::string_view algo, Plan& p, int ch, const std::vector<int>& members,
               const Region& seg) {
  if (algo == "rhd")
    appendDoublingAllGather(p, ch, members, seg);
  else
    appendRingAllGather(p, ch, members, seg);
}

void appendAllReduce(std::string_view algo, Plan& p, int ch, const std::vector<int>& members,
               const Region& seg, int which, size_t scratchOffset, const Region& src) {
  if (algo == "rhd") {
    appendRabenseifnerAllReduce(p, ch, members, seg, src);
  } else if (algo == "tree") {
    appendTreeAllReduce(p, ch, members, seg, which, treeChunks(seg.count), scratchOffset, src);
  } else {
    appendRingReduceScatter(p, ch, members,
                            sourcedLayout(seg, src, static_cast<int>(members.size())));
    appendRingAllGather(p, ch, members, seg);
  }
}

}  // namespace nlccl::algo::pattern
