// The simulated NeuronLink-v4 transport: real data moves through an inner transport (shm between
// processes, loopback between threads) and every message is delayed by the fabric model,
// including the sharing of links, DMA engines and memory among messages in flight.
//
// Each rank keeps a virtual clock. A send appends a record (sender, receiver, bytes, virtual start,
// whether the receiver reduces) to the ranks' shared timeline (timeline.hpp); every rank replays
// the log into its own fabric::FlowModel, in start-time order and only below the horizon, so every
// replica computes the same max-min rates and the same arrivals. A message arrives at
//     max(receiver's post time, the model's arrival of the data),
// and the model's arrival is the data's finish under sharing plus the route latency: on an idle
// fabric exactly latency + bytes / the route's bandwidth. In real-time mode (the default) a
// message is also not delivered before its modelled arrival in wall time.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <vector>

#include "fabric/flow_model.hpp"
#include "transports/neuronlink/link_model.hpp"
#include "transports/neuronlink/timeline.hpp"
#include "transports/time_model.hpp"
#include "transports/transport.hpp"

namespace nlccl::transport {

class NeuronLinkTransport final : public Transport, public TimeModel {
 public:
  NeuronLinkTransport(std::unique_ptr<Transport> inner, std::shared_ptr<const LinkModel> model,
                      std::unique_ptr<Timeline> timeline);
  /// Wraps `inner` (which carries the bytes) for its group: loads the fabric model of `topology`
  /// (NLCCL_TOPOLOGY's preset or file; NLCCL_NEURONLINK_* override it) and sets up the shared
  /// timeline. Collective over the group (`allGather`).
  static Status create(std::unique_ptr<Transport> inner, const std::string& topology,
                       const AllGatherFn& allGather, std::unique_ptr<Transport>* out);
  const char* peerTransport(int peer) const override { return inner_->peerTransport(peer); }
  ~NeuronLinkTransport() override;

  const char* name() const override { return "neuronlink"; }
  int rank() const override { return inner_->rank(); }
  int nranks() const override { return inner_->nranks(); }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) override;
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const Reducer* reducer,
                  Request* req) override;
  Status progress() override;
  uint32_t activityEpoch() override { return inner_->activityEpoch(); }
  const void* activityDomain() const override { return inner_->activityDomain(); }
  void waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) override;
  void abort(Status why) override;
  void wake(int rank) override { inner_->wake(rank); }

  TimeModel* timeModel() override { return this; }
  double clock() const override { return clock_; }
  void setClock(double t) override;
  double localOpTime(size_t bytes, bool reduce) const override {
    return model_->localOpTime(bytes, reduce);
  }
  double launchOverhead() const override { return model_->launchOverhead(); }

 private:
  struct Pending {
    bool isSend = false;
    int peer = 0;
    uint64_t tag = 0;
    double posted = 0;      ///< virtual post time the engine asked for
    double start = 0;       ///< virtual post time (the engine's, or later after a release)
    Request* user = nullptr;
    Request dataReq;        ///< the inner transport's
    bool matched = false;   ///< its record is known (sends: always)
    uint64_t record = 0;    ///< log index of its message
    TimelineRecord rec;     ///< the message (start and wall time of its send)
    int64_t flow = -1;      ///< FlowModel id once the replica has added the record
    bool timed = false;     ///< arrival settled
    double vdone = 0;
    int64_t deadlineNs = 0;
  };
  struct Queued {  // a record waiting for the horizon to pass its start
    TimelineRecord rec;
    uint64_t index;
    bool operator>(const Queued& o) const {
      return rec.start != o.rec.start ? rec.start > o.rec.start : index > o.index;
    }
  };
  using Key = std::pair<int, uint64_t>;  // (peer, tag): messages match in order within one

  Status activate();
  Status settle();
  void consume(uint64_t count);
  void addDue(double horizon, double jump);
  void addNext();
  double settleUntilFinish();
  void noteFinishes();
  void attachFlow(Pending& p);
  void wakeAll(const std::vector<int>& ranks);
  void complete(Pending& p, Status s);

  std::unique_ptr<Transport> inner_;
  std::shared_ptr<const LinkModel> model_;
  std::unique_ptr<Timeline> timeline_;
  fabric::FlowModel flows_;  ///< this rank's replica of the whole fabric
  /// Guards everything below: nlcclCommAbort calls abort() on another thread while the
  /// collective's thread may be in progress() or a post, iterating pending_.
  std::mutex mu_;
  std::list<Pending> pending_;
  double clock_ = 0;
  bool active_ = false;     ///< has operations in flight (the timeline knows it as not idle)
  double earliest_ = 0;     ///< no message of ours may start before it (our floor at activation)
  uint64_t consumed_ = 0;   ///< log records read into the replica
  std::priority_queue<Queued, std::vector<Queued>, std::greater<>> queued_;
  std::unordered_map<uint64_t, Pending*> byRecord_;     ///< our matched operations, by record
  std::unordered_map<uint64_t, int64_t> flowOfRecord_;  ///< our records added before matching
  std::map<Key, std::deque<std::pair<uint64_t, TimelineRecord>>> unmatchedRecords_;
  std::map<Key, std::deque<Pending*>> unmatchedRecvs_;
  std::vector<int> wakeScratch_;
  /// Every flow in the replica: its ranks, until it finishes; then each rank's latest finish.
  std::unordered_map<int64_t, std::pair<int, int>> endpoints_;
  std::vector<double> lastFinish_;
  std::vector<std::pair<int64_t, double>> finishedScratch_;
  int64_t nextDeadlineNs_ = 0;  ///< earliest wall deadline of a pending message (0: none)
  bool waitingOnClock_ = false; ///< some operation waits for the horizon, not for data
  // What the last settle() saw: with the same timeline version, inner activity and operations,
  // another would find nothing new.
  uint64_t seenVersion_ = ~uint64_t{0};
  uint32_t seenEpoch_ = 0;
  bool changed_ = true;
  int64_t lastSettleNs_ = 0;
};

}  // namespace nlccl::transport
