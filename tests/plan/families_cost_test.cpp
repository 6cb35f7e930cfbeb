// Every issue-4 Plan has the alpha (sequential steps) and beta (elements sent) coefficients of its
// formula in REFERENCE.md section 2, so the Plans are the algorithms the literature describes.
// p ranks, n elements; counts divide evenly where the formula assumes it.
//   rhd all-reduce (Rabenseifner), p = 2^k: 2 lg p steps, 2(p-1)/p n sent, every rank.
//     Fold for p = p' + r (p' = 2^floor(lg p), 0 < r < p'): the r even ranks below 2r take 2 steps
//     and send n; their odd partners take 2 lg p' + 2 steps and send 2(p'-1)/p' n + n; the others
//     take 2 lg p' steps and send 2(p'-1)/p' n. Critical path 2 lg p' + 2 steps.
//   rhd all-gather, any p: ceil(lg p) steps, (p-1)/p of the output sent (Bruck for non-powers of
//   2). tree broadcast / reduce (binomial): ceil(lg p) steps on the critical path and at the root,
//   which
//     sends (receives) ceil(lg p) n; every other rank sends n (reduce) or n per child (broadcast).
//   tree all-reduce (double binary tree, C chunks per tree, tree t carries half h_t on channel t):
//     per channel a leaf takes 2C steps, the root 2C, an interior node 2C + 2, and a node with
//     two children one more (its second child's data is reduced on arrival one step after the
//     first's: no separate pass over memory); a rank sends h_t ([has parent] + children) per
//     tree, at most 2n in all. Both trees have depth D = ceil(lg p); with unit-time steps the
//     critical path is 2(C - 1) + H + D, H the root's height counting two steps for a level
//     with two children: pipelining hides the depth for large C.
//   bruck all-to-all: ceil(lg p) steps; p = 2^k sends (n/2) lg p (n = p * count); otherwise
//     count * sum_k |{j < p : bit k of j set}|.
//   hier all-reduce, X groups of Y (ring levels): 2(Y-1) + 2(X-1) steps and
//     2(Y-1)/Y n + 2(X-1)/X n/Y sent; rhd levels (powers of two): 2 lg Y + 2 lg X steps, same beta;
//     three levels: the sum over levels of 2(g_l - 1) steps.
//   hier all-gather / reduce-scatter (ring levels): (Y-1) + (X-1) steps, (Y-1) X c + (X-1) c sent
//     (c = per-rank count; the inner level carries the large blocks).
//   hier all-to-all (2 levels, Tutel 2DH): (Y-1) + (X-1) steps, (Y-1)/Y m + (X-1)/X m sent
//     (m = p * count sent per rank).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <tuple>

#include "algorithms/builders.hpp"
#include "algorithms/patterns.hpp"
#include "algorithms/tree_pattern.hpp"
#include "plan/family_cases.hpp"

