// A rank's connection to the bootstrap root: a background reader thread (Asio) that files round
// results by (group, seq) and turns a dropped peer or root into a sticky failure that waiters, the
// health() check and registered Notifiers see at once. Shared by a Bootstrap and its splits.
// A dropped peer fails only the groups it belongs to: the survivors can still form a group
// without it (nlcclCommShrink), as long as the root lives.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/unique_id.hpp"
#include "util/futex.hpp"
#include "util/status.hpp"

namespace nlccl::bootstrap {

class Link {
 public:
  using Clock = std::chrono::steady_clock;
  using Bytes = std::vector<uint8_t>;
  using FailureCallback = std::function<void(Status, const std::string&)>;

  ~Link();

  /// Connects to the root at `ep` and runs the handshake before `deadline`: proves this rank holds
  /// ep.secret, checks that the root does too (RemoteError if not), and sends the hello that joins
  /// `rank` of `nranks` with `blob`; the join's result comes as round (kWorldGroup, 0). Connections
  /// that are refused, or that the root closes before answering (it drops them while out of
  /// descriptors), are retried; an explicit refusal by the root is InvalidUsage with its reason.
  static Status connect(const Endpoint& ep, int32_t rank, int32_t nranks,
                        std::span<const uint8_t> blob, Clock::time_point deadline,
                        std::shared_ptr<Link>* out);

  /// Queues a frame; the reader thread writes it. Fails once the link has failed.
  Status send(Bytes frame);

  /// Waits for the result of round (group, seq) until `deadline`. On Timeout the message names the
  /// ranks the root had not heard from (asked just before the deadline); `what` says what the
  /// round was ("join", "barrier", ...). `pieces` gets every rank's piece. `members` (world
  /// ranks) limits which lost ranks fail the round; null: any.
  Status awaitRound(uint32_t group, uint32_t seq, int nranks, Clock::time_point deadline,
                    int64_t timeoutMs, const std::string& what, std::vector<Bytes>* pieces,
                    const std::vector<int>* members = nullptr);

  /// Success, or the sticky failure (RemoteError "rank 3 disconnected", ...) with last error set.
  /// With `members` (world ranks), only the loss of one of them (or of the root) counts.
  Status health(const std::vector<int>* members = nullptr) const;
  /// 0 while healthy, nonzero after a failure: cheap to poll, and futex-waitable.
  const std::atomic<uint32_t>* failureWord() const;
  /// Notifiers woken (notify()) on failure, so that blocked transport waits recheck health().
  void addWaker(Notifier* n);
  void removeWaker(Notifier* n);
  /// Called once, from the reader thread, when the link fails (after the wakers).
  void setFailureCallback(FailureCallback cb);

  /// Sends goodbye, drains queued writes (bounded wait), closes and joins the reader thread.
  /// A reader thread that does not stop within 2 s (stuck in a handler) is left running on its
  /// own reference to the link's state, with a warning: close() never hangs.
  void close();
  /// Closes without goodbye: the root tells every other rank this one is gone. Bounded as close().
  void abort();

 private:
  struct Impl;
  explicit Link(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  ///< shared with the io thread (link.cpp's Impl says why)
};

}  // namespace nlccl::bootstrap
