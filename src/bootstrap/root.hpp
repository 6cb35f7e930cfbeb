// The bootstrap root server: a listener and one thread (started by createUniqueId, like NCCL's
// bootstrap root) that authenticates ranks, runs all-gather / broadcast rounds as a star, and tells
// every rank when another one's connection drops.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/unique_id.hpp"
#include "util/status.hpp"

namespace nlccl::bootstrap {

/// Opens the root listener (127.0.0.1, NLCCL_SOCKET_IFNAME or NLCCL_BOOTSTRAP_ADDR; port 0 =
/// ephemeral), starts the root server on a background thread of this process and writes its
/// address and a fresh random secret into *id. The root thread exits, closing its listener, once
/// every rank that joined has disconnected.
Status createUniqueId(UniqueId* id);

/// What a root started in this process has seen (diagnostics and tests).
struct RootStats {
  bool running = false;  ///< the root thread still serves
  int joined = 0;        ///< ranks that completed their hello
  int live = 0;          ///< authenticated connections still open
  int acceptFailures = 0;  ///< accept() calls that failed (out of descriptors, ...)
  int dropped = 0;         ///< connections accepted and closed at once for want of descriptors
  std::vector<std::string> refusals;  ///< one line per refused connection or message
};

/// Fills *out for the root behind `id`; false if no such root was started in this process.
bool rootStats(const UniqueId& id, RootStats* out);

/// Stops every root of this process and joins its thread (also registered with atexit).
void shutdownAllRoots();

}  // namespace nlccl::bootstrap
