// Algorithms generate Plans: pure functions of a Request (DESIGN.md 2.2). Users pick them by name:
// ring, tree, rhd, hier, direct, pairwise, bruck.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.hpp"
#include "plan/symmetry.hpp"

namespace nlccl::algo {

using Builder = plan::Plan (*)(const plan::Request&);
/// The rotations of rank digits the Plans of a request are symmetric under (plan/symmetry.hpp);
/// counts must divide evenly for the images to match exactly (blocks otherwise differ by one
/// element). Tested against the built Plans (tests/plan/symmetry_test.cpp).
using SymmetryOf = plan::Symmetry (*)(const plan::Request&);

struct Entry {
  const char* name;
  Collective collective;
  Builder build;
  SymmetryOf symmetry = nullptr;  ///< nullptr: no symmetry (every rank is its own class)
};

/// Every (algorithm, collective) pair nlccl implements.
const std::vector<Entry>& registry();

/// The builder for `name` on `c`, or nullptr when that algorithm does not implement `c`.
const Entry* find(std::string_view name, Collective c);

/// Comma-separated names valid for `c` (for error messages), e.g. "ring, tree, rhd, hier".
std::string validNames(Collective c);

/// The default algorithm name for `c` (ring for reductions and all-gather, direct for all-to-all,
/// gather and scatter).
const char* defaultAlgorithm(Collective c);

/// The symmetry of `name`'s Plans for `req` (trivial when it declares none).
plan::Symmetry symmetryOf(const plan::Request& req, std::string_view name);


/// Builds the Plan for `req` with algorithm `name`. Returns nullopt, with `error` set to a message
/// listing the valid names, when `name` does not apply to the collective.
std::optional<plan::Plan> build(const plan::Request& req, std::string_view name,
                                std::string* error = nullptr);

}  // namespace nlccl::algo
