#include "transports/neuronlink/neuronlink.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "util/log.hpp"

namespace nlccl::transport {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
// How long a post may wait for room in the shared log (a rank outside nlccl calls for that long
// while the others send half a million messages).
constexpr std::chrono::milliseconds kAppendTimeout{30000};
// A rank waiting on the shared clock rechecks this often: an idle rank's release (after
// NLCCL_NEURONLINK_IDLE_MS) wakes nobody by itself.
constexpr std::chrono::milliseconds kClockRecheck{10};
// Real-time deadlines nearer than this are waited for by yielding, not sleeping.
constexpr std::chrono::microseconds kShortDeadline{500};

int64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
}  // namespace

NeuronLinkTransport::NeuronLinkTransport(std::unique_ptr<Transport> inner,
                                         std::shared_ptr<const LinkModel> model,
                                         std::unique_ptr<Timeline> timeline)
    : inner_(std::move(inner)),
      model_(std::move(model)),
      timeline_(std::move(timeline)),
      flows_(model_->topology(), model_->flowOptions()),
      lastFinish_(static_cast<size_t>(inner_->nranks()), -1.0) {}

NeuronLinkTransport::~NeuronLinkTransport() {
  if (!pending_.empty()) {
    abort(Status::InternalError);
    return;
  }
  wakeScratch_.clear();
  timeline_->leave(&wakeScratch_);
  wakeAll(wakeScratch_);
}

void NeuronLinkTransport::wakeAll(const std::vector<int>& ranks) {
  for (int r : ranks) inner_->wake(r);
}

Status NeuronLinkTransport::activate() {
  if (active_) return Status::Success;
  NLCHECK(timeline_->activate(&earliest_));
  active_ = true;
  return Status::Success;
}

Status NeuronLinkTransport::postSend(int peer, uint64_t tag, const void* buf, size_t bytes,
                                     Request* req) {
  std::lock_guard<std::mutex> lock(mu_);
  NLCHECK(activate());
  const int me = rank();
  Pending& p = pending_.emplace_back();
  p.isSend = true;
  p.peer = peer;
  p.tag = tag;
  p.user = req;
  const bool reduces = req->timing && req->timing->remoteReduces;
  p.posted = req->timing ? req->timing->start : clock_;
  p.start = std::max(p.posted, earliest_);
  p.rec = {p.start, bytes, tag, monotonicNs(), me, peer, reduces ? 1u : 0u, 0};
  const double bound = p.start + model_->transferTime(me, peer, bytes, reduces);
  Status s = timeline_->append(&p.rec, bound, kAppendTimeout, &p.record);
  if (s != Status::Success) {
    pending_.pop_back();
    return s;
  }
  p.start = p.rec.start;
  p.matched = true;
  byRecord_[p.record] = &p;
  changed_ = true;
  return inner_->postSend(peer, tag, buf, bytes, &p.dataReq);
}

Status NeuronLinkTransport::postRecv(int peer, uint64_t tag, void* buf, size_t bytes,
                                     const Reducer* reducer, Request* req) {
  std::lock_guard<std::mutex> lock(mu_);
  NLCHECK(activate());
  Pending& p = pending_.emplace_back();
  p.isSend = false;
  p.peer = peer;
  p.tag = tag;
  p.user = req;
  p.posted = req->timing ? req->timing->start : clock_;
  p.start = std::max(p.posted, earliest_);
  auto found = unmatchedRecords_.find({peer, tag});
  if (found == unmatchedRecords_.end()) {
    unmatchedRecvs_[{peer, tag}].push_back(&p);
  } else {
    auto& records = found->second;
    p.matched = true;
    p.record = records.front().first;
    p.rec = records.front().second;
    records.pop_front();
    if (records.empty()) unmatchedRecords_.erase(found);  // tags are not reused: keep it small
    byRecord_[p.record] = &p;
    if (auto it = flowOfRecord_.find(p.record); it != flowOfRecord_.end()) {
      p.flow = it->second;
      flowOfRecord_.erase(it);
    }
  }
  changed_ = true;
  return inner_->postRecv(peer, tag, buf, bytes, reducer, &p.dataReq);
}

// Reads new log records: each waits in start order for the horizon, and a record for this rank
// is matched to its receive (or kept until the receive is posted).
void NeuronLinkTransport::consume(uint64_t count) {
  const int me = rank();
  for (; consumed_ < count; ++consumed_) {
    const TimelineRecord& r = timeline_->record(consumed_);
    queued_.push({r, consumed_});
    if (r.dst != me) continue;
    auto found = unmatchedRecvs_.find({r.src, r.tag});
    if (found == unmatchedRecvs_.end()) {
      unmatchedRecords_[{r.src, r.tag}].emplace_back(consumed_, r);
      continue;
    }
    Pending* p = found->second.front();
    found->second.pop_front();
    if (found->second.empty()) unmatchedRecvs_.erase(found);
    p->matched = true;
    p->record = consumed_;
    p->rec = r;
    byRecord_[consumed_] = p;
  }
}

