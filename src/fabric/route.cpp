// Routes between chips: up and down through switch layers, dimension order on tori, one hop over
// a direct (partner) link to the chip at the same position of the destination's unit.
#include <algorithm>

#include "nlccl/topology.hpp"

namespace nlccl::fabric {

void Topology::routeLinks(int a, int b, std::vector<int>* out) const {
  const int nl = static_cast<int>(levels_.size());
  while (a != b) {
    int L = 0;
    while (L < nl && a / span_[L + 1] != b / span_[L + 1]) ++L;
    // Both chips lie in one unit of level L and in different units of level L-1.
    const Level& lev = levels_[L];
    const int64_t sub = span_[L];
    if (lev.kind == LevelKind::Switch) {
      // Climb from the chip port (the lowest level of the attach=below chain) to level L.
      int base = L;
      while (!levels_[base].attachChip) --base;
      out->push_back(upBase_[base] + 2 * a);
      for (int k = base + 1; k <= L; ++k)
        out->push_back(upBase_[k] + 2 * static_cast<int>(a / span_[k]));
      for (int k = L; k > base; --k)
        out->push_back(upBase_[k] + 2 * static_cast<int>(b / span_[k]) + 1);
      out->push_back(upBase_[base] + 2 * b + 1);
      return;
    }
    const int ports = portsPerChip_[L];
    const int* slot = &meshLinks_[meshBase_[L] + static_cast<size_t>(a) * ports];
    const int ia = static_cast<int>(a / sub % lev.size);
    const int ib = static_cast<int>(b / sub % lev.size);
    if (lev.kind == LevelKind::Direct) {
      out->push_back(slot[ib < ia ? ib : ib - 1]);
      a = links_[out->back()].to;
      continue;
    }
    // Torus: correct the lowest differing dimension by one hop in its shorter direction.
    int stride = 1;
    for (size_t d = 0; d < lev.dims.size(); ++d) {
      const int dim = lev.dims[d];
      const int ca = ia / stride % dim;
      const int cb = ib / stride % dim;
      if (ca != cb) {
        const int fwd = (cb - ca + dim) % dim;
        out->push_back(slot[2 * d + (fwd <= dim - fwd ? 0 : 1)]);
        a = links_[out->back()].to;
        break;
      }
      stride *= dim;
    }
  }
}

double Topology::transferCapBps(const std::vector<int>& route) const {
  double cap = kInfinite;
  for (int id : route) {
    const Link& l = links_[id];
    if (l.ports > 1 && !levels_[l.level].stripe) cap = std::min(cap, l.bwBps / l.ports);
  }
  return cap;
}

Route Topology::route(int chipA, int chipB) const {
  Route r;
  routeLinks(chipA, chipB, &r.links);
  for (int id : r.links) {
    const Link& l = links_[id];
    r.latencyS += l.latencyS;
    r.bottleneckBps = std::min(r.bottleneckBps, l.bwBps);
    r.topLevel = std::max(r.topLevel, l.level);
  }
  r.bottleneckBps = std::min(r.bottleneckBps, transferCapBps(r.links));
  return r;
}

}  // namespace nlccl::fabric