namespace nlccl::families {
namespace {

using algo::pattern::isPow2;
using algo::tree::ceilLog2;
using algo::tree::floorPow2;

size_t lg(int p) { return static_cast<size_t>(ceilLog2(p)); }

plan::Plan make(const char* algo, const plan::Request& req) {
  std::string err;
  auto p = algo::build(req, algo, &err);
  EXPECT_TRUE(p.has_value()) << err;
  if (!p) return {};
  std::string why;
  EXPECT_TRUE(plan::verify(*p, req, &why)) << describe(req, algo) << ": " << why;
  return *p;
}

size_t elementsReceived(const plan::Plan& p, int rank) {
  size_t n = 0;
  for (const auto& ch : p.ranks.at(rank).channels)
    for (const auto& s : ch.steps)
      for (const auto& t : s.transfers)
        if (t.kind != plan::XferKind::Send) n += t.region.count;
  return n;
}

/// Critical path of a Plan in unit-time steps under rendezvous: a transfer completes one unit after
/// both its step and its partner's step have started; a fused transfer's forward starts once its
/// receive has completed and completes one unit after that and its receiver's step start; a step
/// ends when its last transfer does.
size_t criticalPath(const plan::Plan& p) {
  using Key = std::tuple<int, int, int>;
  // (channel, src, dst) -> (step, rank, transfer index, is a forward), in program order.
  struct End {
    int step, rank, xfer;
    bool forward;
  };
  std::map<Key, std::vector<End>> sends, recvs;
  for (int r = 0; r < p.nranks; ++r)
    for (size_t c = 0; c < p.ranks[r].channels.size(); ++c) {
      const auto& steps = p.ranks[r].channels[c].steps;
      for (size_t s = 0; s < steps.size(); ++s) {
        const auto& ts = steps[s].transfers;
        for (size_t x = 0; x < ts.size(); ++x) {
          if (ts[x].kind == plan::XferKind::Send)
            sends[{int(c), r, ts[x].peer}].push_back({int(s), r, int(x), false});
          else
            recvs[{int(c), ts[x].peer, r}].push_back({int(s), r, int(x), false});
        }
        for (size_t x = 0; x < ts.size(); ++x)
          if (plan::forwards(ts[x].kind))
            sends[{int(c), r, ts[x].next}].push_back({int(s), r, int(x), true});
      }
    }
  // Per transfer (rank, channel, step, index): its partner's step and whether it is the forward.
  struct Link {
    int xfer, peer, peerStep;
    bool forward;
  };
  std::map<Key, std::vector<Link>> partners;  // (rank, channel, step)
  for (auto& [k, sv] : sends) {
    auto& rv = recvs[k];
    EXPECT_EQ(sv.size(), rv.size());
    const int c = std::get<0>(k);
    for (size_t i = 0; i < std::min(sv.size(), rv.size()); ++i) {
      partners[{sv[i].rank, c, sv[i].step}].push_back(
          {sv[i].xfer, rv[i].rank, rv[i].step, sv[i].forward});
      partners[{rv[i].rank, c, rv[i].step}].push_back({rv[i].xfer, sv[i].rank, sv[i].step, false});
    }
  }
  std::map<Key, size_t> start;
  size_t best = 0;
  for (bool changed = true; changed;) {  // relax to the fixpoint (the Plans are deadlock-free)
    changed = false;
    best = 0;
    for (int r = 0; r < p.nranks; ++r)
      for (size_t c = 0; c < p.ranks[r].channels.size(); ++c) {
        size_t t = 0;
        for (size_t s = 0; s < p.ranks[r].channels[c].steps.size(); ++s) {
          const Key k{r, int(c), int(s)};
          if (start[k] != t) start[k] = t, changed = true;
          size_t f = t;
          std::map<int, size_t> received;  // transfer index -> its receive's completion
          for (const Link& l : partners[k])
            if (!l.forward) {
              const size_t done = std::max(t, start[{l.peer, int(c), l.peerStep}]) + 1;
              received[l.xfer] = done;
              f = std::max(f, done);
            }
          for (const Link& l : partners[k])
            if (l.forward)
              f = std::max(f, std::max(received[l.xfer], start[{l.peer, int(c), l.peerStep}]) + 1);
          t = f;
        }
        best = std::max(best, t);
      }
  }
  return best;
}

TEST(FamilyCost, RabenseifnerPowersOfTwo) {
  for (int p : {2, 4, 8, 16, 32}) {
    const size_t n = 24 * static_cast<size_t>(p);
    const auto plan = make("rhd", request(Collective::AllReduce, p, n));
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(plan::sequentialSteps(plan, r), 2 * lg(p)) << p;
      EXPECT_EQ(plan::elementsSent(plan, r), 2 * (p - 1) * n / p) << p;
    }
    EXPECT_EQ(criticalPath(plan), 2 * lg(p)) << p;
  }
}

TEST(FamilyCost, RabenseifnerFold) {
  for (int p : {3, 5, 6, 7, 12, 13, 24, 33}) {
    const int q = floorPow2(p), extra = p - q;
    const size_t n = 8 * static_cast<size_t>(q), core = 2 * (q - 1) * n / q;
    const auto plan = make("rhd", request(Collective::AllReduce, p, n));
    for (int r = 0; r < p; ++r) {
      const bool folded = r < 2 * extra;
      const size_t steps = !folded ? 2 * lg(q) : r % 2 == 0 ? 2 : 2 * lg(q) + 2;
      const size_t sent = !folded ? core : r % 2 == 0 ? n : core + n;
      EXPECT_EQ(plan::sequentialSteps(plan, r), steps) << p << " rank " << r;
      EXPECT_EQ(plan::elementsSent(plan, r), sent) << p << " rank " << r;
    }
    EXPECT_EQ(criticalPath(plan), 2 * lg(q) + 2) << p;
  }
}

TEST(FamilyCost, DoublingAllGatherAnyP) {
  for (int p = 1; p <= 33; ++p) {
    const size_t c = 5;
    const auto plan = make("rhd", request(Collective::AllGather, p, c));
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(plan::sequentialSteps(plan, r), lg(p)) << p;
      EXPECT_EQ(plan::elementsSent(plan, r), (p - 1) * c) << p;
    }
    EXPECT_EQ(criticalPath(plan), lg(p)) << p;
  }
}

