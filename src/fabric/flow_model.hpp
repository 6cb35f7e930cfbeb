// Incremental max-min flow sharing on a topology: the model the neuronlink transport feeds real
// messages into (the simulator's executor uses the FlowNetwork underneath directly).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "nlccl/topology.hpp"

namespace nlccl::fabric {

/// The latest finish time FlowModel::advanceTo(t) takes as at t: finish times carry rounding
/// error, so one a hair past t counts as at it (and is reported with its own time, up to this).
inline double settledBy(double t) { return t + (t < 0 ? -t : t) * 1e-12; }

/// Incremental max-min flow sharing on a topology, for a transport that delays real messages.
/// Feed transfers as they happen ("N bytes from chip a to chip b starting at virtual time t");
/// the model answers when each arrives given every transfer added so far. Transfers must be
/// added in non-decreasing start time for exact answers; an earlier start is clamped to the
/// model's current time (the time of the last event it has processed).
///
/// Two ways to drive it: finishTime() runs the model as far as one transfer needs (right when
/// nothing more will be added before that answer), while advanceTo() + arrived() let a caller
/// that knows "no transfer will start before t" (a conservative clock, as the neuronlink
/// transport keeps) settle exactly the transfers that have finished by t.
class FlowModel {
 public:
  struct Options {
    double latencyS = -1;    ///< every transfer's latency; < 0: its route's
    double rateCapBps = -1;  ///< a cap on each transfer's own rate; <= 0: none
  };
  explicit FlowModel(const fabric::Topology& topo);
  FlowModel(const fabric::Topology& topo, const Options& opts);
  ~FlowModel();
  FlowModel(const FlowModel&) = delete;
  FlowModel& operator=(const FlowModel&) = delete;

  /// Adds a transfer; `reduce` charges the destination's HBM for reduce-on-arrival. Returns an id.
  int64_t add(int chipSrc, int chipDst, double bytes, double startS, bool reduce = false);
  /// Arrival time of transfer `id` (data finished + route latency), advancing the model as far as
  /// needed under the transfers added so far. Later additions that start before this answer may
  /// not change it (they are clamped to the model's time).
  double finishTime(int64_t id);
  /// Processes every event at or before `t` (starts and finishes) and moves the clock to `t`.
  void advanceTo(double t);
  /// True when transfer `id`'s data has finished (it then arrives at *arrivalS). Never advances.
  bool arrived(int64_t id, double* arrivalS) const;
  /// A lower bound on the arrival of transfer `id` that no later addition can break: the
  /// arrival itself once known, else its remaining bytes at the uncontended rate from now (or
  /// from its start) plus its latency.
  double arrivalLowerBound(int64_t id) const;
  /// Time of the next event (a start or a finish) under the transfers added so far; infinity if
  /// none.
  double nextEventTime();
  /// Time of the next data finish at the current rates (starts still to come may change it).
  double nextFinishTime();
  /// Moves the (id, data finish time) of every transfer that finished since the last call, in
  /// order, into *out (forgotten ones too).
  void takeFinished(std::vector<std::pair<int64_t, double>>* out);
  /// Drops what the model remembers of a transfer (at once if it has arrived, else when it does:
  /// it still shares the fabric until then). Its id is unknown afterwards.
  void forget(int64_t id);
  /// The model's current time: events up to here are final.
  double now() const;
  /// Route latency and uncontended rate between two chips (what one lone message sees).
  double latencyS(int chipA, int chipB) const;
  double bottleneckBps(int chipA, int chipB) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nlccl::fabric
