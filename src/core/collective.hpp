// Turns a checked collective or point-to-point call into Work: picks the algorithm, fetches the
// Plan, lays out the buffers (in place or not) and takes the match tags in call order.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>

#include "core/comm.hpp"
#include "core/stream.hpp"
#include "util/dtype.hpp"

namespace nlccl::core {

/// The parts of a call that only PreMulSum's calls have.
struct CollExtras {
  /// Runs when the call runs, before the engine (in stream order): PreMulSum's scaling.
  std::function<void()> prepareInput;
  /// Memory the call reads until it has run (PreMulSum's scaled input).
  std::shared_ptr<char> keepAlive;
};

struct CollArgs {
  Collective collective = Collective::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  ///< the C API's count argument
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  const size_t* sendcounts = nullptr;  ///< AllToAllv only
  const size_t* sdispls = nullptr;
  const size_t* recvcounts = nullptr;
  const size_t* rdispls = nullptr;
  /// What a PreMulSum call adds (applyCustomOp), else null: CollArgs itself stays trivial to
  /// make and drop, as every call makes one.
  const CollExtras* extras = nullptr;
  /// Set (and true) when the caller holds one pending count of the communicator for this call
  /// (the API's guard): a call queued on a stream then takes that count over for its item
  /// (*heldByCaller becomes false) instead of adding one of its own, and the caller keeps it.
  bool* heldByCaller = nullptr;
};

/// Turns a call with a PreMulSum operator of `comm` (args->op >= nlcclNumOps) into a Sum over a
/// scaled copy of the input, made in *extras (args->extras points there): InvalidArgument
/// (naming the op) when it is not one of comm's or was made for another type. Call after the
/// other checks; nothing is changed on failure.
Status applyCustomOp(Communicator* comm, CollArgs* args, std::optional<CollExtras>* extras);

/// Whether a call of `a` ends as soon as it is checked: it then blocks on nothing, queues
/// nothing and takes no sequence number. An empty collective moves nothing, so it ends at once,
/// as NCCL's do (the count is the same on every rank, so every rank skips it alike), except
/// where Communicator::emptyCallsEnd says it must still run. All-to-all-v's counts are arrays.
inline bool emptyCallEnds(const Communicator& comm, const CollArgs& a) {
  return a.count == 0 && a.collective != Collective::AllToAllv && comm.emptyCallsEnd();
}

/// Issues a collective (arguments already checked by the API layer, except buffer overlap).
Status collective(Communicator* comm, const CollArgs& args, Stream* stream);
/// Issues one send or receive (grouped with others when inside a group).
Status pointToPoint(Communicator* comm, bool isSend, void* buf, size_t count, DataType dtype,
                    int peer, Stream* stream);

/// Whether the call runs in place under NCCL's rules; InvalidArgument (with a message) when the
/// buffers overlap in any other way.
Status inPlaceLayout(const Communicator& comm, const CollArgs& args, bool* inPlace);

}  // namespace nlccl::core
