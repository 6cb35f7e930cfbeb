// rhd: Rabenseifner all-reduce (recursive halving + recursive doubling, folded for non-powers of
// two), recursive-doubling all-gather (Bruck's dissemination for non-powers of two) and
// recursive-halving reduce-scatter (ring for non-powers of two).
#include "algorithms/builders.hpp"
#include "algorithms/families.hpp"
#include "algorithms/patterns.hpp"

namespace nlccl::algo {

Plan rabenseifnerAllReduce(const plan::Request& req) {
  Plan p = pattern::shell(req, "rhd");
  const size_t n = req.count;
  // Each rank's contribution is read from Input by its first reduction (RecvReduceCopy) or sent
  // from there: nothing is copied before communicating. A single rank only copies.
  const Region input = req.inPlace ? plan::out(0, n) : plan::in(0, n);
  if (req.nranks == 1)
    pattern::local(p, 0, 0, LocalKind::Copy, input, plan::out(0, n));
  pattern::appendRabenseifnerAllReduce(p, 0, pattern::iota(req.nranks), plan::out(0, n), input);
  return p;  // halving regions nest, so proportional slices would not line up: not pipelinable
}

// Out of place, each rank's first step sends its block from Input and copies it into Output
// after (appendDoublingAllGather's ownSrc).
Plan doublingAllGather(const plan::Request& req) {
  Plan p = pattern::shell(req, "rhd");
  const size_t c = req.count;
  const Region input = plan::in(0, c);
  if (req.nranks == 1 && !req.inPlace && p.builds(0))
    pattern::local(p, 0, 0, LocalKind::Copy, input, plan::out(0, c));
  pattern::appendDoublingAllGather(p, 0, pattern::iota(req.nranks), plan::out(0, c * req.nranks),
                                   req.inPlace ? nullptr : &input);
  return p;
}

// Recursive halving, out of the user's buffers: lg p steps where ring takes p-1, which is what
// small reduce-scatters at 4+ ranks pay for (each step is a wake-up of the partner). Step k
// sends the half of the remaining blocks the partner keeps and reduces the other half; the first
// step reads both from Input (RecvReduceCopy), the middle ones work in Scratch (the blocks the
// first step kept, p/2 of them at most), the last one reduces this rank's block straight into
// Output. Before this, hier(rhd) on one level was the only way to get this schedule, and hier
// stages every block through Scratch and cannot be a prepared call. Non-powers of two take the
// ring's schedule (the same layout as ring's reduce-scatter).
Plan halvingReduceScatter(const plan::Request& req) {
  Plan p = pattern::shell(req, "rhd", 1);
  const int np = req.nranks;
  const size_t c = req.count;
  if (c == 0) return p;
  if (np == 1) {
    if (!req.inPlace && p.builds(0)) pattern::local(p, 0, 0, LocalKind::Copy, plan::in(0, c), plan::out(0, c));
    return p;
  }
  if (!pattern::isPow2(np)) {
    p.pipelinable = true;
    p.scratchCount = np >= 3 ? static_cast<size_t>(std::min(2, np - 2)) * c : 0;
    pattern::RingReduceLayout lay{
        [&](int i, int j) {
          return req.inPlace && i == j ? plan::out(0, c) : plan::in(static_cast<size_t>(j) * c, c);
        },
        [&](int, int s, int) {
          return s == np - 2 ? plan::out(0, c) : plan::scratch((s % 2) * c, c);
        }};
    pattern::appendRingReduceScatter(p, 0, pattern::iota(np), lay);
    return p;
  }
  for (int i = 0; i < np; ++i) {
    if (!p.builds(i)) continue;
    // Where block j's running sum is read from after `steps` steps: Input before the first
    // (Output for this rank's own block in place: the same memory), Scratch after.
    const int firstLo = (i & (np / 2)) == 0 ? 0 : np / 2;
    auto inBlocks = [&](int a, int b) {
      return plan::in(static_cast<size_t>(a) * c, static_cast<size_t>(b - a) * c);
    };
    auto scratchBlocks = [&](int a, int b) {
      return plan::scratch(static_cast<size_t>(a - firstLo) * c, static_cast<size_t>(b - a) * c);
    };
    int lo = 0, hi = np;
    bool first = true;
    for (int mask = np / 2; mask >= 1; mask /= 2) {
      const int mid = (lo + hi) / 2, partner = i ^ mask;
      const bool lower = (i & mask) == 0;
      const int sendLo = lower ? mid : lo, sendHi = lower ? hi : mid;
      const int keepLo = lower ? lo : mid, keepHi = lower ? mid : hi;
      Step st;
      pattern::xfer(st, XferKind::Send, partner,
                    first ? inBlocks(sendLo, sendHi) : scratchBlocks(sendLo, sendHi));
      const bool last = mask == 1;
      const Region src = first ? inBlocks(keepLo, keepHi) : scratchBlocks(keepLo, keepHi);
      const Region dst = last ? plan::out(0, c) : scratchBlocks(keepLo, keepHi);
      if (last && first && req.inPlace)  // p == 2 in place: Output is Input's block i
        st.transfers.push_back(pattern::recvReduce(partner, dst));
      else
        st.transfers.push_back(pattern::recvReduceCopy(partner, dst, src));
      pattern::push(p, i, 0, std::move(st));
      lo = keepLo;
      hi = keepHi;
      first = false;
    }
  }
  pattern::fitScratch(p);
  return p;  // halving regions nest, so proportional slices would not line up: not pipelinable
}

std::vector<Entry> rhdEntries() {
  // Partners are r XOR 2^k: for a power of two, flipping any bit of the rank maps every program
  // onto another. The fold (and Bruck's dissemination) of other counts singles ranks out.
  auto bits = [](const plan::Request& r) {
    plan::Symmetry s;
    if (pattern::isPow2(r.nranks)) pattern::addBits(&s, 1, r.nranks);
    return s;
  };
  return {
      {"rhd", Collective::AllReduce, rabenseifnerAllReduce, bits},
      {"rhd", Collective::AllGather, doublingAllGather, bits},
      {"rhd", Collective::ReduceScatter, halvingReduceScatter,
       [](const plan::Request& r) {
         plan::Symmetry s;
         if (pattern::isPow2(r.nranks))
           pattern::addBits(&s, 1, r.nranks);
         else
           pattern::addRotation(&s, 1, r.nranks);  // the ring's schedule
         return s;
       }},
  };
}

}  // namespace nlccl::algo
