// Symmetries of a Plan: rotations of digits of the rank index under which every rank's program is
// the image of another's (DESIGN.md 6: "symmetric collectives may be simulated on one
// representative per class of equivalent ranks").
//
// A digit (stride s, size n) of rank r is (r / s) % n. Rotating it by g maps r to the rank whose
// digit is (digit + g) % n and whose other digits are r's. A Plan is symmetric under a set of
// disjoint digits when, for every rotation g of them, rank g(r)'s program is rank r's with every
// peer q replaced by g(q) and the same kinds and counts (regions may sit at other offsets): a
// ring is symmetric under the digit (1, p), a hierarchical Plan under one digit per ring level.
// The rotations form a group G acting freely on ranks; its orbits are the classes of equivalent
// ranks, and the rank whose rotated digits are all 0 represents its class.
#pragma once

#include <cstddef>
#include <vector>

namespace nlccl::plan {

/// One digit of the rank index: (rank / stride) % size.
struct Digit {
  int stride = 1;
  int size = 1;
  int of(int rank) const { return rank / stride % size; }
  friend bool operator==(const Digit&, const Digit&) = default;
};

/// A group of rotations of disjoint rank digits (empty: only the identity).
struct Symmetry {
  std::vector<Digit> digits;

  bool trivial() const { return digits.empty(); }
  /// |G|: the number of ranks in each class.
  long long order() const {
    long long n = 1;
    for (const Digit& d : digits) n *= d.size;
    return n;
  }
  /// The representative of r's class: r with every rotated digit set to 0.
  int rep(int r) const {
    for (const Digit& d : digits) r -= d.of(r) * d.stride;
    return r;
  }
  bool isRep(int r) const { return rep(r) == r; }
  /// g^-1(r) for the rotation g that maps rep(q) to q: r with each rotated digit lowered by q's.
  /// A message from r to q is, seen from q's representative, a message from relative(r, q).
  int relative(int r, int q) const {
    for (const Digit& d : digits) {
      const int a = d.of(r), b = d.of(q);
      r += ((a - b + d.size) % d.size - a) * d.stride;
    }
    return r;
  }
  /// The representatives of `nranks` ranks, in increasing order.
  std::vector<int> reps(int nranks) const {
    std::vector<int> out;
    for (int r = 0; r < nranks; ++r)
      if (isRep(r)) out.push_back(r);
    return out;
  }
};

}  // namespace nlccl::plan