// Feeds the replica every record that starts before the horizon (or at or before the jump), in
// (start, log index) order: the same order on every rank, so every replica computes the same
// rates.
void NeuronLinkTransport::addDue(double horizon, double jump) {
  while (!queued_.empty() &&
         (queued_.top().rec.start < horizon || queued_.top().rec.start <= jump))
    addNext();
}

void NeuronLinkTransport::addNext() {
  const int me = rank();
  const Queued q = queued_.top();
  queued_.pop();
  const TimelineRecord& r = q.rec;
  if (r.start < flows_.now() * (1 - 1e-12))  // the horizon promised this cannot happen
    WARN("neuronlink: rank %d: message %llu (rank %d to %d) starts at %.6f us, before the "
         "settled time %.6f us", me, static_cast<unsigned long long>(q.index), r.src, r.dst,
         r.start * 1e6, flows_.now() * 1e6);
  const int64_t id = flows_.add(model_->chipOfRank(r.src), model_->chipOfRank(r.dst),
                                static_cast<double>(r.bytes), r.start, r.reduce != 0);
  endpoints_[id] = {r.src, r.dst};
  if (r.src != me && r.dst != me) {
    flows_.forget(id);  // shares the fabric until it finishes; nobody here waits for it
    return;
  }
  if (auto it = byRecord_.find(q.index); it != byRecord_.end()) it->second->flow = id;
  else flowOfRecord_[q.index] = id;  // a message for us whose receive is not posted yet
}

// Records each rank's latest data finish (Timeline::tryJump asks whether a blocked rank may have
// been unblocked since it said so).
void NeuronLinkTransport::noteFinishes() {
  flows_.takeFinished(&finishedScratch_);
  for (auto [id, t] : finishedScratch_) {
    auto it = endpoints_.find(id);
    if (it == endpoints_.end()) continue;
    lastFinish_[it->second.first] = std::max(lastFinish_[it->second.first], t);
    lastFinish_[it->second.second] = std::max(lastFinish_[it->second.second], t);
    endpoints_.erase(it);
  }
}

// For a jump (Timeline::tryJump): with every rank blocked, everything in the log up to the first
// data finish enters the model, in order, and that finish is the new safe time.
double NeuronLinkTransport::settleUntilFinish() {
  for (;;) {
    const double next = flows_.nextEventTime();
    if (!queued_.empty() && queued_.top().rec.start <= next) {
      addNext();
      continue;
    }
    const double finish = flows_.nextFinishTime();
    if (next < finish) {  // a start before the first finish: it may change the rates
      flows_.advanceTo(next);
      continue;
    }
    return finish;
  }
}

Status NeuronLinkTransport::progress() {
  // Read before the work: a change during it makes the next call look again.
  const uint64_t version = timeline_->version();
  const uint32_t epoch = inner_->activityEpoch();
  Status st = inner_->progress();
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.empty()) return st;
  // Also due: a real-time deadline, and now and then a look at the clock for ranks the others
  // release after their idle grace (nothing else announces that).
  const int64_t now = monotonicNs();
  const bool due = (nextDeadlineNs_ != 0 && now >= nextDeadlineNs_) ||
                   now - lastSettleNs_ >= std::chrono::nanoseconds(kClockRecheck).count();
  if (!changed_ && !due && version == seenVersion_ && epoch == seenEpoch_) return st;
  lastSettleNs_ = now;
  changed_ = false;
  seenVersion_ = version;
  seenEpoch_ = epoch;
  Status s = settle();
  return st != Status::Success ? st : s;
}

