// The communicator: one rank's view of a group of ranks, its transport, its plan cache and the
// counters that give every collective and every point-to-point message its match tag.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/selection.hpp"
#include "nlccl/topology.hpp"
#include "nlccl/tuner.hpp"
#include "plan/compiled.hpp"
#include "transports/transport.hpp"
#include "core/prepared.hpp"
#include "core/rendezvous.hpp"
#include "core/resources.hpp"
#include "core/scratch_pool.hpp"
#include "util/status.hpp"

namespace nlccl::core {

struct CommConfig {
  std::chrono::milliseconds timeout{300000};
  std::string transport = "auto";
  std::string topology;
  std::string algorithm;  ///< e.g. "allreduce:tree,alltoall:hier"; empty: defaults / NLCCL_ALGO
  std::string name;
  size_t sliceBytes = 1 << 20;
  size_t streamStoreBytes = 0;  ///< NLCCL_STREAM_STORE_BYTES (0: never)
  bool check = false;  ///< NLCCL_CHECK: compare every collective's arguments across ranks
};

/// Fills defaults from the environment (NLCCL_TIMEOUT_MS, NLCCL_ALGO, ...).
CommConfig defaultConfig();

/// A collective as nlcclGroupSimulateEnd predicts it: what the call would run.
struct PredictCall {
  Collective collective = Collective::AllReduce;
  size_t bytes = 0;  ///< nccl-tests' S
  int root = 0;
  DataType dtype = DataType::Float32;
  tuner::Candidate candidate;  ///< algorithm, hier's level algorithms, slice
  std::vector<int> groups;     ///< hier's levels
};

/// What the last collective did on this rank (nlcclCommGetStats).
struct CommStats {
  double lastModelledS = 0;   ///< modelled duration on this rank (neuronlink transport; else 0)
  double clockS = 0;          ///< this rank's virtual clock after it
  uint64_t lastBytesSent = 0;
  uint64_t collectives = 0;
  std::string lastAlgorithm;
};

class Communicator {
 public:
  Communicator(int rank, int nranks, std::unique_ptr<transport::Transport> transport,
               std::shared_ptr<Rendezvous> rendezvous, CommConfig config);
  virtual ~Communicator();

