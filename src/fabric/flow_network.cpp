#include "fabric/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nlccl::fabric {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTiny = 1e-12;
}  // namespace

int FlowNetwork::addResource(double capacity, bool passive) {
  passive_.push_back(passive);
  cap_.push_back(capacity);
  load_.push_back(0);
  peak_.push_back(0);
  flowsOn_.emplace_back();
  resMark_.push_back(0);
  expanded_.push_back(0);
  fixedUse_.push_back(0);
  count_.push_back(0);
  residual_.push_back(0);
  coefSum_.push_back(0);
  resLocal_.push_back(-1);
  outsideTop_.push_back(0);
  touchMark_.push_back(0);
  return static_cast<int>(cap_.size()) - 1;
}

int FlowNetwork::start(double now, const Use* uses, int n, double bytes, int64_t tag,
                       double capBps) {
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
    rate_.push_back(0);
    heapPos_.push_back(-1);
  }
  Slot& s = flows_[f];
  // Its uses live in the arena: in its slot's old region when they fit, else in a new one.
  const uint32_t need = static_cast<uint32_t>(n);
  if (need > s.room) {
    s.off = static_cast<uint32_t>(useArena_.size());
    s.room = need;
    useArena_.resize(useArena_.size() + need);
    posArena_.resize(posArena_.size() + need);
  }
  s.n = need;
  Use* u = useArena_.data() + s.off;
  // Active uses first, passive ones last (they are not in flowsOn_).
  uint32_t a = 0, b = need;
  for (int i = 0; i < n; ++i) u[passive_[uses[i].res] ? --b : a++] = uses[i];
  s.passive = need - a;
  int* pos = posArena_.data() + s.off;
  for (uint32_t i = 0; i < a; ++i) {
    pos[i] = static_cast<int>(flowsOn_[u[i].res].size());
    flowsOn_[u[i].res].push_back(f);
    coefSum_[u[i].res] += u[i].coef;
  }
  s.capBps = capBps;
  // Only passive resources on its way: nothing else bounds it, so they cap it (the caller
  // promised that its flows never saturate them).
  if (a == 0)
    for (uint32_t i = a; i < need; ++i) s.capBps = std::min(s.capBps, cap_[u[i].res] / u[i].coef);
  s.remaining = bytes;
  rate_[f] = 0;
  s.lastT = now;
  s.startT = now;
  if (active_ == 0 || now < startFloor_) startFloor_ = now;
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
  s.remaining = std::max(0.0, s.remaining - rate_[f] * (now - s.lastT)) + bytes;
  s.lastT = now;
  ++s.version;
  if (!s.fresh) schedule(f, rate_[f] > 0 ? now + s.remaining / rate_[f] : kInf);
}

void FlowNetwork::remove(int f) {
  Slot& s = flows_[f];
  for (const Use& u : passiveUsesOf(f)) load_[u.res] = std::max(0.0, load_[u.res] - u.coef * rate_[f]);
  const Use* uses = useArena_.data() + s.off;
  const int* pos = posArena_.data() + s.off;
  for (uint32_t i = 0; i < s.n - s.passive; ++i) {
    const int r = uses[i].res;
    // A saturated resource frees capacity for the flows still on it: re-solve them.
    if (tight(r)) {
      seedRes_.push_back(r);
      seedForce_.push_back(1);
      thetaLeft_ = std::min(thetaLeft_, rate_[f]);
    }
    coefSum_[r] -= uses[i].coef;
    load_[r] = std::max(0.0, load_[r] - uses[i].coef * rate_[f]);
    std::vector<int>& on = flowsOn_[r];
    const int p = pos[i];
    const int last = on.back();
    on[p] = last;
    on.pop_back();
    if (on.empty()) load_[r] = coefSum_[r] = 0;  // no drift on idle resources
    if (last != f) {
      const Slot& o = flows_[last];
      const Use* ou = useArena_.data() + o.off;
      int* op = posArena_.data() + o.off;
      for (uint32_t j = 0; j < o.n - o.passive; ++j)
        if (ou[j].res == r && op[j] == static_cast<int>(on.size())) {
          op[j] = p;
          break;
        }
    }
  }
  s.active = false;
  s.fresh = false;
  ++s.version;
  --active_;
  unschedule(f);
  free_.push_back(f);
}

