// The compiled form of a Plan (DESIGN.md 2.1): what follows from the Plan's rules, derived once.
// The engine, the simulator and the verifier all read it; none of them matches messages, cuts
// slices, counts loops or orders pipelined steps on its own, so the three cannot drift apart.
//
// The rules, written here and nowhere else:
// - Matching. Messages between an ordered pair of ranks on one channel match in FIFO order. A
//   rank's messages to one peer on a channel are ordered step by step; within a step, its plain
//   sends (posted when the step starts, in transfer order) go before its forwards (a fused
//   transfer sends only once its own receive has arrived). Receives of a step are ordered as its
//   transfers. Two forwards of one step to the same rank whose receives come from different
//   peers have no defined order: compile() rejects them.
// - Slicing. A pipelinable Plan run with slices of S bytes is cut into L loops (loops()); slice k
//   of a region of n elements is [n*k/L, n*(k+1)/L) (slice()). Slices of matched transfers have
//   the same size; an empty slice is not sent (both ends skip it).
// - Pipelining. Loop k of step s may start once loop k of the channel's previous step and loop
//   k-1 of step s have completed (mayStart()); a step instance completes when all its messages
//   have (sends delivered, receives arrived, forwards delivered), then runs its local ops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "plan/plan.hpp"
#include "util/status.hpp"

namespace nlccl::plan {

/// One step of one rank's channel. Ids are dense: rank by rank, channel by channel, step by step.
struct StepInfo {
  int rank = 0;
  int channel = 0;
  int index = 0;      ///< position in the channel
  int prev = -1;      ///< the channel's previous step (id), -1 for its first
  int next = -1;      ///< the channel's next step (id), -1 for its last
  int firstXfer = 0;  ///< its transfers are xfers [firstXfer, firstXfer + numXfers)
  int numXfers = 0;
};

/// One transfer of a step, with the messages it takes part in.
struct XferInfo {
  int step = 0;     ///< owner step id; the transfer is plan step's transfers[id - firstXfer]
  int sends = -1;   ///< the message it sends (Send, or a fused kind's forward), else -1
  int recvs = -1;   ///< the message it receives (every kind but Send), else -1
};

/// A matched message: sent by transfer `from`, received by transfer `to`.
struct Message {
  int from = 0;          ///< xfer id of the sender
  int to = 0;            ///< xfer id of the receiver
  bool forward = false;  ///< sent by a fused transfer once its own receive has arrived
  bool reduced = false;  ///< the receiver reduces it on arrival
};

class CompiledPlan {
 public:
  /// Compiles `plan`. InvalidArgument, with *error naming the rank, channel, step and transfer,
  /// when a transfer names a bad peer (out of range or itself), a send has no matching receive
  /// (or the reverse), matched sizes differ, or forwards have no defined order.
  static Status compile(std::shared_ptr<const Plan> plan,
                        std::shared_ptr<const CompiledPlan>* out, std::string* error);

  const Plan& plan() const { return *plan_; }
  int nranks() const { return plan_->nranks; }
  const std::vector<StepInfo>& steps() const { return steps_; }
  const std::vector<XferInfo>& xfers() const { return xfers_; }
  const std::vector<Message>& messages() const { return messages_; }
  /// The Plan's step and transfer for ids.
  const Step& step(int id) const { return *stepPtr_[static_cast<size_t>(id)]; }
  const Transfer& transfer(int x) const {
    const XferInfo& xi = xfers_[static_cast<size_t>(x)];
    return step(xi.step).transfers[static_cast<size_t>(x - steps_[xi.step].firstXfer)];
  }
  /// Step ids of `rank`: [first, second).
  std::pair<int, int> rankSteps(int rank) const {
    return {rankFirst_[static_cast<size_t>(rank)], rankFirst_[static_cast<size_t>(rank) + 1]};
  }
  /// Elements of message m (its sender's region; the receiver's has the same count).
  size_t count(int m) const { return transfer(messages_[static_cast<size_t>(m)].from).region.count; }
  int sender(int m) const { return steps_[xfers_[messages_[m].from].step].rank; }
  int receiver(int m) const { return steps_[xfers_[messages_[m].to].step].rank; }

  /// Largest transfer of any rank, in elements.
  size_t maxTransferCount() const { return maxTransferCount_; }
  /// Loops a run with slices of `sliceBytes` cuts the Plan into: 1 unless the Plan is
  /// pipelinable and sliceBytes > 0, else ceil(largest transfer / sliceBytes), at most maxLoops.
  /// Every rank derives the same count (from the whole Plan), so slices match across ranks.
  int loops(size_t sliceBytes, size_t elemSize, int maxLoops) const;
  /// Slice `k` of `loops` of a region of `count` elements: [*first, *first + *size).
  static void slice(size_t count, size_t k, size_t loops, size_t* first, size_t* size) {
    *first = count * k / loops;
    *size = count * (k + 1) / loops - *first;
  }
  static size_t sliceSize(size_t count, size_t k, size_t loops) {
    return count * (k + 1) / loops - count * k / loops;
  }
  /// The pipelining rule: the step instances (step id, loop) that loop k of step s waits for:
  /// loop k of the channel's previous step and loop k-1 of s. Returns how many (0 to 2).
  int predecessors(int s, int k, std::pair<int, int> out[2]) const {
    int n = 0;
    if (const int prev = steps_[static_cast<size_t>(s)].prev; prev >= 0) out[n++] = {prev, k};
    if (k > 0) out[n++] = {s, k - 1};
    return n;
  }
  /// The same rule as a test on progress: may loop k of step s start, given completed[t - base]
  /// = the loops of step t that have completed (loops complete in order)? Predecessors are steps
  /// of the same rank, so `completed` may cover just that rank's steps, from id `base`.
  bool mayStart(int s, int k, const int* completed, int base = 0) const {
    std::pair<int, int> pred[2];
    const int n = predecessors(s, k, pred);
    for (int i = 0; i < n; ++i)
      if (completed[pred[i].first - base] <= pred[i].second) return false;
    return true;
  }

  /// Messages `rank` sends in a run of one loop (plan::elementsSent gives their elements).
  size_t messagesSent(int rank) const;

 private:
  std::shared_ptr<const Plan> plan_;
  std::vector<StepInfo> steps_;
  std::vector<const Step*> stepPtr_;
  std::vector<XferInfo> xfers_;
  std::vector<Message> messages_;
  std::vector<int> rankFirst_;
  size_t maxTransferCount_ = 0;
};

/// Builds and compiles in one go, for callers that hold a Plan by value (tests, tools).
Status compile(Plan plan, std::shared_ptr<const CompiledPlan>* out, std::string* error);

}  // namespace nlccl::plan
