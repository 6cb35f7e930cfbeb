// Public C++ API of the simulator (DESIGN.md section 6): runs a Plan on a fabric Topology and
// reports modelled time, algbw/busbw, per-link load, per-rank finish times and a Chrome trace.
// nlccl-sim is built on it; the simulated NeuronLink transport uses FlowModel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nlccl/topology.hpp"
#include "plan/plan.hpp"
#include "util/dtype.hpp"
#include "util/status.hpp"

namespace nlccl::sim {

enum class Mode : uint8_t {
  Analytical,  ///< every transfer costs latency + bytes / uncontended bottleneck; no sharing
  Flow,        ///< discrete events, max-min fair sharing of links and engines (the default)
};

const char* modeName(Mode m);
bool parseMode(const std::string& name, Mode* out);

struct Options {
  Mode mode = Mode::Flow;
  DataType dtype = DataType::Float32;
  /// Slice size for pipelinable Plans: -1 takes the topology's chunk_bytes (0 on flat: no
  /// slicing), 0 disables slicing.
  int64_t chunkBytes = -1;
  int maxLoops = 64;  ///< cap on slices per Plan
  /// Cap on simulated transfers (transfers x loops); the loop count is lowered to fit.
  size_t transferBudget = 4'000'000;
  double launchOverheadS = -1;  ///< per collective; < 0 takes the topology's launch_overhead_us
  /// S for algbw/busbw in bytes; 0 derives it from the Plan (plan.count, nranks, dtype).
  size_t totalBytes = 0;
  bool trace = false;           ///< collect a trace event per transfer
  size_t maxTraceEvents = 2'000'000;
};

/// One transfer, as the Chrome trace shows it (on the sender's row).
struct TraceEvent {
  int src = -1;
  int dst = -1;
  int channel = 0;
  int step = 0;
  int loop = 0;
  double startS = 0;
  double endS = 0;  ///< arrival at the receiver
  double bytes = 0;
  bool reduce = false;
};

struct LinkStat {
  int link = -1;         ///< Topology::links() index
  double bytes = 0;      ///< bytes that crossed it
  double peakUtil = 0;   ///< max over time of carried rate / bandwidth (0..1)
};

struct Result {
  std::string algorithm;
  Collective collective = Collective::AllReduce;
  int nranks = 0;
  size_t bytes = 0;       ///< S of nccl-tests (total size; see busbwFactor)
  double timeS = 0;       ///< launch overhead + the last rank's finish
  double algbwGBps = 0;   ///< S / time, 10^9 B/s
  double busbwGBps = 0;   ///< algbw x busbwFactor
  int loops = 1;          ///< slices the Plan was cut into
  size_t transfers = 0;   ///< simulated transfers (all loops)
  size_t events = 0;      ///< discrete events processed
  double wallS = 0;       ///< host time the simulation took
  std::vector<double> rankFinishS;
  std::vector<LinkStat> links;       ///< links that carried data
  std::vector<TraceEvent> trace;     ///< when Options::trace
  bool traceTruncated = false;
};

/// nccl-tests' busbw factor: all-reduce 2(p-1)/p; all-gather, reduce-scatter, all-to-all(v)
/// (p-1)/p; broadcast, reduce, send/recv 1.
double busbwFactor(Collective c, int nranks);
/// nccl-tests' S for a Request's count: the total size in bytes (all-gather / reduce-scatter /
/// all-to-all: count x nranks elements; all-to-all-v: the matrix total).
size_t totalBytes(const plan::Request& req, size_t elemSize);

/// Runs `plan` on `topo` (rank r on chip topo.chipOfRank(r)). The Plan's ranks must fit in the
/// topology. `bytes` is the S used for algbw/busbw (0: derived from plan.count).
Status simulate(const fabric::Topology& topo, const plan::Plan& plan, const Options& opts,
                Result* out, std::string* error);

/// A collective to simulate by algorithm name (implemented in library nlccl_sim_collective, which
/// links the algorithm registry).
struct CollectiveRun {
  Collective collective = Collective::AllReduce;
  std::string algorithm;  ///< "" takes the registry's default for the collective
  int nranks = 0;         ///< 0: every rank of the topology
  size_t bytes = 0;       ///< S of nccl-tests (total size); the element count is derived from it
  int root = 0;
  /// Hierarchy for `hier` (innermost first); empty takes Topology::levelGroups(nranks).
  std::vector<int> groups;
  std::vector<std::string> levelAlgorithms;
  std::vector<size_t> matrix;  ///< all-to-all-v only, elements
};

/// The Request a CollectiveRun builds (count from bytes: S / elemSize, divided by nranks for
/// all-gather, reduce-scatter and all-to-all).
plan::Request requestFor(const fabric::Topology& topo, const CollectiveRun& run, size_t elemSize);

/// Builds the Plan with algo::build and simulates it.
Status simulateCollective(const fabric::Topology& topo, const CollectiveRun& run,
                          const Options& opts, Result* out, std::string* error);

/// Writes the Chrome trace-event JSON (Perfetto opens it): one complete event per transfer on
/// the sender's row (pid = chip, tid = rank), plus per-rank finish markers.
Status writeChromeTrace(const fabric::Topology& topo, const Result& r, const std::string& path,
                        std::string* error);

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

}  // namespace nlccl::sim