// Adds resource r to the component; the flows on it join when it is saturated (or `force`), and
// their saturated resources in turn (flows only couple through resources that bind). Frozen
// flows (slower than frozenBelow_) stay out. A resource is expanded (its flows taken in) once.
void FlowNetwork::collect(int r, bool force) {
  std::vector<int>& stack = stack_;
  stack.clear();
  auto reach = [&](int res) {
    if (resMark_[res] == epoch_) return;
    resMark_[res] = epoch_;
    compRes_.push_back(res);
    if (tight(res)) stack.push_back(res);
  };
  reach(r);
  if (force && stack.empty() && expanded_[r] != epoch_) stack.push_back(r);
  while (!stack.empty()) {
    const int res = stack.back();
    stack.pop_back();
    if (expanded_[res] == epoch_) continue;
    expanded_[res] = epoch_;
    // Only the flows at the resource's top rate are bottlenecked there; a slower one owes its
    // rate to another resource, which brings it in if reached. Should the new level fall
    // below it, settle() pulls it in.
    double top = 0;
    for (int f : flowsOn_[res]) top = std::max(top, rate_[f]);
    const double take = std::max(frozenBelow_, top * (1 - 1e-9));
    double rest = 0;  // the fastest flow left out, for settle()
    for (int f : flowsOn_[res]) {
      if (flowMark_[f] == epoch_) continue;
      if (rate_[f] < take) {
        rest = std::max(rest, rate_[f]);
        continue;
      }
      flowMark_[f] = epoch_;
      comp_.push_back(f);
      for (const Use& u : usesOf(f)) reach(u.res);
    }
    outsideTop_[res] = rest;
  }
}

