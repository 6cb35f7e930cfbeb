// One rank's part of a run: sizes, types, ops and roots; timing; checking; rank 0 reports.
#pragma once

#include <atomic>
#include <cstdint>

#include "nlccl.h"
#include "mpi_compare.hpp"
#include "options.hpp"

namespace nlccl::perf {

/// How the ranks were started, for the header.
struct Launch {
  const char* mode;  ///< "threads", "fork" or "mpi"
  int ranksPerProcess = 1;
  MpiReference* mpi = nullptr;  ///< --compare-mpi: time this too (mpirun launch only)
  double shmLatencyNs = -1;     ///< ranks 0-1 cache-line latency (mpirun launch; -1: none)
};

/// Runs the whole benchmark as `comm`'s rank. Rank 0 prints the table. Returns the exit code:
/// 0, 1 if any result was wrong, 2 for a bad argument found late (e.g. -r out of range). On an
/// nlccl error the process exits with 1 (other ranks then fail through the library's timeout).
int runRank(const Options& opts, nlcclComm_t comm, const Launch& launch);

/// Prints an nlccl error for `what` and ends the process with status 1.
[[noreturn]] void die(nlcclComm_t comm, const char* what, nlcclResult_t res);

/// -T: when a test has run longer than the limit, the watchdog ends the run (nccl-tests' "Test
/// timeout"). Each rank stamps the start of every test here (steady clock, ns; 0: idle).
void startWatchdog(int seconds);
void stampTest(bool starting);

}  // namespace nlccl::perf
