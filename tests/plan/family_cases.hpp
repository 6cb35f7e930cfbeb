// Shared helpers for the issue-4 algorithm tests (tree, rhd, hier, bruck).
#pragma once

#include <string>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "plan/plan.hpp"
#include "plan/verifier.hpp"

namespace nlccl::families {

/// A request for `c` over `p` ranks; AllToAllv gets an uneven matrix (with zeros) derived from
/// `count`.
inline plan::Request request(Collective c, int p, size_t count, bool inPlace = false,
                             int root = 0) {
  plan::Request r;
  r.collective = c;
  r.nranks = p;
  r.count = count;
  r.inPlace = inPlace;
  r.root = root % p;
  if (c == Collective::AllToAllv) {
    r.matrix.resize(static_cast<size_t>(p) * p);
    for (int i = 0; i < p; ++i)
      for (int j = 0; j < p; ++j)
        r.matrix[static_cast<size_t>(i) * p + j] =
            (static_cast<size_t>(i) * 7 + j * 3) % (count + 2);
  }
  return r;
}

/// Builds `algo` for `req` through the registry and verifies it; returns "" or the failure.
inline std::string buildAndVerify(const plan::Request& req, const char* algo) {
  std::string err;
  auto plan = algo::build(req, algo, &err);
  if (!plan) return std::string("build failed: ") + err;
  std::string why;
  if (!plan::verify(*plan, req, &why)) return why.empty() ? "verify failed" : why;
  return "";
}

/// Short description of a request for failure messages.
inline std::string describe(const plan::Request& r, const char* algo) {
  std::string s = std::string(algo) + " " + collectiveName(r.collective) +
                  " p=" + std::to_string(r.nranks) + " count=" + std::to_string(r.count) +
                  (r.inPlace ? " inplace" : "") + " root=" + std::to_string(r.root) + " groups=";
  for (int g : r.groups) s += std::to_string(g) + "x";
  s += " levels=";
  for (const auto& a : r.levelAlgorithms) s += a + ",";
  return s;
}

/// The (algorithm, collective) pairs this issue adds, hier excluded (it needs group shapes).
struct Case {
  const char* algo;
  Collective coll;
};
inline std::vector<Case> flatCases() {
  return {{"tree", Collective::AllReduce}, {"tree", Collective::Broadcast},
          {"tree", Collective::Reduce},    {"rhd", Collective::AllReduce},
          {"rhd", Collective::AllGather},  {"rhd", Collective::ReduceScatter},
          {"bruck", Collective::AllToAll}};
}
inline std::vector<Collective> hierCollectives() {
  return {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
          Collective::AllToAll, Collective::AllToAllv, Collective::Broadcast};
}

}  // namespace nlccl::families
