// The reduced (symmetric) form's view of the fabric (docs/fabric.md, "Reduced form").
//
// A Plan symmetric under rotations of rank digits (plan/symmetry.hpp) on a fabric those same
// rotations map onto itself is simulated on one representative rank per class. Every link and
// chip of the fabric then stands for its orbit: the flows of the representatives use the orbit's
// representative, and a flow counts on it `weight` times, the number of members of its own orbit
// that share one member of the link's orbit (|stabiliser| of the link: 4 for a server uplink
// under rotations of the chip in the server). Max-min sharing on this folded network gives every
// representative flow the rate every member of its orbit gets in the whole network (the max-min
// allocation is unique, hence symmetric), so the reduced simulation times each class exactly as
// the full one would.
#pragma once

#include <vector>

#include "nlccl/topology.hpp"
#include "plan/symmetry.hpp"

namespace nlccl::sim {

/// The part of `declared` (an algorithm's symmetry for `nranks` ranks) that is also a symmetry of
/// `topo`: each digit coarsened to the smallest subgroup of its rotations that maps chips, and
/// the units of every level, onto each other (a ring's rotation of the whole rank index becomes
/// the rotation of the top level's units). Trivial when the fabric has a torus, a rank_to_chip
/// list, or nothing fits. On a direct (partner) level only rotations above or below it qualify.
plan::Symmetry fabricSymmetry(const fabric::Topology& topo, const plan::Symmetry& declared,
                              int nranks);

/// Links and chips folded by a fabric symmetry: representative and weight of each.
class Quotient {
 public:
  Quotient(const fabric::Topology& topo, const plan::Symmetry& sym);
  int link(int l) const { return linkRep_.empty() ? l : linkRep_[static_cast<size_t>(l)]; }
  double linkWeight(int l) const {
    return linkWeight_.empty() ? 1.0 : linkWeight_[static_cast<size_t>(l)];
  }
  int chip(int c) const { return chipRep_.empty() ? c : chipRep_[static_cast<size_t>(c)]; }
  double chipWeight() const { return chipWeight_; }
  /// False for the identity (the full form): every link and chip stands for itself.
  bool folds() const { return !linkRep_.empty() || !chipRep_.empty(); }

 private:
  std::vector<int> linkRep_;
  std::vector<float> linkWeight_;
  std::vector<int> chipRep_;
  double chipWeight_ = 1.0;
};

}  // namespace nlccl::sim
