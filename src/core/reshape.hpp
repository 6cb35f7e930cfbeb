// New communicators from an existing one: without some ranks (nlcclCommShrink, which must work
// after a rank died) and with more ranks (nlcclCommGrow, joined through an id that one rank of the
// old communicator made with nlcclCommGetUniqueId).
#pragma once

#include <memory>
#include <vector>

#include "bootstrap/unique_id.hpp"
#include "core/comm.hpp"

namespace nlccl::core {

/// Collective over the ranks of `parent` not in `excluded` (checked: valid, distinct, not the
/// caller). `abortFirst` fails the parent's pending work first (a peer died). Threads of one
/// process meet in memory; processes form a sub-bootstrap without any exchange with the excluded
/// ranks, so the bootstrap root must still be alive.
Status shrink(Communicator* parent, const std::vector<int>& excluded, bool abortFirst,
              const CommConfig& config, std::unique_ptr<Communicator>* out);

/// nlcclCommGetUniqueId: a fresh id (a bootstrap root in this process) kept on `comm` until a grow
/// consumes it; InvalidUsage while a previous one is pending.
Status makeGrowId(Communicator* comm, bootstrap::UniqueId* out);

/// nlcclCommGrow. Old ranks (parent set, newRank -1) keep their ranks; the one that made the id
/// passes it (`id`), the others pass null and learn it from the parent. New ranks (parent null)
/// pass the id and their rank. Collective over all nRanks ranks.
Status grow(Communicator* parent, int nRanks, const bootstrap::UniqueId* id, int newRank,
            const CommConfig& config, std::unique_ptr<Communicator>* out);

}  // namespace nlccl::core
