// Collective entry points: check every argument, then hand the call to the core.
#include <optional>

#include "api/api.hpp"
#include "core/collective.hpp"

using namespace nlccl;
using api::guard;

namespace {

/// The checks all collectives share; `factor` is how many counts the larger buffer holds.
Status checkCommon(nlcclComm_t comm, size_t count, size_t factor, int dt,
                   const char* func) {
  API_CHECK(api::checkComm(comm, func));
  API_CHECK(api::checkDataType(dt, func));
  API_CHECK(api::checkCount(count, factor, dt, "count", func));
  return Status::Success;
}

/// Where a collective's buffers must be valid: on every rank, or at the root only.
enum class Where { All, RootOnly };

/// Whether an empty call ends before the general path: when every check below passes and
/// core::collective would end it at once (core::emptyCallEnds; the communicator neither revoked
/// nor failed). It then takes no hold of the communicator (it blocks on nothing, so there is no
/// wait for an abort to unblock), no guard and no CollExtras: an empty call cost 2.3x Open MPI's
/// (whose MPI_Allgather returns at once for a count of 0), two thirds of it in that machinery.
/// A call that fails any check takes the general path, which reports it. PreMulSum operators
/// take the general path too.
inline bool endsEmpty(nlcclComm_t comm, const core::CollArgs& a, bool needsOp, bool needsRoot) {
  if (comm == nullptr) return false;
  const core::Communicator* c = api::toComm(comm);
  if (!c->valid() || !core::emptyCallEnds(*c, a) || c->suspended() || c->aborted() ||
      c->asyncError() != Status::Success)
    return false;
  return api::validDataType(static_cast<int>(a.dtype)) &&
         (!needsOp || api::validRedOp(static_cast<int>(a.op))) &&
         (!needsRoot || api::validRank(a.root, c->nranks()));
}

/// Checks a collective's arguments, then issues it. `factor`: how many counts the larger buffer
/// holds; `send`/`recv`: where that buffer must not be null. An operator from
/// nlcclRedOpCreatePreMulSum becomes a Sum over a scaled copy (after every other check).
nlcclResult_t runChecked(nlcclComm_t comm, core::CollArgs&& a, nlcclStream_t stream,
                         const char* func, size_t factor, bool needsOp, bool needsRoot, Where send,
                         Where recv) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  std::optional<core::CollExtras> extras;  // a PreMulSum's scaled input, for this call
  return api::guardBlocking(c, [&](bool* held) {
    a.heldByCaller = held;  // a call queued on a stream takes the guard's pending count over
    const int dt = static_cast<int>(a.dtype);
    API_CHECK(checkCommon(comm, a.count, factor, dt, func));
    API_CHECK(api::checkActive(comm, func));
    const int op = static_cast<int>(a.op);
    const bool custom = needsOp && op >= nlcclNumOps && op <= nlcclMaxRedOp;
    if (needsOp && !custom) API_CHECK(api::checkRedOp(op, func));
    if (needsRoot) API_CHECK(api::checkRank(a.root, c->nranks(), "root", func));
    bool root = c->rank() == a.root;
    if (send == Where::All || root) API_CHECK(api::checkBuffer(a.send, a.count, "sendbuff", func));
    if (recv == Where::All || root) API_CHECK(api::checkBuffer(a.recv, a.count, "recvbuff", func));
    if (custom) API_CHECK(core::applyCustomOp(c, &a, &extras));
    return core::collective(c, a, api::toStream(stream));
  });
}

/// runChecked(), after an empty call's way out (inline in every entry point, so that the call
/// makes no more than the checks).
[[gnu::always_inline]] inline nlcclResult_t run(nlcclComm_t comm, core::CollArgs&& a,
                                                nlcclStream_t stream, const char* func,
                                                size_t factor, bool needsOp, bool needsRoot,
                                                Where send, Where recv) {
  if (a.count == 0 && endsEmpty(comm, a, needsOp, needsRoot)) [[unlikely]] {
    log::clearLastError();  // as guard() would
    return nlcclSuccess;
  }
  return runChecked(comm, std::move(a), stream, func, factor, needsOp, needsRoot, send, recv);
}

size_t ranksOf(nlcclComm_t comm) {
  return (comm && api::toComm(comm)->valid()) ? api::toComm(comm)->nranks() : 1;
}

core::CollArgs args(Collective coll, const void* send, void* recv, size_t count,
                    const nlcclDataType_t& dt, const nlcclRedOp_t& op, int root) {
  core::CollArgs a;
  a.collective = coll;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = static_cast<DataType>(api::rawEnum(dt));
  a.op = static_cast<RedOp>(api::rawEnum(op));
  a.root = root;
  return a;
}

}  // namespace

NLCCL_API nlcclResult_t nlcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       nlcclDataType_t datatype, nlcclRedOp_t op,
                                       nlcclComm_t comm, nlcclStream_t stream) {
  return run(comm, args(Collective::AllReduce, sendbuff, recvbuff, count, datatype, op, 0), stream,
             "nlcclAllReduce", 1, true, false, Where::All, Where::All);
}

NLCCL_API nlcclResult_t nlcclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       nlcclDataType_t datatype, int root, nlcclComm_t comm,
                                       nlcclStream_t stream) {
  return run(comm, args(Collective::Broadcast, sendbuff, recvbuff, count, datatype, nlcclSum, root),
             stream, "nlcclBroadcast", 1, false, true, Where::RootOnly, Where::All);
}

