// The algorithm registry: every family's entries, looked up by (name, collective).
#include <string>

#include "algorithms/algorithms.hpp"
#include "algorithms/families.hpp"

namespace nlccl::algo {

const std::vector<Entry>& registry() {
  static const std::vector<Entry> all = [] {
    std::vector<Entry> v;
    for (auto family :
         {ringEntries, directEntries, treeEntries, rhdEntries, hierEntries, bruckEntries,
          rootedEntries, recursiveDoublingEntries}) {
      std::vector<Entry> e = family();
      v.insert(v.end(), e.begin(), e.end());
    }
    return v;
  }();
  return all;
}

const Entry* find(std::string_view name, Collective c) {
  for (const Entry& e : registry())
    if (e.collective == c && name == e.name) return &e;
  return nullptr;
}

std::string validNames(Collective c) {
  std::string s;
  for (const Entry& e : registry())
    if (e.collective == c) {
      if (!s.empty()) s += ", ";
      s += e.name;
    }
  return s;
}

const char* defaultAlgorithm(Collective c) {
  return c == Collective::AllToAll || c == Collective::AllToAllv || c == Collective::Gather ||
                 c == Collective::Scatter
             ? "direct"
             : "ring";
}

plan::Symmetry symmetryOf(const plan::Request& req, std::string_view name) {
  const Entry* e = find(name, req.collective);
  return e != nullptr && e->symmetry != nullptr && req.nranks > 1 ? e->symmetry(req)
                                                                  : plan::Symmetry{};
}

std::optional<plan::Plan> build(const plan::Request& req, std::string_view name,
                                std::string* error) {
  const Entry* e = find(name, req.collective);
  if (e == nullptr) {
    if (error) {
      std::string valid = validNames(req.collective);
      *error = "algorithm '" + std::string(name) + "' does not implement " +
               collectiveName(req.collective) + "; valid: " + (valid.empty() ? "none" : valid);
    }
    return std::nullopt;
  }
  if (req.nranks < 1 || (req.collective == Collective::AllToAllv &&
                         req.matrix.size() != static_cast<size_t>(req.nranks) * req.nranks)) {
    if (error) *error = "bad request for " + std::string(collectiveName(req.collective));
    return std::nullopt;
  }
  plan::Plan plan = e->build(req);
  plan.algorithm = e->name;
  return plan;
}

}  // namespace nlccl::algo
