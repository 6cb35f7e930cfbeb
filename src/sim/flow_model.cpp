// FlowModel: the incremental flow-sharing model a transport feeds messages into (issue 6).
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

#include "nlccl/sim.hpp"
#include "sim/flow_network.hpp"

namespace nlccl::sim {

struct FlowModel::Impl {
  const fabric::Topology& topo;
  FlowNetwork net;
  std::vector<int> linkRes, dmaRes, hbmRes;
  double now = 0;
  struct Pending {
    double start;
    int src, dst;
    double bytes;
    bool reduce;
  };
  // Transfers added but not yet started (start > now), by id; started ones are in the network.
  std::multimap<double, int64_t> waiting;
  std::unordered_map<int64_t, Pending> pending;
  std::unordered_map<int64_t, double> latency;   // per started transfer
  std::unordered_map<int64_t, double> finished;  // id -> arrival time
  int64_t nextId = 0;
  std::vector<int> route;
  std::vector<Use> uses;

  explicit Impl(const fabric::Topology& t) : topo(t) {
    linkRes.assign(t.links().size(), -1);
    for (size_t i = 0; i < t.links().size(); ++i)
      if (std::isfinite(t.links()[i].bwBps)) linkRes[i] = net.addResource(t.links()[i].bwBps);
    dmaRes.assign(t.numChips(), -1);
    hbmRes.assign(t.numChips(), -1);
  }

  void startFlow(int64_t id, const Pending& p) {
    route.clear();
    topo.routeLinks(p.src, p.dst, &route);
    double lat = p.src == p.dst ? topo.chip().localLatencyS : 0.0;
    uses.clear();
    for (int l : route) {
      lat += topo.links()[l].latencyS;
      if (linkRes[l] >= 0) uses.push_back({linkRes[l], 1.0});
    }
    const fabric::ChipEngine& eng = topo.chip();
    if (std::isfinite(eng.dmaBps())) {
      if (dmaRes[p.src] < 0) dmaRes[p.src] = net.addResource(eng.dmaBps());
      uses.push_back({dmaRes[p.src], 1.0});
    }
    if (p.reduce && std::isfinite(eng.hbmBps)) {
      if (hbmRes[p.dst] < 0) hbmRes[p.dst] = net.addResource(eng.hbmBps);
      uses.push_back({hbmRes[p.dst], eng.hbmBytesPerReducedByte});
    }
    latency[id] = lat;
    net.start(now, uses.data(), static_cast<int>(uses.size()), p.bytes, id);
  }

  // Processes every event up to and including time `until` (or until `id` has finished).
  void advance(double until, int64_t id) {
    std::vector<int64_t> done;
    for (;;) {
      net.solve(now);
      if (id >= 0 && finished.count(id)) return;
      const double tStart = waiting.empty() ? std::numeric_limits<double>::infinity()
                                            : waiting.begin()->first;
      const double t = std::min(tStart, net.nextFinish());
      if (!std::isfinite(t) || t > until) return;
      now = std::max(now, t);
      done.clear();
      net.popFinished(t, &done);
      for (int64_t d : done) {
        finished[d] = t + latency[d];
        latency.erase(d);
      }
      while (!waiting.empty() && waiting.begin()->first <= t) {
        const int64_t w = waiting.begin()->second;
        waiting.erase(waiting.begin());
        startFlow(w, pending[w]);
        pending.erase(w);
      }
    }
  }
};

FlowModel::FlowModel(const fabric::Topology& topo) : impl_(std::make_unique<Impl>(topo)) {}
FlowModel::~FlowModel() = default;

int64_t FlowModel::add(int chipSrc, int chipDst, double bytes, double startS, bool reduce) {
  Impl& m = *impl_;
  const int64_t id = m.nextId++;
  // Events before the new start are final; a start in the model's past is clamped to now.
  m.advance(startS, -1);
  const double start = std::max(startS, m.now);
  m.pending[id] = {start, chipSrc, chipDst, bytes, reduce};
  m.waiting.emplace(start, id);
  return id;
}

double FlowModel::finishTime(int64_t id) {
  Impl& m = *impl_;
  auto it = m.finished.find(id);
  if (it != m.finished.end()) return it->second;
  m.advance(std::numeric_limits<double>::infinity(), id);
  it = m.finished.find(id);
  return it == m.finished.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
}

double FlowModel::now() const { return impl_->now; }

double FlowModel::latencyS(int chipA, int chipB) const {
  const fabric::Route r = impl_->topo.route(chipA, chipB);
  return r.latencyS + (chipA == chipB ? impl_->topo.chip().localLatencyS : 0.0);
}

double FlowModel::bottleneckBps(int chipA, int chipB) const {
  const fabric::Topology& t = impl_->topo;
  double bw = t.route(chipA, chipB).bottleneckBps;
  bw = std::min(bw, t.chip().dmaBps());
  return bw;
}

}  // namespace nlccl::sim
