// NLCCL_CHECK=1: before running a batch of collectives, every rank all-gathers a signature of each
// call (collective, count, type, op, root, algorithm) and compares; a rank that called something
// else is named in the error on every rank, instead of a hang or silently wrong data.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.hpp"

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

/// Checks every job of `colls` (whose communicators are `comms[i]`) across its ranks. Sets
/// *engineFailed when the exchange itself failed (the transports are then aborted).
Status checkSignatures(const std::vector<engine::CollJob>& colls,
                       const std::vector<Communicator*>& comms,
                       const std::vector<CallSignature>& sigs, std::chrono::milliseconds timeout,
                       bool* engineFailed);

}  // namespace nlccl::core
