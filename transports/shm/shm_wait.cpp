// ShmTransport's waits and held runs (see shm.hpp): the activity epoch a wait watches, the wait
// itself, and the single-driver mode in which one thread takes the lock for a whole engine run
// and the LL Dekker checks' fences are put off until it yields or releases.
#include <sched.h>

#include <algorithm>

#include "transports/shm/shm.hpp"
#include "util/futex.hpp"

namespace nlccl::transport {

// The doorbell's count plus one per peer whose LL FIFO holds a record drain has not looked at:
// LL records ring nothing, so a record arriving changes the epoch this way. Only drain (in
// progress) takes that term down again, so during a wait the epoch only grows.
uint32_t ShmTransport::activityEpoch() {
  return own_.header()->epoch.load(std::memory_order_acquire) + llNews();
}

void ShmTransport::hold() {
  mu_.lock();
  held_ = true;
  holder_.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

void ShmTransport::release() {
  flushDeferred();
  held_ = false;
  holder_.store(std::thread::id{}, std::memory_order_relaxed);
  mu_.unlock();
}

void ShmTransport::wakeLL(Peer& p) {
  // A peer already asleep is rung now (a plain look at `sleepers`, no fence): it waits for this
  // record, and putting its wake-up off to our first yield cost microseconds whenever a rank
  // slept. Only the race with a peer going to sleep this moment needs the fenced look.
  if (held_ && p.seg.header()->sleepers.load(std::memory_order_relaxed) == 0) {
    p.wakeDue = deferred_ = true;
    return;
  }
  p.seg.wakeIfSleeping();
}

void ShmTransport::freedLL(int src) {
  Peer& p = peers_[static_cast<size_t>(src)];
  if (held_) {
    p.freedDue = deferred_ = true;
    return;
  }
  // Pairs with the sender's llSenderWaits store before its second look at llTail (Dekker).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  shm::RingControl* rc = own_.ring(src);
  if (rc->llSenderWaits.load(std::memory_order_relaxed) != 0) {
    rc->llSenderWaits.store(0, std::memory_order_relaxed);
    p.seg.ringDoorbell();
  }
}

void ShmTransport::flushDeferred() {
  if (!deferred_) return;
  deferred_ = false;
  // One fence for all: orders our LL stores before the looks at the peers' `sleepers`
  // (Segment::wakeIfSleeping), and our llTail stores before the looks at llSenderWaits.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int src : served_) {
    Peer& p = peers_[static_cast<size_t>(src)];
    if (p.wakeDue) {
      p.wakeDue = false;
      if (p.seg.header()->sleepers.load(std::memory_order_relaxed) > 0) p.seg.ringDoorbell();
    }
    if (p.freedDue) {
      p.freedDue = false;
      shm::RingControl* rc = own_.ring(src);
      if (rc->llSenderWaits.load(std::memory_order_relaxed) != 0) {
        rc->llSenderWaits.store(0, std::memory_order_relaxed);
        p.seg.ringDoorbell();
      }
    }
  }
}

void ShmTransport::waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) {
  // A holder keeps the lock through the first spins (most waits end in them) and gives it up,
  // its put-off checks done, before it yields: then other threads (abort, another run) get in.
  struct Unhold {
    ShmTransport& t;
    bool was = false;
    void now() {
      if (!t.heldHere()) return;
      t.release();
      was = true;
    }
    ~Unhold() {
      if (was) t.hold();
    }
  } unhold{*this};
  shm::SegmentHeader* h = own_.header();
  std::chrono::steady_clock::time_point spinEnd{};  // read at the first yield: most waits end sooner
  for (uint32_t i = 1;; ++i) {  // spin, yielding every yieldEvery_ checks (util/futex.hpp)
    if (activityEpoch() != seen) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & (yieldEvery_ - 1)) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (i == yieldEvery_) {
        unhold.now();
        spinEnd = now + std::min<std::chrono::nanoseconds>(timeout, kSpinBeforeBlock);
      } else if (now >= spinEnd) {
        break;
      }
      sched_yield();
    }
  }
  checkSoon_.store(true, std::memory_order_relaxed);  // the next progress() checks the peers
  // Bounded so that the caller's progress() keeps checking the peers' liveness.
  timeout = std::min<std::chrono::nanoseconds>(timeout, shm::kCheckInterval);
  h->sleepers.fetch_add(1);  // seq_cst: pairs with ringDoorbell and wakeIfSleeping
  const uint32_t e = h->epoch.load();
  if (e + llNews() == seen) futexWait(&h->epoch, e, timeout, true);
  h->sleepers.fetch_sub(1);
}

}  // namespace nlccl::transport
