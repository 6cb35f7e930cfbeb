// NLCCL_CHECK=1: before running a batch of calls, every rank all-gathers a signature of each
// collective (collective, count, type, op, root, algorithm; for all-to-all-v also its count
// vectors) and compares; a rank that called something else is named in the error on every rank,
// instead of a hang or silently wrong data.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "util/status.hpp"

namespace nlccl::core {

class Communicator;

struct CallSignature {
  int32_t collective = 0;
  int32_t dtype = 0;
  int32_t op = 0;
  int32_t root = 0;
  uint64_t count = 0;
  uint64_t algorithmHash = 0;
  friend bool operator==(const CallSignature&, const CallSignature&) = default;
};

/// One call to compare across its communicator's ranks.
struct CallCheck {
  Communicator* comm = nullptr;
  uint64_t seq = 0;  ///< the call's collective sequence number (the exchange's tags derive from it)
  CallSignature sig;
  /// All-to-all-v: this rank's sendcounts then its recvcounts (2 x nranks); empty otherwise.
  /// Every rank checks that rank i sends rank j what rank j expects from rank i.
  std::vector<uint64_t> counts;
};

/// Compares every call of `checks` across its ranks: InvalidUsage, with a message naming the
/// rank that differs from the others (on every rank alike), when one does. Sets *engineFailed
/// when the exchange itself failed (the transports are then aborted).
Status checkCalls(const std::vector<CallCheck>& checks, std::chrono::milliseconds timeout,
                  bool* engineFailed);

}  // namespace nlccl::core
