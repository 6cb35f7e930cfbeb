#include "fabric/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nlccl::fabric {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTiny = 1e-12;
}  // namespace

int FlowNetwork::addResource(double capacity) {
  cap_.push_back(capacity);
  load_.push_back(0);
  peak_.push_back(0);
  flowsOn_.emplace_back();
  resMark_.push_back(0);
  fixedUse_.push_back(0);
  count_.push_back(0);
  residual_.push_back(0);
  return static_cast<int>(cap_.size()) - 1;
}

int FlowNetwork::start(double now, const Use* uses, int n, double bytes, int64_t tag,
                       double capBps) {
  int capRes = -1;
  if (capBps < std::numeric_limits<double>::infinity()) {
    // A private resource of the cap's size makes the cap one more constraint of max-min.
    std::vector<int>& idle = capPool_[capBps];
    if (idle.empty()) {
      capRes = addResource(capBps);
    } else {
      capRes = idle.back();
      idle.pop_back();
    }
  }
  int f;
  if (!free_.empty()) {
    f = free_.back();
    free_.pop_back();
  } else {
    f = static_cast<int>(flows_.size());
    flows_.emplace_back();
    flowMark_.push_back(0);
    fixed_.push_back(0);
    newRate_.push_back(0);
    heapPos_.push_back(-1);
    finish_.push_back(kInf);
  }
  Slot& s = flows_[f];
  s.uses.assign(uses, uses + n);
  if (capRes >= 0) {
    s.uses.push_back({capRes, 1.0});
    ++n;
  }
  s.capRes = capRes;
  s.pos.resize(n);
  for (int i = 0; i < n; ++i) {
    s.pos[i] = static_cast<int>(flowsOn_[s.uses[i].res].size());
    flowsOn_[s.uses[i].res].push_back(f);
  }
  s.remaining = bytes;
  s.rate = 0;
  s.lastT = now;
  s.active = true;
  s.fresh = true;
  s.tag = tag;
  ++s.version;
  ++active_;
  seedFlows_.push_back(f);
  return f;
}

void FlowNetwork::extend(int f, double bytes, double now) {
  Slot& s = flows_[f];
  s.remaining = std::max(0.0, s.remaining - s.rate * (now - s.lastT)) + bytes;
  s.lastT = now;
  ++s.version;
  if (!s.fresh) schedule(f, s.rate > 0 ? now + s.remaining / s.rate : kInf);
}

void FlowNetwork::remove(int f) {
  Slot& s = flows_[f];
  for (size_t i = 0; i < s.uses.size(); ++i) {
    const int r = s.uses[i].res;
    // A saturated resource frees capacity for the flows still on it: re-solve them.
    if (tight(r)) {
      seedRes_.push_back(r);
      seedForce_.push_back(1);
    }
    load_[r] = std::max(0.0, load_[r] - s.uses[i].coef * s.rate);
    std::vector<int>& on = flowsOn_[r];
    const int p = s.pos[i];
    const int last = on.back();
    on[p] = last;
    on.pop_back();
    if (on.empty()) load_[r] = 0;  // no drift on idle resources
    if (last != f) {
      Slot& o = flows_[last];
      for (size_t j = 0; j < o.uses.size(); ++j)
        if (o.uses[j].res == r && o.pos[j] == static_cast<int>(on.size())) {
          o.pos[j] = p;
          break;
        }
    }
  }
  s.active = false;
  s.fresh = false;
  ++s.version;
  --active_;
  unschedule(f);
  if (s.capRes >= 0) capPool_[cap_[s.capRes]].push_back(s.capRes);
  s.capRes = -1;
  free_.push_back(f);
}

// Adds resource r to the component; the flows on it join when it is saturated (or `force`), and
// their saturated resources in turn (flows only couple through resources that bind).
void FlowNetwork::collect(int r, bool force) {
  std::vector<std::pair<int, bool>>& stack = stack_;
  stack.assign(1, {r, force});
  while (!stack.empty()) {
    const auto [res, frc] = stack.back();
    stack.pop_back();
    if (resMark_[res] != epoch_) {
      resMark_[res] = epoch_;
      compRes_.push_back(res);
    } else if (!frc) {
      continue;
    }
    if (!frc && !tight(res)) continue;
    for (int f : flowsOn_[res]) {
      if (flowMark_[f] == epoch_) continue;
      flowMark_[f] = epoch_;
      comp_.push_back(f);
      for (const Use& u : flows_[f].uses)
        if (resMark_[u.res] != epoch_) stack.push_back({u.res, false});
    }
  }
}

