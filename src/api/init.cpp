// Version, errors, communicator creation and lifetime.
#include <cstdio>
#include <cstring>

#include "api/api.hpp"
#include "core/init.hpp"
#include "core/process_init.hpp"

using namespace nlccl;
using api::guard;


NLCCL_API nlcclResult_t nlcclGetVersion(int* version) {
  return guard(nullptr, [&] {
    if (version == nullptr) {
      WARN("nlcclGetVersion: version is NULL");
      return Status::InvalidArgument;
    }
    *version = NLCCL_VERSION_CODE;
    return Status::Success;
  });
}

NLCCL_API const char* nlcclGetErrorString(nlcclResult_t r) {
  switch (r) {
    case nlcclSuccess: return "no error";
    case nlcclUnhandledDeviceError: return "unhandled device error";
    case nlcclSystemError: return "unhandled system error (see NLCCL_DEBUG=WARN for details)";
    case nlcclInternalError: return "internal error - please report this issue to the nlccl developers";
    case nlcclInvalidArgument: return "invalid argument (run with NLCCL_DEBUG=WARN for details)";
    case nlcclInvalidUsage: return "invalid usage (run with NLCCL_DEBUG=WARN for details)";
    case nlcclRemoteError: return "remote process exited or there was a network error";
    case nlcclInProgress: return "operation in progress";
    case nlcclTimeout: return "timed out waiting for a peer";
    default: return "unknown result code";
  }
}

NLCCL_API const char* nlcclGetLastError(nlcclComm_t comm) {
  if (comm != nullptr && api::toComm(comm)->valid()) {
    static thread_local std::string copy;
    copy = api::toComm(comm)->lastError();
    return copy.c_str();
  }
  return api::globalLastError();
}

