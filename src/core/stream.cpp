#include "core/stream.hpp"

#include <sched.h>

namespace nlccl::core {

namespace {

/// `counter` += n for a counter only written under mu_ (and read without it): a plain store,
/// not a locked read-modify-write.
void bump(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_release);
}

/// Spins up to `limit` until `ready()` holds (cheap checks on atomics, yielding now and then: on
/// a loaded machine the thread we wait for needs the core), so that back-to-back calls do not
/// each pay a futex sleep and wake-up; the caller then blocks as usual.
template <typename F>
bool spinFor(F ready, std::chrono::microseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63) == 63) {
      if (std::chrono::steady_clock::now() > end) return false;
      sched_yield();
    }
  }
}

constexpr auto kSpin = std::chrono::microseconds(20);

}  // namespace

Stream::Stream() : queue_(kMaxQueued), thread_([this] { loop(); }) {}

Stream::~Stream() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    drain(lock);  // whatever is still queued runs here (or finishes on the thread) first
    stop_ = true;
  }
  workCv_.notify_all();
  thread_.join();
}

template <typename Done>
void Stream::runUntil(std::unique_lock<std::mutex>& lock, Done done) {
  ++syncers_;  // from here the thread starts no new item: this caller runs them
  while (!done()) {
    if (!queue_.empty() && !running_) {  // nobody has started them: run them here
      runBatch(lock, true);
      continue;
    }
    // The thread is running the item it took before we came: wait for that one to finish.
    lock.unlock();
    const uint64_t seen = finished_.load(std::memory_order_acquire);
    spinFor([&] { return finished_.load(std::memory_order_acquire) != seen; }, kSpin);
    lock.lock();
    idleCv_.wait(lock, [this] { return !running_; });
  }
  --syncers_;
}

void Stream::drain(std::unique_lock<std::mutex>& lock) {
  // Work still pending when the caller comes: the thread's wake-ups for it bought nothing.
  if (idle()) {
    syncRuns_ = 0;
  } else {
    ++syncRuns_;
    // Already lazy (a timing loop's usual case), no clock read.
    if (!lazy_ && (syncRuns_ >= kLazyAfter ||
                   std::chrono::steady_clock::now() - busySince_ < kQuickSync)) {
      lazy_ = true;
      // A thread asleep until woken moves to napping now, not at the next enqueue's wake-up
      // (which would hand it that enqueue's work, before its synchronize comes).
      if (threadWaits_ && !threadNaps_) workCv_.notify_one();
    }
  }
  runUntil(lock, [this] { return idle(); });
}

void Stream::makeRoom(std::unique_lock<std::mutex>& lock) {
  runUntil(lock, [this] { return queue_.size() < kMaxQueued; });
}

void Stream::enqueue(const StreamItem& item) {
  bool wake;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) makeRoom(lock);
    if (!lazy_ && idle()) busySince_ = std::chrono::steady_clock::now();
    queue_.push_back(item);
    bump(submitted_, 1);
    wake = threadWaits_ && !running_ && syncers_ == 0 && !(lazy_ && threadNaps_);
  }
  if (wake) wakeThread();
}

void Stream::wakeThread() {
  wakeups_.fetch_add(1, std::memory_order_relaxed);
  workCv_.notify_one();
}

void Stream::runBatch(std::unique_lock<std::mutex>& lock, bool bySyncer) {
  // Up to kBatch items per lock round: whoever runs many small collectives (nccl-tests' timing
  // loop) pays the lock, the counter and the wake-up check once per batch, and an enqueuer that
  // competes for the lock meanwhile meets it once per batch too.
  StreamItem items[kBatch];
  size_t n = 0;
  for (; n < kBatch && !queue_.empty(); ++n) {
    items[n] = queue_.front();
    queue_.pop_front();
  }
  running_ = true;
  lock.unlock();
  Lives owners, later;  // the first failure's owners; those of any after it are dropped
  Status failed = Status::Success;  // the first failure of the batch
  for (size_t i = 0; i < n; ++i) {
    const Status s = items[i].run(items[i], failed == Status::Success ? &owners : &later);
    // Released (a Work's communicators' pending counts with it) before it counts as done.
    if (items[i].release != nullptr) items[i].release(items[i]);
    if (s != Status::Success && failed == Status::Success) failed = s;
  }
  lock.lock();
  running_ = false;
  bump(finished_, n);
  if (failed != Status::Success && currentError() == Status::Success) {
    error_ = failed;
    errorReported_ = false;
    if (isFatal(failed)) errorOwners_ = std::move(owners);
  }
  // Synchronizers (other than the caller) wait for the runner role.
  if (syncers_ > (bySyncer ? 1 : 0)) idleCv_.notify_all();
}

