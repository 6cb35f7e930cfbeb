// The shared timeline of the neuronlink transport: the ranks' conservative virtual clock and the
// log of every message, in memory all ranks map (a heap block for threads, a memfd for
// processes). Each rank replays the log into its own fabric::FlowModel, so all ranks see the same
// max-min sharing of links, DMA engines and memory, and agree on every arrival.
//
// Ranks post messages out of virtual-time order, so a message's arrival is final only once no
// message can still start before its data finishes. Each rank publishes a floor: no message it
// posts from now on starts earlier. The horizon is the smallest floor; the log is complete below
// it, and every replica may settle what finishes by then. A rank's floor is the earliest
// completion it still waits for (a lower bound from the model), so floors rise by at least the
// route latency per round: the latency is the lookahead that keeps the clock moving. Where there
// is none (two ranks on one chip) or sharing slows transfers, a jump does: once every rank is
// blocked (it can post nothing before one of its messages settles), the first data finish to
// come is safe to reach (tryJump).
//
// A rank with nothing in flight (outside nlccl calls, or done) holds the horizon at its clock for
// NLCCL_NEURONLINK_IDLE_MS of wall time (twenty times that before its first message, counted from
// the first message of any rank), so a rank that comes back promptly is timed exactly.
// Past that it is released and no longer holds the others; when it returns its messages start no
// earlier than the horizon the others reached (kept exact for every rank, so all agree). While one
// rank is released, others that go idle are released at once (most likely all wait at a barrier).
//
// Everything that reads or changes the floors runs under one robust, process-shared mutex; the
// log is a ring that a record leaves once every rank's replica has read it.
#pragma once

#include <pthread.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "transports/transport.hpp"
#include "util/status.hpp"

namespace nlccl::transport {

/// One message: what every replica feeds into its flow model.
struct TimelineRecord {
  double start = 0;      ///< virtual time the sender posted it
  uint64_t bytes = 0;
  uint64_t tag = 0;
  int64_t wallNs = 0;    ///< sender's CLOCK_MONOTONIC at the post (real-time mode)
  int32_t src = 0;
  int32_t dst = 0;
  uint32_t reduce = 0;   ///< the receiver reduces it on arrival
  uint32_t pad = 0;
};

class Timeline {
 public:
  /// Bytes a timeline of `nranks` ranks and a ring of `capacity` records needs.
  static size_t bytesFor(int nranks, uint64_t capacity);
  /// Lays out a fresh timeline in zeroed memory `mem` of `bytes` (the creator, before any rank
  /// attaches). `idleGrace` is how long an idle rank holds the horizon.
  static Status format(void* mem, size_t bytes, int nranks, uint64_t capacity,
                       std::chrono::milliseconds idleGrace);
  /// Rank `rank`'s handle on the timeline in `mem`; `keepAlive` owns the mapping.
  static Status attach(std::shared_ptr<void> keepAlive, void* mem, size_t bytes, int nranks,
                       int rank, std::unique_ptr<Timeline>* out);
  ~Timeline();

  /// The horizon and the log as this rank may read them now.
  struct View {
    double horizon = 0;     ///< no record still to come starts before it
    uint64_t count = 0;     ///< records appended so far: all those starting before the horizon
    uint32_t incoming = 0;  ///< records for this rank so far (pass back to publish())
    double jump = 0;        ///< records starting at or before it are all in the log too
    /// How far a replica may settle: max(horizon, jump).
    double effective() const { return horizon > jump ? horizon : jump; }
  };
  /// Ranks the view's releases let progress are added to *wake.
  Status view(View* out, std::vector<int>* wake);
  /// Record `i` of the log; valid for i < a count this rank has viewed and not yet published
  /// as consumed.
  const TimelineRecord& record(uint64_t i) const;

  /// Leaves the idle state before posting; *earliest is the earliest start this rank's messages
  /// may have (its floor: above its clock only after it was released).
  Status activate(double* earliest);
  /// Appends `rec` and lowers the receiver's floor to `arrivalBound`, a lower bound of its
  /// arrival, until the receiver has read it. A start the clock has passed (possible only after a
  /// jump) moves up to the clock. Waits while the ring is full.
  Status append(TimelineRecord* rec, double arrivalBound, std::chrono::milliseconds timeout,
                uint64_t* index);
  /// Publishes this rank's floor and the horizon it waits for (its operations cannot settle
  /// before it; infinity: none), and that its replica has read `consumed` records. `seen` is the
  /// view the floor was computed from: records for this rank appended since keep the floor at
  /// their bounds. `blocked`: it can post nothing before one of its operations completes. Ranks
  /// whose awaited horizon has now been reached are added to *wake; *horizon receives the new
  /// horizon.
  Status publish(double floor, double needHorizon, const View& seen, bool blocked,
                 uint64_t consumed, std::vector<int>* wake, double* horizon);
  /// When every rank is blocked (it said so at some horizon, and `lastFinish[r]`, the latest
  /// data finish of rank r's messages in this rank's replica, is not later; waiting for another
  /// rank's data counts) and nothing was appended since `seen`, no message can start before the
  /// first data finish to come: `settleUntilFinish` (run under the lock) feeds this rank's
  /// replica everything in the log up to that finish and returns its time, which becomes the
  /// jump. This keeps the clock moving where floors alone would not (no latency between two
  /// ranks on one chip, or transfers slowed by sharing). *jumped says whether it did; every rank
  /// must then be woken.
  Status tryJump(const View& seen, const std::vector<double>& lastFinish,
                 const std::function<double()>& settleUntilFinish, bool* jumped);
  /// Nothing in flight: this rank's next messages start at `clock` or later.
  Status setIdle(double clock, uint64_t consumed, std::vector<int>* wake);
  /// This rank is gone (aborted or destroyed): it no longer holds the horizon.
  void leave(std::vector<int>* wake);

  /// Changes whenever the horizon or the jump moves or a record is appended: a rank that saw
  /// the same value last time (and nothing else changed for it) has nothing new to settle.
  uint64_t version() const;


 private:
  struct Header;
  struct RankState;
  Timeline() = default;
  Status lock();
  void unlock();
  RankState& state(int r) const;
  double minFloor() const;  // under the lock
  void bump();              // under the lock
  void raise(double before, std::vector<int>* wake);  // under the lock

  std::shared_ptr<void> keepAlive_;
  Header* h_ = nullptr;
  RankState* ranks_ = nullptr;
  TimelineRecord* log_ = nullptr;
  int nranks_ = 0;
  int rank_ = 0;
  int64_t lastLivenessNs_ = 0;
};

/// The timeline of a group, in shareable memory (util/shared_memory.hpp) that rank 0 allocates
/// and every other rank maps through /proc/<pid>/fd: the same for threads and for processes, and
/// nameless, so nothing outlives the ranks. Collective over the group (`allGather`).
Status sharedTimeline(int rank, int nranks, const AllGatherFn& allGather,
                      std::unique_ptr<Timeline>* out);
/// Ring capacity, in records, and idle grace: NLCCL_NEURONLINK_IDLE_MS (default 50).
uint64_t timelineCapacity();
Status timelineIdleGrace(std::chrono::milliseconds* out);

}  // namespace nlccl::transport