TEST(FamilyCost, DoublingAllGatherSendsItsOwnBlockFromInput) {
  // Out of place a rank's first step sends its block from Input and copies it into Output after
  // its transfers: the peer then never reads the Output block this rank rewrites at its next
  // call (the lines it read sit in its cache, and each rewrite costs a cross-core transfer).
  for (int p = 2; p <= 9; ++p)
    for (bool inPlace : {false, true}) {
      const plan::Plan plan = make("rhd", request(Collective::AllGather, p, 5, inPlace));
      for (int r = 0; r < p; ++r) {
        const auto& steps = plan.ranks.at(r).channels.at(0).steps;
        ASSERT_FALSE(steps.empty()) << p;
        const auto& first = steps.front();
        ASSERT_FALSE(first.transfers.empty()) << "p=" << p << " rank " << r << ": a step first";
        for (const auto& t : first.transfers) {
          if (t.kind == plan::XferKind::Send) {
            EXPECT_EQ(t.region.buffer, inPlace ? plan::Buffer::Output : plan::Buffer::Input)
                << "p=" << p << " rank " << r;
          }
        }
        EXPECT_EQ(first.locals.size(), inPlace ? 0u : 1u) << "p=" << p << " rank " << r;
      }
    }
}

TEST(FamilyCost, BroadcastRootCopiesBesideItsSends) {
  // Out of place the root's copy Input -> Output must not wait for its sends (a step's locals run
  // after its transfers complete, and a single-copy send completes once the peer has read it
  // all) nor hold them up: it sits alone on a channel with no transfers, and the sends read Input.
  for (const char* algo : {"ring", "tree"})
    for (int p : {2, 3, 4, 8})
      for (int root : {0, p - 1}) {
        const plan::Request req = request(Collective::Broadcast, p, 64, false, root);
        const plan::Plan plan = make(algo, req);
        int copies = 0;
        for (const auto& ch : plan.ranks.at(root).channels) {
          bool copiesHere = false, transfersHere = false;
          for (const auto& st : ch.steps) {
            for (const auto& l : st.locals)
              if (l.kind == plan::LocalKind::Copy) copiesHere = true, ++copies;
            if (!st.transfers.empty()) transfersHere = true;
            for (const auto& t : st.transfers)
              if (t.kind == plan::XferKind::Send) {
                EXPECT_EQ(t.region.buffer, plan::Buffer::Input) << algo << " p=" << p;
              }
          }
          EXPECT_FALSE(copiesHere && transfersHere) << algo << " p=" << p << " root " << root;
        }
        EXPECT_EQ(copies, 1) << algo << " p=" << p << " root " << root;
      }
}

TEST(FamilyCost, HalvingReduceScatter) {
  // lg p steps on powers of two (ring's p-1 otherwise), (p-1) blocks sent either way.
  for (int p = 1; p <= 33; ++p) {
    const size_t c = 5;
    const auto plan = make("rhd", request(Collective::ReduceScatter, p, c));
    const size_t steps = p == 1 ? 0 : isPow2(p) ? lg(p) : static_cast<size_t>(p - 1);
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(plan::sequentialSteps(plan, r), steps) << p;
      EXPECT_EQ(plan::elementsSent(plan, r), (p - 1) * c) << p;
    }
    EXPECT_EQ(criticalPath(plan), steps) << p;
  }
}

