// Algorithm choice by name per collective: the syntax NLCCL_ALGO and the config's algorithm field
// accept, e.g. "tree" (every collective tree implements) or "allreduce:tree,alltoall:hier".
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "plan/plan.hpp"
#include "util/status.hpp"

namespace nlccl::algo {

/// "auto": the tuner chooses (the default for every collective).
inline constexpr const char* kAuto = "auto";

/// Algorithm names chosen per collective; collectives without a choice are "auto".
struct Selection {
  std::map<Collective, std::string> chosen;
  /// The chosen name for `c`, or "auto".
  std::string nameFor(Collective c) const;
};

/// Parses comma-separated items, each "name" or "collective:name" ("auto" is a name of every
/// collective) (case-insensitive, spaces
/// ignored). A bare name applies to every collective that algorithm implements; a
/// "collective:name" item overrides it for that collective (later items win). An empty string is
/// an empty selection. Returns InvalidArgument, with `error` naming the bad item and listing the
/// valid names (algo::validNames) or collectives, for an unknown collective, an unknown name, or a
/// name that does not apply to the collective.
Status parseSelection(std::string_view text, Selection* out, std::string* error = nullptr);

}  // namespace nlccl::algo
