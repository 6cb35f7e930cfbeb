#include "sim/quotient.hpp"

#include <algorithm>

namespace nlccl::sim {

namespace {

using fabric::LevelKind;
using fabric::Topology;
using plan::Digit;

/// Ranks per unit of each level, innermost first: ranks per chip, then level 0, 1, ...
std::vector<long long> boundaries(const Topology& topo) {
  std::vector<long long> b{topo.ranksPerChip()};
  for (int l = 0; l < static_cast<int>(topo.levels().size()); ++l)
    b.push_back(static_cast<long long>(topo.ranksPerChip()) * topo.span(l));
  return b;
}

/// Whether rotating digit (s, n) maps the fabric onto itself: the digit lies inside every unit
/// boundary or above it (moving whole units), and does not rotate a direct level's own index.
bool compatible(const Topology& topo, const std::vector<long long>& bounds, long long s,
                long long n) {
  for (long long r : bounds) {
    const bool inside = s * n <= r && r % (s * n) == 0;
    const bool above = s >= r && s % r == 0;
    if (!inside && !above) return false;
  }
  for (size_t l = 0; l < topo.levels().size(); ++l)
    if (topo.levels()[l].kind == LevelKind::Direct && s >= bounds[l] && s * n <= bounds[l + 1])
      return false;
  return true;
}

bool foldable(const Topology& topo, int nranks) {
  for (const fabric::Level& l : topo.levels())
    if (l.kind == LevelKind::Torus) return false;
  for (int r = 0; r < nranks; ++r)
    if (topo.chipOfRank(r) != r / topo.ranksPerChip()) return false;  // a rank_to_chip list
  return true;
}

/// Product of the sizes of the digits that lie inside units of `ranks` ranks (they fix a unit).
double insideOrder(const plan::Symmetry& sym, long long ranks) {
  double w = 1;
  for (const Digit& d : sym.digits)
    if (static_cast<long long>(d.stride) * d.size <= ranks) w *= d.size;
  return w;
}

}  // namespace

plan::Symmetry fabricSymmetry(const Topology& topo, const plan::Symmetry& declared, int nranks) {
  plan::Symmetry out;
  if (declared.trivial() || nranks > topo.numRanks() || !foldable(topo, nranks)) return out;
  const std::vector<long long> bounds = boundaries(topo);
  for (const Digit& d : declared.digits) {
    // The smallest k dividing the size whose rotation by k (digit (s k, n / k)) fits the fabric.
    for (int k = 1; k < d.size; ++k) {
      if (d.size % k != 0) continue;
      if (compatible(topo, bounds, static_cast<long long>(d.stride) * k, d.size / k)) {
        out.digits.push_back({d.stride * k, d.size / k});
        break;
      }
    }
  }
  return out;
}

Quotient::Quotient(const Topology& topo, const plan::Symmetry& sym) {
  if (sym.trivial()) return;
  const int rpc = topo.ranksPerChip();
  const int chips = topo.numChips();
  chipWeight_ = insideOrder(sym, rpc);
  chipRep_.resize(static_cast<size_t>(chips));
  // (Chips beyond the Plan's ranks carry no flows; where they map does not matter.)
  for (int c = 0; c < chips; ++c) chipRep_[static_cast<size_t>(c)] = sym.rep(c * rpc) / rpc;
  const auto& links = topo.links();
  const auto& levels = topo.levels();
  const int nl = static_cast<int>(levels.size());
  // Links of a level are contiguous, in port order, up then down for switches (topology.cpp).
  std::vector<int> first(static_cast<size_t>(nl), -1);
  for (int l = static_cast<int>(links.size()) - 1; l >= 0; --l) first[links[l].level] = l;
  auto unitRep = [&](int level, long long unit) {
    const long long ranks = static_cast<long long>(rpc) * topo.span(level);
    return static_cast<long long>(sym.rep(static_cast<int>(unit * ranks))) / ranks;
  };
  linkRep_.resize(links.size());
  linkWeight_.resize(links.size());
  for (size_t id = 0; id < links.size(); ++id) {
    const fabric::Link& k = links[id];
    const fabric::Level& lev = levels[static_cast<size_t>(k.level)];
    const int base = first[static_cast<size_t>(k.level)];
    long long rep = static_cast<long long>(id);
    double weight = 1;
    if (lev.kind == LevelKind::Switch && lev.attachChip) {
      const bool up = k.from < chips;
      const int chip = up ? k.from : k.to;
      rep = base + 2LL * chipRep_[static_cast<size_t>(chip)] + (up ? 0 : 1);
      weight = chipWeight_;
    } else if (lev.kind == LevelKind::Switch) {
      // From the switch of unit u of the level below (up) or to it (down).
      const int lowerBase = links[static_cast<size_t>(first[static_cast<size_t>(k.level - 1)])].to;
      const bool up = (static_cast<long long>(id) - base) % 2 == 0;
      const long long unit = (up ? k.from : k.to) - lowerBase;
      rep = base + 2 * unitRep(k.level - 1, unit) + (up ? 0 : 1);
      weight = insideOrder(sym, static_cast<long long>(rpc) * topo.span(k.level - 1));
    } else {  // Direct: size - 1 links per chip, in port order
      const int ports = lev.size - 1;
      const long long port = (static_cast<long long>(id) - base) % ports;
      rep = base + static_cast<long long>(chipRep_[static_cast<size_t>(k.from)]) * ports + port;
      weight = chipWeight_;
    }
    linkRep_[id] = static_cast<int>(rep);
    linkWeight_[id] = static_cast<float>(weight);
  }
}

}  // namespace nlccl::sim
