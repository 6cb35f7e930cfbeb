#include "transports/neuronlink/timeline.hpp"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <string>
#include <thread>

#include "fabric/flow_model.hpp"
#include "util/log.hpp"
#include "util/params.hpp"
#include "util/process.hpp"

namespace nlccl::transport {

namespace {
constexpr uint64_t kMagic = 0x314c5463636c6e6eull;  // "nnlccTL1"
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kLine = 64;
constexpr uint64_t kDefaultCapacity = uint64_t{1} << 19;  // 24 MiB of records, touched lazily
// idleSinceNs of a rank that has not posted yet: its grace starts when the first rank does.
constexpr int64_t kNotStarted = -1;
constexpr int64_t kStartupGraceFactor = 20;
constexpr int64_t kLivenessPeriodNs = 50'000'000;

int64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
size_t roundUp(size_t v) { return (v + kLine - 1) / kLine * kLine; }
}  // namespace

struct Timeline::Header {
  uint64_t magic;
  uint32_t nranks;
  uint32_t broken;  ///< a rank died holding the mutex: the clock can no longer be trusted
  uint64_t capacity;
  int64_t idleGraceNs;
  pthread_mutex_t mu;
  double maxHorizon;  ///< largest horizon any rank has viewed
  uint64_t count;     ///< records appended
  double jump;        ///< every record starting at or before it is in the log (see tryJump)
  uint64_t version;   ///< bumped when the clock moves or the log grows (read without the lock)
};

struct alignas(kLine) Timeline::RankState {
  double floor;        ///< no record this rank appends from now on starts earlier
  double needHorizon;  ///< its operations cannot settle before the horizon reaches this
  int64_t idleSinceNs; ///< wall time it went idle; 0 while it has operations in flight
  uint64_t consumed;   ///< records its replica has read
  uint32_t incoming;   ///< records appended for it
  double incomingBound;  ///< smallest arrival bound of those appended since it last published
  uint8_t released;    ///< idle past the grace: does not hold the horizon
  uint8_t gone;        ///< aborted or destroyed
  uint8_t started;     ///< has posted at least once
  double blockedAt;    ///< it could not post before a completion, as of this horizon; -1: not
  int32_t pid;         ///< its process, and that process's start time (a dead rank is gone)
  uint64_t pidStart;
};

size_t Timeline::bytesFor(int nranks, uint64_t capacity) {
  return roundUp(sizeof(Header)) + static_cast<size_t>(nranks) * sizeof(RankState) +
         capacity * sizeof(TimelineRecord);
}

Status Timeline::format(void* mem, size_t bytes, int nranks, uint64_t capacity,
                        std::chrono::milliseconds idleGrace) {
  if (nranks < 1 || capacity < 1 || bytes < bytesFor(nranks, capacity))
    return Status::InternalError;
  auto* h = new (mem) Header();
  h->nranks = static_cast<uint32_t>(nranks);
  h->capacity = capacity;
  h->idleGraceNs = static_cast<int64_t>(idleGrace.count()) * 1000000;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  int rc = pthread_mutex_init(&h->mu, &attr);
  pthread_mutexattr_destroy(&attr);
  if (rc != 0) {
    WARN("neuronlink: cannot initialise the timeline mutex: %s", strerror(rc));
    return Status::SystemError;
  }
  auto* ranks = reinterpret_cast<RankState*>(static_cast<char*>(mem) + roundUp(sizeof(Header)));
  for (int r = 0; r < nranks; ++r) {
    RankState* s = new (&ranks[r]) RankState();
    s->idleSinceNs = kNotStarted;
    s->blockedAt = -1;
    s->incomingBound = kInf;
  }
  __atomic_store_n(&h->magic, kMagic, __ATOMIC_RELEASE);
  return Status::Success;
}

Status Timeline::attach(std::shared_ptr<void> keepAlive, void* mem, size_t bytes, int nranks,
                        int rank, std::unique_ptr<Timeline>* out) {
  auto* h = static_cast<Header*>(mem);
  if (bytes < sizeof(Header) || __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != kMagic ||
      h->nranks != static_cast<uint32_t>(nranks) || bytes < bytesFor(nranks, h->capacity) ||
      rank < 0 || rank >= nranks) {
    WARN("neuronlink: rank %d: the shared timeline does not match %d ranks", rank, nranks);
    return Status::InternalError;
  }
  std::unique_ptr<Timeline> t(new Timeline());
  t->keepAlive_ = std::move(keepAlive);
  t->h_ = h;
  t->ranks_ = reinterpret_cast<RankState*>(static_cast<char*>(mem) + roundUp(sizeof(Header)));
  t->log_ = reinterpret_cast<TimelineRecord*>(reinterpret_cast<char*>(t->ranks_) +
                                              static_cast<size_t>(nranks) * sizeof(RankState));
  t->nranks_ = nranks;
  t->rank_ = rank;
  char state = 0;
  uint64_t start = 0;
  readProcStat(getpid(), &state, &start);
  NLCHECK(t->lock());
  t->ranks_[rank].pid = static_cast<int32_t>(getpid());
  t->ranks_[rank].pidStart = start;
  t->unlock();
  *out = std::move(t);
  return Status::Success;
}

Timeline::~Timeline() = default;

Timeline::RankState& Timeline::state(int r) const { return ranks_[r]; }

Status Timeline::lock() {
  int rc = pthread_mutex_lock(&h_->mu);
  if (rc == EOWNERDEAD) {
    pthread_mutex_consistent(&h_->mu);
    h_->broken = 1;
    WARN("neuronlink: rank %d: a rank died while updating the shared clock", rank_);
  } else if (rc != 0) {
    WARN("neuronlink: rank %d: cannot lock the shared clock: %s", rank_, strerror(rc));
    return Status::SystemError;
  }
  if (h_->broken) {
    pthread_mutex_unlock(&h_->mu);
    return Status::RemoteError;
  }
  return Status::Success;
}

void Timeline::unlock() { pthread_mutex_unlock(&h_->mu); }

double Timeline::minFloor() const {
  double m = kInf;
  for (int r = 0; r < nranks_; ++r) {
    const RankState& s = ranks_[r];
    if (!s.released && !s.gone) m = std::min(m, s.floor);
  }
  return std::isinf(m) ? h_->maxHorizon : std::max(m, h_->maxHorizon);
}

void Timeline::bump() { __atomic_add_fetch(&h_->version, 1, __ATOMIC_RELEASE); }

uint64_t Timeline::version() const { return __atomic_load_n(&h_->version, __ATOMIC_ACQUIRE); }

void Timeline::raise(double before, std::vector<int>* wake) {
  const double after = minFloor();
  if (!(after > before)) return;
  bump();
  for (int r = 0; r < nranks_; ++r) {
    const RankState& s = ranks_[r];
    // Wake who can now settle something.
    if (r != rank_ && !s.gone && s.needHorizon > before && s.needHorizon <= after)
      wake->push_back(r);
  }
}

Status Timeline::view(View* out, std::vector<int>* wake) {
  NLCHECK(lock());
  const double before = minFloor();
  const int64_t now = monotonicNs();
  if (now - lastLivenessNs_ > kLivenessPeriodNs) {
    // A rank whose process died no longer holds the clock; if others need its data, their
    // transport reports it.
    lastLivenessNs_ = now;
    for (int r = 0; r < nranks_; ++r) {
      RankState& s = ranks_[r];
      if (s.gone || s.pid == 0 || s.pid == getpid() || !processDead(s.pid, s.pidStart)) continue;
      s.gone = 1;
      WARN("neuronlink: rank %d (process %d) has died", r, static_cast<int>(s.pid));
    }
  }
  // While a rank is out, the program is most likely at a point where ranks wait for each other
  // outside nlccl (a barrier, the end): ranks that go idle then are released at once, instead of
  // each holding the next one back for another grace.
  bool anyReleased = false;
  for (int r = 0; r < nranks_; ++r)
    anyReleased = anyReleased || (ranks_[r].released && !ranks_[r].gone);
  for (int r = 0; r < nranks_; ++r) {
    RankState& s = ranks_[r];
    if (s.idleSinceNs == kNotStarted) s.idleSinceNs = now;  // the job has started: count from here
    // Starting up (allocating and filling buffers) takes longer than the gap between calls.
    const int64_t grace = !s.started ? kStartupGraceFactor * h_->idleGraceNs
                          : anyReleased ? 0 : h_->idleGraceNs;
    if (!s.released && !s.gone && s.idleSinceNs != 0 && now - s.idleSinceNs > grace) {
      s.released = 1;
      INFO(log::kNet, "neuronlink: rank %d has been idle for over %lld ms: released at virtual "
           "time %.3f us", r, static_cast<long long>(grace / 1000000), s.floor * 1e6);
    }
  }
  raise(before, wake);  // releases may have moved the clock
  h_->maxHorizon = minFloor();
  out->horizon = h_->maxHorizon;
  out->count = h_->count;
  out->incoming = ranks_[rank_].incoming;
  out->jump = h_->jump;
  unlock();
  return Status::Success;
}

const TimelineRecord& Timeline::record(uint64_t i) const { return log_[i % h_->capacity]; }

Status Timeline::activate(double* earliest) {
  NLCHECK(lock());
  RankState& s = ranks_[rank_];
  if (s.released) {
    s.floor = std::max(s.floor, h_->maxHorizon);
    s.released = 0;
  }
  s.idleSinceNs = 0;
  s.started = 1;
  s.blockedAt = -1;
  *earliest = s.floor;
  unlock();
  return Status::Success;
}

Status Timeline::append(TimelineRecord* rec, double arrivalBound,
                        std::chrono::milliseconds timeout, uint64_t* index) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    NLCHECK(lock());
    uint64_t oldest = h_->count;
    int slowest = -1;
    for (int r = 0; r < nranks_; ++r)
      if (!ranks_[r].gone && ranks_[r].consumed < oldest) {
        oldest = ranks_[r].consumed;
        slowest = r;
      }
    if (h_->count - oldest < h_->capacity) break;
    unlock();
    if (std::chrono::steady_clock::now() >= deadline) {
      WARN("neuronlink: rank %d: the shared log of %llu messages is full and rank %d has not read "
           "it for %lld ms (a rank must stay in nlccl calls while others move data)",
           rank_, static_cast<unsigned long long>(h_->capacity), slowest,
           static_cast<long long>(timeout.count()));
      return Status::Timeout;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  // A sender the inner transport held back (waiting for its receiver to post, or for room in a
  // FIFO) may come back after the clock jumped past its own time: its message starts at the
  // clock, the same for every replica.
  if (rec->start < h_->maxHorizon) {
    arrivalBound += h_->maxHorizon - rec->start;
    rec->start = h_->maxHorizon;
  }
  *index = h_->count;
  log_[h_->count % h_->capacity] = *rec;
  ++h_->count;
  bump();
  RankState& d = ranks_[rec->dst];
  ++d.incoming;
  // Until the receiver has read the record, its floor covers the receive it may already wait in.
  const double bound = std::max(arrivalBound, h_->maxHorizon);
  d.floor = std::min(d.floor, bound);
  d.incomingBound = std::min(d.incomingBound, bound);
  unlock();
  return Status::Success;
}

Status Timeline::publish(double floor, double needHorizon, const View& seen, bool blocked,
                         uint64_t consumed, std::vector<int>* wake, double* horizon) {
  NLCHECK(lock());
  const double before = minFloor();
  RankState& s = ranks_[rank_];
  const uint32_t incoming = seen.incoming;
  s.blockedAt = blocked && s.incoming == incoming ? seen.effective() : -1;
  // Records appended for us since our view are not in `floor`: their bounds still count.
  s.floor = s.incoming == incoming ? floor : std::min(floor, s.incomingBound);
  s.incomingBound = kInf;
  s.floor = std::max(s.floor, h_->maxHorizon);
  s.needHorizon = needHorizon;
  s.consumed = consumed;
  raise(before, wake);
  *horizon = minFloor();
  unlock();
  return Status::Success;
}

Status Timeline::setIdle(double clock, uint64_t consumed, std::vector<int>* wake) {
  NLCHECK(lock());
  const double before = minFloor();
  RankState& s = ranks_[rank_];
  s.floor = std::max(clock, h_->maxHorizon);
  s.needHorizon = kInf;
  s.blockedAt = -1;
  s.consumed = consumed;
  s.idleSinceNs = monotonicNs();
  raise(before, wake);
  unlock();
  return Status::Success;
}

Status Timeline::tryJump(const View& seen, const std::vector<double>& lastFinish,
                         const std::function<double()>& settleUntilFinish, bool* jumped) {
  *jumped = false;
  NLCHECK(lock());
  // Each rank judged itself blocked at some horizon, and none of its messages has finished since
  // (up to now, which our replica has reached): then it is still blocked.
  const double now = std::max(minFloor(), h_->jump);
  bool all = h_->count == seen.count && seen.effective() == now;
  bool anyone = false;
  for (int r = 0; r < nranks_ && all; ++r) {
    const RankState& s = ranks_[r];
    if (s.released || s.gone) continue;
    anyone = true;
    // A finish a hair past the horizon it judged at was already in its replica then
    // (FlowModel::advanceTo takes it as at the horizon): without the same slack every rank
    // waits for a jump that never comes.
    all = s.blockedAt >= 0 && lastFinish[r] <= fabric::settledBy(s.blockedAt);
    if (!all)
      TRACE(log::kNet, "neuronlink: rank %d: no jump at %.6f us: rank %d judged at %.6f us, its "
            "last finish %.6f us (floor %.6f us, idle %d)", rank_, now * 1e6, r,
            s.blockedAt * 1e6, lastFinish[r] * 1e6, s.floor * 1e6, s.idleSinceNs != 0);
  }
  if (h_->count != seen.count || seen.effective() != now)
    TRACE(log::kNet, "neuronlink: rank %d: no jump: log %llu/%llu, horizon %.6f/%.6f us", rank_,
          static_cast<unsigned long long>(seen.count), static_cast<unsigned long long>(h_->count),
          seen.effective() * 1e6, now * 1e6);
  if (all && anyone) {
    // Every rank waits for a completion and the log holds every message there will be until
    // one happens: the first finish is safe to reach, whatever the floors say.
    const double j = settleUntilFinish();
    if (std::isfinite(j) && j > h_->jump) {
      h_->jump = j;
      bump();
      h_->maxHorizon = std::max(h_->maxHorizon, j);
      for (int r = 0; r < nranks_; ++r) ranks_[r].blockedAt = -1;
      *jumped = true;
    }
  }
  unlock();
  return Status::Success;
}

void Timeline::leave(std::vector<int>* wake) {
  if (lock() != Status::Success) return;
  const double before = minFloor();
  ranks_[rank_].gone = 1;
  ranks_[rank_].needHorizon = kInf;
  raise(before, wake);
  unlock();
}

uint64_t timelineCapacity() { return kDefaultCapacity; }

Status timelineIdleGrace(std::chrono::milliseconds* out) {
  const Param<int64_t> ms = paramNeuronlinkIdleMs();
  if (!ms.ok || ms.value < 0) {
    WARN("NLCCL_NEURONLINK_IDLE_MS=%s is not a non-negative whole number of milliseconds",
         paramNeuronlinkIdleMsText());
    return Status::InvalidArgument;
  }
  *out = std::chrono::milliseconds(ms.value);
  return Status::Success;
}

}  // namespace nlccl::transport
