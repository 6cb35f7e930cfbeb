#include "fabric/json_spec.hpp"

#include <cctype>
#include <fstream>
#include <sstream>

#include "fabric/presets.hpp"
#include "util/log.hpp"

namespace nlccl::fabric {

namespace {

using nlohmann::json;

Status fail(std::string* error, std::string msg) {
  if (error) *error = std::move(msg);
  return Status::InvalidArgument;
}

bool parsePositive(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  *out = std::stoi(s);
  return *out > 0;
}

// The flat topology: p chips on one non-blocking switch; alpha 10 us, 1280 GB/s per port by
// default (override with levels.switch.latency_us / bw_GBps, or nlccl-sim --alpha-us / --bw-GBps).
json flatDocument(int p) {
  json level = {{"name", "switch"}, {"kind", "switch"}, {"size", p}, {"attach", "chip"},
                {"bw_GBps", 1280.0}, {"latency_us", 10.0}};
  json chip = {{"name", "flat"},
               {"dma_engines", "inf"},
               {"dma_engine_GBps", "inf"},
               {"hbm_GBps", "inf"},
               {"hbm_bytes_per_reduced_byte", 2},
               {"local_latency_us", 0}};
  return {{"name", "flat:" + std::to_string(p)},
          {"description", "p ranks on one non-blocking switch, for checks against closed forms"},
          {"flat", true},
          {"ranks_per_chip", 1},
          {"launch_overhead_us", 0},
          {"pair_window_bytes", 0},
          {"chunk_bytes", 0},
          {"chip", chip},
          {"levels", json::array({level})}};
}

Status loadBase(const std::string& spec, json* out, std::string* error) {
  for (const Preset& p : presets()) {
    if (p.name == spec) {
      *out = json::parse(p.json, nullptr, /*allow_exceptions=*/false);
      if (out->is_discarded()) return fail(error, "preset " + spec + " is not valid JSON");
      return Status::Success;
    }
  }
  if (spec.rfind("flat:", 0) == 0) {
    int p = 0;
    if (!parsePositive(spec.substr(5), &p)) return fail(error, "bad flat topology '" + spec + "'");
    *out = flatDocument(p);
    return Status::Success;
  }
  if (spec.rfind("cluster:", 0) == 0) {
    const std::string rest = spec.substr(8);
    const size_t x = rest.rfind('x');
    int n = 0;
    if (x == std::string::npos || !parsePositive(rest.substr(x + 1), &n))
      return fail(error, "bad cluster topology '" + spec + "' (want cluster:<preset>x<N>)");
    json base;
    NLCHECK(loadBase(rest.substr(0, x), &base, error));
    json so = base.value("scale_out", json{{"name", "efa"}, {"bw_GBps", 25}, {"latency_us", 15}});
    json level = {{"name", so.value("name", "efa")}, {"kind", "switch"}, {"size", n},
                  {"attach", "chip"}, {"bw_GBps", so.value("bw_GBps", json(25))},
                  {"latency_us", so.value("latency_us", json(15))}};
    base["levels"].push_back(level);
    base["name"] = spec;
    base["description"] = std::to_string(n) + " copies of " + rest.substr(0, x) +
                          " joined by a non-blocking scale-out network, one port per chip";
    base.erase("scale_out");
    *out = std::move(base);
    return Status::Success;
  }
  std::ifstream in(spec);
  if (!in) {
    std::string names;
    for (const Preset& p : presets()) names += std::string(names.empty() ? "" : ", ") + std::string(p.name);
    return fail(error, "unknown topology '" + spec + "': not a preset (" + names +
                           ", flat:<p>, cluster:<preset>x<N>) and not a readable file");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  *out = json::parse(ss.str(), nullptr, false, /*ignore_comments=*/true);
  if (out->is_discarded()) return fail(error, "topology file " + spec + " is not valid JSON");
  return Status::Success;
}

}  // namespace

Status applyOverride(const std::string& assignment, json* doc, std::string* error) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    return fail(error, "override '" + assignment + "' is not key=value");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  json value = json::parse(text, nullptr, false);
  if (value.is_discarded()) value = text;
  json* node = doc;
  std::stringstream ks(key);
  std::string seg;
  while (std::getline(ks, seg, '.')) {
    if (node->is_array()) {
      int idx = -1;
      if (!seg.empty() && std::isdigit(static_cast<unsigned char>(seg[0]))) {
        idx = std::stoi(seg);
      } else {
        for (size_t i = 0; i < node->size(); ++i)
          if ((*node)[i].is_object() && (*node)[i].value("name", "") == seg) idx = static_cast<int>(i);
      }
      if (idx < 0 || idx >= static_cast<int>(node->size()))
        return fail(error, "override '" + key + "': no element '" + seg + "'");
      node = &(*node)[static_cast<size_t>(idx)];
    } else if (node->is_object() || node->is_null()) {
      node = &(*node)[seg];
    } else {
      return fail(error, "override '" + key + "': '" + seg + "' is inside a non-object");
    }
  }
  *node = value;
  return Status::Success;
}

Status resolveSpec(const std::string& spec, const std::vector<std::string>& overrides, json* out,
                   std::string* error) {
  NLCHECK(loadBase(spec, out, error));
  for (const std::string& o : overrides) NLCHECK(applyOverride(o, out, error));
  return Status::Success;
}

}  // namespace nlccl::fabric