// Progressive filling of comp_ within the capacity the other flows leave, then applies the rates.
void FlowNetwork::fill(double now) {
  for (int r : compRes_) {
    fixedUse_[r] = 0;
    count_[r] = 0;
    residual_[r] = cap_[r] - load_[r];
  }
  for (int f : comp_) {
    fixed_[f] = 0;
    newRate_[f] = kInf;
    for (const Use& u : flows_[f].uses) {
      residual_[u.res] += u.coef * flows_[f].rate;  // give back this flow's current share
      count_[u.res] += u.coef;
    }
  }
  std::vector<LevelKey>& hv = levelHeap_;
  hv.clear();
  auto push = [&hv](LevelKey k) {
    hv.push_back(k);
    std::push_heap(hv.begin(), hv.end(), std::greater<>());
  };
  auto levelOf = [&](int r) { return std::max(0.0, residual_[r] - fixedUse_[r]) / count_[r]; };
  for (int r : compRes_)
    if (count_[r] > kTiny) push({levelOf(r), r});
  while (!hv.empty()) {
    std::pop_heap(hv.begin(), hv.end(), std::greater<>());
    const LevelKey k = hv.back();
    hv.pop_back();
    const int r = k.res;
    if (count_[r] <= kTiny) continue;
    const double lvl = levelOf(r);
    if (lvl > k.level) {  // levels only rise as flows are fixed: this key is stale
      push({lvl, r});
      continue;
    }
    // Fixing flows only raises the other resources' levels, so their keys (lower bounds) stay
    // in the heap and are refreshed when they come out stale (above): no push per flow.
    for (int f : flowsOn_[r]) {
      if (flowMark_[f] != epoch_ || fixed_[f]) continue;
      fixed_[f] = 1;
      newRate_[f] = lvl;
      for (const Use& u : flows_[f].uses) {
        fixedUse_[u.res] += u.coef * lvl;
        count_[u.res] -= u.coef;
      }
    }
    count_[r] = 0;
  }
  for (int f : comp_) {
    Slot& s = flows_[f];
    const double nr = newRate_[f];
    s.remaining = std::max(0.0, s.remaining - s.rate * (now - s.lastT));
    s.lastT = now;
    for (const Use& u : s.uses) load_[u.res] += u.coef * (nr - s.rate);
    if (s.fresh || nr != s.rate) {
      s.rate = nr;
      s.fresh = false;
      ++s.version;
      schedule(f, nr > 0 ? now + s.remaining / nr : kInf);
    }
  }
  for (int r : compRes_) peak_[r] = std::max(peak_[r], load_[r] / cap_[r]);
}