TEST(FamilyCost, BinomialBroadcastAndReduce) {
  for (int p = 1; p <= 33; ++p)
    for (int root : {0, p / 3}) {
      const size_t n = 10;
      const auto b = make("tree", request(Collective::Broadcast, p, n, false, root));
      const auto red = make("tree", request(Collective::Reduce, p, n, false, root));
      EXPECT_EQ(plan::sequentialSteps(b, root), lg(p)) << p;
      EXPECT_EQ(plan::elementsSent(b, root), lg(p) * n) << p;
      EXPECT_EQ(plan::sequentialSteps(red, root), lg(p)) << p;
      EXPECT_EQ(elementsReceived(red, root), lg(p) * n) << p;
      EXPECT_EQ(criticalPath(b), lg(p)) << p;
      EXPECT_EQ(criticalPath(red), lg(p)) << p;
      for (int r = 0; r < p; ++r) {
        EXPECT_LE(plan::sequentialSteps(b, r), lg(p));
        EXPECT_EQ(plan::elementsSent(red, r), r == root ? 0 : n) << p << " rank " << r;
      }
    }
}

TEST(FamilyCost, DoubleBinaryTree) {
  for (int p = 2; p <= 33; ++p) {
    // Both trees are proper trees of depth ceil(lg p) whose links agree in both directions.
    for (int t = 0; t < 2; ++t) {
      auto links = [&](int r) { return algo::tree::doubleTree(p, r, t); };
      EXPECT_EQ(algo::tree::depth(p, links), ceilLog2(p)) << p;
      int roots = 0;
      for (int r = 0; r < p; ++r) {
        roots += links(r).parent < 0;
        for (int c : links(r).child)
          if (c >= 0) {
            EXPECT_EQ(links(c).parent, r) << p;
          }
        if (links(r).parent >= 0) {
          const auto up = links(links(r).parent);
          EXPECT_TRUE(up.child[0] == r || up.child[1] == r) << p;
        }
      }
      EXPECT_EQ(roots, 1);
    }
    for (int chunks : {1, 2, 4}) {
      const size_t n = 64;
      const plan::Request req = request(Collective::AllReduce, p, n);
      const auto plan = algo::treeAllReduce(req, chunks);
      std::string why;
      ASSERT_TRUE(plan::verify(plan, req, &why)) << why;
      for (int r = 0; r < p; ++r) {
        size_t steps = 0, sent = 0;
        for (int t = 0; t < 2; ++t) {
          const auto l = algo::tree::doubleTree(p, r, t);
          const bool interior = l.parent >= 0 && l.children() > 0;
          // A second child is reduced one step after the first: one step more.
          steps = std::max<size_t>(steps, 2 * chunks + (interior ? 2 : 0) + (l.children() == 2));
          sent += n / 2 * ((l.parent >= 0) + l.children());
        }
        EXPECT_EQ(plan::sequentialSteps(plan, r), steps) << p << " rank " << r;
        EXPECT_EQ(plan::elementsSent(plan, r), sent) << p << " rank " << r;
        EXPECT_LE(sent, 2 * n);
      }
      // A chunk climbs a level in one step, two where the node has a second child (reduced one
      // step after the first), then descends a level per step: the critical path is
      // 2(C - 1) + (weighted height of the root) + depth, the larger of the two trees.
      size_t want = 0;
      for (int t = 0; t < 2; ++t) {
        auto links = [&](int r) { return algo::tree::doubleTree(p, r, t); };
        std::function<size_t(int)> height = [&](int r) -> size_t {
          const auto l = links(r);
          size_t h = 0;
          for (int c : l.child)
            if (c >= 0) h = std::max(h, height(c) + 1 + (l.children() == 2 ? 1 : 0));
          return h;
        };
        int root = 0;
        while (links(root).parent >= 0) root = links(root).parent;
        want = std::max(want, 2 * (chunks - 1) + height(root) + ceilLog2(p));
      }
      EXPECT_EQ(criticalPath(plan), want) << p << " chunks " << chunks;
    }
  }
}