  static constexpr uint64_t kMagic = 0x6e6c63636c436f6dull;  // "nlcclCom"
  /// False once destroyed: the API layer rejects stale handles instead of crashing on them.
  bool valid() const { return magic_ == kMagic; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const CommConfig& config() const { return config_; }
  transport::Transport* transport() const { return transport_.get(); }
  /// Whether an empty collective ends as soon as it is checked: not under NLCCL_CHECK (its
  /// cross-rank check must see every call) nor on a modelled transport (its clock charges the
  /// launch). Fixed at construction, as both are.
  bool emptyCallsEnd() const { return emptyCallsEnd_; }
  /// Scratch memory for one collective, reused across calls (see scratch_pool.hpp).
  std::shared_ptr<char> leaseScratch(size_t bytes) { return scratchPool_->lease(bytes); }
  Rendezvous* rendezvous() const { return rendezvous_.get(); }
  /// This rank's index among the communicator's ranks on its host (nlcclCommCuDevice).
  int localRank() const { return localRank_; }
  void setLocalRank(int r) { localRank_ = r; }
  /// Registered buffers and windows, custom operators.
  Resources& resources() { return resources_; }
  /// Bytes of scratch kept for reuse (nlcclCommMemStats); trimScratch frees them.
  size_t scratchBytes() const { return scratchPool_->idleBytes() + prepared_.keptBytes(); }
  void trimScratch() {
    scratchPool_->trim();
    prepared_.trimScratch();
  }
  /// The collectives this communicator has prepared (prepared.hpp).
  PreparedTable& prepared() { return prepared_; }
  /// nlcclCommSuspend / Resume: calls on a suspended communicator are refused.
  bool suspended() const { return suspended_.load(); }
  void setSuspended(bool s) { suspended_.store(s); }
  /// Shrinks and grows made from this communicator so far (the same on every rank that calls
  /// them, since they are collective): keys their meeting points.
  uint64_t nextReshape() { return reshapes_++; }
  /// The id nlcclCommGetUniqueId made for a grow, until nlcclCommGrow consumes it.
  std::vector<char>& pendingGrowId() { return growId_; }

  /// Applies an algorithm choice string; InvalidArgument (with a message) when a name does not
  /// apply. Called at init with the config / NLCCL_ALGO.
  Status setAlgorithms(const std::string& spec);
  std::string algorithmFor(Collective c) const;

  /// The tuner's choice for a collective of S = `bytes` (nccl-tests' total size), memoised per
  /// (collective, root, in place, size class: bytes rounded down to a power of two). Every rank
  /// computes the same choice: the fabric and the model are the same on every rank. An
  /// all-reduce's in place is part of the question (rd in place stages through scratch: a copy
  /// more), so the ranks of one all-reduce must agree on it (README, "Using the API").
  Status tune(Collective c, size_t bytes, int root, DataType dtype, bool inPlace,
              tuner::Choice* out);
  /// The simulator's analytical time of `call` on this communicator's fabric.
  Status predict(const PredictCall& call, double* seconds);
  /// The fabric the tuner models this communicator on (built at the first tune): the modelled
  /// fabric over the neuronlink transport, else the host fabric (tuner/host_fabric.hpp).
  Status tunerFabric(const fabric::Topology** out);

  /// The compiled Plan for `req` with algorithm `algo`, built and compiled once and cached.
  Status getPlan(const plan::Request& req, const std::string& algo,
                 std::shared_ptr<const plan::CompiledPlan>* out);

  /// Default group sizes of `hier` (innermost first): {ranks per host, hosts} when ranks are
  /// laid out host by host in equal numbers; empty (one level) otherwise.
  const std::vector<int>& hostGroups() const { return hostGroups_; }
  void setHostGroups(std::vector<int> g) { hostGroups_ = std::move(g); }

  /// The next collective's number (the same on every rank: calls on a communicator are issued
  /// in one order, by one thread at a time, as NCCL requires). A plain load and store, not a
  /// locked read-modify-write: concurrent callers would already disagree across ranks.
  uint64_t nextCollSeq() {
    const uint64_t s = collSeq_.load(std::memory_order_relaxed);
    collSeq_.store(s + 1, std::memory_order_relaxed);
    return s;
  }
  uint64_t nextSendTag(int peer);
  uint64_t nextRecvTag(int peer);

  /// Records a finished collective job of this rank (its algorithm, virtual times and bytes).
  /// `algorithm` must have static storage (a registry name). Lock-free: the fields are
  /// separate atomics, read as a snapshot by stats().
  void recordCollective(const char* algorithm, double vstart, double vend, uint64_t bytes);
  CommStats stats() const;
  /// The transport's modelled clock in seconds (0 when it does not model time).
  double modelledClock() const;

  void setLastError(const std::string& msg);
  std::string lastError() const;
  Status asyncError() const { return static_cast<Status>(asyncError_.load()); }
  void setAsyncError(Status s);
  /// Fails all pending work on this communicator's transport.
  void abort();
  /// Alive until this communicator is aborted or destroyed (a stream's fatal error stays while
  /// one of its communicators does).
  std::shared_ptr<const std::atomic<bool>> life() const { return alive_; }

  /// Work (queued or running) that uses this communicator; destroy and abort wait for it, so no
  /// stream thread is left holding a freed communicator. removePending must be the caller's last
  /// touch of the communicator; waitIdle polls the count (it is for teardown, not the hot path).
  void addPending();
  void removePending();
  void waitIdle();
  bool aborted() const { return aborted_.load(); }

 private:
  /// Whether tune() asks the model in place (its staging copies count).
  bool stagingCounts(Collective c, bool inPlace) const;
  /// tune()'s choice for 2 ranks over shm: rd when the model puts it near the best.
  void preferOneExchange(Collective c, size_t bytes, tuner::Choice* choice);

  uint64_t magic_ = kMagic;
  int rank_;
  int nranks_;
  std::unique_ptr<transport::Transport> transport_;
  std::shared_ptr<Rendezvous> rendezvous_;
  CommConfig config_;
  bool emptyCallsEnd_ = false;

  algo::Selection selection_;
  std::vector<int> hostGroups_;
  /// Plans by (collective, algorithm, shape): a plain key, since a lookup sits on every call.
  struct PlanKey {
    Collective collective;
    std::string algorithm;
    int nranks, root;
    size_t count;
    bool inPlace;
    std::vector<int> groups;
    std::vector<std::string> levels;
    friend bool operator<(const PlanKey& a, const PlanKey& b) {
      return std::tie(a.collective, a.count, a.root, a.inPlace, a.nranks, a.algorithm, a.groups,
                      a.levels) < std::tie(b.collective, b.count, b.root, b.inPlace, b.nranks,
                                           b.algorithm, b.groups, b.levels);
    }
  };
  std::mutex tuneMu_;
  std::unique_ptr<fabric::Topology> fabric_;
  std::map<std::tuple<Collective, int, bool, int>, tuner::Choice> tuned_;
  std::mutex planMu_;
  std::map<PlanKey, std::shared_ptr<const plan::CompiledPlan>> plans_;
  std::shared_ptr<ScratchPool> scratchPool_ = std::make_shared<ScratchPool>();

  int localRank_ = 0;
  Resources resources_;
  std::atomic<bool> suspended_{false};
  uint64_t reshapes_ = 0;
  std::vector<char> growId_;

  std::atomic<uint64_t> collSeq_{0};
  std::mutex p2pMu_;
  std::vector<uint64_t> sendCount_, recvCount_;

  std::atomic<int> pendingWork_{0};  ///< calls inside the API and items queued on streams

  std::atomic<double> lastModelledS_{0}, clockS_{0};
  std::atomic<uint64_t> lastBytesSent_{0}, collectives_{0};
  std::atomic<const char*> lastAlgorithm_{""};
  PreparedTable prepared_;

  mutable std::mutex errMu_;
  std::string lastError_;
  std::atomic<int> asyncError_{0};
  std::atomic<bool> aborted_{false};
  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);
};

}  // namespace nlccl::core
