// The Plan IR: a per-rank program of communication steps (DESIGN.md section 2.1).
//
// An algorithm is a pure function that returns a Plan. The engine runs a Plan on real buffers over
// transports; the simulator runs the same Plan on the fabric model; the verifier proves it computes
// its collective. Nothing here knows about buffers, transports or the C API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nlccl/types.hpp"

namespace nlccl::plan {

/// The three buffers a rank's program addresses. Input is the user's send buffer, Output the
/// receive buffer, Scratch a temporary the engine allocates (Plan::scratchCount elements).
enum class Buffer : uint8_t { Input, Output, Scratch };

/// A contiguous range of one buffer, in elements.
struct Region {
  Buffer buffer = Buffer::Input;
  size_t offset = 0;
  size_t count = 0;
  friend bool operator==(const Region&, const Region&) = default;
};

inline Region in(size_t offset, size_t count) { return {Buffer::Input, offset, count}; }
inline Region out(size_t offset, size_t count) { return {Buffer::Output, offset, count}; }
inline Region scratch(size_t offset, size_t count) { return {Buffer::Scratch, offset, count}; }

enum class XferKind : uint8_t {
  Send,            ///< send `region` to `peer`
  Recv,            ///< receive from `peer` into `region`
  RecvReduce,      ///< receive from `peer`; region = region op incoming (reduce on arrival)
  RecvReduceSend,  ///< RecvReduce from `peer` into `region`, then send `region` to `next`
  RecvCopySend,    ///< Recv from `peer` into `region`, then send `region` to `next`
  /// Receive from `peer`; region = src op incoming (NCCL's recvReduceCopy). Fuses a local copy of
  /// `src` into `region` with a RecvReduce, so memory is swept once instead of twice.
  RecvReduceCopy,
  /// RecvReduceCopy from `peer` into `region`, then send `region` to `next`
  RecvReduceCopySend,
};

/// "send", "recv", "recvReduce", ... (the names of DESIGN.md 2.1, for messages).
const char* xferKindName(XferKind k);

/// True for the kinds that read Transfer::src (RecvReduceCopy, RecvReduceCopySend).
inline bool readsSrc(XferKind k) {
  return k == XferKind::RecvReduceCopy || k == XferKind::RecvReduceCopySend;
}
/// Every kind but Send receives from `peer`.
inline bool receives(XferKind k) { return k != XferKind::Send; }
/// The fused kinds: receive from `peer`, then send the region on to `next`.
inline bool forwards(XferKind k) {
  return k == XferKind::RecvReduceSend || k == XferKind::RecvCopySend ||
         k == XferKind::RecvReduceCopySend;
}
/// The kinds that combine the incoming data with local data as it arrives (RecvReduceCopy reads
/// `src` instead of the region, the same memory traffic).
inline bool reducesOnArrival(XferKind k) {
  return k == XferKind::RecvReduce || k == XferKind::RecvReduceSend || readsSrc(k);
}

/// One message of a step. For Send, `region` is the source; otherwise it is the destination.
/// Constructible as {kind, peer, next, region} (src defaults) or {kind, peer, next, region, src}.
struct Transfer {
  Transfer() = default;
  Transfer(XferKind kind, int peer, int next, Region region, Region src = {})
      : kind(kind), peer(peer), next(next), region(region), src(src) {}