TEST(FamilyCost, BruckAllToAll) {
  for (int p = 1; p <= 33; ++p) {
    const size_t c = 3;
    const auto plan = make("bruck", request(Collective::AllToAll, p, c));
    // The literature's (n/2) lg p for powers of two (n = p * count); otherwise step k moves the
    // blocks whose index has bit k set.
    size_t sent = p * c / 2 * lg(p);
    if (!isPow2(p)) {
      size_t blocks = 0;
      for (int bit = 1; bit < p; bit <<= 1)
        for (int j = 0; j < p; ++j) blocks += (j & bit) != 0;
      sent = blocks * c;
    }
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(plan::sequentialSteps(plan, r), lg(p)) << p;
      EXPECT_EQ(plan::elementsSent(plan, r), sent) << p;
    }
  }
}

plan::Request hierReq(Collective c, std::vector<int> g, size_t count, const char* algo) {
  int p = 1;
  for (int x : g) p *= x;
  plan::Request req = request(c, p, count);
  req.groups = g;
  req.levelAlgorithms.assign(g.size(), algo);
  return req;
}

TEST(FamilyCost, HierAllReduce) {
  for (auto [Y, X] :
       std::vector<std::pair<int, int>>{{2, 3}, {4, 4}, {3, 5}, {8, 2}, {1, 4}, {4, 1}}) {
    const size_t n = 12 * static_cast<size_t>(X * Y);
    const size_t beta = 2 * (Y - 1) * n / Y + 2 * (X - 1) * (n / Y) / X;
    const auto ring = make("hier", hierReq(Collective::AllReduce, {Y, X}, n, "ring"));
    for (int r = 0; r < X * Y; ++r) {
      EXPECT_EQ(plan::sequentialSteps(ring, r), size_t(2 * (Y - 1) + 2 * (X - 1))) << Y << "x" << X;
      EXPECT_EQ(plan::elementsSent(ring, r), beta) << Y << "x" << X;
    }
    if (isPow2(X) && isPow2(Y)) {
      const auto rhd = make("hier", hierReq(Collective::AllReduce, {Y, X}, n, "rhd"));
      for (int r = 0; r < X * Y; ++r) {
        EXPECT_EQ(plan::sequentialSteps(rhd, r), 2 * lg(Y) + 2 * lg(X));
        EXPECT_EQ(plan::elementsSent(rhd, r), beta);
      }
    }
  }
  const auto three = make("hier", hierReq(Collective::AllReduce, {2, 2, 3}, 120, "ring"));
  for (int r = 0; r < 12; ++r) EXPECT_EQ(plan::sequentialSteps(three, r), size_t(2 + 2 + 4));
}

TEST(FamilyCost, HierGatherScatterAndAllToAll) {
  for (auto [Y, X] : std::vector<std::pair<int, int>>{{2, 3}, {4, 4}, {3, 5}, {1, 3}, {3, 1}}) {
    const size_t c = 7, m = c * X * Y;
    const size_t steps = static_cast<size_t>((Y - 1) + (X - 1));
    const auto ag = make("hier", hierReq(Collective::AllGather, {Y, X}, c, "ring"));
    const auto rs = make("hier", hierReq(Collective::ReduceScatter, {Y, X}, c, "ring"));
    const auto a2a = make("hier", hierReq(Collective::AllToAll, {Y, X}, c, "ring"));
    for (int r = 0; r < X * Y; ++r) {
      EXPECT_EQ(plan::sequentialSteps(ag, r), steps);
      EXPECT_EQ(plan::sequentialSteps(rs, r), steps);
      EXPECT_EQ(plan::sequentialSteps(a2a, r), steps);
      EXPECT_EQ(plan::elementsSent(ag, r), (Y - 1) * X * c + (X - 1) * c);
      EXPECT_EQ(plan::elementsSent(rs, r), (Y - 1) * X * c + (X - 1) * c);
      EXPECT_EQ(plan::elementsSent(a2a, r), (Y - 1) * m / Y + (X - 1) * m / X);
    }
  }
}

}  // namespace
}  // namespace nlccl::families
