// The transport registry (DESIGN.md section 5): an ordered list of data transports, each with a
// test of which pairs of ranks it can connect and a factory, plus the decorators that wrap a
// whole data path (neuronlink). connect() builds a rank's data path: every peer gets the first
// transport that can connect the pair (or the one a choice forces on every pair), so ofi serves
// peers on other hosts while shm serves this host's. Core names no concrete transport; a new one
// is an entry here.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transports/transport.hpp"
#include "util/status.hpp"

namespace nlccl::transport {

/// What a factory gets. Every rank of the group calls connect() at once, and a transport that
/// any pair uses is created on every rank (its set-up exchanges are collective).
struct Context {
  int rank = 0;
  int nranks = 1;
  std::vector<std::string> hosts;  ///< host identity of every rank (hostname + boot id, NLCCL_HOSTID)
  bool threads = false;            ///< the ranks are threads of this process (nlcclCommInitAll)
  AllGatherFn allGather;           ///< collective exchange over the group
  std::chrono::milliseconds timeout{300000};
  std::function<Status()> health;  ///< liveness of the group (the bootstrap's); may be empty
  std::string topology;            ///< fabric of a modelling decorator (config / NLCCL_TOPOLOGY)
  /// Set by connect() for each factory: the peers (not this rank) the new transport serves.
  std::vector<int> peers;
};

/// A transport that carries data.
struct Entry {
  const char* name;
  /// Can it connect ranks a and b of the group (a == b: messages to oneself)?
  bool (*canConnect)(const Context& ctx, int a, int b);
  Status (*create)(const Context& ctx, std::unique_ptr<Transport>* out);
};
/// A transport that wraps a whole data path (the data still moves through the chosen entries).
struct Decorator {
  const char* name;
  Status (*wrap)(const Context& ctx, std::unique_ptr<Transport> inner,
                 std::unique_ptr<Transport>* out);
};

/// The data transports built into this library, in order of preference.
const std::vector<Entry>& entries();
const std::vector<Decorator>& decorators();
/// "auto", then every entry and decorator: the values `choice` may take.
std::string choices();

/// Builds this rank's data path. `choice` is "auto" (every pair gets the first entry that can
/// connect it), an entry's name (that entry for every pair; InvalidArgument naming a pair it
/// cannot connect) or a decorator's name (auto, wrapped). InvalidArgument for an unknown choice;
/// InvalidUsage when no entry can connect a pair.
Status connect(const Context& ctx, const std::string& choice, std::unique_ptr<Transport>* out);

}  // namespace nlccl::transport