NLCCL_API nlcclResult_t nlcclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    nlcclDataType_t datatype, nlcclRedOp_t op, int root,
                                    nlcclComm_t comm, nlcclStream_t stream) {
  return run(comm, args(Collective::Reduce, sendbuff, recvbuff, count, datatype, op, root), stream,
             "nlcclReduce", 1, true, true, Where::All, Where::RootOnly);
}

NLCCL_API nlcclResult_t nlcclBcast(void* buff, size_t count, nlcclDataType_t datatype, int root,
                                   nlcclComm_t comm, nlcclStream_t stream) {
  return run(comm, args(Collective::Broadcast, buff, buff, count, datatype, nlcclSum, root), stream,
             "nlcclBcast", 1, false, true, Where::All, Where::All);
}

NLCCL_API nlcclResult_t nlcclGather(const void* sendbuff, void* recvbuff, size_t count,
                                    nlcclDataType_t datatype, int root, nlcclComm_t comm,
                                    nlcclStream_t stream) {
  return run(comm, args(Collective::Gather, sendbuff, recvbuff, count, datatype, nlcclSum, root),
             stream, "nlcclGather", ranksOf(comm), false, true, Where::All, Where::RootOnly);
}

NLCCL_API nlcclResult_t nlcclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                     nlcclDataType_t datatype, int root, nlcclComm_t comm,
                                     nlcclStream_t stream) {
  return run(comm, args(Collective::Scatter, sendbuff, recvbuff, count, datatype, nlcclSum, root),
             stream, "nlcclScatter", ranksOf(comm), false, true, Where::RootOnly, Where::All);
}

NLCCL_API nlcclResult_t nlcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       nlcclDataType_t datatype, nlcclComm_t comm,
                                       nlcclStream_t stream) {
  return run(comm, args(Collective::AllGather, sendbuff, recvbuff, sendcount, datatype, nlcclSum, 0),
             stream, "nlcclAllGather", ranksOf(comm), false, false, Where::All, Where::All);
}

NLCCL_API nlcclResult_t nlcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           nlcclDataType_t datatype, nlcclRedOp_t op,
                                           nlcclComm_t comm, nlcclStream_t stream) {
  return run(comm, args(Collective::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0),
             stream, "nlcclReduceScatter", ranksOf(comm), true, false, Where::All, Where::All);
}

NLCCL_API nlcclResult_t nlcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                      nlcclDataType_t datatype, nlcclComm_t comm,
                                      nlcclStream_t stream) {
  return run(comm, args(Collective::AllToAll, sendbuff, recvbuff, count, datatype, nlcclSum, 0),
             stream, "nlcclAlltoAll", ranksOf(comm), false, false, Where::All, Where::All);
}

NLCCL_API nlcclResult_t nlcclAlltoAllv(const void* sendbuff, const size_t sendcounts[],
                                       const size_t sdispls[], void* recvbuff,
                                       const size_t recvcounts[], const size_t rdispls[],
                                       nlcclDataType_t datatype, nlcclComm_t comm,
                                       nlcclStream_t stream) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  const char* func = "nlcclAlltoAllv";
  return api::guardBlocking(c, [&] {
    API_CHECK(checkCommon(comm, 0, 1, api::rawEnum(datatype), func));
    API_CHECK(api::checkActive(comm, func));
    const std::pair<const size_t*, const char*> arrays[] = {
        {sendcounts, "sendcounts"}, {sdispls, "sdispls"}, {recvcounts, "recvcounts"},
        {rdispls, "rdispls"}};
    for (auto [arr, name] : arrays) API_CHECK(api::checkBuffer(arr, 1, name, func));
    size_t sendTotal = 0, recvTotal = 0;
    for (int r = 0; r < c->nranks(); ++r) {
      API_CHECK(api::checkCount(sendcounts[r], 1, api::rawEnum(datatype), "sendcounts[r]", func));
      API_CHECK(api::checkCount(recvcounts[r], 1, api::rawEnum(datatype), "recvcounts[r]", func));
      size_t sEnd, rEnd;
      if (__builtin_add_overflow(sdispls[r], sendcounts[r], &sEnd) ||
          __builtin_add_overflow(rdispls[r], recvcounts[r], &rEnd)) {
        WARN("%s: sdispls[%d] or rdispls[%d] plus its count overflows", func, r, r);
        return Status::InvalidArgument;
      }
      API_CHECK(api::checkCount(sEnd, 1, api::rawEnum(datatype), "sdispls[r]", func));
      API_CHECK(api::checkCount(rEnd, 1, api::rawEnum(datatype), "rdispls[r]", func));
      sendTotal += sendcounts[r];
      recvTotal += recvcounts[r];
    }
    API_CHECK(api::checkBuffer(sendbuff, sendTotal, "sendbuff", func));
    API_CHECK(api::checkBuffer(recvbuff, recvTotal, "recvbuff", func));
    core::CollArgs a = args(Collective::AllToAllv, sendbuff, recvbuff, 0, datatype, nlcclSum, 0);
    a.sendcounts = sendcounts;
    a.sdispls = sdispls;
    a.recvcounts = recvcounts;
    a.rdispls = rdispls;
    return core::collective(c, a, api::toStream(stream));
  });
}