NLCCL_API nlcclResult_t nlcclCommInitAll(nlcclComm_t* comms, int ndev, const int* devlist) {
  return guard(nullptr, [&] {
    if (comms == nullptr) {
      WARN("nlcclCommInitAll: comms is NULL");
      return Status::InvalidArgument;
    }
    if (ndev <= 0 || ndev > core::kMaxThreadRanks) {
      WARN("nlcclCommInitAll: ndev %d must be between 1 and %d (ranks as threads of one process)",
           ndev, core::kMaxThreadRanks);
      return Status::InvalidArgument;
    }
    core::CommConfig config;
    API_CHECK(api::applyConfig(nullptr, &config, "nlcclCommInitAll"));
    std::vector<std::unique_ptr<core::Communicator>> made;
    API_CHECK(core::initAll(ndev, config, &made));
    for (int i = 0; i < ndev; ++i) comms[i] = api::toHandle(made[i].release());
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclGetUniqueId(nlcclUniqueId* id) {
  return guard(nullptr, [&] {
    if (id == nullptr) {
      WARN("nlcclGetUniqueId: uniqueId is NULL");
      return Status::InvalidArgument;
    }
    static_assert(sizeof(bootstrap::UniqueId) == sizeof(nlcclUniqueId));
    bootstrap::UniqueId uid;
    API_CHECK(core::makeUniqueId(&uid));
    std::memcpy(id->internal, uid.bytes, sizeof(uid.bytes));
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommInitRankConfig(nlcclComm_t* comm, int nranks, nlcclUniqueId id,
                                                int rank, nlcclConfig_t* config) {
  return guard(nullptr, [&] {
    if (comm == nullptr) {
      WARN("nlcclCommInitRank: comm is NULL");
      return Status::InvalidArgument;
    }
    if (nranks <= 0 || nranks > core::kMaxRanks) {
      WARN("nlcclCommInitRank: nranks %d must be between 1 and %d", nranks, core::kMaxRanks);
      return Status::InvalidArgument;
    }
    API_CHECK(api::checkRank(rank, nranks, "rank", "nlcclCommInitRank"));
    core::CommConfig cc;
    API_CHECK(api::applyConfig(config, &cc, "nlcclCommInitRank"));
    bootstrap::UniqueId uid;
    std::memcpy(uid.bytes, id.internal, sizeof(uid.bytes));
    std::unique_ptr<core::Communicator> made;
    API_CHECK(core::initRank(uid, rank, nranks, cc, &made));
    *comm = api::toHandle(made.release());
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommInitRank(nlcclComm_t* comm, int nranks, nlcclUniqueId id,
                                          int rank) {
  return nlcclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

NLCCL_API nlcclResult_t nlcclCommSplit(nlcclComm_t comm, int color, int key, nlcclComm_t* newcomm,
                                       nlcclConfig_t* config) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  return api::guardBlocking(c, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommSplit"));
    if (newcomm == nullptr) {
      WARN("nlcclCommSplit: newcomm is NULL");
      return Status::InvalidArgument;
    }
    core::CommConfig cc;
    API_CHECK(api::applyConfig(config, &cc, "nlcclCommSplit"));
    if (config == nullptr) cc = c->config();
    std::unique_ptr<core::Communicator> made;
    API_CHECK(core::split(c, color < 0 ? -1 : color, key, cc, &made));
    *newcomm = api::toHandle(made.release());
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommFinalize(nlcclComm_t comm) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommFinalize"));
    core::Communicator* c = api::toComm(comm);
    c->waitIdle();  // every call queued on a stream has run
    const Status s = c->asyncError();
    // The failed work's message stays the last error (the guard records this thread's).
    if (s != Status::Success) log::setLastError(c->lastError());
    return s;
  });
}

NLCCL_API nlcclResult_t nlcclCommDestroy(nlcclComm_t comm) {
  if (comm == nullptr) return nlcclSuccess;  // NCCL accepts NULL
  return guard(nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommDestroy"));
    core::Communicator* c = api::toComm(comm);
    c->waitIdle();  // no stream thread may still use it
    delete c;
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommAbort(nlcclComm_t comm) {
  if (comm == nullptr) return nlcclSuccess;
  return guard(nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommAbort"));
    core::Communicator* c = api::toComm(comm);
    c->abort();     // queued work fails fast, running work fails at the transport
    c->waitIdle();
    delete c;
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommGetAsyncError(nlcclComm_t comm, nlcclResult_t* asyncError) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommGetAsyncError"));
    if (asyncError == nullptr) {
      WARN("nlcclCommGetAsyncError: asyncError is NULL");
      return Status::InvalidArgument;
    }
    *asyncError = api::toResult(api::toComm(comm)->asyncError());
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommCount(const nlcclComm_t comm, int* count) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommCount"));
    if (count == nullptr) {
      WARN("nlcclCommCount: count is NULL");
      return Status::InvalidArgument;
    }
    *count = api::toComm(comm)->nranks();
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommUserRank(const nlcclComm_t comm, int* rank) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommUserRank"));
    if (rank == nullptr) {
      WARN("nlcclCommUserRank: rank is NULL");
      return Status::InvalidArgument;
    }
    *rank = api::toComm(comm)->rank();
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommGetStats(const nlcclComm_t comm, nlcclCommStats_t* stats) {
  return guard(comm ? api::toComm(comm) : nullptr, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommGetStats"));
    if (stats == nullptr) {
      WARN("nlcclCommGetStats: stats is NULL");
      return Status::InvalidArgument;
    }
    if (stats->size < sizeof(nlcclCommStats_t)) {
      WARN("nlcclCommGetStats: stats->size %zu is not sizeof(nlcclCommStats_t) = %zu", stats->size,
           sizeof(nlcclCommStats_t));
      return Status::InvalidArgument;
    }
    core::Communicator* c = api::toComm(comm);
    core::CommStats st = c->stats();
    stats->lastModelledUs = st.lastModelledS * 1e6;
    stats->clockUs = c->modelledClock() * 1e6;  // also counts send/recv since then
    stats->lastBytesSent = st.lastBytesSent;
    stats->collectives = st.collectives;
    snprintf(stats->lastAlgorithm, sizeof(stats->lastAlgorithm), "%s", st.lastAlgorithm.c_str());
    snprintf(stats->transport, sizeof(stats->transport), "%s", c->transport()->name());
    return Status::Success;
  });
}
