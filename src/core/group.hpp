// nlcclGroupStart/End: calls made inside a group (by this thread, on any communicators) are
// collected and issued together at the outermost GroupEnd, so grouped sends and receives never
// deadlock whatever their order, and one thread can drive several ranks.
#pragma once

#include <memory>

#include "core/stream.hpp"
#include "core/work.hpp"

namespace nlccl::core {

void groupStart();
/// Closes one level; at depth 0 runs (NULL stream) or enqueues (per stream) the collected work.
Status groupEnd();
int groupDepth();
/// nlcclGroupSimulateEnd: closes one level; at depth 0 drops the collected work and sets
/// *seconds to its predicted time (per communicator the sum of its collectives; the largest).
Status groupSimulateEnd(double* seconds);

/// Runs `work` now (stream == nullptr), queues it on `stream`, or adds it to the open group.
Status submit(std::shared_ptr<Work> work, Stream* stream);

}  // namespace nlccl::core
