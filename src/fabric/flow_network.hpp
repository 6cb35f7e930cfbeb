// Max-min fair sharing of capacitated resources (links, DMA engines, HBM) among flows, solved
// incrementally: a change re-solves only the flows coupled to it through saturated resources.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <queue>
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
  /// Adds a resource of `capacity` bytes/s (finite, > 0). Returns its id.
  int addResource(double capacity);
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
  /// Removes and returns (in `done`, as tags) every flow finishing at or before `t`.
  void popFinished(double t, std::vector<int64_t>* done);
  size_t activeFlows() const { return active_; }
  double peakUtil(int res) const { return peak_[res]; }
  double rate(int flow) const { return flows_[flow].rate; }
  /// Bytes flow `flow` still has to move at time `now` (>= its last rate change).
  double remaining(int flow, double now) const {
    const Slot& s = flows_[flow];
    return s.rate > 0 ? std::max(0.0, s.remaining - s.rate * (now - s.lastT)) : s.remaining;
  }

 private:
  struct Slot {
    std::vector<Use> uses;
    std::vector<int> pos;  // position of this flow in flowsOn_[uses[i].res]
    double remaining = 0;
    double rate = 0;
    double lastT = 0;
    uint32_t version = 0;
    bool active = false;
    bool fresh = false;   // started since the last solve
    int capRes = -1;      // its private cap resource (capPool_), -1 when uncapped
    int64_t tag = 0;
  };

  bool tight(int r) const { return load_[r] >= cap_[r] * (1 - 1e-9); }
  void remove(int f);
  void collect(int r, bool force);
  void fill(double now);

  std::vector<double> cap_, load_, peak_;
  std::vector<std::vector<int>> flowsOn_;
  std::vector<Slot> flows_;
  std::vector<int> free_;
  std::map<double, std::vector<int>> capPool_;  // idle private cap resources, by capacity
  // Finish times of the flows with a rate: an indexed binary min-heap, one entry per flow, moved
  // in place when a rate changes (no stale entries pile up: a million-flow all-to-all re-rates
  // thousands of flows per event).
  std::vector<int> heap_;       // flow ids
  std::vector<int> heapPos_;    // per flow: its index in heap_, -1 when absent
  std::vector<double> finish_;  // per flow
  void schedule(int f, double t);
  void unschedule(int f);
  void siftUp(size_t i);
  void siftDown(size_t i);
  size_t active_ = 0;
  // Solve scratch: seeds since the last solve, the component, marks by epoch.
  std::vector<int> seedFlows_, seedRes_;
  std::vector<char> seedForce_;
  std::vector<int> comp_, compRes_;
  std::vector<uint32_t> flowMark_, resMark_;
  uint32_t epoch_ = 0;
  std::vector<double> fixedUse_, count_, residual_;
  std::vector<char> fixed_;      // per flow, during fill()
  std::vector<double> newRate_;  // per flow, during fill()
  struct LevelKey {
    double level;
    int res;
    bool operator>(const LevelKey& o) const { return level > o.level; }
  };
  std::vector<LevelKey> levelHeap_;
  std::vector<std::pair<int, bool>> stack_;
};

}  // namespace nlccl::fabric
