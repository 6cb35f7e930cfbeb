// hier: hierarchical collectives composed from the shared step patterns (patterns.hpp) over the
// levels of Request::groups (innermost first; rank = c0 + g0*(c1 + g1*(c2 + ...))).
//   all-reduce:     reduce-scatter in each level's group going out, all-reduce at the outermost
//                   level, all-gather coming back in (each on the shard the level below left).
//   reduce-scatter: inner levels first; all-gather: outer levels first. Both work in Scratch with
//                   the blocks ordered by reversed digits (c0 most significant), so every level's
//                   group exchanges contiguous ranges.
//   all-to-all(v):  two stages over X = nranks/g0 groups of Y = g0: an all-to-all inside the group
//                   that gathers at local index y everything bound for local index y, then one
//                   across groups between ranks of the same local index (levels beyond the
//                   first are taken as one: X = nranks / g0).
//   broadcast:      each rank receives once, at the innermost level at which its coordinate
//                   differs from the root's, and then sends to its groups at every level inside
//                   that one, all in one step: one message per other group crosses each level
//                   (per host, not per rank, across hosts).
// Level l's inner algorithm is levelAlgorithms[l] (default ring): reduce-scatter and all-gather
// phases use ring, or recursive halving/doubling for "rhd" (halving needs a power-of-two group,
// else ring); "tree" only changes the outermost all-reduce (double binary tree); elsewhere it is
// ring. A malformed hierarchy (sizes < 1, product != nranks) is treated as one level.
#include <string>

#include "algorithms/builders.hpp"
#include "algorithms/families.hpp"
#include "algorithms/patterns.hpp"

