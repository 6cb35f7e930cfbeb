// Resolving a topology spec (preset, flat:<p>, cluster:<preset>x<N>, file) to its JSON document,
// and applying `key=value` overrides to it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.hpp"

namespace nlccl::fabric {

/// The JSON document of `spec` with `overrides` applied.
Status resolveSpec(const std::string& spec, const std::vector<std::string>& overrides,
                   nlohmann::json* out, std::string* error);

/// Applies one `dotted.key=value` override (value parsed as JSON, else taken as a string).
/// A non-numeric key segment inside an array selects the element whose "name" equals it.
Status applyOverride(const std::string& assignment, nlohmann::json* doc, std::string* error);

}  // namespace nlccl::fabric