  XferKind kind = XferKind::Send;
  int peer = -1;
  int next = -1;  ///< forward target of the fused kinds; -1 otherwise
  Region region;
  /// The local operand of RecvReduceCopy / RecvReduceCopySend: region = src op incoming. Same count
  /// as `region`; it is read while the transfer runs (concurrently with the step's other
  /// transfers). It may be `region` itself (then the kind acts as RecvReduce) but must not
  /// partially overlap it. Ignored (leave it default) for every other kind.
  Region src;
  friend bool operator==(const Transfer&, const Transfer&) = default;
};

/// The rank a transfer sends to: `peer` for Send, `next` for the fused kinds, else -1.
inline int sendTarget(const Transfer& t) {
  return t.kind == XferKind::Send ? t.peer : forwards(t.kind) ? t.next : -1;
}

enum class LocalKind : uint8_t {
  Copy,    ///< dst = src
  Reduce,  ///< dst = dst op src
};

struct LocalOp {
  LocalKind kind = LocalKind::Copy;
  Region src;
  Region dst;
  friend bool operator==(const LocalOp&, const LocalOp&) = default;
};

/// A step posts all its transfers at once (a ring step sends one chunk while it receives another),
/// waits for all of them, then runs its local ops in order. A step with no transfers costs no
/// start-up time (no alpha) in the cost model.
struct Step {
  std::vector<Transfer> transfers;
  std::vector<LocalOp> locals;
};

/// A channel's steps run in order. Sends and receives between a pair of ranks on one channel match
/// in FIFO order (no tags). Channels of a rank run concurrently.
struct Channel {
  std::vector<Step> steps;
};

/// The program of one rank.
struct RankPlan {
  std::vector<Channel> channels;
};

/// What to build a Plan for. Counts are in elements and follow the C API's meaning:
/// AllReduce/Broadcast/Reduce: the buffer; AllGather: sendcount; ReduceScatter: recvcount;
/// AllToAll, Gather, Scatter: elements per peer (the block of each rank). AllToAllv uses `matrix` (matrix[i*nranks+j] = elements rank i sends
/// to rank j, packed in rank order in both buffers) and ignores `count`.
struct Request {
  Collective collective = Collective::AllReduce;
  int nranks = 1;
  size_t count = 0;
  int root = 0;
  bool inPlace = false;  ///< Input aliases Output with NCCL's in-place layout (see inPlaceOffset)
  std::vector<size_t> matrix;  ///< AllToAllv only
  /// Hierarchy for `hier` algorithms: group sizes from the innermost level out; their product
  /// must be nranks. Empty means one level of nranks.
  std::vector<int> groups;
  /// Inner algorithm per level for `hier` ("ring", "rhd", "tree"); empty means ring everywhere.
  std::vector<std::string> levelAlgorithms;
  /// Build the programs of these ranks only (the others stay empty): the simulator compiles a
  /// few ranks at a time, or only the representatives of a symmetric Plan (compiled.hpp,
  /// symmetry.hpp). Empty: every rank. The engine and the verifier always take whole Plans.
  std::vector<int> onlyRanks;
};

/// A Plan for every rank of a collective.
struct Plan {
  Collective collective = Collective::AllReduce;
  std::string algorithm;       ///< "ring", "tree", ...
  int nranks = 0;
  size_t count = 0;            ///< Request::count
  int root = 0;
  bool inPlace = false;
  size_t scratchCount = 0;     ///< elements of scratch each rank needs (max over ranks)
  /// True when the engine may cut every region into equal proportional slices and pipeline them
  /// as loops (DESIGN.md 2.1; compiled.hpp has the rules). Only algorithms whose steps never read data another slice wrote set it.
  bool pipelinable = false;
  std::vector<RankPlan> ranks;  ///< ranks[r] is rank r's program
  /// Non-empty for a partial Plan (Request::onlyRanks): built[r] says whether rank r's program
  /// was built. CompiledPlan::compile rejects a partial Plan; compileRanks takes them.
  std::vector<uint8_t> built;
  bool builds(int rank) const {
    return built.empty() || built[static_cast<size_t>(rank)] != 0;
  }
};

/// Elements of Input and Output for `rank` under request `req` (sizes the verifier and engine use).
size_t inputCount(const Request& req, int rank);
size_t outputCount(const Request& req, int rank);
/// The same for a collective without a matrix (0 for AllToAllv and SendRecv), from its shape
/// alone (the hot path builds no Request).
inline size_t inputCount(Collective c, int nranks, size_t count, int root, int rank) {
  const size_t p = static_cast<size_t>(nranks);
  switch (c) {
    case Collective::AllReduce: return count;
    case Collective::AllGather: return count;
    case Collective::ReduceScatter: return count * p;
    case Collective::Broadcast: return rank == root ? count : 0;
    case Collective::Reduce: return count;
    case Collective::AllToAll: return count * p;
    case Collective::AllToAllv: return 0;
    case Collective::SendRecv: return 0;
    case Collective::Gather: return count;
    case Collective::Scatter: return rank == root ? count * p : 0;
  }
  return 0;
}

inline size_t outputCount(Collective c, int nranks, size_t count, int root, int rank) {
  const size_t p = static_cast<size_t>(nranks);
  switch (c) {
    case Collective::AllReduce: return count;
    case Collective::AllGather: return count * p;
    case Collective::ReduceScatter: return count;
    case Collective::Broadcast: return count;
    case Collective::Reduce: return rank == root ? count : 0;
    case Collective::AllToAll: return count * p;
    case Collective::AllToAllv: return 0;
    case Collective::SendRecv: return 0;
    case Collective::Gather: return rank == root ? count * p : 0;
    case Collective::Scatter: return count;
  }
  return 0;
}

/// Offset in Output of Input when the collective runs in place (NCCL's layout): AllGather
/// rank*count, ReduceScatter: Output sits in Input at rank*count (returned negated via the flag),
/// others 0. See plan.cpp.
struct InPlaceLayout {
  bool inputInsideOutput = true;  ///< false: Output lies inside Input (ReduceScatter)
  size_t offset = 0;              ///< elements from the start of the larger buffer
};
InPlaceLayout inPlaceLayout(const Request& req, int rank);

/// Number of steps that post at least one transfer, summed over the longest channel of `rank`
/// (the alpha coefficient of the Plan in the Hockney model).
size_t sequentialSteps(const Plan& plan, int rank);
/// Elements `rank` sends in the whole Plan (the beta coefficient, times the element size).
size_t elementsSent(const Plan& plan, int rank);

}  // namespace nlccl::plan
