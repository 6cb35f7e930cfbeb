// rhd: Rabenseifner all-reduce (recursive halving + recursive doubling, folded for non-powers of
// two) and recursive-doubling all-gather (Bruck's dissemination for non-powers of two).
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

Plan doublingAllGather(const plan::Request& req) {
  Plan p = pattern::shell(req, "rhd");
  const size_t c = req.count;
  if (!req.inPlace)
    for (int r = 0; r < req.nranks; ++r)
      if (p.builds(r)) pattern::local(p, r, 0, LocalKind::Copy, plan::in(0, c), plan::out(r * c, c));
  pattern::appendDoublingAllGather(p, 0, pattern::iota(req.nranks), plan::out(0, c * req.nranks));
  return p;
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
  };
}

}  // namespace nlccl::algo
