// nlcclStream_t: an in-order queue of work with its own progress thread (DESIGN.md 2.4). The
// first error a work item returns is kept and reported by synchronize() and query(). A fatal one
// (the communicator is broken: system, internal, remote, timeout) is sticky: every later
// synchronize() and query() reports it again, until every communicator that work used has been
// aborted or destroyed, and it is reported at least once even when that happened first (work
// failed by nlcclCommAbort). Other errors are reported once.
//
// Items run one at a time, in order, in batches of up to 16 per lock round, by whoever holds the
// runner role: the stream's thread, or a thread in synchronize(), which runs the items nobody
// has started yet itself instead of waiting for the thread to be scheduled (a synchronizing
// caller pays no thread handoff). While a thread synchronizes, the stream's thread starts no new
// item (two threads taking turns per item, on a machine with fewer cores than threads, woke each
// other for every item). The queue holds at
// most kMaxQueued items, made at construction, so enqueueing never allocates (items are
// fixed-size; general work is held by a pointer the caller made); an enqueue that finds it full
// first runs the oldest items itself, as a synchronize would, until there is room (a full
// CUDA launch queue blocks the host likewise). nccl-tests-style timing loops that queue
// thousands of calls before one synchronize so neither grow the queue nor wait for the thread.
//
// Lazy wake-ups: when the last few synchronizes each found work still pending (a program that
// synchronizes after every call, or after each batch of calls, as nccl-tests does), waking the
// thread for each enqueue only costs a futex call and a thread that competes for the caller's
// core (4 ranks on 2 cores, synchronizing after each call: 33 instead of 9.5 us a call). The
// thread then naps (kNap) instead of sleeping, and enqueue does not wake it. Work nobody
// synchronizes for still starts within a nap, and finding it there turns wake-ups back on, as a
// query() does (it also wakes the thread); after kNapsBeforeSleep empty naps the thread sleeps
// until woken as usual. A synchronize that finds everything done restarts the count. A
// synchronize that comes within kQuickSync of the enqueue that ended the stream's idleness turns
// wake-ups off at once: the wake-up could not have bought anything (a timing loop's calls, queued
// back to back and synchronized at once, or one call synchronized right away), and the thread it
// woke now competes with this caller, and on an oversubscribed machine (4 ranks on 2 cores)
// with the other ranks, for the cores: the first blocks of a benchmark's first size ran 3-6x
// slower for it, until kLazyAfter synchronizes had gone by. A caller that overlaps the work with
// its own (a framework that waits for it later) synchronizes later and keeps its wake-ups.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "util/ring_queue.hpp"
#include "util/status.hpp"

namespace nlccl::core {

using Lives = std::vector<std::shared_ptr<const std::atomic<bool>>>;

/// One queued unit of work. `run` executes it; on a fatal error it also appends the lives of the
/// communicators it used (Communicator::life()) to *owners. The other fields are its arguments.
/// Trivially copyable (the queue copies items in and out by value, a few words each): what an
/// item owns (general work) it frees in `release`, called once it has run.
struct StreamItem {
  Status (*run)(StreamItem& item, Lives* owners) = nullptr;
  void (*release)(StreamItem& item) = nullptr;
  void* ptr[4] = {};
  uint64_t value = 0;
};
static_assert(std::is_trivially_copyable_v<StreamItem>);

class Stream {
 public:
  Stream();
  ~Stream();  ///< waits for queued work, then stops the thread
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void enqueue(const StreamItem& item);
  /// Runs or waits for everything queued; returns the first error met (clearing it unless sticky).
  Status synchronize();
  /// Success when idle, InProgress while work is queued, or the first error met (not cleared).
  Status query();

  /// Test hooks: how often enqueue woke the thread, and whether it currently does not.
  uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }
  bool lazy();

  static constexpr int kLazyAfter = 4;  ///< synchronizes in a row finding work pending
  /// A synchronize this soon after the work it finds pending was enqueued turns wake-ups off.
  static constexpr std::chrono::microseconds kQuickSync{200};
  static constexpr std::chrono::microseconds kNap{10000};
  static constexpr int kNapsBeforeSleep = 64;
  static constexpr size_t kMaxQueued = 1024;  ///< items waiting; enqueue makes room beyond
  static constexpr size_t kBatch = 16;        ///< items a runner takes per lock round

 private:
  void loop();
  /// Wakes the thread from its wait (outside mu_), counted for wakeups().
  void wakeThread();
  /// Takes the runner role and runs the first items queued (up to a batch), in order: the
  /// thread, or a caller in runUntil (`bySyncer`). Called and returns with `lock` held.
  void runBatch(std::unique_lock<std::mutex>& lock, bool bySyncer);
  bool idle() const { return queue_.empty() && !running_; }
  /// Runs (or waits for) everything queued, as synchronize() and the destructor need; the thread
  /// starts no item meanwhile. Called and returns with `lock` held.
  void drain(std::unique_lock<std::mutex>& lock);
  /// Runs the oldest items (or waits for the one running) until fewer than kMaxQueued wait.
  void makeRoom(std::unique_lock<std::mutex>& lock);
  /// drain's and makeRoom's loop: takes the runner role for batches until `done()`.
  template <typename Done>
  void runUntil(std::unique_lock<std::mutex>& lock, Done done);
  /// The error to report now (under mu_): clears a sticky one whose communicators are all gone.
  Status currentError();

  std::mutex mu_;
  std::condition_variable workCv_;  ///< the thread waits here: work arrived, or stop
  std::condition_variable idleCv_;  ///< synchronizers wait here: the runner role is free
  RingQueue<StreamItem> queue_;
  bool running_ = false;       ///< someone holds the runner role
  bool threadWaits_ = false;   ///< the thread is blocked on workCv_
  bool threadNaps_ = false;    ///< and in a lazy nap (enqueue does not wake it)
  int syncers_ = 0;            ///< threads in drain(): the thread leaves the items to them
  bool errorReported_ = false;  ///< error_ was returned by synchronize() or query()
  bool stop_ = false;
  bool lazy_ = false;          ///< enqueue leaves the thread to find work at the end of its nap
  int syncRuns_ = 0;           ///< synchronizes in a row that found work pending
  std::chrono::steady_clock::time_point busySince_;  ///< enqueue that found the stream idle
  std::atomic<uint64_t> wakeups_{0};
  std::atomic<uint64_t> submitted_{0};  ///< items ever enqueued
  std::atomic<uint64_t> finished_{0};   ///< items ever finished
  Lives errorOwners_;                   ///< of a sticky error
  Status error_ = Status::Success;
  std::thread thread_;
};

}  // namespace nlccl::core
