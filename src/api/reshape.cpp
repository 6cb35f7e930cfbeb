// Communicators made from others or from several ids: nlcclCommShrink, nlcclCommGetUniqueId +
// nlcclCommGrow, nlcclCommInitRankScalable.
#include <cstring>
#include <vector>

#include "api/api.hpp"
#include "core/process_init.hpp"
#include "core/reshape.hpp"

using namespace nlccl;
using api::guard;

NLCCL_API nlcclResult_t nlcclCommShrink(nlcclComm_t comm, int* excludeRanksList,
                                        int excludeRanksCount, nlcclComm_t* newcomm,
                                        nlcclConfig_t* config, int shrinkFlags) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  const char* func = "nlcclCommShrink";
  return guard(c, [&] {
    API_CHECK(api::checkComm(comm, func));
    if (newcomm == nullptr) {
      WARN("%s: newcomm is NULL", func);
      return Status::InvalidArgument;
    }
    const int n = c->nranks();
    if (excludeRanksCount < 0 || excludeRanksCount >= n) {
      WARN("%s: excludeRanksCount %d is out of range [0, %d) (at least one rank must stay)", func,
           excludeRanksCount, n);
      return Status::InvalidArgument;
    }
    if (excludeRanksCount > 0 && excludeRanksList == nullptr) {
      WARN("%s: excludeRanksList is NULL with excludeRanksCount %d", func, excludeRanksCount);
      return Status::InvalidArgument;
    }
    std::vector<bool> seen(static_cast<size_t>(n), false);
    std::vector<int> excluded;
    for (int i = 0; i < excludeRanksCount; ++i) {
      const int r = excludeRanksList[i];
      if (r < 0 || r >= n) {
        WARN("%s: excludeRanksList[%d] = %d is out of range (the communicator has %d ranks)",
             func, i, r, n);
        return Status::InvalidArgument;
      }
      if (seen[static_cast<size_t>(r)]) {
        WARN("%s: excludeRanksList[%d] = %d is listed twice", func, i, r);
        return Status::InvalidArgument;
      }
      if (r == c->rank()) {
        WARN("%s: excludeRanksList[%d] = %d is the calling rank (excluded ranks do not call "
             "nlcclCommShrink)",
             func, i, r);
        return Status::InvalidArgument;
      }
      seen[static_cast<size_t>(r)] = true;
      excluded.push_back(r);
    }
    if (shrinkFlags != NLCCL_SHRINK_DEFAULT && shrinkFlags != NLCCL_SHRINK_ABORT) {
      WARN("%s: shrinkFlags %d is not NLCCL_SHRINK_DEFAULT (0) or NLCCL_SHRINK_ABORT (1)", func,
           shrinkFlags);
      return Status::InvalidArgument;
    }
    core::CommConfig cc;
    API_CHECK(api::applyConfig(config, &cc, func));
    if (config == nullptr) cc = c->config();
    std::unique_ptr<core::Communicator> made;
    API_CHECK(core::shrink(c, excluded, shrinkFlags == NLCCL_SHRINK_ABORT, cc, &made));
    *newcomm = api::toHandle(made.release());
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommGetUniqueId(nlcclComm_t comm, nlcclUniqueId* uniqueId) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  return guard(c, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommGetUniqueId"));
    if (uniqueId == nullptr) {
      WARN("nlcclCommGetUniqueId: uniqueId is NULL");
      return Status::InvalidArgument;
    }
    bootstrap::UniqueId uid;
    API_CHECK(core::makeGrowId(c, &uid));
    std::memcpy(uniqueId->internal, uid.bytes, sizeof(uid.bytes));
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommGrow(nlcclComm_t comm, int nRanks, const nlcclUniqueId* uniqueId,
                                      int rank, nlcclComm_t* newcomm, nlcclConfig_t* config) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  const char* func = "nlcclCommGrow";
  return guard(c, [&] {
    if (newcomm == nullptr) {
      WARN("%s: newcomm is NULL", func);
      return Status::InvalidArgument;
    }
    if (comm != nullptr) {
      API_CHECK(api::checkComm(comm, func));
      if (nRanks <= c->nranks()) {
        WARN("%s: nRanks %d does not grow the communicator of %d ranks", func, nRanks,
             c->nranks());
        return Status::InvalidArgument;
      }
      if (rank != -1) {
        WARN("%s: rank %d must be -1 on the ranks of the old communicator (they keep theirs)",
             func, rank);
        return Status::InvalidArgument;
      }
    } else {
      if (uniqueId == nullptr) {
        WARN("%s: uniqueId is NULL on a new rank (comm NULL)", func);
        return Status::InvalidArgument;
      }
      if (nRanks <= 0) {
        WARN("%s: nRanks %d must be positive", func, nRanks);
        return Status::InvalidArgument;
      }
      API_CHECK(api::checkRank(rank, nRanks, "rank", func));
    }
    core::CommConfig cc;
    API_CHECK(api::applyConfig(config, &cc, func));
    if (config == nullptr && c != nullptr) cc = c->config();
    bootstrap::UniqueId uid;
    if (uniqueId) std::memcpy(uid.bytes, uniqueId->internal, sizeof(uid.bytes));
    std::unique_ptr<core::Communicator> made;
    API_CHECK(core::grow(c, nRanks, uniqueId ? &uid : nullptr, rank, cc, &made));
    *newcomm = api::toHandle(made.release());
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommInitRankScalable(nlcclComm_t* newcomm, int nranks, int myrank,
                                                  int nId, nlcclUniqueId* commIds,
                                                  nlcclConfig_t* config) {
  const char* func = "nlcclCommInitRankScalable";
  return guard(nullptr, [&] {
    if (newcomm == nullptr) {
      WARN("%s: newcomm is NULL", func);
      return Status::InvalidArgument;
    }
    if (nranks <= 0) {
      WARN("%s: nranks %d must be positive", func, nranks);
      return Status::InvalidArgument;
    }
    API_CHECK(api::checkRank(myrank, nranks, "myrank", func));
    if (nId < 1 || nId > nranks) {
      WARN("%s: nId %d is out of range [1, nranks = %d]", func, nId, nranks);
      return Status::InvalidArgument;
    }
    if (commIds == nullptr) {
      WARN("%s: commIds is NULL", func);
      return Status::InvalidArgument;
    }
    core::CommConfig cc;
    API_CHECK(api::applyConfig(config, &cc, func));
    // nlccl's bootstrap is one root: every rank meets at the first id's (the same on all ranks).
    bootstrap::UniqueId uid;
    std::memcpy(uid.bytes, commIds[0].internal, sizeof(uid.bytes));
    std::unique_ptr<core::Communicator> made;
    API_CHECK(core::initRank(uid, myrank, nranks, cc, &made));
    *newcomm = api::toHandle(made.release());
    return Status::Success;
  });
}
