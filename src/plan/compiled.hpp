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
//
// Two ways to compile. compile() takes a whole Plan (the engine, the verifier, small simulations)
// and keeps it: step() and transfer() reach back into it. compileRanks() asks a builder for a few
// ranks' programs at a time (Request::onlyRanks) and keeps only what the rules above need (kinds,
// peers, counts, local-op totals), so no whole Plan is ever held; given a Symmetry it compiles the
// representatives of the classes alone, and the receiver of a message to a rank that is not
// compiled is the receive, in that rank's representative, of the message's image
// (Symmetry::relative): the same FIFO rule, applied to the image. Both forms answer the compact
// queries (xfers()[x].kind/peer/next/count, steps()[s].copyElems/reduceElems, pairs) the
// simulator reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <functional>

#include "plan/plan.hpp"
#include "plan/symmetry.hpp"
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
  /// Elements its local ops copy and reduce (the ops' src counts summed by kind): what their cost
  /// depends on, kept when the Plan itself is not (compileRanks).
  size_t copyElems = 0;
  size_t reduceElems = 0;
  int numSends = 0;  ///< its transfers of kind Send (the engine holds their wake-ups when > 1)
};

/// One transfer of a step, with the messages it takes part in.
struct XferInfo {
  size_t count = 0;  ///< elements of its region
  int step = 0;      ///< owner step id; the transfer is plan step's transfers[id - firstXfer]
  int sends = -1;    ///< the message it sends (Send, or a fused kind's forward), else -1
  int recvs = -1;    ///< the message it receives (every kind but Send), else -1
  int peer = -1;     ///< Transfer::peer
  int next = -1;     ///< Transfer::next
  XferKind kind = XferKind::Send;
  /// An exchange pair (transport.hpp, Request::pairTarget): a step of exactly a Send and then a
  /// RecvReduceCopy with one peer whose src is the Send's region (a recursive-doubling round).
  /// The xfer id of the other one of the two, else -1.
  int paired = -1;
  /// The rank it sends to (peer for Send, next for the fused kinds), -1 when it does not send.
  int target() const { return kind == XferKind::Send ? peer : forwards(kind) ? next : -1; }
};

/// A matched message: sent by transfer `from`, received by transfer `to`.
struct Message {
  int from = 0;          ///< xfer id of the sender
  int to = 0;            ///< xfer id of the receiver
  int pair = 0;          ///< the (channel, sender, receiver) FIFO it travels in: ids are dense
  bool forward = false;  ///< sent by a fused transfer once its own receive has arrived
  bool reduced = false;  ///< the receiver reduces it on arrival
};

/// Builds the programs of `ranks` (a partial Plan: Request::onlyRanks) for compileRanks.
using RankBuilder =
    std::function<Status(const std::vector<int>& ranks, Plan* out, std::string* error)>;

/// What compileRanks found beyond the rules: messages whose image's receive has another count
/// (a symmetric Plan whose blocks do not divide evenly differ by an element here and there).
struct CompileReport {
  size_t countMismatches = 0;
  size_t maxCountDifference = 0;  ///< elements
};

class CompiledPlan {
 public:
  /// Compiles `plan`. InvalidArgument, with *error naming the rank, channel, step and transfer,
  /// when a transfer names a bad peer (out of range or itself), a send has no matching receive
  /// (or the reverse), matched sizes differ, or forwards have no defined order.
  static Status compile(std::shared_ptr<const Plan> plan,
                        std::shared_ptr<const CompiledPlan>* out, std::string* error);
  /// Compiles the representatives of `sym`'s classes of `nranks` ranks (every rank when `sym` is
  /// trivial), building at most `batch` ranks' programs at a time with `build` and dropping each
  /// batch once compiled. A message to a rank that is not compiled is matched in its
  /// representative (see above). With a non-trivial symmetry, matched counts may differ (the
  /// sender's count is the message's; *report counts them); with a trivial one they must not.
  /// InvalidArgument, as compile(), for a malformed program or an unmatched transfer (also when
  /// the programs are not symmetric under `sym`).
  static Status compileRanks(int nranks, const Symmetry& sym, const RankBuilder& build,
                             size_t batch, std::shared_ptr<const CompiledPlan>* out,
                             std::string* error, CompileReport* report = nullptr);

  /// The whole Plan (compile() only: hasPlan()).
  const Plan& plan() const { return *plan_; }
  bool hasPlan() const { return plan_ != nullptr; }
  int nranks() const { return nranks_; }
  Collective collective() const { return collective_; }
  const std::string& algorithm() const { return algorithm_; }
  size_t count() const { return count_; }  ///< Plan::count
  int root() const { return root_; }
  bool pipelinable() const { return pipelinable_; }
  /// The symmetry the compiled ranks represent the others under (trivial for compile()).
  const Symmetry& symmetry() const { return symmetry_; }
  /// True when only some ranks are compiled (the representatives of a non-trivial symmetry).
  bool reduced() const { return !symmetry_.trivial(); }
  /// Number of (channel, sender, receiver) FIFOs messages travel in (Message::pair).
  int pairs() const { return pairs_; }
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
  size_t count(int m) const { return xfers_[messages_[static_cast<size_t>(m)].from].count; }
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
  friend class Compiler;
  std::shared_ptr<const Plan> plan_;
  int nranks_ = 0;
  Collective collective_ = Collective::AllReduce;
  std::string algorithm_;
  size_t count_ = 0;
  int root_ = 0;
  bool pipelinable_ = false;
  Symmetry symmetry_;
  int pairs_ = 0;
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
