// FlowModel: the incremental flow-sharing model the neuronlink transport feeds messages into.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

#include "fabric/flow_model.hpp"
#include "fabric/flow_network.hpp"

namespace nlccl::fabric {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

struct FlowModel::Impl {
  const fabric::Topology& topo;
  Options opts;
  FlowNetwork net;
  std::vector<int> linkRes, dmaRes, hbmRes;
  std::vector<int> capPool;  // free per-transfer rate-cap resources (opts.rateCapBps)
  double now = 0;
  struct Transfer {
    double start = 0;
    double bytes = 0;
    double latency = 0;
    double uncontendedBps = kInf;  // what it would get alone
    double portCapBps = kInf;      // one port of its route's unstriped ports
    std::vector<Use> uses;
    int flow = -1;     // in `net` once started
    int capRes = -1;
    double arrival = -1;  // >= 0 once its data has finished
    bool forgotten = false;  // drop it as soon as it arrives
  };
  // Not yet started (start > now), by start; all transfers not forgotten, by id.
  std::multimap<double, int64_t> waiting;
  std::unordered_map<int64_t, Transfer> transfers;
  int64_t nextId = 0;
  std::vector<int> route;
  std::vector<std::pair<int64_t, double>> finishedLog;  // for takeFinished()

  Impl(const fabric::Topology& t, const Options& o) : topo(t), opts(o) {
    linkRes.assign(t.links().size(), -1);
    for (size_t i = 0; i < t.links().size(); ++i)
      if (std::isfinite(t.links()[i].bwBps)) linkRes[i] = net.addResource(t.links()[i].bwBps);
    dmaRes.assign(t.numChips(), -1);
    hbmRes.assign(t.numChips(), -1);
  }

  // The resources a transfer uses (links of its route, the source's DMA engines, the
  // destination's HBM when it reduces on arrival) and its latency.
  void describe(int src, int dst, bool reduce, Transfer* x) {
    route.clear();
    topo.routeLinks(src, dst, &route);
    double lat = src == dst ? topo.chip().localLatencyS : 0.0;
    for (int l : route) {
      lat += topo.links()[l].latencyS;
      if (linkRes[l] >= 0) x->uses.push_back({linkRes[l], 1.0});
    }
    x->latency = opts.latencyS >= 0 ? opts.latencyS : lat;
    const fabric::ChipEngine& eng = topo.chip();
    if (eng.sharesEngine()) {  // one resource per chip: sends at the source, reduces at the dest
      for (int c : {src, dst})
        if (dmaRes[c] < 0 && (c == src || reduce)) dmaRes[c] = net.addResource(eng.dmaBps());
      x->uses.push_back({dmaRes[src], 1.0});
      if (reduce && dst == src) x->uses.back().coef += eng.sharedReduceCost();
      else if (reduce) x->uses.push_back({dmaRes[dst], eng.sharedReduceCost()});
    } else if (std::isfinite(eng.dmaBps())) {
      const int mover = eng.mover(src, dst);
      if (dmaRes[mover] < 0) dmaRes[mover] = net.addResource(eng.dmaBps());
      x->uses.push_back({dmaRes[mover], 1.0});
    }
    if (!eng.sharesEngine() && reduce && std::isfinite(eng.hbmBps)) {
      if (hbmRes[dst] < 0) hbmRes[dst] = net.addResource(eng.hbmBps);
      x->uses.push_back({hbmRes[dst], eng.hbmBytesPerReducedByte});
    }
    x->portCapBps = topo.transferCapBps(route);
    x->uncontendedBps = x->portCapBps;
    for (const Use& u : x->uses)
      x->uncontendedBps = std::min(x->uncontendedBps, net.capacity(u.res) / u.coef);
    if (opts.rateCapBps > 0) x->uncontendedBps = std::min(x->uncontendedBps, opts.rateCapBps);
  }

  void startFlow(int64_t id, Transfer& x) {
    if (opts.rateCapBps > 0) {
      // A private resource of the cap's size makes the cap one more constraint of max-min.
      if (capPool.empty()) capPool.push_back(net.addResource(opts.rateCapBps));
      x.capRes = capPool.back();
      capPool.pop_back();
      x.uses.push_back({x.capRes, 1.0});
    }
    x.flow = net.start(now, x.uses.data(), static_cast<int>(x.uses.size()), x.bytes, id,
                       x.portCapBps);
  }