// Progressive filling of comp_ within the capacity the other flows leave; applies the rates
// unless one falls below frozenBelow_ (then returns false, changing nothing). A flow's own cap
// is a level of its own (in a sorted list beside the heap) rather than a resource.
bool FlowNetwork::fill(double now) {
  const size_t nres = compRes_.size();
  onStart_.assign(nres + 1, 0);
  for (size_t i = 0; i < nres; ++i) {
    const int r = compRes_[i];
    fixedUse_[r] = 0;
    count_[r] = 0;
    residual_[r] = cap_[r] - load_[r];
    resLocal_[r] = static_cast<int>(i);
  }
  for (int f : comp_) {
    fixed_[f] = 0;
    newRate_[f] = kInf;
    for (const Use& u : usesOf(f)) {
      residual_[u.res] += u.coef * rate_[f];  // give back this flow's current share
      count_[u.res] += u.coef;
      ++onStart_[resLocal_[u.res] + 1];
    }
  }
  // The component's flows per resource (flowsOn_ also holds flows outside it).
  for (size_t i = 0; i < nres; ++i) onStart_[i + 1] += onStart_[i];
  onFill_.assign(onStart_.begin(), onStart_.end() - 1);
  compOn_.resize(onStart_[nres]);
  for (int f : comp_)
    for (const Use& u : usesOf(f)) compOn_[onFill_[resLocal_[u.res]]++] = f;
  std::vector<LevelKey>& hv = levelHeap_;
  hv.clear();
  auto levelOf = [&](int r) { return std::max(0.0, residual_[r] - fixedUse_[r]) / count_[r]; };
  for (int r : compRes_)
    if (count_[r] > kTiny) hv.push_back({levelOf(r), r});
  std::make_heap(hv.begin(), hv.end(), std::greater<>());
  // The flows' own caps, rising, beside the heap: the flows of one port usually share a cap,
  // so the order is usually there already.
  std::vector<CapKey>& caps = capOrder_;
  caps.clear();
  for (int f : comp_)
    if (flows_[f].capBps < kInf) caps.push_back({flows_[f].capBps, f});
  auto byCap = [](const CapKey& a, const CapKey& b) { return a.cap < b.cap; };
  if (!std::is_sorted(caps.begin(), caps.end(), byCap)) std::sort(caps.begin(), caps.end(), byCap);
  size_t nextCap = 0, unfixed = comp_.size();
  auto fix = [&](int f, double lvl) {
    fixed_[f] = 1;
    newRate_[f] = lvl;
    --unfixed;
    for (const Use& u : usesOf(f)) {
      fixedUse_[u.res] += u.coef * lvl;
      count_[u.res] -= u.coef;
    }
  };
  while (unfixed > 0) {
    while (nextCap < caps.size() && fixed_[caps[nextCap].flow]) ++nextCap;
    // A flow's cap at or below every resource's level (the keys are lower bounds) binds first.
    if (nextCap < caps.size() && (hv.empty() || caps[nextCap].cap <= hv.front().level)) {
      fix(caps[nextCap].flow, caps[nextCap].cap);
      ++nextCap;
      continue;
    }
    if (hv.empty()) break;
    std::pop_heap(hv.begin(), hv.end(), std::greater<>());
    const LevelKey k = hv.back();
    hv.pop_back();
    const int r = k.res;
    if (count_[r] <= kTiny) continue;
    const double lvl = levelOf(r);
    if (lvl > k.level) {  // levels only rise as flows are fixed: this key is stale
      hv.push_back({lvl, r});
      std::push_heap(hv.begin(), hv.end(), std::greater<>());
      continue;
    }
    // Fixing flows only raises the other resources' levels, so their keys (lower bounds) stay
    // in the heap and are refreshed when they come out stale (above): no push per flow.
    const int li = resLocal_[r];
    for (int i = onStart_[li]; i < onStart_[li + 1]; ++i)
      if (!fixed_[compOn_[i]]) fix(compOn_[i], lvl);
    count_[r] = 0;
  }
  // A rate below the frozen level means the threshold did not hold (rounding): the caller
  // solves again without it.
  if (frozenBelow_ > 0)
    for (int f : comp_)
      if (newRate_[f] < frozenBelow_) return false;
  for (int f : comp_) {
    Slot& s = flows_[f];
    const double nr = newRate_[f];
    s.remaining = std::max(0.0, s.remaining - rate_[f] * (now - s.lastT));
    s.lastT = now;
    for (const Use& u : usesOf(f)) load_[u.res] += u.coef * (nr - rate_[f]);
    if (s.fresh || nr != rate_[f]) {
      setRate(f, nr);
      s.fresh = false;
      ++s.version;
      schedule(f, nr > 0 ? now + s.remaining / nr : kInf);
    }
  }
  ++stats_.fills;
  stats_.flowsFilled += comp_.size();
  return true;
}

// Sets a flow's rate, carrying the change onto its passive resources. Their peaks (and those of
// the resources placed flows use) are taken by notePeaks() once every rate of a solve is in,
// not between two flows' changes.
void FlowNetwork::setRate(int f, double rate) {
  for (const Use& u : passiveUsesOf(f)) {
    load_[u.res] += u.coef * (rate - rate_[f]);
    touch(u.res);
  }
  rate_[f] = rate;
}

