// rhd: Rabenseifner all-reduce (recursive halving + recursive doubling, folded for non-powers of
// two) and recursive-doubling all-gather (Bruck's dissemination for non-powers of two).
#include "algorithms/builders.hpp"
#include "algorithms/families.hpp"
#include "algorithms/patterns.hpp"

namespace nlccl::algo {

Plan rabenseifnerAllReduce(const plan::Request& req) {
  Plan p = pattern::shell(req, "rhd");
  const size_t n = req.count;
  if (!req.inPlace)
    for (int r = 0; r < req.nranks; ++r)
      pattern::local(p, r, 0, LocalKind::Copy, plan::in(0, n), plan::out(0, n));
  pattern::appendRabenseifnerAllReduce(p, 0, pattern::iota(req.nranks), plan::out(0, n));
  return p;  // halving regions nest, so proportional slices would not line up: not pipelinable
}

Plan doublingAllGather(const plan::Request& req) {
  Plan p = pattern::shell(req, "rhd");
  const size_t c = req.count;
  if (!req.inPlace)
    for (int r = 0; r < req.nranks; ++r)
      pattern::local(p, r, 0, LocalKind::Copy, plan::in(0, c), plan::out(r * c, c));
  pattern::appendDoublingAllGather(p, 0, pattern::iota(req.nranks), plan::out(0, c * req.nranks));
  return p;
}

std::vector<Entry> rhdEntries() {
  return {
      {"rhd", Collective::AllReduce, rabenseifnerAllReduce},
      {"rhd", Collective::AllGather, doublingAllGather},
  };
}

}  // namespace nlccl::algo