namespace nlccl::algo {

namespace {

/// The level structure of a request: sizes, strides (product of inner sizes) and algorithms.
struct Levels {
  std::vector<int> size, stride;
  std::vector<std::string> algo;
  int levels() const { return static_cast<int>(size.size()); }
  int coord(int rank, int l) const { return rank / stride[l] % size[l]; }
  /// Members of `rank`'s group at level l, by local index.
  std::vector<int> members(int rank, int l) const {
    std::vector<int> m;
    const int base = rank - coord(rank, l) * stride[l];
    for (int j = 0; j < size[l]; ++j) m.push_back(base + j * stride[l]);
    return m;
  }
  /// Product of the sizes of the levels outside l (the weight of digit l in the reversed order).
  int outer(int l) const {
    int w = 1;
    for (int k = l + 1; k < levels(); ++k) w *= size[k];
    return w;
  }
  /// Position of `rank` when blocks are ordered by reversed digits (c0 most significant).
  int key(int rank) const {
    int k = 0;
    for (int l = 0; l < levels(); ++l) k += coord(rank, l) * outer(l);
    return k;
  }
};

// A malformed hierarchy (sizes < 1 or product != nranks) is treated as one level.
Levels levelsOf(const plan::Request& req) {
  Levels lv;
  int prod = 1;
  bool ok = !req.groups.empty();
  for (int g : req.groups) {
    if (g < 1)
      ok = false;
    else
      prod *= g;
  }
  lv.size = ok && prod == req.nranks ? req.groups : std::vector<int>{req.nranks};
  int stride = 1;
  for (size_t l = 0; l < lv.size.size(); ++l) {
    lv.stride.push_back(stride);
    stride *= lv.size[l];
    lv.algo.push_back(l < req.levelAlgorithms.size() ? req.levelAlgorithms[l] : "ring");
  }
  return lv;
}

// Calls f(members, leader) once per group of level l that has a member `p` builds (a partial
// Plan visits only the groups of the ranks it builds).
template <typename F>
void forGroups(const Plan& p, const Levels& lv, int nranks, int l, F f) {
  if (p.built.empty()) {
    for (int r = 0; r < nranks; ++r)
      if (lv.coord(r, l) == 0) f(lv.members(r, l), r);
    return;
  }
  std::vector<uint8_t> seen(static_cast<size_t>(nranks), 0);
  for (int r = 0; r < nranks; ++r) {
    if (!p.builds(r)) continue;
    const int leader = r - lv.coord(r, l) * lv.stride[l];
    if (seen[static_cast<size_t>(leader)]) continue;
    seen[static_cast<size_t>(leader)] = 1;
    f(lv.members(leader, l), leader);
  }
}

// Range of keys (in blocks) whose digits 0..l-1 equal those of `rank`: g_l * outer(l) blocks.
Region keyRange(const Levels& lv, int rank, int l, size_t c) {
  size_t start = 0;
  for (int k = 0; k < l; ++k) start += static_cast<size_t>(lv.coord(rank, k)) * lv.outer(k);
  return plan::scratch(start * c, static_cast<size_t>(lv.size[l]) * lv.outer(l) * c);
}

}  // namespace

Plan hierAllReduce(const plan::Request& req) {
  Plan p = pattern::shell(req, "hier");
  const Levels lv = levelsOf(req);
  const int top = lv.levels() - 1, np = req.nranks;
  const size_t n = req.count;
  // The first level with more than one member reduces straight from Input (RecvReduceCopy), so
  // no rank copies its buffer before communicating; the levels below it have nothing to do.
  int first = 0;
  while (first <= top && lv.size[first] == 1) ++first;
  // A tree at the top level runs its two trees on two channels; every phase then splits in halves.
  const int nch = lv.algo[top] == "tree" ? 2 : 1;
  for (int t = 0; t < nch; ++t) {
    const Region whole = pattern::block(plan::out(0, n), nch, t);
    const Region input = req.inPlace ? whole : plan::in(whole.offset, whole.count);
    if (first > top) {  // a single rank
      for (int r = 0; r < np; ++r) pattern::local(p, r, t, LocalKind::Copy, input, whole);
      continue;
    }
    // The shard of `rank` after reduce-scatters at levels 0..l-1 (levels below `first` keep it
    // whole), and where its contribution is read at level l.
    auto shard = [&](int rank, int l) {
      Region s = whole;
      for (int k = 0; k < l; ++k) s = pattern::block(s, lv.size[k], lv.coord(rank, k));
      return s;
    };
    auto source = [&](int rank, int l) { return l == first ? input : shard(rank, l); };
    for (int l = first; l < top; ++l)
      forGroups(p, lv, np, l, [&](const std::vector<int>& m, int r) {
        pattern::appendReduceScatter(lv.algo[l], p, t, m, shard(r, l), source(r, l));
      });
    forGroups(p, lv, np, top, [&](const std::vector<int>& m, int r) {
      const Region s = shard(r, top);
      pattern::appendAllReduce(lv.algo[top], p, t, m, s, t, s.offset, source(r, top));
    });
    for (int l = top - 1; l >= first; --l)
      forGroups(p, lv, np, l, [&](const std::vector<int>& m, int r) {
        pattern::appendAllGather(lv.algo[l], p, t, m, shard(r, l));
      });
  }
  pattern::fitScratch(p);
  return p;
}

namespace {

// All-gather and reduce-scatter are mirror images in Scratch with the blocks ordered by key:
// all-gather stages its own block, runs the levels from the outermost in and unpacks every block;
// reduce-scatter stages every block, runs the levels from the innermost out and unpacks its own.
Plan hierKeyed(const plan::Request& req, bool gather) {
  Plan p = pattern::shell(req, "hier");
  const Levels lv = levelsOf(req);
  const int np = req.nranks, nl = lv.levels();
  const size_t c = req.count;
  if (c == 0) return p;
  auto keyed = [&](int q) { return plan::scratch(lv.key(q) * c, c); };
  for (int r = 0; r < np; ++r) {
    if (!p.builds(r)) continue;
    if (gather)
      pattern::local(p, r, 0, LocalKind::Copy, plan::in(0, c), keyed(r));
    else
      for (int q = 0; q < np; ++q)
        pattern::local(p, r, 0, LocalKind::Copy, plan::in(q * c, c), keyed(q));
  }
  for (int i = 0; i < nl; ++i) {
    const int l = gather ? nl - 1 - i : i;
    forGroups(p, lv, np, l, [&](const std::vector<int>& m, int r) {
      const Region range = keyRange(lv, r, l, c);
      if (gather)
        pattern::appendAllGather(lv.algo[l], p, 0, m, range);
      else
        pattern::appendReduceScatter(lv.algo[l], p, 0, m, range, range);
    });
  }
  for (int r = 0; r < np; ++r) {
    if (!p.builds(r)) continue;
    if (gather)
      for (int q = 0; q < np; ++q)
        pattern::local(p, r, 0, LocalKind::Copy, keyed(q), plan::out(q * c, c));
    else
      pattern::local(p, r, 0, LocalKind::Copy, keyed(r), plan::out(0, c));
  }
  pattern::fitScratch(p);
  return p;
}

}  // namespace

// Broadcast: with m the lowest level at which rank r's coordinate differs from the root's, r
// receives from the member of its level-m group that has the root's coordinate m (that member
// shares the root's coordinates below m, so it has the data by then), then sends to the other
// members of its groups at levels m-1 .. 0. The root (no such m) sends at every level. A rank's
// sends go in one step: they all read the same buffer, and a level's sends need not wait for
// another level's to complete (over tcp each one takes the sender's time).
Plan hierBroadcast(const plan::Request& req) {
  Plan p = pattern::shell(req, "hier");
  p.pipelinable = true;  // every transfer moves the whole buffer, so its slices pipeline
  const Levels lv = levelsOf(req);
  const int np = req.nranks, root = req.root, nl = lv.levels();
  const size_t n = req.count;
  if (n == 0) return p;
  const Region buf = plan::out(0, n);
  for (int r = 0; r < np; ++r) {
    if (!p.builds(r)) continue;
    int m = 0;
    while (m < nl && lv.coord(r, m) == lv.coord(root, m)) ++m;
    if (m < nl) {
      Step st;
      st.transfers.push_back(
          pattern::recv(r + (lv.coord(root, m) - lv.coord(r, m)) * lv.stride[m], buf));
      pattern::push(p, r, 0, std::move(st));
    }
    // Out of place the root sends from Input and copies it to Output on a channel of its own.
    const bool rootCopies = r == root && !req.inPlace;
    const Region src = rootCopies ? plan::in(0, n) : buf;
    Step sends;
    for (int l = m - 1; l >= 0; --l)
      for (int j : lv.members(r, l))
        if (j != r) sends.transfers.push_back(pattern::send(j, src));
    if (!sends.transfers.empty()) pattern::push(p, r, 0, std::move(sends));
    if (rootCopies) pattern::local(p, r, 1, LocalKind::Copy, src, buf);
  }
  return p;
}

Plan hierAllGather(const plan::Request& req) { return hierKeyed(req, /*gather=*/true); }
Plan hierReduceScatter(const plan::Request& req) { return hierKeyed(req, /*gather=*/false); }

Plan hierAllToAll(const plan::Request& req) {
  Plan p = pattern::shell(req, "hier");
  const int np = req.nranks;
  const Levels lv = levelsOf(req);
  const int Y = lv.size[0], X = np / Y;
  const bool v = req.collective == Collective::AllToAllv;
  // S(i, j): elements rank i sends to rank j.
  auto S = [&](int i, int j) {
    return v ? req.matrix[static_cast<size_t>(i) * np + j] : req.count;
  };
  auto rank = [Y](int y, int x) { return y + Y * x; };
  // Rank R = (y, x) reads its matrix column summed per group (where each group's data lands in
  // its Output) and its group's rows at the columns of local index y (stage 2's staging): np
  // strided reads per rank, cache- and TLB-bound when a simulator builds 9,216 ranks 32 at a
  // time. They are gathered for all the built ranks at once instead, in row order: the column
  // sums up front, the block once per group.
  std::vector<int> built, slot(static_cast<size_t>(np), -1);  // slot: index in `built`
  for (int R = 0; R < np; ++R)
    if (p.builds(R)) {
      slot[R] = static_cast<int>(built.size());
      built.push_back(R);
    }
  const size_t nb = built.size();
  std::vector<size_t> colSum;  // v: colSum[g * nb + k] = sum over s0 of S(rank(s0, g), built[k])
  if (v) {
    colSum.assign(static_cast<size_t>(X) * nb, 0);
    for (int i = 0; i < np; ++i) {
      const size_t* row = req.matrix.data() + static_cast<size_t>(i) * np;
      size_t* sum = colSum.data() + static_cast<size_t>(i / Y) * nb;
      for (size_t k = 0; k < nb; ++k) sum[k] += row[built[k]];
    }
  }
  auto fromGroup = [&](int g, int R) {
    return v ? colSum[static_cast<size_t>(g) * nb + slot[R]] : req.count * Y;
  };
  // v: block[k * np + s0 * X + D] = S(rank(s0, x), rank(y, D)) for the k-th built rank (y, x)
  // of group `blockOf`.
  std::vector<size_t> block;
  std::vector<int> inGroup(static_cast<size_t>(Y), -1);
  int blockOf = -1;
  for (int R = 0; R < np; ++R) {
    if (!p.builds(R)) continue;
    const int y = R % Y, x = R / Y;
    if (v && blockOf != x) {
      std::vector<int> ys;
      for (int yy = 0; yy < Y; ++yy)
        if (p.builds(rank(yy, x))) {
          inGroup[yy] = static_cast<int>(ys.size());
          ys.push_back(yy);
        }
      block.resize(ys.size() * np);
      for (int s0 = 0; s0 < Y; ++s0) {
        const size_t* row = req.matrix.data() + static_cast<size_t>(rank(s0, x)) * np;
        for (int D = 0; D < X; ++D)
          for (size_t k = 0; k < ys.size(); ++k)
            block[k * np + static_cast<size_t>(s0) * X + D] = row[rank(ys[k], D)];
      }
      blockOf = x;
    }
    // S(rank(s0, x), rank(y, D)): what group x's rank s0 sends to R's peers of local index y.
    auto SB = [&](int s0, int D) {
      return v ? block[static_cast<size_t>(inGroup[y]) * np + static_cast<size_t>(s0) * X + D]
               : req.count;
    };
    // Scratch: A[d0][D] = my data for (d0, D) | B[s0][D] = from (s0, x) for (y, D) |
    // C[D][s0] = B transposed, so stage 2 sends one contiguous range per group.
    std::vector<size_t> aOff(static_cast<size_t>(np) + 1);  // indexed by d0 * X + D
    for (int i = 0; i < np; ++i) aOff[i + 1] = aOff[i] + S(R, rank(i / X, i % X));
    auto a = [&](int d0, int D) { return plan::scratch(aOff[d0 * X + D], S(R, rank(d0, D))); };
    std::vector<size_t> bOff(static_cast<size_t>(np) + 1);  // indexed by s0 * X + D
    bOff[0] = aOff[np];
    for (int i = 0; i < np; ++i) bOff[i + 1] = bOff[i] + SB(i / X, i % X);
    auto b = [&](int s0, int D) { return plan::scratch(bOff[s0 * X + D], SB(s0, D)); };
    std::vector<size_t> cOff(static_cast<size_t>(np) + 1);  // indexed by D * Y + s0
    cOff[0] = bOff[np];
    for (int i = 0; i < np; ++i) cOff[i + 1] = cOff[i] + SB(i % Y, i / Y);
    auto cc = [&](int D, int s0) { return plan::scratch(cOff[D * Y + s0], SB(s0, D)); };
    auto span = [](const Region& first, const Region& last) {
      return plan::scratch(first.offset, last.offset + last.count - first.offset);
    };
    // Where group g's data lands in R's Output, and where R's data for `dst` sits in Input.
    std::vector<size_t> outPrefix(static_cast<size_t>(X) + 1), inPrefix(static_cast<size_t>(np) + 1);
    for (int g = 0; g < X; ++g) outPrefix[g + 1] = outPrefix[g] + fromGroup(g, R);
    for (int i = 0; i < np; ++i) inPrefix[i + 1] = inPrefix[i] + S(R, i);
    auto outOff = [&](int g) { return outPrefix[g]; };
    auto inOff = [&](int dst) { return inPrefix[dst]; };
    for (int d0 = 0; d0 < Y; ++d0)
      for (int D = 0; D < X; ++D)
        pattern::local(p, R, 0, LocalKind::Copy, plan::in(inOff(rank(d0, D)), S(R, rank(d0, D))),
                   a(d0, D));
    for (int D = 0; D < X; ++D) pattern::local(p, R, 0, LocalKind::Copy, a(y, D), b(y, D));
    // Stage 1, inside the group: rotated pairwise exchange.
    for (int s = 1; s < Y; ++s) {
      const int to = (y + s) % Y, from = (y - s + Y) % Y;
      Step st;
      pattern::xfer(st, XferKind::Send, rank(to, x), span(a(to, 0), a(to, X - 1)));
      pattern::xfer(st, XferKind::Recv, rank(from, x), span(b(from, 0), b(from, X - 1)));
      pattern::push(p, R, 0, std::move(st));
    }
    for (int s0 = 0; s0 < Y; ++s0)
      for (int D = 0; D < X; ++D) pattern::local(p, R, 0, LocalKind::Copy, b(s0, D), cc(D, s0));
    // Stage 2, across groups between ranks of the same local index.
    const Region own = span(cc(x, 0), cc(x, Y - 1));
    pattern::local(p, R, 0, LocalKind::Copy, own, plan::out(outOff(x), own.count));
    for (int t = 1; t < X; ++t) {
      const int to = (x + t) % X, from = (x - t + X) % X;
      const size_t inCount = outPrefix[from + 1] - outPrefix[from];
      Step st;
      pattern::xfer(st, XferKind::Send, rank(y, to), span(cc(to, 0), cc(to, Y - 1)));
      pattern::xfer(st, XferKind::Recv, rank(y, from), plan::out(outOff(from), inCount));
      pattern::push(p, R, 0, std::move(st));
    }
  }
  pattern::fitScratch(p);
  return p;
}

namespace {

// A level's digit is a symmetry when every phase on it is: ring phases under rotating the
// level's coordinate, halving/doubling (powers of two) under each of its bits. Bruck's
// dissemination (rhd all-gather of other sizes), the fold and the trees are not symmetric.
void addLevel(plan::Symmetry* s, const Levels& lv, int l, bool reduceScatter, bool allGather,
              bool allReduce) {
  const std::string& a = lv.algo[l];
  const bool pow2 = pattern::isPow2(lv.size[l]);
  if (a == "rhd") {
    if (pow2) pattern::addBits(s, lv.stride[l], lv.size[l]);
    else if (!allGather && !allReduce && reduceScatter)
      pattern::addRotation(s, lv.stride[l], lv.size[l]);  // halving falls back to ring
    return;
  }
  if (a == "tree" && allReduce) return;
  pattern::addRotation(s, lv.stride[l], lv.size[l]);
}

plan::Symmetry allReduceSymmetry(const plan::Request& req) {
  const Levels lv = levelsOf(req);
  plan::Symmetry s;
  const int top = lv.levels() - 1;
  for (int l = 0; l < lv.levels(); ++l) addLevel(&s, lv, l, l < top, l < top, l == top);
  return s;
}

plan::Symmetry keyedSymmetry(const plan::Request& req, bool gather) {
  const Levels lv = levelsOf(req);
  plan::Symmetry s;
  for (int l = 0; l < lv.levels(); ++l) addLevel(&s, lv, l, !gather, gather, false);
  return s;
}

// Equal blocks only: rotated exchanges inside the group (digit 0) and across groups.
plan::Symmetry allToAllSymmetry(const plan::Request& req) {
  const Levels lv = levelsOf(req);
  plan::Symmetry s;
  const int y = lv.size[0];
  pattern::addRotation(&s, 1, y);
  pattern::addRotation(&s, y, req.nranks / y);
  return s;
}

}  // namespace

std::vector<Entry> hierEntries() {
  return {
      {"hier", Collective::AllReduce, hierAllReduce, allReduceSymmetry},
      {"hier", Collective::AllGather, hierAllGather,
       [](const plan::Request& r) { return keyedSymmetry(r, true); }},
      {"hier", Collective::ReduceScatter, hierReduceScatter,
       [](const plan::Request& r) { return keyedSymmetry(r, false); }},
      {"hier", Collective::AllToAll, hierAllToAll, allToAllSymmetry},
      {"hier", Collective::AllToAllv, hierAllToAll},
      {"hier", Collective::Broadcast, hierBroadcast},
  };
}

}  // namespace nlccl::algo
