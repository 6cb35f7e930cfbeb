// bruck: Bruck's all-to-all in ceil(lg p) steps for small messages (any p). Rank r keeps block j of
// its working array (data travelling from rank r-j's point of view) in Output at block (r-j) mod p,
// so the final inverse rotation is free; step k sends every block whose index has bit k set to
// rank r + 2^k, packed into Scratch.
#include "algorithms/builders.hpp"
#include "algorithms/families.hpp"
#include "algorithms/patterns.hpp"

namespace nlccl::algo {

Plan bruckAllToAll(const plan::Request& req) {
  Plan p = pattern::shell(req, "bruck");
  const int np = req.nranks;
  const size_t c = req.count, pc = c * static_cast<size_t>(np);
  if (c == 0) return p;
  auto mod = [np](int a) { return pattern::mod(a, np); };
  // Largest number of blocks a step moves, and the scratch layout: [work (in place only) | send
  // pack | receive pack].
  size_t maxBlocks = 0;
  for (int bit = 1; bit < np; bit <<= 1) {
    size_t nb = 0;
    for (int j = 0; j < np; ++j) nb += (j & bit) != 0;
    maxBlocks = std::max(maxBlocks, nb);
  }
  const size_t sendBase = req.inPlace ? pc : 0, recvBase = sendBase + maxBlocks * c;
  for (int r = 0; r < np; ++r) {
    if (!p.builds(r)) continue;
    // In place, Input is Output: keep the working array in Scratch instead.
    auto work = [&](int j) {
      return req.inPlace ? plan::scratch(static_cast<size_t>(j) * c, c)
                         : plan::out(static_cast<size_t>(mod(r - j)) * c, c);
    };
    for (int j = 0; j < np; ++j)
      pattern::local(p, r, 0, LocalKind::Copy, plan::in(static_cast<size_t>(mod(r + j)) * c, c),
                 work(j));
    auto pack = [&](Step& st, int bit) {
      size_t idx = 0;
      for (int j = 0; j < np; ++j)
        if (j & bit)
          st.locals.push_back({LocalKind::Copy, work(j), plan::scratch(sendBase + c * idx++, c)});
    };
    Step first;
    pack(first, 1);
    pattern::push(p, r, 0, std::move(first));
    for (int bit = 1; bit < np; bit <<= 1) {
      size_t nb = 0;
      for (int j = 0; j < np; ++j) nb += (j & bit) != 0;
      Step st;
      pattern::xfer(st, XferKind::Send, mod(r + bit), plan::scratch(sendBase, nb * c));
      pattern::xfer(st, XferKind::Recv, mod(r - bit), plan::scratch(recvBase, nb * c));
      size_t idx = 0;
      for (int j = 0; j < np; ++j)
        if (j & bit)
          st.locals.push_back({LocalKind::Copy, plan::scratch(recvBase + c * idx++, c), work(j)});
      if ((bit << 1) < np) pack(st, bit << 1);
      pattern::push(p, r, 0, std::move(st));
    }
    if (req.inPlace)
      for (int j = 0; j < np; ++j)
        pattern::local(p, r, 0, LocalKind::Copy, work(j),
                   plan::out(static_cast<size_t>(mod(r - j)) * c, c));
  }
  pattern::fitScratch(p);
  return p;
}

std::vector<Entry> bruckEntries() {
  // Rank r's program is rank 0's with every peer and block index shifted by r.
  auto rotation = [](const plan::Request& r) {
    plan::Symmetry s;
    pattern::addRotation(&s, 1, r.nranks);
    return s;
  };
  return {{"bruck", Collective::AllToAll, bruckAllToAll, rotation}};
}

}  // namespace nlccl::algo
