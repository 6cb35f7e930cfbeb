// Public C++ API of the simulator (DESIGN.md section 6): runs a collective, built by one of
// nlccl's algorithms, on a fabric Topology and reports modelled time, algbw/busbw, per-link load,
// per-rank finish times and a Chrome trace. nlccl-sim is built on it. Link with nlccl::sim
// (find_package(nlccl) or pkg-config nlccl-sim); errors come back as a Status and a message,
// never through the C API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nlccl/export.hpp"
#include "nlccl/status.hpp"
#include "nlccl/topology.hpp"
#include "nlccl/types.hpp"

namespace nlccl::sim {

enum class Mode : uint8_t {
  Analytical,  ///< every transfer costs latency + bytes / uncontended bottleneck; no sharing
  Flow,        ///< discrete events, max-min fair sharing of links and engines (the default)
};

NLCCL_MODEL_API const char* modeName(Mode m);
NLCCL_MODEL_API bool parseMode(const std::string& name, Mode* out);

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
  /// Bytes a sender may have in flight to one receiver (per channel) ahead of the receives it
  /// posted: the transport's buffer. Beyond it a message waits for its receive. < 0 takes the
  /// topology's pair_window_bytes; infinity: eager, unlimited buffering.
  double pairWindowBytes = -1;
  /// simulateCollective: simulate a symmetric collective on one representative rank per class
  /// of equivalent ranks (docs/fabric.md, "Reduced form") when its algorithm and the fabric
  /// allow; false always simulates every rank.
  bool reduce = true;
  /// S for algbw/busbw in bytes; 0 derives it from the Plan (plan.count, nranks, dtype).
  size_t totalBytes = 0;
  /// Flow mode: relative precision of finish times. Flows due within `precision` x their own
  /// duration of the next finish finish with it, at the latest of their finish times (never past
  /// the next other event), so one re-solve serves them all; their share idles meanwhile, which
  /// keeps the schedule feasible. 0 (the default) is exact max-min. 1e-2 cuts the re-solves of a
  /// skewed 144-rank all-to-all-v by about 4x and moves its time by about 0.2%.
  double precision = 0;
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
  size_t solves = 0;      ///< flow mode: max-min re-solves (events that changed rates)
  /// Ranks simulated: nranks, or the representatives of the reduced form.
  int simulatedRanks = 0;
  /// Reduced form: messages whose images' counts differ from their representative's (blocks
  /// that do not divide evenly; each class is then timed as its representative), and by how
  /// many elements at most. 0 means the reduced form is exactly the full one.
  size_t countMismatches = 0;
  size_t maxCountDifference = 0;
  double wallS = 0;       ///< host time the simulation took
  std::vector<double> rankFinishS;
  std::vector<double> rankBytesSent;  ///< bytes each rank put on the fabric
  std::vector<double> rankBytesReceived;  ///< bytes each rank took off the fabric
  std::vector<LinkStat> links;       ///< links that carried data
  std::vector<TraceEvent> trace;     ///< when Options::trace
  bool traceTruncated = false;
};

/// nccl-tests' busbw factor: all-reduce 2(p-1)/p; all-gather, reduce-scatter, all-to-all(v)
/// (p-1)/p; broadcast, reduce, send/recv 1. (For all-to-all-v, S is the matrix total over p:
/// one rank's mean buffer, as nccl-tests' alltoallv sizes it.)
NLCCL_MODEL_API double busbwFactor(Collective c, int nranks);

/// A collective to simulate by algorithm name.
struct CollectiveRun {
  Collective collective = Collective::AllReduce;
  std::string algorithm;  ///< "" takes the registry's default for the collective
  int nranks = 0;         ///< 0: every rank of the topology
  size_t bytes = 0;       ///< S of nccl-tests (total size); the element count is derived from it
  int root = 0;
  /// Input aliases Output (NCCL's in-place layout): an algorithm may then stage through scratch
  /// what it would otherwise read from Input, and the simulation charges those copies.
  bool inPlace = false;
  /// Hierarchy for `hier` (innermost first); empty takes Topology::levelGroups(nranks).
  std::vector<int> groups;
  std::vector<std::string> levelAlgorithms;
  std::vector<size_t> matrix;  ///< all-to-all-v only, elements
};

/// The algorithms nlccl has for `c` ("ring", "tree", ...), the default first.
NLCCL_MODEL_API std::vector<std::string> algorithms(Collective c);

/// Builds the collective's Plan with the named algorithm and simulates it. InvalidArgument (with
/// *error saying why) for an algorithm that does not implement the collective, ranks that do not
/// fit the topology or a malformed matrix.
NLCCL_MODEL_API Status simulateCollective(const fabric::Topology& topo, const CollectiveRun& run,
                                          const Options& opts, Result* out, std::string* error);

/// Writes the Chrome trace-event JSON (Perfetto opens it): one complete event per transfer on
/// the sender's row (pid = chip, tid = rank), plus per-rank finish markers.
NLCCL_MODEL_API Status writeChromeTrace(const fabric::Topology& topo, const Result& r, const std::string& path,
                        std::string* error);

}  // namespace nlccl::sim
