// Compiled-in topology presets: each is the text of src/fabric/presets/<name>.json.
#pragma once

#include <string_view>
#include <vector>

namespace nlccl::fabric {

struct Preset {
  std::string_view name;
  std::string_view json;
};

/// All presets, generated at configure time from src/fabric/presets/*.json.
const std::vector<Preset>& presets();

}  // namespace nlccl::fabric
