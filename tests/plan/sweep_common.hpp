// Request generation shared by the plan sweeps: every registered (algorithm, collective) pair is
// proven by the verifier for many rank counts, counts, roots and both in-place modes.
#pragma once

#include <string>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "plan/plan.hpp"

namespace nlccl::plan::testing {

/// A deterministic skewed all-to-all-v matrix with some empty blocks.
inline std::vector<size_t> skewedMatrix(int p, size_t count) {
  std::vector<size_t> m(static_cast<size_t>(p) * p);
  for (int i = 0; i < p; ++i)
    for (int j = 0; j < p; ++j) {
      size_t h = static_cast<size_t>(i) * 131 + static_cast<size_t>(j) * 71 + count * 17;
      m[static_cast<size_t>(i) * p + j] =
          h % 7 == 0 ? 0 : 1 + (h * 2654435761u >> 7) % (1 + count / p);
    }
  return m;
}

/// The requests a sweep proves `entry` on for nranks `p`: the given counts, in and out of place,
/// roots 0 and p-1 for rooted collectives, and a two-level grouping for hier.
inline std::vector<Request> sweepRequests(const algo::Entry& entry, int p,
                                          const std::vector<size_t>& counts) {
  std::vector<Request> out;
  const bool rooted =
      entry.collective == Collective::Broadcast || entry.collective == Collective::Reduce ||
      entry.collective == Collective::Gather || entry.collective == Collective::Scatter;
  std::vector<int> roots = rooted && p > 1 ? std::vector<int>{0, p - 1} : std::vector<int>{0};
  std::vector<std::vector<int>> groupings = {{}};
  if (std::string(entry.name) == "hier")
    for (int f = 2; f < p; ++f)
      if (p % f == 0) {
        groupings.push_back({f, p / f});
        break;
      }
  for (size_t count : counts)
    for (bool inPlace : {false, true})
      for (int root : roots)
        for (const std::vector<int>& groups : groupings) {
          Request req;
          req.collective = entry.collective;
          req.nranks = p;
          req.count = count;
          req.root = root;
          req.inPlace = inPlace;
          req.groups = groups;
          if (entry.collective == Collective::AllToAllv) req.matrix = skewedMatrix(p, count);
          out.push_back(req);
        }
  return out;
}

inline std::string describe(const algo::Entry& e, const Request& req) {
  std::string s = std::string(e.name) + " " + collectiveName(e.collective) +
                  " nranks=" + std::to_string(req.nranks) + " count=" + std::to_string(req.count) +
                  " root=" + std::to_string(req.root) + (req.inPlace ? " in-place" : "");
  if (!req.groups.empty()) {
    s += " groups=";
    for (int g : req.groups) s += std::to_string(g) + ",";
  }
  return s;
}

}  // namespace nlccl::plan::testing