  // Processes every event up to and including time `until`, or until `id` has arrived.
  void advance(double until, int64_t id) {
    std::vector<int64_t> done;
    for (;;) {
      net.solve(now);
      if (id >= 0) {
        auto it = transfers.find(id);
        if (it == transfers.end() || it->second.arrival >= 0) return;
      }
      const double tStart = waiting.empty() ? kInf : waiting.begin()->first;
      const double t = std::min(tStart, net.nextFinish());
      if (!std::isfinite(t) || t > settledBy(until)) return;
      now = std::max(now, t);
      done.clear();
      net.popFinished(t, &done);
      for (int64_t d : done) {
        finishedLog.emplace_back(d, t);
        Transfer& x = transfers.at(d);
        if (x.forgotten) {
          if (x.capRes >= 0) capPool.push_back(x.capRes);
          transfers.erase(d);
          continue;
        }
        x.arrival = t + x.latency;
        x.flow = -1;
        if (x.capRes >= 0) capPool.push_back(x.capRes);
        x.capRes = -1;
        x.uses.clear();
        x.uses.shrink_to_fit();
      }
      while (!waiting.empty() && waiting.begin()->first <= t) {
        const int64_t w = waiting.begin()->second;
        waiting.erase(waiting.begin());
        startFlow(w, transfers.at(w));
      }
    }
  }
};

FlowModel::FlowModel(const fabric::Topology& topo) : FlowModel(topo, Options{}) {}
FlowModel::FlowModel(const fabric::Topology& topo, const Options& opts)
    : impl_(std::make_unique<Impl>(topo, opts)) {}
FlowModel::~FlowModel() = default;

int64_t FlowModel::add(int chipSrc, int chipDst, double bytes, double startS, bool reduce) {
  Impl& m = *impl_;
  const int64_t id = m.nextId++;
  // Events before the new start are final; a start in the model's past is clamped to now.
  m.advance(startS, -1);
  Impl::Transfer& x = m.transfers[id];
  x.start = std::max(startS, m.now);
  x.bytes = bytes;
  m.describe(chipSrc, chipDst, reduce, &x);
  m.waiting.emplace(x.start, id);
  return id;
}

double FlowModel::finishTime(int64_t id) {
  Impl& m = *impl_;
  auto it = m.transfers.find(id);
  if (it == m.transfers.end()) return std::numeric_limits<double>::quiet_NaN();
  if (it->second.arrival < 0) m.advance(kInf, id);
  it = m.transfers.find(id);
  return it == m.transfers.end() ? std::numeric_limits<double>::quiet_NaN() : it->second.arrival;
}

void FlowModel::advanceTo(double t) {
  Impl& m = *impl_;
  m.advance(t, -1);
  m.now = std::max(m.now, t);
  m.net.solve(m.now);
}

double FlowModel::nextEventTime() {
  Impl& m = *impl_;
  m.net.solve(m.now);
  const double tStart = m.waiting.empty() ? kInf : m.waiting.begin()->first;
  return std::min(tStart, m.net.nextFinish());
}

void FlowModel::takeFinished(std::vector<std::pair<int64_t, double>>* out) {
  out->clear();
  out->swap(impl_->finishedLog);
}

double FlowModel::nextFinishTime() {
  impl_->net.solve(impl_->now);
  return impl_->net.nextFinish();
}

bool FlowModel::arrived(int64_t id, double* arrivalS) const {
  auto it = impl_->transfers.find(id);
  if (it == impl_->transfers.end() || it->second.arrival < 0) return false;
  *arrivalS = it->second.arrival;
  return true;
}

double FlowModel::arrivalLowerBound(int64_t id) const {
  const Impl& m = *impl_;
  auto it = m.transfers.find(id);
  if (it == m.transfers.end()) return kInf;
  const Impl::Transfer& x = it->second;
  if (x.arrival >= 0) return x.arrival;
  // Not finished: it moves its remaining bytes no faster than it would alone.
  const double from = std::max(m.now, x.start);
  const double left = x.flow >= 0 ? m.net.remaining(x.flow, m.now) : x.bytes;
  const double data = std::isfinite(x.uncontendedBps) ? left / x.uncontendedBps : 0.0;
  return from + data + x.latency;
}

void FlowModel::forget(int64_t id) {
  auto it = impl_->transfers.find(id);
  if (it == impl_->transfers.end()) return;
  if (it->second.arrival >= 0) impl_->transfers.erase(it);
  else it->second.forgotten = true;
}

double FlowModel::now() const { return impl_->now; }

double FlowModel::latencyS(int chipA, int chipB) const {
  if (impl_->opts.latencyS >= 0) return impl_->opts.latencyS;
  const fabric::Route r = impl_->topo.route(chipA, chipB);
  return r.latencyS + (chipA == chipB ? impl_->topo.chip().localLatencyS : 0.0);
}

double FlowModel::bottleneckBps(int chipA, int chipB) const {
  const fabric::Topology& t = impl_->topo;
  double bw = t.route(chipA, chipB).bottleneckBps;
  bw = std::min(bw, t.chip().dmaBps());
  if (impl_->opts.rateCapBps > 0) bw = std::min(bw, impl_->opts.rateCapBps);
  return bw;
}

}  // namespace nlccl::fabric
