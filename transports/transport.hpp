// The transport interface (DESIGN.md section 5): post sends and receives (with optional reduce on
// arrival) to peers, progress them, and wait for activity. The engine is its only caller.
//
// Matching: a send from rank A to rank B with tag T completes against B's receive from A with tag
// T; messages with the same (peer, tag) match in the order they were posted. Sizes must agree.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "kernels/reduce.hpp"
#include "kernels/stream_store.hpp"
#include "transports/time_model.hpp"
#include "util/status.hpp"

namespace nlccl::transport {

/// dst[i] = dst[i] op src[i] for `count` elements (the kernels of kernels/reduce.hpp).
using kernels::ReduceFn;

/// Reduce-on-arrival for a receive: the element size and the kernel. Without `src` the receiver
/// computes buf = buf op incoming; with it, buf = src op incoming (NCCL's recvReduceCopy: buf's
/// old contents are never read). `src` covers the receive's `bytes`, stays valid and unchanged
/// until the request completes, and either is `buf` or does not overlap it.
struct Reducer {
  ReduceFn fn = nullptr;
  size_t elemSize = 1;
  const void* src = nullptr;  ///< optional local operand
  kernels::Reduce3Fn fn3 = nullptr;  ///< buf = src op incoming in one sweep (needed with src)
  bool streamed = false;  ///< write buf = src op incoming with streaming stores

  /// fn, fn3 and elemSize of (type, op), no src.
  static Reducer of(DataType type, RedOp op) {
    return {kernels::reduceKernel(type, op), dataTypeSize(type), nullptr,
            kernels::reduce3Kernel(type, op)};
  }
  /// The `bytes` at `offset` of a receive into `buf` that just arrived as `incoming`.
  void apply(char* buf, size_t offset, const void* incoming, size_t bytes) const {
    if (src && streamed && buf + offset != static_cast<const char*>(src) + offset)
      kernels::streamReduce3(fn3, elemSize, buf + offset, static_cast<const char*>(src) + offset,
                             incoming, bytes / elemSize);
    else if (src)
      kernels::reduceCopy(fn, fn3, buf + offset, static_cast<const char*>(src) + offset, incoming,
                          bytes / elemSize);
    else
      fn(buf + offset, incoming, bytes / elemSize);
  }
};

/// A collective exchange among the ranks of a group, for transport set-up: every rank contributes
/// `bytes` from `mine`; `all` receives nranks * bytes, rank r's at all + r * bytes.
using AllGatherFn = std::function<Status(const void* mine, size_t bytes, void* all)>;

/// Completion record of one posted operation. The transport writes `status`, then sets `done`.
/// `timing` is set by the engine only when the transport has a time model (time_model.hpp).
/// `readOnlySource`, set by the caller before postSend: the sender never writes the buffer
/// during its collective (an out-of-place Input), so a peer reading it in place finds no line
/// the sender rewrites under it or just after (shm then reads it in place from a smaller size).
/// `holdWake`, also set before postSend: the caller posts more sends and then calls
/// Transport::releaseWakes(), so the transport may wake this send's receiver only then (shm: one
/// memory fence for all of a step's sends instead of one each).
///
/// An exchange pair (both set by the caller before posting; the send first, its receive right
/// after): a send to `peer` and a receive from it of the same bytes whose reducer computes
/// `pairTarget` = (the send's data) op incoming, the peer posting the mirror pair (a recursive-
/// doubling round). The send's `pairTarget` names that receive's buffer and the receive's
/// `pairSend` the send. A transport may then split the work (shm, when both ranks' buffers are
/// shareable): each rank reduces half of the message and stores it in both ranks' targets, and
/// each request completes only once its half is in place (the send once the peer's half is in
/// `pairTarget`). Both results are what the receives alone give, up to the order of op's
/// operands (each half is computed once, so both ranks hold the same bits). `pairState` is the
/// transport's. Transports that do not split ignore all three.
struct Request {
  std::atomic<bool> done{false};
  Status status = Status::Success;
  Timing* timing = nullptr;
  bool readOnlySource = false;
  bool streamed = false;  ///< a receive: copy into the buffer with streaming stores
  bool holdWake = false;
  void* pairTarget = nullptr;   ///< a send of an exchange pair: its receive's buffer
  Request* pairSend = nullptr;  ///< a receive of an exchange pair: its send
  enum class Pair : uint8_t { None, Offered, Refused };
  Pair pairState = Pair::None;  ///< a pair's send: whether the transport offered to split it
  void reset() {
    done.store(false, std::memory_order_relaxed);
    status = Status::Success;
    timing = nullptr;
    readOnlySource = false;
    streamed = false;
    holdWake = false;
    pairTarget = nullptr;
    pairSend = nullptr;
    pairState = Pair::None;
  }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;

