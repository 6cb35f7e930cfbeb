#include "algorithms/selection.hpp"

#include <cctype>
#include <vector>

#include "algorithms/algorithms.hpp"

namespace nlccl::algo {

namespace {

constexpr Collective kSelectable[] = {
    Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::Broadcast,
    Collective::Reduce,    Collective::AllToAll,  Collective::AllToAllv, Collective::Gather,
    Collective::Scatter};

std::string normalize(std::string_view s) {
  std::string r;
  for (char ch : s)
    if (!std::isspace(static_cast<unsigned char>(ch)))
      r += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return r;
}

Status fail(std::string* error, std::string msg) {
  if (error) *error = std::move(msg);
  return Status::InvalidArgument;
}

}  // namespace

std::string Selection::nameFor(Collective c) const {
  auto it = chosen.find(c);
  return it != chosen.end() ? it->second : kAuto;
}

Status parseSelection(std::string_view text, Selection* out, std::string* error) {
  Selection bare, explicitly;
  const std::string all = normalize(text);
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t end = all.find(',', pos);
    if (end == std::string::npos) end = all.size();
    const std::string item = all.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
      bool any = false;
      for (Collective c : kSelectable)
        if (item == kAuto || find(item, c)) {
          bare.chosen[c] = item;
          any = true;
        }
      if (!any) {
        std::string names;
        for (Collective c : kSelectable)
          names +=
              std::string(names.empty() ? "" : "; ") + collectiveName(c) + ": " + validNames(c);
        return fail(error,
                    "unknown algorithm '" + item + "' (valid names per collective: " + names + ")");
      }
      continue;
    }
    const std::string coll = item.substr(0, colon), name = item.substr(colon + 1);
    const Collective* which = nullptr;
    for (const Collective& c : kSelectable)
      if (coll == collectiveName(c)) which = &c;
    if (!which) {
      std::string names;
      for (Collective c : kSelectable)
        names += std::string(names.empty() ? "" : ", ") + collectiveName(c);
      return fail(error,
                  "unknown collective '" + coll + "' in '" + item + "' (valid: " + names + ")");
    }
    if (name != kAuto && !find(name, *which))
      return fail(error, "algorithm '" + name + "' does not apply to " + collectiveName(*which) +
                             " (valid names: " + validNames(*which) + ")");
    explicitly.chosen[*which] = name;
  }
  for (auto& [c, n] : explicitly.chosen) bare.chosen[c] = n;
  if (out) *out = std::move(bare);
  return Status::Success;
}

}  // namespace nlccl::algo
