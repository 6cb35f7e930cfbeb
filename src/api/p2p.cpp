// Point-to-point and groups.
#include "api/api.hpp"
#include "core/collective.hpp"
#include "core/group.hpp"

using namespace nlccl;
using api::guard;

namespace {
nlcclResult_t p2p(bool isSend, void* buf, size_t count, int dt, int peer,
                  nlcclComm_t comm, nlcclStream_t stream, const char* func) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  return api::guardBlocking(c, [&] {
    API_CHECK(api::checkComm(comm, func));
    API_CHECK(api::checkActive(comm, func));
    API_CHECK(api::checkDataType(dt, func));
    API_CHECK(api::checkCount(count, 1, dt, "count", func));
    API_CHECK(api::checkRank(peer, c->nranks(), "peer", func));
    API_CHECK(api::checkBuffer(buf, count, isSend ? "sendbuff" : "recvbuff", func));
    return core::pointToPoint(c, isSend, buf, count, static_cast<DataType>(dt), peer,
                              api::toStream(stream));
  });
}
}  // namespace

NLCCL_API nlcclResult_t nlcclSend(const void* sendbuff, size_t count, nlcclDataType_t datatype,
                                  int peer, nlcclComm_t comm, nlcclStream_t stream) {
  return p2p(true, const_cast<void*>(sendbuff), count, api::rawEnum(datatype), peer, comm, stream, "nlcclSend");
}

NLCCL_API nlcclResult_t nlcclRecv(void* recvbuff, size_t count, nlcclDataType_t datatype, int peer,
                                  nlcclComm_t comm, nlcclStream_t stream) {
  return p2p(false, recvbuff, count, api::rawEnum(datatype), peer, comm, stream, "nlcclRecv");
}

NLCCL_API nlcclResult_t nlcclGroupStart(void) {
  return guard(nullptr, [] {
    core::groupStart();
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclGroupEnd(void) {
  return guard(nullptr, [] { return core::groupEnd(); });
}

NLCCL_API nlcclResult_t nlcclGroupSimulateEnd(nlcclSimInfo_t* simInfo) {
  return guard(nullptr, [simInfo] {
    if (simInfo == nullptr || simInfo->size < sizeof(nlcclSimInfo_t) ||
        simInfo->magic != NLCCL_SIM_INFO_MAGIC) {
      // Still closes the group level, as NCCL does after a bad argument.
      double ignored = 0;
      (void)core::groupSimulateEnd(&ignored);
      WARN("nlcclGroupSimulateEnd: simInfo must be initialised with NLCCL_SIM_INFO_INITIALIZER");
      return Status::InvalidArgument;
    }
    double s = 0;
    NLCHECK(core::groupSimulateEnd(&s));
    simInfo->estimatedTime = static_cast<float>(s * 1e6);
    return Status::Success;
  });
}
