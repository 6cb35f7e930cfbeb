// Queries and states of a communicator that NCCL added after the core API: the local index
// (nlcclCommCuDevice), revoke, suspend / resume, memory statistics.
#include "api/api.hpp"

using namespace nlccl;
using api::guard;

NLCCL_API nlcclResult_t nlcclCommCuDevice(const nlcclComm_t comm, int* device) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommCuDevice"));
    if (device == nullptr) {
      WARN("nlcclCommCuDevice: device is NULL");
      return Status::InvalidArgument;
    }
    *device = api::toComm(comm)->localRank();
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommPeerTransport(const nlcclComm_t comm, int peer,
                                               const char** name) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommPeerTransport"));
    core::Communicator* c = api::toComm(comm);
    API_CHECK(api::checkRank(peer, c->nranks(), "peer", "nlcclCommPeerTransport"));
    if (name == nullptr) {
      WARN("nlcclCommPeerTransport: name is NULL");
      return Status::InvalidArgument;
    }
    *name = c->transport()->peerTransport(peer);
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommRevoke(nlcclComm_t comm, int revokeFlags) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommRevoke"));
    if (revokeFlags != NLCCL_REVOKE_DEFAULT) {
      WARN("nlcclCommRevoke: revokeFlags %d must be NLCCL_REVOKE_DEFAULT (0)", revokeFlags);
      return Status::InvalidArgument;
    }
    core::Communicator* c = api::toComm(comm);
    c->abort();  // pending work fails at the transport; later calls are InvalidUsage
    c->waitIdle();
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommSuspend(nlcclComm_t comm, int flags) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommSuspend"));
    if ((flags & ~NLCCL_SUSPEND_MEM) != 0) {
      WARN("nlcclCommSuspend: flags 0x%x has bits other than NLCCL_SUSPEND_MEM", flags);
      return Status::InvalidArgument;
    }
    core::Communicator* c = api::toComm(comm);
    c->setSuspended(true);
    c->waitIdle();
    if (flags & NLCCL_SUSPEND_MEM) c->trimScratch();
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommResume(nlcclComm_t comm) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommResume"));
    api::toComm(comm)->setSuspended(false);
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommMemStats(nlcclComm_t comm, nlcclCommMemStat_t stat,
                                          uint64_t* value) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommMemStats"));
    if (value == nullptr) {
      WARN("nlcclCommMemStats: value is NULL");
      return Status::InvalidArgument;
    }
    core::Communicator* c = api::toComm(comm);
    switch (api::rawEnum(stat)) {
      case nlcclStatGpuMemSuspend:
      case nlcclStatGpuMemTotal: *value = c->scratchBytes(); break;
      case nlcclStatGpuMemSuspended: *value = c->suspended() ? 1 : 0; break;
      case nlcclStatGpuMemPersist: *value = 0; break;
      default:
        WARN("nlcclCommMemStats: stat %d is not an nlcclCommMemStat_t", api::rawEnum(stat));
        return Status::InvalidArgument;
    }
    return Status::Success;
  });
}