void FlowNetwork::solve(double now) {
  if (seedFlows_.empty() && seedRes_.empty()) return;
  ++epoch_;
  comp_.clear();
  compRes_.clear();
  // While the allocation is max-min (no flow has left since the last solve, every new flow so
  // far placed), a new flow may be placed without re-solving anyone: it takes the tightest
  // residual x of its resources, which is max-min again if no flow on a resource it saturates
  // goes faster than x (it is bottlenecked there, the others keep their bottlenecks: it uses no
  // saturated resource). Otherwise it and the flows after it are solved with their components.
  bool place = seedRes_.empty();
  for (int f : seedFlows_) {
    Slot& s = flows_[f];
    if (!s.active || !s.fresh || flowMark_[f] == epoch_) continue;
    if (s.uses.empty()) {  // nothing finite on its way: done at once
      s.rate = kInf;
      s.fresh = false;
      ++s.version;
      schedule(f, now);
      continue;
    }
    flowMark_[f] = epoch_;
    // Fast path: alone on every resource it uses, the flow gets the tightest of them.
    bool alone = true;
    for (const Use& u : s.uses) alone &= flowsOn_[u.res].size() == 1;
    if (alone) {
      double rate = std::numeric_limits<double>::infinity();
      for (const Use& u : s.uses) rate = std::min(rate, cap_[u.res] / u.coef);
      for (const Use& u : s.uses) {
        load_[u.res] = u.coef * rate;
        peak_[u.res] = std::max(peak_[u.res], load_[u.res] / cap_[u.res]);
      }
      s.rate = rate;
      s.fresh = false;
      ++s.version;
      schedule(f, now + s.remaining / rate);
      continue;
    }
    if (place) {
      double x = kInf;
      for (const Use& u : s.uses) x = std::min(x, std::max(0.0, cap_[u.res] - load_[u.res]) / u.coef);
      bool ok = x > 0 && std::isfinite(x);
      for (size_t i = 0; ok && i < s.uses.size(); ++i) {
        const Use& u = s.uses[i];
        if (std::max(0.0, cap_[u.res] - load_[u.res]) / u.coef > x * (1 + 1e-12)) continue;
        for (int g : flowsOn_[u.res])
          if (g != f && flows_[g].rate > x * (1 + 1e-9)) {
            ok = false;
            break;
          }
      }
      if (ok) {
        for (const Use& u : s.uses) {
          load_[u.res] += u.coef * x;
          peak_[u.res] = std::max(peak_[u.res], load_[u.res] / cap_[u.res]);
        }
        s.rate = x;
        s.fresh = false;
        ++s.version;
        schedule(f, now + s.remaining / x);
        flowMark_[f] = epoch_ - 1;  // a later flow's component may still take it in
        continue;
      }
      place = false;
    }
    comp_.push_back(f);
    for (const Use& u : s.uses) collect(u.res, false);
  }
  for (size_t i = 0; i < seedRes_.size(); ++i) collect(seedRes_[i], seedForce_[i]);
  seedFlows_.clear();
  seedRes_.clear();
  seedForce_.clear();
  if (comp_.empty()) return;
  for (;;) {
    fill(now);
    // A resource the new rates saturate may hold outside flows that now get more than the
    // component's flows bottlenecked there: pull them in and solve again.
    bool grew = false;
    const size_t nres = compRes_.size();
    for (size_t i = 0; i < nres; ++i) {
      const int r = compRes_[i];
      if (!tight(r)) continue;
      double maxComp = 0;
      for (int f : flowsOn_[r])
        if (flowMark_[f] == epoch_) maxComp = std::max(maxComp, flows_[f].rate);
      for (int g : flowsOn_[r]) {
        if (flowMark_[g] == epoch_ || flows_[g].rate <= maxComp * (1 + 1e-9)) continue;
        flowMark_[g] = epoch_;
        comp_.push_back(g);
        for (const Use& u : flows_[g].uses) collect(u.res, false);
        grew = true;
      }
    }
    if (!grew) break;
  }
}

void FlowNetwork::siftUp(size_t i) {
  const int f = heap_[i];
  while (i > 0) {
    const size_t up = (i - 1) / 2;
    if (finish_[heap_[up]] <= finish_[f]) break;
    heap_[i] = heap_[up];
    heapPos_[heap_[i]] = static_cast<int>(i);
    i = up;
  }
  heap_[i] = f;
  heapPos_[f] = static_cast<int>(i);
}

void FlowNetwork::siftDown(size_t i) {
  const int f = heap_[i];
  const size_t n = heap_.size();
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && finish_[heap_[c + 1]] < finish_[heap_[c]]) ++c;
    if (finish_[heap_[c]] >= finish_[f]) break;
    heap_[i] = heap_[c];
    heapPos_[heap_[i]] = static_cast<int>(i);
    i = c;
  }
  heap_[i] = f;
  heapPos_[f] = static_cast<int>(i);
}

void FlowNetwork::schedule(int f, double t) {
  finish_[f] = t;
  if (heapPos_[f] < 0) {
    heap_.push_back(f);
    siftUp(heap_.size() - 1);
    return;
  }
  const size_t i = static_cast<size_t>(heapPos_[f]);
  siftUp(i);
  siftDown(static_cast<size_t>(heapPos_[f]));
}

void FlowNetwork::unschedule(int f) {
  const int pos = heapPos_[f];
  if (pos < 0) return;
  heapPos_[f] = -1;
  const int last = heap_.back();
  heap_.pop_back();
  if (last == f) return;
  heap_[static_cast<size_t>(pos)] = last;
  heapPos_[last] = pos;
  siftUp(static_cast<size_t>(pos));
  siftDown(static_cast<size_t>(heapPos_[last]));
}

double FlowNetwork::nextFinish() { return heap_.empty() ? kInf : finish_[heap_.front()]; }

void FlowNetwork::popFinished(double t, std::vector<int64_t>* done) {
  const double limit = t + std::abs(t) * 1e-12;
  while (!heap_.empty() && finish_[heap_.front()] <= limit) {
    const int f = heap_.front();
    done->push_back(flows_[f].tag);
    remove(f);
  }
}

}  // namespace nlccl::fabric
