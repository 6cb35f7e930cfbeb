// The output of rank 0: nccl-tests' table on stdout, plus optional JSON and CSV files.
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
  char host[56];
};
static_assert(sizeof(RankInfo) == 64);

/// Half a table row: one of out-of-place or in-place.
struct Measure {
  double timeUs = 0, algBw = 0, busBw = 0;
  int64_t wrong = -1;  ///< -1: not checked
  double mpiTimeUs = -1;  ///< --compare-mpi, out of place: the MPI equivalent's time (-1: none)
  double mpiBusBw = 0;
  double modelUs = -1;    ///< simulated NeuronLink: modelled time (max over ranks; -1: none)
  double modelBusBw = 0;
  std::string algorithm;  ///< what the communicator ran (nlcclCommGetStats), "" if unknown
};

/// Prints what rank 0 reports and writes the files.
class Reporter {
 public:
  /// `modelled`: the transport reports modelled time (neuronlink): print its columns too.
  Reporter(const Options& opts, int nranks, int nThreads, const char* mode, bool modelled);
  ~Reporter();
  /// Opens the files; false (with a message) if one cannot be written.
  bool open();
  /// The header up to the column titles.
  void header(const std::vector<RankInfo>& ranks);
  /// One table row (out-of-place, then in-place) and its two file records.
  void row(size_t bytes, size_t count, nlcclDataType_t type, const char* op, int root,
           const Measure& outOfPlace, const Measure& inPlace);
  /// The footer; returns the number of tests with wrong results.
  int footer();

 private:
  void record(size_t bytes, size_t count, nlcclDataType_t type, const char* op, int root,
              bool inPlace, const Measure& m);
  const Options& opts_;
  int nranks_, nThreads_;
  std::string mode_;
  bool modelled_;
  double bwSum_ = 0;
  int bwCount_ = 0;
  double logRatioSum_ = 0;  ///< --compare-mpi: for the geometric mean of the ratios
  int ratioCount_ = 0;
  int errors_ = 0;
  FILE* csv_ = nullptr;
  nlohmann::json json_;
};

}  // namespace nlccl::perf