void Stream::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  int naps = 0;  // lazy naps in a row that found nothing to do
  const auto ready = [this] { return stop_ || (!queue_.empty() && !running_ && syncers_ == 0); };
  bool wasIdle = true;  // the thread comes from its start, a spin or a wait, not from a batch
  while (true) {
    if (!queue_.empty() && !running_ && syncers_ == 0) {
      // Work found idle while a synchronize had turned wake-ups off (the spin or the wait began
      // before it did): nobody synchronizes for it, as when a nap finds work.
      if (wasIdle && lazy_) {
        lazy_ = false;
        syncRuns_ = 0;
      }
      wasIdle = false;
      runBatch(lock, false);
      continue;
    }
    if (stop_) return;
    wasIdle = true;
    if (queue_.empty() && !lazy_) {
      // Idle: back-to-back work usually follows at once; spin a little before sleeping.
      lock.unlock();
      const uint64_t seen = submitted_.load(std::memory_order_acquire);
      spinFor([&] { return submitted_.load(std::memory_order_acquire) != seen; }, kSpin);
      lock.lock();
      if (!queue_.empty() && !running_ && syncers_ == 0) continue;
    }
    threadWaits_ = true;
    if (!lazy_) {
      // Until work comes, or a synchronize turns wake-ups off (it then wakes us to nap).
      workCv_.wait(lock, [&] { return ready() || lazy_; });
      naps = 0;
    } else {
      threadNaps_ = true;  // enqueue leaves us to find its work at the end of the nap
      const bool found = workCv_.wait_for(lock, kNap, ready);
      threadNaps_ = false;
      if (found && !stop_) {
        // Work nobody woke us for nor synchronized for within a nap: wake promptly again.
        lazy_ = false;
        syncRuns_ = 0;
        naps = 0;
      } else if (!found && ++naps >= kNapsBeforeSleep) {
        lazy_ = false;  // idle this long: sleep, and let the next enqueue wake us
        syncRuns_ = 0;
        naps = 0;
      }
    }
    threadWaits_ = false;
  }
}

Status Stream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  drain(lock);
  // Work enqueued by other threads meanwhile is the thread's again.
  if (syncers_ == 0 && !queue_.empty() && threadWaits_) workCv_.notify_one();
  Status s = currentError();
  errorReported_ = s != Status::Success;
  if (!isFatal(s)) error_ = Status::Success;  // fatal errors stay until their comms are gone
  return s;
}

Status Stream::query() {
  bool wake = false;
  Status s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = currentError();
    if (s != Status::Success) {
      errorReported_ = true;
    } else if (!idle()) {
      s = Status::InProgress;
      // A caller that polls instead of synchronizing: its work should not wait for a nap.
      wake = threadNaps_ && !running_ && syncers_ == 0;
      lazy_ = false;
      syncRuns_ = 0;
    }
  }
  if (wake) wakeThread();
  return s;
}

bool Stream::lazy() {
  std::lock_guard<std::mutex> lock(mu_);
  return lazy_;
}

Status Stream::currentError() {
  if (isFatal(error_) && errorReported_) {
    bool anyAlive = false;
    for (const auto& o : errorOwners_) anyAlive = anyAlive || o->load();
    if (!anyAlive) {  // every communicator of the failed work was aborted or destroyed
      error_ = Status::Success;
      errorOwners_.clear();
    }
  }
  return error_;
}

}  // namespace nlccl::core