void FlowNetwork::notePeaks() {
  for (int r : touched_) peak_[r] = std::max(peak_[r], load_[r] / cap_[r]);
  touched_.clear();
  ++touchEpoch_;
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
    const std::span<const Use> uses = usesOf(f);
    if (uses.empty() && !(s.capBps < kInf)) {  // nothing finite on its way: done at once
      rate_[f] = kInf;
      s.fresh = false;
      ++s.version;
      schedule(f, now);
      continue;
    }
    flowMark_[f] = epoch_;
    // Fast path: alone on every resource it uses, the flow gets the tightest of them.
    bool alone = true;
    for (const Use& u : uses) alone &= flowsOn_[u.res].size() == 1;
    if (alone) {
      double rate = s.capBps;
      for (const Use& u : uses) rate = std::min(rate, cap_[u.res] / u.coef);
      for (const Use& u : uses) {
        load_[u.res] = u.coef * rate;
        touch(u.res);
      }
      setRate(f, rate);
      s.fresh = false;
      ++s.version;
      schedule(f, now + s.remaining / rate);
      continue;
    }
    if (place) {
      double x = s.capBps;
      for (const Use& u : uses) x = std::min(x, std::max(0.0, cap_[u.res] - load_[u.res]) / u.coef);
      bool ok = x > 0 && std::isfinite(x);
      for (size_t i = 0; ok && i < uses.size(); ++i) {
        const Use& u = uses[i];
        if (std::max(0.0, cap_[u.res] - load_[u.res]) / u.coef > x * (1 + 1e-12)) continue;
        for (int g : flowsOn_[u.res])
          if (g != f && rate_[g] > x * (1 + 1e-9)) {
            ok = false;
            break;
          }
      }
      if (ok) {
        for (const Use& u : uses) {
          load_[u.res] += u.coef * x;
          touch(u.res);
        }
        setRate(f, x);
        s.fresh = false;
        ++s.version;
        schedule(f, now + s.remaining / x);
        flowMark_[f] = epoch_ - 1;  // a later flow's component may still take it in
        continue;
      }
      place = false;
    }
    pending_.push_back(f);
  }
  seedFlows_.clear();
  // Flows slower than every change of this solve keep their rates (a max-min property: a flow
  // that leaves at rate x, or joins at a final rate x, changes no flow slower than x, and no
  // flow at least as fast drops below x). A new flow ends at least at its fair share of its
  // tightest resource, capacity / (sum of coefficients there). Frozen flows stay out of the
  // component and their load stays on their resources.
  double theta = thetaLeft_;
  for (int f : pending_) {
    double share = flows_[f].capBps;
    for (const Use& u : usesOf(f)) share = std::min(share, cap_[u.res] / coefSum_[u.res]);
    theta = std::min(theta, share);
  }
  thetaLeft_ = kInf;
  frozenBelow_ = std::isfinite(theta) ? theta * (1 - 1e-9) : 0;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0) {  // without the threshold, from the same seeds
      ++epoch_;
      comp_.clear();
      compRes_.clear();
      frozenBelow_ = 0;
      ++stats_.retries;
    }
    for (int f : pending_) flowMark_[f] = epoch_;
    comp_.assign(pending_.begin(), pending_.end());
    for (int f : pending_)
      for (const Use& u : usesOf(f)) collect(u.res, false);
    for (size_t i = 0; i < seedRes_.size(); ++i) collect(seedRes_[i], seedForce_[i]);
    if (comp_.empty() || settle(now)) break;
  }
  frozenBelow_ = 0;
  pending_.clear();
  seedRes_.clear();
  seedForce_.clear();
  notePeaks();  // of the placed flows' resources (a component may have re-rated them since)
}

// Fills the component until no outside flow needs to join; false if the threshold failed.
bool FlowNetwork::settle(double now) {
  ++stats_.solves;
  for (;;) {
    if (!fill(now)) return false;
    // A resource the new rates saturate may hold outside flows that now get more than the
    // component's flows bottlenecked there: pull them in and solve again.
    bool grew = false;
    // The component's flows on a resource are those of fill()'s CSR (compOn_); an expanded
    // resource knows its fastest outside flow, so only a resource that may hold a faster one
    // is scanned.
    const size_t nres = onStart_.size() - 1;
    for (size_t i = 0; i < nres; ++i) {
      const int r = compRes_[i];
      if (!tight(r)) continue;
      double maxComp = 0;
      for (int k = onStart_[i]; k < onStart_[i + 1]; ++k)
        maxComp = std::max(maxComp, rate_[compOn_[k]]);
      const double above = maxComp * (1 + 1e-9);
      if (expanded_[r] == epoch_ && outsideTop_[r] <= above) continue;
      double rest = 0;
      for (int g : flowsOn_[r]) {
        if (flowMark_[g] == epoch_) continue;
        if (rate_[g] <= above) {
          rest = std::max(rest, rate_[g]);
          continue;
        }
        flowMark_[g] = epoch_;
        comp_.push_back(g);
        for (const Use& u : usesOf(g)) collect(u.res, false);
        grew = true;
      }
      if (expanded_[r] == epoch_) outsideTop_[r] = rest;
    }
    if (!grew) break;
  }
  // Peaks once the rates are final (a filling that pulls in more flows is not).
  for (int r : compRes_) peak_[r] = std::max(peak_[r], load_[r] / cap_[r]);
  notePeaks();
  return true;
}

