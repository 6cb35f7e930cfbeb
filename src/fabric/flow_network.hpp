// Max-min fair sharing of capacitated resources (links, DMA engines, HBM) among flows, solved
// incrementally: a change re-solves only the flows coupled to it through saturated resources and
// at least as fast as the slowest change (docs/fabric.md, "flow mode").
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <span>
#include <vector>

namespace nlccl::fabric {

/// A resource use: flow rate x `coef` counts against the resource's capacity (coef 2 for HBM on a
/// reduce-on-arrival: read of the destination + write of the sum).
struct Use {
  int res = -1;
  double coef = 1.0;
};

class FlowNetwork {
 public:
  /// Adds a resource of `capacity` bytes/s (finite, > 0). Returns its id. A passive resource is
  /// one the caller knows its flows can never saturate (their sources' or destinations' capacity
  /// is smaller): max-min ignores it, so it takes no part in solving and only its load and peak
  /// utilisation are kept.
  int addResource(double capacity, bool passive = false);
  double capacity(int res) const { return cap_[res]; }
  /// Starts a flow of `bytes` at time `now` over `uses` (no rate until the next solve()), at most
  /// `capBps` (a constraint of its own, e.g. one port of a chip's ports). A flow without uses or
  /// cap has infinite rate and finishes at once. Returns the flow id.
  int start(double now, const Use* uses, int n, double bytes, int64_t tag,
            double capBps = std::numeric_limits<double>::infinity());
  /// Adds `bytes` to active flow `flow` at time `now` (its rate stays: max-min does not depend
  /// on sizes), moving its finish.
  void extend(int flow, double bytes, double now);
  /// Re-solves the rates of every flow affected by starts/finishes since the last solve().
  void solve(double now);
  /// Earliest finish time among active flows (infinity if none).
  double nextFinish();
  /// Removes and returns (in `done`, as tags) every flow finishing at or before `t` and, with a
  /// precision set, the flows due by `horizon` whose finish lies within precision x their own
  /// duration of `t`. Returns the batch's time: the latest finish removed (>= t), at which the
  /// caller takes them as done.
  double popFinished(double t, std::vector<int64_t>* done, double horizon = 0);
  /// Relative precision of finish times (0: exact max-min, the default). Finishes within it
  /// (of a flow's own duration) merge into one event, which cuts the re-solves of a large
  /// all-to-all; the merged flows' share idles until the event, so the schedule stays feasible.
  void setPrecision(double rel) { precision_ = rel; }
  size_t activeFlows() const { return active_; }
  /// Work done so far: solves that re-rated flows, progressive fillings (a solve may need more
  /// than one), flows re-rated over all fillings, and solves redone without the threshold.
  struct Stats {
    size_t solves = 0, fills = 0, flowsFilled = 0, retries = 0;
  };
  const Stats& stats() const { return stats_; }
  double peakUtil(int res) const { return peak_[res]; }
  double rate(int flow) const { return rate_[flow]; }
  /// Bytes flow `flow` still has to move at time `now` (>= its last rate change).
  double remaining(int flow, double now) const {
    const Slot& s = flows_[flow];
    const double r = rate_[flow];
    return r > 0 ? std::max(0.0, s.remaining - r * (now - s.lastT)) : s.remaining;
  }

 private:
  struct Slot {
    // Its uses and, per use, its position in flowsOn_[use.res]: n entries at `off` in the
    // arenas (useArena_, posArena_), a region of `room` entries the slot keeps for reuse.
    uint32_t off = 0, n = 0, room = 0;
    uint32_t passive = 0;  // of the n, the last `passive` are on passive resources
    double remaining = 0;
    double lastT = 0;
    double startT = 0;
    uint32_t version = 0;
    bool active = false;
    bool fresh = false;   // started since the last solve
    double capBps = 0;    // its own cap (infinity: none), a level of its own in fill()
    int64_t tag = 0;
  };

  /// The uses that take part in solving, then those on passive resources.
  std::span<const Use> usesOf(int f) const {
    return {useArena_.data() + flows_[f].off, flows_[f].n - flows_[f].passive};
  }
  std::span<const Use> passiveUsesOf(int f) const {
    const Slot& s = flows_[f];
    return {useArena_.data() + s.off + (s.n - s.passive), s.passive};
  }
  void setRate(int f, double rate);
  void notePeaks();

  bool tight(int r) const { return load_[r] >= cap_[r] * (1 - 1e-9); }
  void remove(int f);
  void collect(int r, bool force);
  bool fill(double now);
  bool settle(double now);

  std::vector<double> cap_, load_, peak_;
  std::vector<double> coefSum_;  // per resource: sum of its flows' coefficients
  std::vector<char> passive_;    // per resource
  std::vector<int> touched_;  // resources whose peak notePeaks() has still to take, once each
  std::vector<uint32_t> touchMark_;  // per resource: touchEpoch_ when in touched_
  uint32_t touchEpoch_ = 1;
  void touch(int r) {
    if (touchMark_[r] == touchEpoch_) return;
    touchMark_[r] = touchEpoch_;
    touched_.push_back(r);
  }
  std::vector<std::vector<int>> flowsOn_;
  std::vector<Slot> flows_;
  std::vector<double> rate_;  // per flow (apart from Slot: the scans of solve() read only it)
  std::vector<Use> useArena_;
  std::vector<int> posArena_;
  std::vector<int> free_;
  // Finish times of the flows with a rate: an indexed binary min-heap, one entry per flow, moved
  // in place when a rate changes (no stale entries pile up: a million-flow all-to-all re-rates
  // thousands of flows per event).
  struct HeapEntry {
    double t;  // finish time
    int f;
  };
  std::vector<HeapEntry> heap_;
  std::vector<int> heapPos_;  // per flow: its index in heap_, -1 when absent
  void schedule(int f, double t);
  void unschedule(int f);
  void siftUp(size_t i);
  void siftDown(size_t i);
  size_t active_ = 0;
  Stats stats_;
  double precision_ = 0;
  double startFloor_ = 0;  // no active flow started before it
  std::vector<int> merge_;
  std::vector<size_t> stackIdx_;
  // Solve scratch: seeds since the last solve, the component, marks by epoch.
  std::vector<int> seedFlows_, seedRes_, pending_;
  double thetaLeft_ = std::numeric_limits<double>::infinity();  // slowest flow that left a tight resource
  double frozenBelow_ = 0;  // during a solve: flows slower than this keep their rates
  std::vector<char> seedForce_;
  std::vector<int> comp_, compRes_;
  std::vector<uint32_t> flowMark_, resMark_, expanded_;
  std::vector<double> outsideTop_;  // per expanded resource: its fastest flow left out
  uint32_t epoch_ = 0;
  std::vector<double> fixedUse_, count_, residual_;
  std::vector<char> fixed_;      // per flow, during fill()
  std::vector<int> resLocal_;    // per resource: its index in compRes_, during fill()
  std::vector<int> onStart_, onFill_, compOn_;  // the component's flows per resource (CSR)
  std::vector<double> newRate_;  // per flow, during fill()
  struct LevelKey {
    double level;
    int res;
    bool operator>(const LevelKey& o) const { return level > o.level; }
  };
  std::vector<LevelKey> levelHeap_;
  struct CapKey {
    double cap;
    int flow;
  };
  std::vector<CapKey> capOrder_;  // the component's capped flows, by rising cap
  std::vector<int> stack_;
};

}  // namespace nlccl::fabric
