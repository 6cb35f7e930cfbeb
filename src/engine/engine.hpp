// The engine runs Plans over transports (DESIGN.md 2.3): each step becomes sends and receives
// posted to the transport, reductions happen on arrival, large messages are cut into slices that
// pipeline as loops. One call drives a whole batch (a group): several collectives, on one or more
// communicators, plus grouped point-to-point transfers, so grouped calls never deadlock.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "plan/compiled.hpp"
#include "transports/transport.hpp"
#include "util/dtype.hpp"
#include "util/status.hpp"

namespace nlccl::engine {

/// A rank's part of one collective.
struct CollJob {
  std::shared_ptr<const plan::CompiledPlan> plan;
  int rank = 0;
  const void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;  ///< plan->scratchCount elements
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  transport::Transport* transport = nullptr;
  uint64_t seq = 0;          ///< the communicator's collective sequence number (match tags)
  size_t sliceBytes = 0;     ///< pipeline slice size; 0 runs each step as one message
  /// This rank's share of the host's streaming-store threshold (kernels/stream_store.hpp): when
  /// its input and output add up to at least this, copies and out-of-place reductions write
  /// around the cache. 0: never.
  size_t streamStoreBytes = 0;

  // Outputs (virtual times are set only when the transport has a time model; see
  // transports/time_model.hpp).
  double vcall = 0;          ///< this rank's clock when the collective was called
  double vstart = 0;         ///< modelled start (vcall plus the launch overhead)
  double vend = 0;           ///< modelled time at which this rank finished
  uint64_t bytesSent = 0;    ///< bytes this rank sent
};

/// One point-to-point transfer of a group.
struct P2POp {
  bool isSend = true;
  int peer = 0;
  void* buf = nullptr;
  size_t bytes = 0;
  uint64_t tag = 0;  ///< makeP2PTag(n): the n-th message between this pair in this direction
};

struct P2PJob {
  transport::Transport* transport = nullptr;
  std::vector<P2POp> ops;
  /// Set when the ops are one collective's (direct all-to-all-v): its communicator records it.
  const char* collectiveAlgorithm = nullptr;
  // Outputs, as CollJob's: virtual call, start (a collective's pays the launch overhead) and end
  // (timed transports), bytes sent.
  double vcall = 0;
  double vstart = 0;
  double vend = 0;
  uint64_t bytesSent = 0;
};

/// Tag of the n-th point-to-point message between an ordered pair (disjoint from collective tags).
constexpr uint64_t makeP2PTag(uint64_t n) { return (uint64_t{1} << 63) | n; }

/// Tag of the messages of collective `seq`, channel `channel`, loop `loop`.
constexpr uint64_t makeCollTag(uint64_t seq, unsigned channel, unsigned loop) {
  return ((seq & 0xffffffffffull) << 23) | (uint64_t{channel & 0x7f} << 16) | (loop & 0xffff);
}

class CollRunner;

/// Runs one collective job at a time over its transport, keeping the per-step state between
/// runs: once it has run a Plan, running it again allocates nothing (the prepared path of small
/// collectives, STYLE.md 8). Not for concurrent use; each prepared collective owns one.
class Runner {
 public:
  Runner();
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  /// As run() below for one job and no point-to-point transfers, failures included (the
  /// transport is aborted before it returns).
  Status run(CollJob& job, std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<CollRunner> impl_;
};

/// Runs every job to completion. Fails with Timeout when nothing moves for `timeout`, or with the
/// first transport error. On failure, operations already posted may still be pending in the
/// transports: the caller must abort them before it frees the buffers.
Status run(std::vector<CollJob>& colls, std::vector<P2PJob>& p2ps,
           std::chrono::milliseconds timeout);

}  // namespace nlccl::engine
