// A unit of queued work: the engine jobs of one call, or of one group of calls, with the scratch
// memory they need. Runs inline (NULL stream) or on a stream's thread.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/check.hpp"
#include "core/comm.hpp"
#include "engine/engine.hpp"

namespace nlccl::core {

struct Work {
  std::vector<engine::CollJob> colls;
  std::vector<engine::P2PJob> p2ps;
  std::vector<std::function<void()>> localCopies;  ///< run before the engine (own blocks)
  /// Jobs whose results the main jobs depend on (the counts of a hierarchical all-to-all-v): run
  /// together first, then each `prepare` turns their results into main jobs.
  std::vector<engine::CollJob> preColls;
  std::vector<std::function<Status(Work&)>> prepare;
  std::vector<std::function<void()>> finish;  ///< after the main jobs (unpacking)
  std::vector<std::shared_ptr<char>> scratch;  ///< leased from the communicators' pools
  std::vector<Communicator*> comms;  ///< every communicator involved (for error reporting)
  std::vector<Communicator*> collComms;  ///< communicator of colls[i]
  std::vector<CallCheck> checks;  ///< the calls to compare across ranks (NLCCL_CHECK)
  /// Scratch bytes colls[i] needs, leased from its communicator when the work starts (not when
  /// it is queued: a stream may hold many queued calls, and only the running ones need memory).
  std::vector<size_t> collScratch;
  /// The collectives as nlcclGroupSimulateEnd predicts them (one per colls entry built by a
  /// collective call).
  std::vector<PredictCall> predictions;
  std::vector<Communicator*> pendingOn;  ///< one entry per addComm (released by the destructor)

  Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work();

  /// Names a communicator this work uses; it stays pending on it until the Work is destroyed.
  void addComm(Communicator* c);
  /// Appends `other`'s jobs (a group merges the calls it collected).
  void merge(Work&& other);
  /// Runs everything; on failure records the error on the communicators (the engine has aborted
  /// their transports, so no rank waits for this one).
  Status execute();
};

}  // namespace nlccl::core