  /// Posts a send of `bytes` from `buf` to `peer`. `buf` must stay valid and unchanged until
  /// `req->done`. Never blocks waiting for the peer.
  virtual Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) = 0;
  /// Posts a receive of exactly `bytes` into `buf` from `peer`. With `reducer`, the incoming data
  /// is reduced into `buf` (or, with reducer->src, buf = src op incoming) instead of copied. The
  /// transport copies *reducer. Never blocks waiting for the peer.
  virtual Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const Reducer* reducer,
                          Request* req) = 0;
  /// Wakes the receivers of the sends posted with Request::holdWake since the last call, if
  /// they sleep. Whoever posts such a send calls it before waiting for anything (or returning),
  /// since until then a blocked receiver may not see the message.
  virtual void releaseWakes() {}
  /// True when exchange() below is this transport's own (then the engine may call it).
  virtual bool exchanges() const { return false; }
  /// A send of `sendBytes` from `send` to `peer` and a receive of `recvBytes` from it into `recv`
  /// (postSend's and postRecv's arguments, one tag for both), run to completion in the calling
  /// thread: the whole of a step that is one exchange with one peer (a 2-rank recursive-doubling
  /// all-reduce), without Requests, two posts and a progress loop around them. Fails as the two
  /// would, or with Timeout when they have not completed within `timeout`; on failure the
  /// transport is aborted (nothing stays posted). Only for transports whose exchanges() is true.
  /// A half may be absent (a step of one transfer, such as a 2-rank broadcast): `send` null with
  /// `sendBytes` 0 sends nothing, `recv` null with `recvBytes` 0 receives nothing (the engine never
  /// sends an empty transfer, so these never stand for a zero-byte message). `sendReadOnly`:
  /// Request::readOnlySource of the send.
  virtual Status exchange(int peer, uint64_t tag, const void* send, size_t sendBytes, bool sendReadOnly,
                          void* recv, size_t recvBytes, const Reducer* reducer,
                          std::chrono::milliseconds timeout) {
    (void)peer, (void)tag, (void)send, (void)sendBytes, (void)sendReadOnly, (void)recv,
        (void)recvBytes, (void)reducer, (void)timeout;
    return Status::InternalError;
  }
  /// Advances outstanding operations; a fatal error (dead peer) is returned here too.
  virtual Status progress() = 0;
  /// A counter that changes whenever progress() may complete something; pass it to waitActivity.
  virtual uint32_t activityEpoch() = 0;
  /// Transports returning the same domain share one activity counter, so one wait covers them.
  virtual const void* activityDomain() const { return this; }
  /// Spins briefly, then blocks until the epoch differs from `seen` or `timeout` passes.
  virtual void waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) = 0;
  /// Fails every pending operation with `why` and wakes all waiters; later posts fail too.
  virtual void abort(Status why) = 0;
  /// Wakes `rank`'s waiters (its activity epoch changes): something outside the transport that
  /// lets it progress has happened (the neuronlink transport's shared clock moved).
  virtual void wake(int rank) = 0;

  /// The transport that carries messages to `peer` ("shm", "ofi", ...): name() but for a
  /// transport that routes peers to others.
  virtual const char* peerTransport(int peer) const { return name(); }

  /// The fabric model's clock, for transports that model time (neuronlink); null otherwise.
  virtual TimeModel* timeModel() { return nullptr; }
};

}  // namespace nlccl::transport