// Advances the replica to the horizon, settles and completes what it can, and publishes this
// rank's floor: the earliest completion it still waits for, below which it posts nothing.
Status NeuronLinkTransport::settle() {
  // What completes here, the engine acts on after this call returns: until then our floor must
  // stay at or below the earliest of those completions, and we are not blocked.
  double completedFloor = kInf;
  // Each round either settles something, moves the clock, or stops; the cap only bounds how long
  // one progress() call may take.
  for (int round = 0; round < 256; ++round) {
    Timeline::View v;
    wakeScratch_.clear();
    NLCHECK(timeline_->view(&v, &wakeScratch_));
    wakeAll(wakeScratch_);
    consume(v.count);
    addDue(v.horizon, v.jump);
    flows_.advanceTo(v.effective());
    noteFinishes();
    const int64_t now = model_->realtime() ? monotonicNs() : 0;
    double floor = completedFloor, need = kInf;
    bool blocked = !pending_.empty() && completedFloor == kInf;  // all wait for the clock
    nextDeadlineNs_ = 0;
    waitingOnClock_ = false;
    for (auto it = pending_.begin(); it != pending_.end();) {
      Pending& p = *it;
      double arrival = 0;
      if (!p.timed && p.flow >= 0 && flows_.arrived(p.flow, &arrival)) {
        p.timed = true;
        p.vdone = p.isSend ? arrival : std::max(p.start, arrival);
        p.deadlineNs = p.rec.wallNs + static_cast<int64_t>((arrival - p.rec.start) * 1e9);
        flows_.forget(p.flow);
      }
      const bool dataDone = p.dataReq.done.load(std::memory_order_acquire);
      if (dataDone && p.dataReq.status != Status::Success) {
        blocked = false;
        completedFloor = std::min(completedFloor, p.posted);
        complete(p, p.dataReq.status);
        it = pending_.erase(it);
        continue;
      }
      if (!p.timed) {
        if (p.matched) {
          const TimelineRecord& r = p.rec;
          const bool red = r.reduce != 0;
          double lb = p.flow >= 0 ? flows_.arrivalLowerBound(p.flow)
                                  : r.start + model_->transferTime(r.src, r.dst, r.bytes, red);
          // Its data cannot finish before lb - latency: the horizon it needs.
          need = std::min(need, lb - model_->transferTime(r.src, r.dst, 0, false));
          if (!p.isSend) lb = std::max(lb, p.start);
          // A bound computed along another path than the arrival may round a hair above it.
          floor = std::min(floor, lb - std::abs(lb) * 1e-12);
          waitingOnClock_ = true;
        }
        ++it;
        continue;
      }
      floor = std::min(floor, p.vdone);
      if (!dataDone) {
        // Settled, but the inner transport still waits for the peer (a rendezvous, or a full
        // FIFO): the peer must move first, so this does not keep us from being blocked.
        ++it;
        continue;
      }
      blocked = false;  // it completes at vdone (in real time, at its deadline)
      if (model_->realtime() && now < p.deadlineNs) {
        nextDeadlineNs_ = nextDeadlineNs_ ? std::min(nextDeadlineNs_, p.deadlineNs) : p.deadlineNs;
        ++it;
        continue;
      }
      completedFloor = std::min(completedFloor, p.vdone);
      complete(p, Status::Success);
      it = pending_.erase(it);
    }
    double horizon = 0;
    wakeScratch_.clear();
    NLCHECK(timeline_->publish(floor, need, v, blocked, consumed_, &wakeScratch_, &horizon));
    wakeAll(wakeScratch_);
    // Our own floor may have been what held the horizon: if it moved, go again (to settle, or
    // to be counted as blocked at the new horizon).
    if (horizon > v.effective()) continue;
    if (!blocked) break;
    bool jumped = false;
    NLCHECK(timeline_->tryJump(v, lastFinish_, [this] {
      const double t = settleUntilFinish();
      noteFinishes();
      return t;
    }, &jumped));
    if (!jumped) break;
    for (int r = 0; r < nranks(); ++r) inner_->wake(r);
  }
  return Status::Success;
}

void NeuronLinkTransport::complete(Pending& p, Status s) {
  if (p.matched) byRecord_.erase(p.record);
  if (!p.matched && !p.isSend) {
    if (auto it = unmatchedRecvs_.find({p.peer, p.tag}); it != unmatchedRecvs_.end()) {
      auto& q = it->second;
      q.erase(std::remove(q.begin(), q.end(), &p), q.end());
      if (q.empty()) unmatchedRecvs_.erase(it);
    }
  }
  changed_ = true;  // once the engine has acted on it, our floor and blocked state change
  p.user->status = s;
  if (p.user->timing) p.user->timing->done = s == Status::Success ? p.vdone : p.posted;
  p.user->done.store(true, std::memory_order_release);
}

void NeuronLinkTransport::setClock(double t) {
  std::lock_guard<std::mutex> lock(mu_);
  clock_ = t;
  if (!pending_.empty() || !active_) return;
  active_ = false;
  wakeScratch_.clear();
  if (timeline_->setIdle(t, consumed_, &wakeScratch_) != Status::Success) return;
  wakeAll(wakeScratch_);
}

void NeuronLinkTransport::waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) {
  if (waitingOnClock_) timeout = std::min<std::chrono::nanoseconds>(timeout, kClockRecheck);
  if (nextDeadlineNs_ != 0) {
    // A message becomes deliverable at its deadline without any inner activity: wake then.
    auto untilDeadline =
        std::chrono::nanoseconds(std::max<int64_t>(0, nextDeadlineNs_ - monotonicNs()));
    timeout = std::min(timeout, untilDeadline);
    if (timeout.count() == 0) return;
    if (timeout < kShortDeadline) {
      // A sleep this short oversleeps by a scheduler tick on a busy host: yield until then.
      while (inner_->activityEpoch() == seen && monotonicNs() < nextDeadlineNs_) sched_yield();
      return;
    }
  }
  inner_->waitActivity(seen, timeout);
}

// nlcclCommAbort calls this from another thread while the collective's thread may be in
// progress() or a post (or, seeing the inner transport fail, failing into abort too): mu_ makes
// them take turns, or one frees pending_'s nodes under the other's iterator.
void NeuronLinkTransport::abort(Status why) {
  std::lock_guard<std::mutex> lock(mu_);
  inner_->abort(why);
  for (Pending& p : pending_) complete(p, why);
  pending_.clear();
  wakeScratch_.clear();
  timeline_->leave(&wakeScratch_);
  wakeAll(wakeScratch_);
}

}  // namespace nlccl::transport
