// The output of rank 0: nccl-tests' table on stdout, nccl-tests' JSON (-J) and a CSV file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "options.hpp"

namespace nlccl::perf {

/// One rank's identity, gathered to rank 0 for the "Using devices" list (fixed size: it travels
/// through nlcclAllGather as bytes).
struct RankInfo {
  int32_t rank;
  int32_t pid;
  int32_t device;  ///< the rank's index on its host (nlcclCommCuDevice)
  char host[52];
  /// The transports of this rank's peers (nlcclCommPeerTransport), e.g. "shm 3, ofi 4".
  char peers[64];
};
static_assert(sizeof(RankInfo) == 128);

/// nccl-tests' per-iteration statistics (-I), in microseconds.
struct IterStats {
  double min = 0, max = 0, avg = 0, p50 = 0, p95 = 0, p99 = 0, stdev = 0, cvPct = 0;
};

/// Half a table row: one of out-of-place or in-place.
struct Measure {
  double timeUs = 0, algBw = 0, busBw = 0;
  int64_t wrong = -1;  ///< -1: not checked
  double mpiTimeUs = -1;  ///< --compare-mpi, out of place: the MPI equivalent's time (-1: none)
  double mpiBusBw = 0;
  double modelUs = -1;    ///< simulated NeuronLink: modelled time (max over ranks; -1: none)
  double modelBusBw = 0;
  std::string algorithm;  ///< what the communicator ran (nlcclCommGetStats), "" if unknown
  bool perIter = false;   ///< -I: the fields below are set
  IterStats stats;
  std::vector<double> timesUs;  ///< per iteration, the max over process rows
  std::vector<std::vector<double>> processTimesUs;  ///< per process, the max over its ranks
};

/// Prints what rank 0 reports and writes the files.
class Reporter {
 public:
  /// `modelled`: the transport reports modelled time (neuronlink): print its columns too.
  Reporter(const Options& opts, int nranks, const char* mode, bool modelled);
  ~Reporter();
  /// The header's and the JSON's shared-memory latency between ranks 0 and 1 (shm_latency.hpp;
  /// below 0: not measured).
  void shmLatency(double ns) { shmLatencyNs_ = ns; }
  /// Opens the files; false (with a message) if one cannot be written.
  bool open();
  /// The header up to the column titles.
  void header(const std::vector<RankInfo>& ranks);
  /// One table row (out-of-place, then in-place) and its records.
  void row(size_t bytes, size_t count, nlcclDataType_t type, const char* op, int root,
           const Measure& outOfPlace, const Measure& inPlace);
  /// -M: the memory in use (bytes per rank, max over ranks).
  void memory(double userBytes, double scratchBytes);
  /// The footer; writes the JSON file.
  void footer();

 private:
  void csvRecord(size_t bytes, size_t count, nlcclDataType_t type, const char* op, int root,
                 bool inPlace, const Measure& m);
  nlohmann::ordered_json half(const Measure& m) const;
  nlohmann::ordered_json perIterJson(const Measure& m) const;
  const Options& opts_;
  int nranks_;
  std::string mode_;
  bool modelled_;
  double shmLatencyNs_ = -1;
  double bwSum_ = 0;
  int bwCount_ = 0;
  double logRatioSum_ = 0;  ///< --compare-mpi: for the geometric mean of the ratios
  int ratioCount_ = 0;
  int errors_ = 0;
  FILE* csv_ = nullptr;
  std::string jsonPath_;  ///< where -J writes (the name, or name.N when it existed)
  nlohmann::ordered_json json_;
};

/// Local time as nccl-tests formats it ("%Y-%m-%d %H:%M:%S").
std::string formatNow();

}  // namespace nlccl::perf
