#include "transports/neuronlink/link_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "util/log.hpp"
#include "util/params.hpp"

namespace nlccl::transport {

namespace {
/// A non-negative number from `p`; InvalidArgument naming the variable when it is not one.
Status nonNegative(const Param<double>& p, const char* name, double* out) {
  if (!p.set) return Status::Success;
  if (!p.ok || !(p.value >= 0)) {
    WARN("%s=%s is not a non-negative number", name, p.ok ? std::to_string(p.value).c_str() : "?");
    return Status::InvalidArgument;
  }
  *out = p.value;
  return Status::Success;
}
}  // namespace

Status linkModelOptionsFromEnv(const std::string& topology, LinkModelOptions* out) {
  LinkModelOptions o;
  if (!topology.empty()) o.topology = topology;
  NLCHECK(nonNegative(paramNeuronlinkLatencyUs(), "NLCCL_NEURONLINK_LATENCY_US", &o.latencyUs));
  NLCHECK(nonNegative(paramNeuronlinkBandwidthGbps(), "NLCCL_NEURONLINK_BANDWIDTH_GBPS",
                      &o.bandwidthGBps));
  const Param<int64_t> realtime = paramNeuronlinkRealtime();
  if (!realtime.ok) return Status::InvalidArgument;
  o.realtime = realtime.value != 0;
  if (const Param<std::string> chips = paramNeuronlinkChips(); chips.set) {
    std::stringstream ss(chips.value);
    std::string tok;
    while (std::getline(ss, tok, ',')) {
      char* end = nullptr;
      long c = strtol(tok.c_str(), &end, 10);
      if (tok.empty() || *end != '\0' || c < 0) {
        WARN("NLCCL_NEURONLINK_CHIPS=%s: '%s' is not a chip number", chips.value.c_str(),
             tok.c_str());
        return Status::InvalidArgument;
      }
      o.chips.push_back(static_cast<int>(c));
    }
  }
  *out = std::move(o);
  return Status::Success;
}

Status LinkModel::create(const LinkModelOptions& opts, int nranks,
                         std::shared_ptr<const LinkModel>* out) {
  auto m = std::make_shared<LinkModel>();
  m->opts_ = opts;
  std::string error;
  if (fabric::Topology::load(opts.topology, {}, &m->topo_, &error) != Status::Success) {
    WARN("neuronlink: topology '%s': %s", opts.topology.c_str(), error.c_str());
    return Status::InvalidArgument;
  }
  if (!opts.chips.empty()) {
    if (static_cast<int>(opts.chips.size()) != nranks) {
      WARN("neuronlink: NLCCL_NEURONLINK_CHIPS lists %zu chips for %d ranks", opts.chips.size(),
           nranks);
      return Status::InvalidArgument;
    }
    for (int c : opts.chips)
      if (c >= m->topo_.numChips()) {
        WARN("neuronlink: chip %d is not in topology %s (%d chips)", c, opts.topology.c_str(),
             m->topo_.numChips());
        return Status::InvalidArgument;
      }
    m->chips_ = opts.chips;
  } else {
    if (nranks > m->topo_.numRanks()) {
      WARN("neuronlink: %d ranks do not fit on topology %s (%d ranks: %d chips x %d per chip)",
           nranks, opts.topology.c_str(), m->topo_.numRanks(), m->topo_.numChips(),
           m->topo_.ranksPerChip());
      return Status::InvalidArgument;
    }
    for (int r = 0; r < nranks; ++r) m->chips_.push_back(m->topo_.chipOfRank(r));
  }
  INFO(log::kNet, "neuronlink: %d ranks on %s, latency %s, real time %s", nranks,
       opts.topology.c_str(), opts.latencyUs >= 0 ? "fixed" : "per route",
       opts.realtime ? "on" : "off");
  *out = std::move(m);
  return Status::Success;
}

double LinkModel::transferTime(int src, int dst, size_t bytes, bool reduce) const {
  const int a = chips_[src], b = chips_[dst];
  const fabric::ChipEngine& eng = topo_.chip();
  double latency, rate;
  if (a == b) {
    latency = eng.localLatencyS;
    rate = fabric::kInfinite;
  } else {
    fabric::Route r = topo_.route(a, b);
    latency = r.latencyS;
    rate = r.bottleneckBps;
  }
  if (opts_.latencyUs >= 0) latency = opts_.latencyUs * 1e-6;
  rate = std::min(rate, eng.dmaBps());
  if (reduce) rate = std::min(rate, eng.hbmBps / eng.hbmBytesPerReducedByte);
  if (opts_.bandwidthGBps > 0) rate = std::min(rate, opts_.bandwidthGBps * 1e9);
  double data = std::isfinite(rate) ? static_cast<double>(bytes) / rate : 0.0;
  return latency + data;
}

fabric::FlowModel::Options LinkModel::flowOptions() const {
  fabric::FlowModel::Options o;
  o.latencyS = opts_.latencyUs >= 0 ? opts_.latencyUs * 1e-6 : -1;
  o.rateCapBps = opts_.bandwidthGBps > 0 ? opts_.bandwidthGBps * 1e9 : -1;
  return o;
}

double LinkModel::localOpTime(size_t bytes, bool reduce) const {
  return topo_.chip().localOpSeconds(static_cast<double>(bytes), reduce);
}

}  // namespace nlccl::transport