// The heap's entries carry their finish times, so a sift compares without a second load.
void FlowNetwork::siftUp(size_t i) {
  const HeapEntry e = heap_[i];
  while (i > 0) {
    const size_t up = (i - 1) / 2;
    if (heap_[up].t <= e.t) break;
    heap_[i] = heap_[up];
    heapPos_[heap_[i].f] = static_cast<int>(i);
    i = up;
  }
  heap_[i] = e;
  heapPos_[e.f] = static_cast<int>(i);
}

void FlowNetwork::siftDown(size_t i) {
  const HeapEntry e = heap_[i];
  const size_t n = heap_.size();
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && heap_[c + 1].t < heap_[c].t) ++c;
    if (heap_[c].t >= e.t) break;
    heap_[i] = heap_[c];
    heapPos_[heap_[i].f] = static_cast<int>(i);
    i = c;
  }
  heap_[i] = e;
  heapPos_[e.f] = static_cast<int>(i);
}

void FlowNetwork::schedule(int f, double t) {
  if (heapPos_[f] < 0) {
    heap_.push_back({t, f});
    siftUp(heap_.size() - 1);
    return;
  }
  const size_t i = static_cast<size_t>(heapPos_[f]);
  const double old = heap_[i].t;
  heap_[i].t = t;
  if (t < old) siftUp(i);
  else siftDown(i);
}

void FlowNetwork::unschedule(int f) {
  const int pos = heapPos_[f];
  if (pos < 0) return;
  heapPos_[f] = -1;
  const HeapEntry last = heap_.back();
  heap_.pop_back();
  if (last.f == f) return;
  heap_[static_cast<size_t>(pos)] = last;
  heapPos_[last.f] = pos;
  siftUp(static_cast<size_t>(pos));
  siftDown(static_cast<size_t>(heapPos_[last.f]));
}

double FlowNetwork::nextFinish() { return heap_.empty() ? kInf : heap_.front().t; }

double FlowNetwork::popFinished(double t, std::vector<int64_t>* done, double horizon) {
  const double limit = t + std::abs(t) * 1e-12;
  double batch = t;
  if (precision_ > 0 && horizon > limit && !heap_.empty() && heap_.front().t <= limit) {
    // Within the precision: a flow due by `horizon` and within precision x its own duration of
    // t finishes with this batch, at the batch's time. Its capacity idles until then, so the
    // schedule stays feasible (no resource over capacity, every byte moved). The heap is walked
    // from its root: every active flow started at or after startFloor_, so one qualifies only if
    // its finish is at most (t - p startFloor) / (1 - p), which prunes whole subtrees.
    const double reach = std::min(horizon, (t - precision_ * startFloor_) / (1 - precision_));
    merge_.clear();
    stackIdx_.assign(1, 0);
    while (!stackIdx_.empty()) {
      const size_t i = stackIdx_.back();
      stackIdx_.pop_back();
      const int f = heap_[i].f;
      const double fin = heap_[i].t;
      if (fin > reach) continue;
      if (fin <= limit || fin - t <= precision_ * (fin - flows_[f].startT)) {
        merge_.push_back(f);
        batch = std::max(batch, fin);
      }
      if (2 * i + 1 < heap_.size()) stackIdx_.push_back(2 * i + 1);
      if (2 * i + 2 < heap_.size()) stackIdx_.push_back(2 * i + 2);
    }
    for (int f : merge_) {
      done->push_back(flows_[f].tag);
      remove(f);
    }
    return batch;
  }
  while (!heap_.empty() && heap_.front().t <= limit) {
    const int f = heap_.front().f;
    done->push_back(flows_[f].tag);
    remove(f);
  }
  return batch;
}

}  // namespace nlccl::fabric
